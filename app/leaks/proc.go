package leaks

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v4/process"
)

// proc is one process as seen by one scan.
type proc struct {
	pid   int
	ppid  int
	start time.Time
	gp    *process.Process
}

// cacheBootTime makes gopsutil read the boot time once, instead of once
// per process looked at (that was two thirds of Find's time and most of
// Record's). Start times then all use one boot time, which is what
// comparing them needs.
var cacheBootTime = sync.OnceFunc(func() { process.EnableBootTimeCache(true) })

// lookup reads the start time and parent of one process. A process that
// has gone yields process.ErrorProcessNotRunning (or a read error).
func lookup(ctx context.Context, pid int) (*proc, error) {
	cacheBootTime()
	if pid <= 0 {
		return nil, process.ErrorProcessNotRunning
	}
	gp, err := process.NewProcessWithContext(ctx, int32(pid))
	if err != nil {
		return nil, err
	}
	ms, err := gp.CreateTimeWithContext(ctx)
	if err != nil {
		return nil, err
	}
	ppid, err := gp.PpidWithContext(ctx)
	if err != nil {
		return nil, err
	}
	return &proc{pid: pid, ppid: int(ppid), start: time.UnixMilli(ms), gp: gp}, nil
}

// exited reports whether the process has exited since it was looked up:
// a zombie waiting for its parent's wait, or gone (reaped, its /proc
// entry with it). A state that cannot be read otherwise says running.
func (p *proc) exited(ctx context.Context) bool {
	st, err := p.gp.StatusWithContext(ctx)
	if err != nil {
		running, rerr := p.gp.IsRunningWithContext(ctx)
		return rerr == nil && !running
	}
	return slices.Contains(st, process.Zombie)
}

// uid is the real user id of the process.
func (p *proc) uid(ctx context.Context) (int, bool) {
	ids, err := p.gp.UidsWithContext(ctx)
	if err != nil || len(ids) == 0 {
		return 0, false
	}
	return int(ids[0]), true
}

// argv is the command line. A process that rewrote its title (npm sets
// "npm exec PKG") may show it as one string with spaces: split it.
func (p *proc) argv(ctx context.Context) []string {
	argv, err := p.gp.CmdlineSliceWithContext(ctx)
	if err != nil {
		return nil
	}
	if len(argv) == 1 && strings.ContainsRune(argv[0], ' ') {
		return strings.Fields(argv[0])
	}
	return argv
}

// environ is the process's environment, or nil if it cannot be read
// (another user's process, or gone).
func (p *proc) environ(ctx context.Context) []string {
	env, err := p.gp.EnvironWithContext(ctx)
	if err != nil {
		return nil
	}
	return env
}

func (p *proc) name(ctx context.Context) string {
	n, _ := p.gp.NameWithContext(ctx)
	return n
}

func (p *proc) rss(ctx context.Context) uint64 {
	m, err := p.gp.MemoryInfoWithContext(ctx)
	if err != nil {
		return 0
	}
	return m.RSS
}

// table is one scan of all processes: who exists, and who is whose child.
type table struct {
	procs    map[int]*proc
	order    []int // PIDs, ascending
	children map[int][]int
}

func scan(ctx context.Context) (*table, error) {
	pids, err := process.PidsWithContext(ctx)
	if err != nil {
		return nil, err
	}
	t := &table{procs: make(map[int]*proc, len(pids)), children: map[int][]int{}}
	for _, id := range pids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p, err := lookup(ctx, int(id))
		if err != nil {
			continue // gone while we looked, or not ours to read
		}
		t.procs[p.pid] = p
		t.order = append(t.order, p.pid)
		t.children[p.ppid] = append(t.children[p.ppid], p.pid)
	}
	slices.Sort(t.order)
	return t, nil
}

// descendants lists pid's descendants, without pid, ascending.
func (t *table) descendants(pid int) []int {
	var out []int
	queue := slices.Clone(t.children[pid])
	seen := map[int]bool{pid: true}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if seen[c] {
			continue
		}
		seen[c] = true
		out = append(out, c)
		queue = append(queue, t.children[c]...)
	}
	slices.Sort(out)
	return out
}

// excluded is the set no leak may come from: PIDs 0 and 1, the roots and
// their descendants, and the ancestors of this process.
func (t *table) excluded(roots []int) map[int]bool {
	skip := map[int]bool{0: true, 1: true}
	for _, r := range roots {
		skip[r] = true
		for _, d := range t.descendants(r) {
			skip[d] = true
		}
	}
	for pid := os.Getppid(); pid > 1 && !skip[pid]; {
		skip[pid] = true
		p := t.procs[pid]
		if p == nil {
			break
		}
		pid = p.ppid
	}
	return skip
}

// reapers are the subreapers orphans are re-parented to besides PID 1:
// systemd's user manager on Linux desktops, launchd on macOS.
var reapers = []string{"systemd", "launchd"}

// reaperParent reports whether p's parent is init or a known subreaper,
// which is where a process lands when whoever started it died.
func (t *table) reaperParent(ctx context.Context, p *proc) bool {
	if p.ppid == 1 {
		return true
	}
	parent := t.procs[p.ppid]
	return parent != nil && slices.Contains(reapers, parent.name(ctx))
}

func (t *table) parentName(ctx context.Context, p *proc) string {
	if p.ppid == 1 {
		return "init (PID 1)"
	}
	if parent := t.procs[p.ppid]; parent != nil {
		return parent.name(ctx) + " (PID " + itoa(p.ppid) + ")"
	}
	return "PID " + itoa(p.ppid)
}

// leak describes p.
func (t *table) leak(ctx context.Context, p *proc, server, kind, reason string) Leak {
	desc := t.descendants(p.pid)
	if desc == nil {
		desc = []int{}
	}
	return Leak{PID: p.pid, Server: server, Command: p.argv(ctx), StartedAt: p.start,
		RSSBytes: p.rss(ctx), Reason: reason, Kind: kind, Proven: kind == KindRecorded || kind == KindMarked, PPID: p.ppid, PGID: pgid(p.pid), Descendants: desc}
}

// resolveLink follows symlinks in an absolute path (npx runs a package
// through node_modules/.bin/NAME, a link into the package), or returns "".
func resolveLink(path string) string {
	if !filepath.IsAbs(path) {
		return ""
	}
	r, err := filepath.EvalSymlinks(path)
	if err != nil || r == path {
		return ""
	}
	return r
}

func itoa(i int) string { return strconv.Itoa(i) }
