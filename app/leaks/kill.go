package leaks

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/shirou/gopsutil/v4/process"
)

// Grace periods of Kill: after SIGTERM before SIGKILL, and after SIGKILL
// before giving up.
var (
	TermGrace = 2 * time.Second
	KillGrace = 2 * time.Second
)

// sendOne and sendGroup send SIGTERM (term) or SIGKILL to one process
// and to a process group. Tests make them fail as a signal to another
// user's process does (EPERM).
var (
	sendOne   = signalOne
	sendGroup = signalGroup
)

// pollEvery is how often Kill looks whether its targets are gone.
const pollEvery = 20 * time.Millisecond

// Kill kills leaked backend pid, which must be a proven leak in proof (the
// result of a recent Find for home): anything else, a suspect included, is
// refused with an error that Is ErrRefused; the refusal of a process
// whose run marker names another home says which. A PID that is not in
// proof and that no running process has, or a leak in proof that has
// exited since it was listed, gets an error that Is ErrNotRunning: there
// is nothing to kill. Right before signalling it checks that pid still
// has the start time Find saw, so a PID reused in between is refused too.
//
// A process that leads its own process group is killed with its whole
// group (npx -> npm exec -> node chains) and its descendants outside the
// group; otherwise the process and its descendants are. Each gets
// SIGTERM, then SIGKILL after TermGrace; a signal that cannot be sent to
// one target (another user's) does not stop the others'. Kill returns nil
// once every target has exited (or is a zombie waiting for its parent to
// reap it), else an error naming those still running after KillGrace
// and the signals that failed.
func Kill(ctx context.Context, home string, pid int, proof []Leak) error {
	var leak *Leak
	for i := range proof {
		if proof[i].PID == pid {
			leak = &proof[i]
			break
		}
	}
	if pid <= 1 {
		return notKnown(pid)
	}
	if leak == nil {
		if !running(ctx, pid) {
			return fmt.Errorf("PID %d is %w", pid, ErrNotRunning)
		}
		if other := otherHome(ctx, home, pid); other != "" {
			return &refusal{pid: pid, why: fmt.Sprintf("it belongs to another Switchboard home (%s); only that home's Switchboard kills it (SWITCHBOARD_HOME=%s switchboard kill %d)",
				other, other, pid)}
		}
		return notKnown(pid)
	}
	if !leak.Proven {
		why := fmt.Sprintf("it matches configured server %s, but it carries no Switchboard run marker and is not a recorded child, "+
			"so it may be another program's", leak.Server)
		switch leak.Kind {
		case KindDetached:
			why = fmt.Sprintf("server %s still has a live child, which may have started it on purpose (a browser, a daemon)", leak.Server)
		case KindInherited:
			why = "it carries the run marker of this home's Switchboard, but it is in the process group or session of no child that run started, " +
				"so it may be a program that merely inherited the marker"
		case KindLegacy:
			why = "it carries the run marker of an earlier Switchboard version, which does not say which Switchboard home started it, " +
				"so it may be another home's"
		}
		return &refusal{pid: pid, why: fmt.Sprintf("%s; if you know it is a leaked backend, end it yourself (kill %d)", why, pid)}
	}
	tab, err := scan(ctx)
	if err != nil {
		return fmt.Errorf("kill PID %d: list processes: %w", pid, err)
	}
	p := tab.procs[pid]
	if p == nil || p.exited(ctx) {
		// It exited since it was listed: nothing was killed.
		return fmt.Errorf("PID %d is %w", pid, ErrNotRunning)
	}
	if !sameStart(p.start, leak.StartedAt) {
		return &refusal{pid: pid, why: fmt.Sprintf("the PID now belongs to another process (started %s; the leaked backend started %s)",
			p.start.Format(time.RFC3339), leak.StartedAt.Format(time.RFC3339))}
	}
	skip := tab.excluded([]int{os.Getpid()})
	if skip[pid] {
		return &refusal{pid: pid, why: "it is Switchboard itself or one of its ancestors"}
	}

	// The targets, with their start times, taken before any signal: once
	// the leader dies its children are re-parented and the links are lost.
	group := pgid(pid) == pid
	targets := []*proc{p}
	for _, d := range tab.descendants(pid) {
		targets = append(targets, tab.procs[d])
	}
	if group {
		for _, q := range tab.procs {
			if q.pid == pid || pgid(q.pid) != pid {
				continue
			}
			if skip[q.pid] {
				// This process shares the group: signal processes, not it.
				group = false
				continue
			}
			if !contains(targets, q.pid) {
				targets = append(targets, q)
			}
		}
	}
	// A descendant that left the group (a helper that called setsid)
	// does not hear the group's signal: it is signalled itself. A signal
	// that fails (a descendant of another user's, started through sudo)
	// stops nothing: the others still get theirs.
	signal := func(term bool) error {
		var errs []error
		if group {
			if err := sendGroup(pid, term); err != nil {
				errs = append(errs, fmt.Errorf("process group %d: %w", pid, err))
			}
		}
		for _, t := range targets {
			if group && pgid(t.pid) == pid {
				continue // the group's signal reached it
			}
			if still(ctx, t) {
				if err := sendOne(t.pid, term); err != nil {
					errs = append(errs, fmt.Errorf("PID %d: %w", t.pid, err))
				}
			}
		}
		return joinErrors(errs)
	}

	// Once begun, a kill runs its course, whoever asked for it stops
	// waiting: a client that gives up (Ctrl-C on the CLI, a closed
	// control connection) must not turn SIGTERM's grace into an
	// immediate SIGKILL. Both graces bound it.
	ctx = context.WithoutCancel(ctx)
	var failed []error
	if err := signal(true); err != nil {
		failed = append(failed, fmt.Errorf("SIGTERM: %w", err))
	}
	if waitGone(ctx, targets, TermGrace) {
		if group {
			_ = sendGroup(pid, false) // members that joined after the scan
		}
		return nil
	}
	if err := signal(false); err != nil {
		failed = append(failed, fmt.Errorf("SIGKILL: %w", err))
	}
	if waitGone(ctx, targets, KillGrace) {
		return nil
	}
	return stillRunning(ctx, pid, targets, failed)
}

