package pool

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// supervise alone starts, handshakes, waits for and restarts the backend's
// children. It exits when stop is called (or the pool closes), after the
// last child is gone and every pending request has been answered.
func (b *backend) supervise() {
	defer close(b.done)
	defer b.reqs.stopTimer()
	defer b.srv.backendDone(b)
	budget := newRestartBudget(b.restartPolicy())
	for {
		c, err := b.nextChild()
		if err == nil {
			budget.started()
			err = b.runUntilExit(c)
			if err == nil {
				return // stopped
			}
			if errors.Is(err, errDetached) {
				b.mu.Lock()
				b.stopErr = errDetached
				carried := b.carrying == c
				b.mu.Unlock()
				if !carried {
					// A child started after the hand-over chose another
					// (one that exited meanwhile): nobody carries it.
					c.shutdown()
					b.reap(c, errPoolClosing)
				}
				b.finishStop() // nothing is pending after a hand-over; the pool's own requests end here
				return         // the carried child runs on, for the next pool
			}
		}
		if b.stopping() || b.detaching() {
			b.finishStop() // a hand-over took this backend: no next child
			return
		}
		budget.pol = b.restartPolicy() // a reload may have changed it
		failed, wait := b.noteCrash(err, budget)
		if failed {
			// Crash loop: fail fast until restarted or reconfigured.
			select {
			case <-b.stopReq:
				b.finishStop()
				return
			case <-b.detachQ:
				b.finishStop()
				return
			case <-b.restartQ:
				budget.restarted()
				b.mu.Lock()
				b.state = StateStarting
				b.hsErr, b.hsWhole = nil, nil
				b.mu.Unlock()
				b.emitState()
				b.srv.revived(b)
				continue
			}
		}
		if !b.waitToRestart(wait) {
			b.finishStop()
			return
		}
	}
}

// waitToRestart waits out the backoff d before the next child, or less
// when the user asks for a restart. It reports false when the backend is
// stopping instead.
func (b *backend) waitToRestart(d time.Duration) bool {
	t := b.p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-b.stopReq:
		return false
	case <-b.detachQ:
		return false // a hand-over: no next child
	case <-b.restartQ:
		return true
	case <-t.C:
		return true
	}
}

// detaching reports whether a hand-over has taken the backend.
func (b *backend) detaching() bool {
	select {
	case <-b.detachQ:
		return true
	default:
		return false
	}
}

func (b *backend) stopping() bool {
	select {
	case <-b.stopReq:
		return true
	default:
		return false
	}
}

// startAndHandshake starts a child and performs the pool's one handshake
// with it. On failure the child is already gone.
func (b *backend) startAndHandshake() (*child, error) {
	b.mu.Lock()
	b.state = StateStarting
	b.mu.Unlock()
	b.emitState()
	cfg, ok := b.launchConfig(b.config())
	if !ok {
		return nil, errStoppedWhileResolving
	}
	spawned := time.Now()
	c, err := startChild(cfg, b.p.opts.ChildEnv, b.p.opts.StartOn)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", cfg.Name, err)
	}
	if read := b.p.opts.ProcessStart; read != nil {
		if t, err := read(c.pid); err == nil {
			c.started = t // the OS's clock, which leak detection compares with
		}
	}
	b.childStarted(c)
	b.log.Info("child started", "pid", c.pid, "command", cfg.Command)
	configured := b.config()
	ev := Event{Kind: EventBackendStarted, Server: cfg.Name, PID: c.pid, ProcessStart: c.started,
		Command: configured.shownLine(), Session: b.ownerID(), Roots: b.roots}
	if cfg.Command != configured.Command {
		ev.ResolvedCommand = configured.shownResolved(append([]string{cfg.Command}, cfg.Args...))
	}
	b.p.emit(&ev)
	b.startLoops(c)

	hs, err := b.handshake(c)
	if err != nil {
		b.log.Warn("handshake failed", "pid", c.pid, "err", err)
		c.shutdown()
		b.reap(c, nil)
		return nil, err
	}
	b.awaitRoots(c, hs, time.Since(spawned))
	b.becomeReady(c, hs)
	return c, nil
}

