// Package leaks finds MCP server processes that outlived the pool that
// started them (or some other proxy's), and kills them on request.
//
// Each Switchboard home (SWITCHBOARD_HOME, or the OS's directories)
// claims only its own processes: several homes may run on one machine,
// each with its own pool, history and leftovers.
//
// A process is a proven leaked backend when Switchboard can prove it is
// an MCP backend of this home's and that nobody is using it:
//
//   - it is a child a pool of this home recorded in an earlier run, still
//     alive with the same PID and the same process start time (so a
//     reused PID never matches), or
//   - it carries the run marker (RunEnv) of a run of this home that has
//     ended, or of this run with init (or a subreaper) as its parent
//     while no child of its server runs, and it is in the process group
//     or session of a child that run started (ChildSource): the marker
//     alone is inherited by any program a backend's environment reaches.
//
// Suspects are listed and never killed: such a marked process outside
// the groups and sessions of its run's children, a process of this run
// re-parented to init while a child of its server runs (that child may
// have detached it on purpose: a browser, a daemon), a process carrying
// the marker of an ended run of an earlier version, which does not name
// its home, for a server this home configures (for any other server it
// is taken as another home's), and a process whose command line matches
// a configured server while its parent is init (PID 1, launchd) or a
// known subreaper (systemd --user) and that carries no marker.
//
// A process whose marker names another home is that home's: it is never
// listed here, and Kill refuses it. The running pool's own children, and
// the current process tree, are never leaks. Kill refuses every PID that
// the latest Find did not report as proven, and re-checks the start time
// right before signalling.
package leaks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shirou/gopsutil/v4/process"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/store"
)

// ChildRecord is one child a pool started and never saw exit, as the
// history database's backends table keeps it: the one record of
// children, history on or off (store.Options.ChildrenOnly). Its StartedAt
// is the process start time as the OS reports it (see StartTime).
type ChildRecord = store.ChildRecord

// Source gives the children that earlier pool runs started and never saw
// exit: the history database (*store.Store), and FileSource for the
// file earlier versions kept.
type Source interface {
	ChildrenOfEarlierRuns(ctx context.Context) ([]ChildRecord, error)
}

// ChildSource is a Source that also gives every child that this home's
// runs started and that its records still hold, exited or not: the
// evidence that a process carrying a run's marker descends from one of
// that run's children (its process group or session is that child's),
// not merely inherited the marker from one (a shell that imported a
// backend's environment, an editor a backend opened).
type ChildSource interface {
	Source
	RecordedChildren(ctx context.Context) ([]ChildRecord, error)
}

// Leak is one leaked backend, as `switchboard leaks --json` prints it.
type Leak struct {
	PID    int    `json:"pid"`
	Server string `json:"server"`
	// Command is the process's command line as the OS reports it.
	Command   []string  `json:"command"`
	StartedAt time.Time `json:"startedAt"`
	RSSBytes  uint64    `json:"rssBytes"`
	Reason    string    `json:"reason"`
	// Kind is "recorded" (a child of an earlier run, by PID and start
	// time), "marked" (carries the run marker of this home's Switchboard
	// run that has ended, or this run's with init as its parent while no
	// child of its server runs, and is in the process group or session
	// of a child that run started), "inherited" (carries such a marker
	// but is in no such group or session), "detached" (carries this
	// run's marker, its parent is init, and a child of its server runs),
	// "legacy" (carries the marker of an ended run of an earlier
	// version, which does not name its home, for a configured server) or
	// "orphan" (matches a configured server, its parent is init, and it
	// has no marker).
	Kind string `json:"kind"`
	// Proven says the process is a leaked backend of this home beyond
	// doubt (recorded or marked): only those are killed. The others are
	// suspects: an inherited one may be any program started from a
	// backend's environment, a detached one a helper a live child started
	// on purpose, a legacy one another home's, and any program of the
	// same user may run a configured command line.
	Proven bool `json:"proven"`
	// PPID and PGID say what Kill will signal: the whole group when the
	// process leads its own group (PGID == PID), else the process and
	// its descendants.
	PPID int `json:"ppid"`
	PGID int `json:"pgid"`
	// Descendants are the PIDs that die with it.
	Descendants []int `json:"descendants"`
}