// stillRunning is Kill's error when targets outlived SIGKILL: which, and
// the signals that could not be sent (why they outlived it).
func stillRunning(ctx context.Context, pid int, targets []*proc, failed []error) error {
	var left []string
	for _, t := range targets {
		if still(ctx, t) {
			left = append(left, itoa(t.pid))
		}
	}
	err := fmt.Errorf("kill PID %d: still running %s after SIGKILL: %s", pid, KillGrace, strings.Join(left, ", "))
	if len(failed) > 0 {
		return fmt.Errorf("%w; could not signal: %w", err, joinErrors(failed))
	}
	return err
}

// joinedErrors is errors on one line, as the CLI prints them, each still
// found by errors.Is.
type joinedErrors []error

func (e joinedErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e joinedErrors) Unwrap() []error { return e }

// joinErrors is nil for no errors, else them joined on one line.
func joinErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return joinedErrors(errs)
}

// otherHome is the home that pid's run marker names when that is not
// home, else "".
func otherHome(ctx context.Context, home string, pid int) string {
	p, err := lookup(ctx, pid)
	if err != nil {
		return ""
	}
	run, _ := markerOf(p.environ(ctx))
	if m, ok := parseMarker(run); ok && m.home != "" && !sameHome(homePath(home), m.home) {
		return m.home
	}
	return ""
}

// running reports whether a process with pid exists and is not a zombie.
func running(ctx context.Context, pid int) bool {
	if ok, err := process.PidExistsWithContext(ctx, int32(pid)); err == nil && !ok {
		return false
	}
	p, err := lookup(ctx, pid)
	return err != nil || !p.exited(ctx) // unreadable: say running, and refuse it
}

// still reports whether t is running: the same process (same start
// time), not yet a zombie.
func still(ctx context.Context, t *proc) bool {
	now, err := lookup(ctx, t.pid)
	if err != nil {
		return false
	}
	return sameStart(now.start, t.start) && !now.exited(ctx)
}

// waitGone polls until no target is still running, or d passes.
func waitGone(ctx context.Context, targets []*proc, d time.Duration) bool {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		alive := false
		for _, t := range targets {
			if still(ctx, t) {
				alive = true
				break
			}
		}
		if !alive {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

func contains(ps []*proc, pid int) bool {
	for _, p := range ps {
		if p.pid == pid {
			return true
		}
	}
	return false
}