// childStarted makes c, whose process just started, the backend's child.
// Its warm-up begins now, whatever came before (a resolution, a crash's
// backoff, a handshake that timed out): the server arms its idle timer
// again.
func (b *backend) childStarted(c *child) {
	b.mu.Lock()
	b.child = c
	b.startedAt = c.started
	b.warmFrom = b.p.clock.Now()
	b.mu.Unlock()
	b.srv.processStarted(b)
}

// startLoops starts the goroutines that read and write a child's pipes.
func (b *backend) startLoops(c *child) {
	b.stderr.Store(c.errTail) // status shows this child's lines alone from now on
	b.p.wg.Go(func() { b.readLoop(c) })
	b.p.wg.Go(func() { b.writeLoop(c) })
	b.p.wg.Go(func() {
		stderrLoop(c, func(l string) { b.log.Debug("child stderr", "pid", c.pid, "line", l) })
	})
}

// becomeReady makes a handshaken child the one requests go to.
func (b *backend) becomeReady(c *child, hs *handshake) {
	b.srv.hs.Store(hs)
	b.mu.Lock()
	fresh := b.childLevel == ""
	b.mu.Unlock()
	if fresh && hs.era != EraModern {
		// A new child its sessions came to (new roots, a stop, a config
		// change) without one's level asked of it yet: the level they ask
		// for, recorded now (the child is not ready: nothing is sent) and
		// queued below with the ready state, ahead of any request. One
		// that declared no logging is set as well: a level its sessions
		// hold is one a child of the server took (levelEnded).
		b.syncLogLevel()
	}
	b.mu.Lock()
	b.hs = hs
	b.state = StateReady
	b.hsErr, b.hsWhole = nil, nil
	c.ready, c.modern = true, hs.era == EraModern
	// What the sessions subscribed to until now, taken with the state: a
	// subscribe or unsubscribe counted from here on is forwarded instead
	// (countLocked). A legacy child's subscribes are queued
	// here, under the same lock, so that a forwarded unsubscribe of the
	// same URI reaches the child after them, never before.
	var unsent error
	if hs.era != EraModern {
		for _, uri := range slices.Sorted(maps.Keys(b.subs)) {
			p := b.newInternal("resources/subscribe", subscribeParams(uri))
			p.sub = &subChange{uri: uri, add: true} // for reap: the next child is told again
			if err := b.queueLocked(p); err != nil {
				unsent = err // the table is full: so are the ones after
				break
			}
			b.subscribingLocked(p)
		}
	}
	// The level the sessions asked for, queued with the ready state: a
	// level a session sets from here on is queued after it (syncLogLevel).
	// A modern child has no setLevel: its requests carry their levels.
	var levelUnsent error
	level := b.childLevel
	if level != "" && hs.era != EraModern {
		levelUnsent = b.queueLocked(b.newInternal("logging/setLevel", logLevelParams(level)))
	}
	ch := b.hsDone
	select {
	case <-ch:
	default:
		close(ch)
	}
	b.mu.Unlock()
	b.signal()
	b.emitState()
	b.log.Info("child ready", "pid", c.pid, "era", hs.era, "protocolVersion", hs.protocolVersion)
	if unsent != nil {
		b.log.Warn("the new child is not subscribed to everything its sessions are", "pid", c.pid, "err", unsent)
	}
	if levelUnsent != nil {
		b.log.Warn("the new child's log level is not the one its sessions asked for", "pid", c.pid, "level", level, "err", levelUnsent)
	}
	if hs.era == EraModern {
		b.newChild()     // what the last child refused, this one is asked for again
		b.syncUpstream() // a modern child's subscriptions: the pool's upstream listen
	}
	b.listToolsForHints()
}

// runUntilExit waits for the child to exit (an error), for stop (nil), or
// for a user restart (an error that does not count as a crash). A child
// whose stdout ends without it exiting is stopped and counts as a crash.
func (b *backend) runUntilExit(c *child) error {
	select {
	case <-c.exited:
		b.reap(c, nil)
		return fmt.Errorf("child exited (%s)", c.describeExit())
	case <-c.outEnded:
		b.stopIfMute(c)
		b.reap(c, nil)
		return fmt.Errorf("child exited (%s)", c.describeExit())
	case <-b.stopReq:
		b.mu.Lock()
		b.state = StateStopping
		why := b.stopErr
		b.mu.Unlock()
		b.emitState()
		c.shutdown()
		b.reap(c, why)
		b.finishStop()
		return nil
	case <-b.restartQ:
		b.mu.Lock()
		b.state = StateRestart // a hand-over from now on does not take it for ready
		b.mu.Unlock()
		b.emitState()
		c.shutdown()
		b.reap(c, errUserRestart)
		return errUserRestart
	case <-b.detachQ:
		return errDetached
	}
}