// Kinds of leak.
const (
	KindRecorded  = "recorded"
	KindOrphan    = "orphan"
	KindMarked    = "marked"    // carries the marker of this home's run that has ended, or this run's with no child of its server left, in the group or session of a child of that run
	KindInherited = "inherited" // carries such a marker, in no group or session of a child of that run
	KindDetached  = "detached"  // carries this run's marker, re-parented, while a child of its server runs
	KindLegacy    = "legacy"    // carries an earlier version's marker (no home) of a run that has ended, for a configured server
)

// RunEnv is the environment variable that marks every child of a
// Switchboard run, and so every descendant that did not scrub its
// environment: "PID@START@HOME", the run's process ID and start time
// (Unix milliseconds) and its home (see RunMarker). A process carrying
// the marker of a run of this home that is no longer alive was left
// behind by it, whatever its command line. Earlier versions wrote
// "PID@START", without the home: such a marker proves a process is some
// home's leftover, not whose.
const RunEnv = "SWITCHBOARD_RUN"

// RunMarker is this process's RunEnv value, for a pool of home: the
// directory that identifies the instance (the one holding its run
// directory), which Find and Kill must be given too.
func RunMarker(ctx context.Context, home string) (string, error) {
	cacheBootTime()
	p, err := lookup(ctx, os.Getpid())
	if err != nil {
		return "", fmt.Errorf("run marker: %w", err)
	}
	return strconv.Itoa(p.pid) + "@" + strconv.FormatInt(p.start.UnixMilli(), 10) + "@" + homePath(home), nil
}

// marker is a parsed RunEnv value.
type marker struct {
	pid   int
	start time.Time
	home  string // "" in an earlier version's marker
}

// parseMarker reads a RunEnv value, with or without its home. The home
// comes last, so it may hold any character.
func parseMarker(v string) (marker, bool) {
	a, rest, found := strings.Cut(v, "@")
	if !found {
		return marker{}, false
	}
	b, home, withHome := strings.Cut(rest, "@")
	pid, err1 := strconv.Atoi(a)
	ms, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 || (withHome && home == "") {
		return marker{}, false
	}
	return marker{pid: pid, start: time.UnixMilli(ms), home: home}, true
}

// homePath is how a marker names a home: its absolute, cleaned path.
func homePath(home string) string {
	if home == "" {
		return ""
	}
	if abs, err := filepath.Abs(home); err == nil {
		return abs
	}
	return filepath.Clean(home)
}

