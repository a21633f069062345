package pool

import (
	"slices"
	"time"
)

// The pool's timing policies: when a shared child with no session left
// is stopped (idle reaping, with a warm-up grace for a fresh child), how
// long a crashed child waits before the next one (backoff), and when
// crashes come so fast that the server is failed (a crash loop). Each
// decision is a function of the time it is given; the time and the
// timers come from the pool's clock. policy_test.go runs them, and the
// server code that arms them, under testing/synctest, where the clock's
// time is a bubble's virtual time.

// clock is where the pool's timing policies read the time and arm their
// timers.
type clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) *time.Timer
	NewTimer(d time.Duration) *time.Timer
}

// systemClock is the time package's clock (virtual inside a synctest
// bubble).
type systemClock struct{}

func (systemClock) Now() time.Time                                  { return time.Now() }
func (systemClock) AfterFunc(d time.Duration, f func()) *time.Timer { return time.AfterFunc(d, f) }
func (systemClock) NewTimer(d time.Duration) *time.Timer            { return time.NewTimer(d) }

// idlePolicy says when a shared child whose last session left is
// stopped: after idle without a session, but not before warmup since its
// process started has passed (starting an npx server costs seconds, and a
// client that reconnects right away should find it warm). The warm-up
// counts from the process's start, not from when its slot was made: a
// package resolution or a crash's backoff before it, which can take a
// minute or more, does not use it up, and each restarted process gets its
// own. The grace
// outlasts an idleTimeout shorter than it on purpose: capped at the
// idleTimeout, it would never keep a child at all, since the idle time
// counts from when the last session left, never before the child started.
// A child no session joined (started for a client's initialize before
// its roots were known, which then took the client elsewhere) is kept for
// its grace alone, in the idleTimeout's place: nobody is there to come
// back to it.
type idlePolicy struct {
	idle     time.Duration // the server's idleTimeout; 0 means the default, negative never
	warmup   time.Duration // Options.WarmupGrace; negative means none
	unjoined bool          // no session joined the child (server.startedLocked)
}

// stopAfter is how long after now a child whose process started at
// started, whose last session left at left, is stopped (0: at once); ok
// is false when it never is, or not until its process starts (started
// zero, with a warm-up: it has not begun), when it is asked again. left
// is before now when the policy changed meanwhile (a config reload): the
// new idleTimeout counts from then too.
func (pol idlePolicy) stopAfter(started, left, now time.Time) (wait time.Duration, ok bool) {
	idle := pol.idle
	if idle == 0 {
		idle = DefaultIdleTimeout
	}
	if idle < 0 || started.IsZero() && pol.warmup >= 0 {
		return 0, false
	}
	if pol.unjoined && pol.warmup >= 0 {
		idle = pol.warmup
	}
	wait = left.Add(idle).Sub(now)
	if grace := started.Add(pol.warmup).Sub(now); grace > wait {
		wait = grace
	}
	return max(wait, 0), true
}

// restartBudget is a backend's restarts: the backoff before the next
// child after one exited, and the crash-loop rule (MaxRestarts exits
// within Window mark the server failed). supervise alone owns it.
type restartBudget struct {
	pol     RestartPolicy
	exits   []time.Time // unexpected exits within the window
	backoff time.Duration
}

func newRestartBudget(pol RestartPolicy) *restartBudget {
	return &restartBudget{pol: pol, backoff: pol.MinBackoff}
}

// started notes a child that started and answered its handshake: the
// next backoff starts over from MinBackoff.
func (r *restartBudget) started() { r.backoff = r.pol.MinBackoff }

// exited notes an unexpected exit at now. failed says the budget is
// spent: the server fails fast until it is restarted or reconfigured
// (failures is how many exits spent it). Otherwise wait is the backoff
// before the next child, which doubles, up to MaxBackoff, until a child
// starts.
func (r *restartBudget) exited(now time.Time) (failed bool, failures int, wait time.Duration) {
	r.exits = append(r.exits, now)
	r.exits = slices.DeleteFunc(r.exits, func(t time.Time) bool { return now.Sub(t) > r.pol.Window })
	if len(r.exits) >= r.pol.MaxRestarts {
		return true, len(r.exits), 0
	}
	return false, len(r.exits), r.nextWait()
}

// restarted notes a user's restart: what was spent is forgotten.
func (r *restartBudget) restarted() {
	r.exits = nil
	r.backoff = r.pol.MinBackoff
}

// nextWait is the backoff after a restart the user asked for, or after a
// child that could not start: no exit counted, the same doubling.
func (r *restartBudget) nextWait() time.Duration {
	wait := r.backoff
	r.backoff = min(r.backoff*2, r.pol.MaxBackoff)
	return wait
}