var errUserRestart = errors.New("restarted by the user")

// outEndedGrace is how long an exit may follow the end of a child's stdout
// and still be its own: a child that ends closes its stdout as it exits.
const outEndedGrace = 500 * time.Millisecond

// stopIfMute stops a child whose stdout ended (closed, or /dev/null put in
// its place) and that runs on: it can answer nothing more, and every
// request written to it would wait out its timeout.
func (b *backend) stopIfMute(c *child) {
	t := time.NewTimer(outEndedGrace)
	defer t.Stop()
	select {
	case <-c.exited:
		return // an ordinary exit
	case <-t.C:
	}
	c.ended = "closed its stdout and was stopped"
	b.log.Warn("child closed its stdout but runs on: stopping it", "pid", c.pid)
	c.shutdown()
}

// reap waits for the child's goroutines, records its exit and applies the
// at-most-once rule to every pending request:
//
//   - not yet written: stays queued for the next child;
//   - written and safe to repeat, not yet retried: queued again, once;
//   - written otherwise: never re-sent; the client gets an error saying it
//     may have executed, and why the child ended: stopped, when the pool
//     stopped it (stopped is why), else its exit. After a crash (stopped
//     is nil) they are answered once the restart budget decided whether
//     the server restarts (noteCrash): sending them again can work only
//     if it does.
func (b *backend) reap(c *child, stopped error) {
	<-c.exited
	// What is left of the child's process group outlived it: orphans,
	// ended as shutdown ends them. One of them may hold the child's stdin
	// without reading it, and a writer blocked on that full pipe would
	// wait for ever: closing our end makes the write return.
	killOrphans(c.pid)
	c.stdin.Close()
	<-c.writerDone
	c.closeReaders()

	tail := c.errTail.tail(5) // read to its end, or for readersGrace (closeReaders)
	exit := c.describeExit()
	why := fmt.Sprintf("server %q exited (%s)", b.srv.name, exit)
	if stopped != nil {
		why = fmt.Sprintf("server %q was stopped (%v)", b.srv.name, stopped)
	}
	b.mu.Lock()
	b.child = nil
	b.state = StateRestart
	retry, failed, void := b.reqs.afterExit(b.safeToRepeatLocked, why)
	// Subscription changes, written or not, are counted already, and the
	// next child is told what is held once it is ready (becomeReady): none
	// is sent again, each is done. Lines meant for the dead child
	// (cancellations, answers to its requests, the rest of a line it had
	// part of) mean nothing to the next one; its requests to clients are
	// void (afterExit forgot them), and withdrawn at their clients below.
	var settled []*pending
	isSub := func(p *pending) bool {
		if p.sub != nil {
			settled = append(settled, p)
		}
		return p.sub != nil
	}
	retry = slices.DeleteFunc(retry, isSub)
	failed = slices.DeleteFunc(failed, isSub)
	b.queue = slices.DeleteFunc(b.queue, func(it outItem) bool { return it.p == nil || it.restFor != nil || isSub(it.p) })
	b.notesGoneLocked()
	requeue := make([]outItem, 0, len(retry))
	for _, p := range retry {
		requeue = append(requeue, outItem{p: p, line: p.line})
	}
	b.queue = append(requeue, b.queue...)
	// b.subs stays: the sessions still hold those subscriptions, and the
	// next child is subscribed again once ready (becomeReady).
	b.mu.Unlock()
	withdrawVoid(void, why)

	b.log.Info("child exited", "pid", c.pid, "exit", exit, "failedRequests", len(failed), "retried", len(retry))
	b.p.emit(&Event{Kind: EventBackendExited, Server: b.srv.name, PID: c.pid, ExitCode: c.exitCode(), Err: exit, Session: b.ownerID()})
	for _, p := range settled {
		b.finish(p, outcome{kind: endNotForChild})
	}
	if stopped == nil {
		b.crashed = crashedCalls{reqs: failed, exit: exit, tail: tail}
	}
	for _, p := range failed {
		if stopped != nil {
			b.finish(p, failure(endChildGone, errChildStopped, b.srv.name, stopped, p.method))
		}
	}
	b.signal()
}