// sameHome reports whether marker home other names home: the same path,
// or the same directory under another spelling (a symlink, another
// case). An empty home is nobody's.
func sameHome(home, other string) bool {
	if home == "" || other == "" {
		return false
	}
	if home == other {
		return true
	}
	a, err1 := os.Stat(home)
	b, err2 := os.Stat(other)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// StartTolerance is how far a recorded start time may be from the one
// the OS reports now and still be the same process. Linux reports start
// times in clock ticks since a boot time rounded to the second; PID reuse
// within a second of the original start is practically impossible.
var StartTolerance = time.Second

// ErrRefused marks a kill that was refused because the PID is not a
// proven MCP backend.
var ErrRefused = errors.New("refused")

// ErrNotRunning marks a kill of a PID that no process has: a leak that
// has exited since it was listed. Nothing is left to kill.
var ErrNotRunning = errors.New("not running")

// refusal is Kill's error for a PID it will not touch.
type refusal struct {
	pid int
	why string
}

func (e *refusal) Error() string { return fmt.Sprintf("refusing to kill PID %d: %s", e.pid, e.why) }

func (e *refusal) Is(target error) bool { return target == ErrRefused }

// notKnown is the refusal for a PID that is not in the leak list.
func notKnown(pid int) error {
	return &refusal{pid: pid, why: "it is not a known MCP backend (not started by Switchboard and does not match a configured server)"}
}

// StartTime is the OS's start time of process pid: what a recorder should
// store, since Find compares against the same clock.
func StartTime(ctx context.Context, pid int) (time.Time, error) {
	p, err := lookup(ctx, pid)
	if err != nil {
		return time.Time{}, err
	}
	return p.start, nil
}

// Gone reports whether the process recorded as pid, started at start
// (zero when its start was not recorded), has provably ended: no process
// has pid, or the one that has it started at another time (the PID was
// reused). A process with pid whose start was not recorded is not
// provably another. When it cannot tell (the process cannot be read), it
// says not gone, and why.
func Gone(ctx context.Context, pid int, start time.Time) (bool, error) {
	p, err := lookup(ctx, pid)
	if err == nil {
		return !start.IsZero() && !sameStart(p.start, start), nil
	}
	if errors.Is(err, process.ErrorProcessNotRunning) {
		return true, nil
	}
	// It may have ended while it was read.
	if exists, xerr := process.PidExistsWithContext(ctx, int32(pid)); xerr == nil && !exists {
		return true, nil
	}
	return false, fmt.Errorf("process %d: %w", pid, err)
}

// Find lists home's leaked backends: children of earlier runs from src
// (home's records) that are still alive (same PID and start time),
// processes carrying a run marker (see the package doc), and processes
// whose command line matches one of configured (home's servers) while
// their parent is init or a subreaper. A process whose marker names
// another home is never reported, nor are processes in own (the running
// pool's children) and their descendants, and the current process with
// its ancestors and descendants; own's environments say which servers
// have a live child. src may be nil. The result is sorted by PID and
// never nil.
func Find(ctx context.Context, home string, src Source, configured []pool.ServerConfig, own []int) ([]Leak, error) {
	var recs []ChildRecord
	if src != nil {
		var err error
		if recs, err = src.ChildrenOfEarlierRuns(ctx); err != nil {
			return nil, fmt.Errorf("read the children of earlier runs: %w", err)
		}
	}
	started, err := recordedChildren(ctx, src)
	if err != nil {
		return nil, err
	}
	tab, err := scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	skip := tab.excluded(append(slices.Clone(own), os.Getpid()))
	out := []Leak{}
	found := map[int]bool{}
	add := func(p *proc, server, kind, reason string) {
		found[p.pid] = true
		out = append(out, tab.leak(ctx, p, server, kind, reason))
	}

	for _, r := range recs {
		p := tab.procs[r.PID]
		if p == nil || skip[r.PID] || found[r.PID] || !sameStart(p.start, r.StartedAt) || p.exited(ctx) {
			continue
		}
		if tab.markedByLiveRun(ctx, p) {
			// A live run's child: one an in-place upgrade carried over
			// (the run that started it recorded it too, and never sees
			// it exit), asked about without that run's own list.
			continue
		}
		add(p, r.Server, KindRecorded, fmt.Sprintf("recorded child of an earlier run (pid %d started at %s) is still running",
			r.PID, r.StartedAt.Format(time.RFC3339)))
	}

	// The servers with a live child of this run, by the server name in
	// the child's environment: a process such a child detached may be a
	// helper it still uses.
	live := map[string]int{}
	for _, pid := range own {
		if p := tab.procs[pid]; p != nil && !p.exited(ctx) {
			if _, s := markerOf(p.environ(ctx)); s != "" && (live[s] == 0 || pid < live[s]) {
				live[s] = pid
			}
		}
	}

	// Descendants of this home's runs' children, by their inherited
	// marker: a grandchild that ignored stdin EOF outlives its run
	// whatever it runs.
	uid, self := os.Getuid(), os.Getpid()
	home = homePath(home)
	for _, pid := range tab.order {
		p := tab.procs[pid]
		if skip[pid] || found[pid] {
			continue
		}
		if u, ok := p.uid(ctx); !ok || u != uid {
			continue
		}
		run, server := markerOf(p.environ(ctx))
		m, ok := parseMarker(run)
		if !ok {
			continue
		}
		if m.home != "" && !sameHome(home, m.home) {
			// Another home's, whether its run has ended or not (a
			// clock step or a PID namespace can make a live one look
			// ended): that home's Switchboard decides.
			continue
		}
		// A run that has exited and awaits its parent's wait (a zombie)
		// has ended.
		rp := tab.procs[m.pid]
		runAlive := rp != nil && sameStart(rp.start, m.start) && !rp.exited(ctx)
		thisRun := runAlive && m.pid == self
		if runAlive && (!thisRun || !tab.reaperParent(ctx, p)) {
			// Another live Switchboard's, or this one's and still
			// inside a live child's tree.
			continue
		}
		if p.exited(ctx) {
			continue
		}
		if m.home == "" && !thisRun {
			// An earlier version's marker names no home: some home's
			// leftover, not provably this one's (an earlier version of
			// this process, after an upgrade, is this run: thisRun). A
			// suspect when this home has its server, else another's.
			if slices.ContainsFunc(configured, func(c pool.ServerConfig) bool { return c.Name == server }) {
				add(p, server, KindLegacy, fmt.Sprintf("carries %s=%s: started under server %s by a Switchboard run (pid %d, started %s) that has ended; "+
					"an earlier version wrote this marker without its home, so it may be another Switchboard home's: listed, never killed",
					RunEnv, run, server, m.pid, m.start.Format(time.RFC3339)))
			}
			continue
		}
		c := live[server]
		if thisRun && c != 0 {
			add(p, server, KindDetached, fmt.Sprintf("carries this run's %s and its parent is %s, while server %s still has a live child (PID %d): "+
				"it may be a helper that child started on purpose (a browser, a daemon); listed, not killed while that child runs",
				RunEnv, tab.parentName(ctx, p), server, c))
			continue
		}
		what := fmt.Sprintf("carries %s=%s: started under server %s by a Switchboard run of this home (pid %d, started %s) that has ended",
			RunEnv, run, server, m.pid, m.start.Format(time.RFC3339))
		if thisRun {
			what = fmt.Sprintf("carries this run's %s: left behind by server %s after its child exited; its parent is %s",
				RunEnv, server, tab.parentName(ctx, p))
		}
		if why, ok := descends(p, m, started); ok {
			add(p, server, KindMarked, what+"; "+why)
		} else {
			add(p, server, KindInherited, what+"; but it is in the process group or session of no child that run started "+
				"(as the records hold them), so it may be a program that merely inherited the marker (a shell that imported a backend's environment, "+
				"an editor a backend opened): listed, never killed")
		}
	}
	// Then processes that merely look like a configured server: suspects
	// only, since any program of this user may run the same command line.
	for _, pid := range tab.order {
		p := tab.procs[pid]
		if skip[pid] || found[pid] || !tab.reaperParent(ctx, p) {
			continue
		}
		if u, ok := p.uid(ctx); !ok || u != uid {
			continue // never another user's process
		}
		if run, _ := markerOf(p.environ(ctx)); run != "" {
			continue // a Switchboard run's: the marker decided above
		}
		argv := p.argv(ctx)
		for _, c := range configured {
			if matches(argv, c, resolveLink) {
				if !p.exited(ctx) {
					add(p, c.Name, KindOrphan, fmt.Sprintf("matches configured server %s and its parent is %s; it carries no Switchboard run marker, so it may be another program's: listed, never killed", c.Name, tab.parentName(ctx, p)))
				}
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

// recordedChildren is every child src's records hold, exited or not, when
// src keeps them (ChildSource), else none.
func recordedChildren(ctx context.Context, src Source) ([]ChildRecord, error) {
	cs, ok := src.(ChildSource)
	if !ok {
		return nil, nil
	}
	recs, err := cs.RecordedChildren(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the children runs started: %w", err)
	}
	return recs, nil
}

// descends reports whether p, which carries marker m, is in the process
// group or the session of a child that m's run started (started between
// the run's start and p's), and says which. Children start leading a
// process group of their own, and a group or session id is not reused
// while a member lives: only the child and its descendants are in it (or
// join it; its parent, the run, aside). A process that merely inherited
// the marker from a backend's environment is in another group.
func descends(p *proc, m marker, started []ChildRecord) (string, bool) {
	ids := []struct {
		what string
		id   int
	}{{"process group", pgid(p.pid)}, {"session", sid(p.pid)}}
	for _, id := range ids {
		if id.id <= 1 {
			continue
		}
		for _, c := range started {
			if c.PID == id.id && !c.StartedAt.Before(m.start.Add(-StartTolerance)) && !c.StartedAt.After(p.start.Add(StartTolerance)) {
				return fmt.Sprintf("it is in the %s of child PID %d (server %s, started %s)",
					id.what, c.PID, c.Server, c.StartedAt.Format(time.RFC3339)), true
			}
		}
	}
	return "", false
}

// markedByLiveRun reports whether p carries the run marker of a
// Switchboard run that is alive (same PID and start time, not a zombie):
// such a process is in use by that run, whatever an earlier run recorded.
func (t *table) markedByLiveRun(ctx context.Context, p *proc) bool {
	run, _ := markerOf(p.environ(ctx))
	m, ok := parseMarker(run)
	if !ok {
		return false
	}
	rp := t.procs[m.pid]
	return rp != nil && sameStart(rp.start, m.start) && !rp.exited(ctx)
}

// markerOf finds the run marker and server name in an environment.
func markerOf(env []string) (run, server string) {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, RunEnv+"="); ok {
			run = v
		} else if v, ok := strings.CutPrefix(kv, pool.ServerEnv+"="); ok {
			server = v
		}
	}
	return run, server
}

func sameStart(a, b time.Time) bool {
	d := a.Sub(b)
	return d <= StartTolerance && d >= -StartTolerance
}