// crashedCalls are the requests a crashed child had been written that are
// not sent again, and why it ended.
type crashedCalls struct {
	reqs []*pending
	exit string
	tail []string
}

// answerCrashed answers the calls the last crash left, for a server that
// restarts: they may have run, and may be sent again.
func (b *backend) answerCrashed(cc crashedCalls) {
	for _, p := range cc.reqs {
		b.finish(p, failure(endChildGone, errChildDied, b.srv.name, cc.exit, p.method, b.stderrNote(cc.tail)))
	}
}

// noteCrash records why the last child ended (or could not start) in the
// budget. It reports whether the budget is spent, or no child can start
// at all (cannotStartError), in which case the backend is now failed and
// every pending request has been answered, those the crash left with the
// failure's error (not retryable); otherwise wait is the backoff before
// the next child, and what the crash left is answered as may have run,
// retryable. A restart the user asked for spends nothing.
func (b *backend) noteCrash(cause error, budget *restartBudget) (failed bool, wait time.Duration) {
	crashed := b.crashed
	b.crashed = crashedCalls{}
	// What a session is told of the last child's end, and what the views
	// have (they redact it): redacted before the lock is taken.
	toldCause, toldNote, rawNote := b.toldCause(cause), b.stderrNote(crashed.tail), rawStderrNote(crashed.tail)
	b.mu.Lock()
	b.lastErr, b.lastTold = cause.Error(), toldCause
	if errors.Is(cause, errUserRestart) {
		b.restarts++
		b.mu.Unlock()
		b.answerCrashed(crashed) // (none: reap answered what the restart's stop left)
		return false, budget.nextWait()
	}
	failed, exits, wait := budget.exited(b.p.clock.Now())
	cs := (*cannotStartError)(nil)
	never := errors.As(cause, &cs) // no child ran: the next would not either, until the user acts
	if !failed && !never {
		b.restarts++
		b.mu.Unlock()
		b.answerCrashed(crashed)
		b.emitState()
		return false, wait
	}
	kind, args := errCannotStart, []any{b.srv.name, cs}
	whole := args // as the views have it, which redact it (status, events)
	if !never {
		// The last child's own stderr (reap); none when none started. A
		// cause that quotes it already (a failed handshake) is not
		// followed by it again.
		if sf := (*startFailure)(nil); errors.As(cause, &sf) && sf.saysStderr {
			rawNote = ""
			if b.quotesStderr() {
				toldNote = ""
			}
		}
		kind, args = errServerFailed, []any{b.srv.name, exits, budget.pol.Window, toldCause, toldNote}
		whole = []any{b.srv.name, exits, budget.pol.Window, cause, rawNote}
	}
	state := map[string]any{"state": StateFailed}
	b.state = StateFailed
	b.hsErr = newErrorData(kind, false, b.srv.name, state, args...) // what later requests are refused with
	b.hsWhole = newError(kind, false, b.srv.name, whole...)
	if ch := b.hsDone; ch != nil {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
	all := b.takeAllLocked()
	b.mu.Unlock()
	b.log.Error("server failed", "reason", b.hsWhole.Error())
	b.emitState()
	for _, p := range all {
		// Whether each may have run is its own: one the crash left was
		// written, and a request re-queued after reaching an earlier
		// child (safe to repeat) may have run there.
		o := failure(endChildGone, kind, args...)
		o.extra = state
		b.finish(p, o)
	}
	return true, 0
}

// takeAllLocked empties the queue and returns every request in flight,
// for the caller to finish: after the backend's state changed, under
// the same lock, so that no request is queued after it.
func (b *backend) takeAllLocked() []*pending {
	b.queue = nil
	b.notesGoneLocked()
	return b.reqs.all()
}

// stderrNote is the end of an error message that tells a session how
// b's child ended, about the child's last stderr lines, if it wrote any:
// they are quoted, redacted, only when b quotesStderr; otherwise the note
// says where to read them (status redacts them too).
func (b *backend) stderrNote(tail []string) string {
	switch {
	case len(tail) == 0:
		return ""
	case b.owner == nil:
		return "; its stderr is not quoted, as the child serves other sessions too: see `switchboard status`"
	case !b.quotesStderr():
		return "; see its stderr in `switchboard status`"
	}
	lines := make([]string, len(tail))
	for i, l := range tail {
		lines[i] = b.p.opts.RedactText(l)
	}
	return rawStderrNote(lines)
}

// rawStderrNote is the end of a message that quotes a child's last
// stderr lines as they are, for the views, which redact it.
func rawStderrNote(tail []string) string {
	if len(tail) == 0 {
		return ""
	}
	return "; last stderr: " + strings.Join(tail, " | ")
}

// quotesStderr reports whether the errors b's session is told quote its
// child's stderr: only a session's own child's (share "session"), whose
// stderr holds nothing of another session's, and only redacted, when the
// pool can redact. A shared child's was written while it served every
// session: a child may log each request, with its credentials, or a
// token a session gave it.
func (b *backend) quotesStderr() bool { return b.owner != nil && b.p.opts.RedactText != nil }

// toldCause is what a session's error says of why b's last child ended,
// cause: a failed handshake's cause quotes the child's stderr, which is
// redacted, or left out when b does not quote it (quotesStderr).
func (b *backend) toldCause(cause error) string {
	sf := (*startFailure)(nil)
	if !errors.As(cause, &sf) || !sf.saysStderr {
		return cause.Error()
	}
	if !b.quotesStderr() {
		return strings.Replace(cause.Error(), sf.msg, sf.bare, 1)
	}
	return b.p.opts.RedactText(cause.Error())
}

// finishStop answers everything still pending once the backend stops.
func (b *backend) finishStop() {
	b.mu.Lock()
	err := b.stopErr
	b.state = StateStopped
	b.child = nil
	if ch := b.hsDone; ch != nil {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
	if b.hsErr == nil {
		b.hsErr = newError(errServerGone, false, b.srv.name, b.srv.name, err)
	}
	all := b.takeAllLocked()
	b.mu.Unlock()
	b.emitState()
	for _, p := range all {
		b.finish(p, failure(endChildGone, errServerStopped, b.srv.name, err, p.method))
	}
}

// stop shuts the backend down and waits until it is gone.
func (b *backend) stop(reason error) {
	b.stopOnce.Do(func() {
		b.mu.Lock()
		b.stopErr = reason
		b.mu.Unlock()
		close(b.stopReq)
	})
	<-b.done
}

// restartNow asks the supervisor for a restart: of a failed backend, or of
// a running child (gracefully).
func (b *backend) restartNow() {
	select {
	case b.restartQ <- struct{}{}:
	default:
	}
}

// drainAfterTimeout is how long past the request timeout a draining
// backend waits before it stops anyway. Its requests end by their own
// timers first, each answered -32001 as it runs out: a backstop at the
// very timeout raced them, and a call that ran out its time on a loaded
// machine was answered "stopped" instead.
const drainAfterTimeout = 5 * time.Second

// drain stops the backend once nothing is pending, or a little after the
// request timeout at the latest (drainAfterTimeout). For a final reason
// (the server removed or disabled) the waits for the child's handshake
// end first (retire).
func (b *backend) drain(reason error) {
	b.mu.Lock()
	b.draining = true
	timeout := b.requestTimeoutLocked()
	b.mu.Unlock()
	if f := (*finalStop)(nil); errors.As(reason, &f) {
		b.retire(reason)
	}
	idle := b.reqs.whenIdle()
	b.p.wg.Go(func() {
		t := time.NewTimer(timeout + drainAfterTimeout)
		defer t.Stop()
		select {
		case <-idle:
		case <-t.C:
		case <-b.done:
		}
		b.stop(reason)
	})
}

func (b *backend) ownerID() string {
	if b.owner != nil {
		return b.owner.id
	}
	return ""
}

func (b *backend) emitState() {
	b.mu.Lock()
	st := b.state
	pid := 0
	if b.child != nil {
		pid = b.child.pid
	}
	errText := ""
	if b.hsWhole != nil {
		errText = b.hsWhole.Error()
	} else if b.hsErr != nil {
		errText = b.hsErr.Error()
	}
	b.mu.Unlock()
	b.p.emit(&Event{Kind: EventBackendState, Server: b.srv.name, State: st, PID: pid, Err: errText, Session: b.ownerID()})
}

// restartPolicy is the pool's policy with the server's overrides.
func (b *backend) restartPolicy() RestartPolicy {
	return b.config().Restart.or(b.p.opts.Restart)
}
