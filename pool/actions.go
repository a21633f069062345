package pool

import (
	"errors"
	"fmt"
)

// ErrNotFound means an action named a request or process the pool does
// not have.
var ErrNotFound = errors.New("not found")

// Restart restarts the server's children: a failed server gets a fresh
// restart budget, a running child is shut down gracefully and started
// again (its written requests follow the at-most-once rule). A closed
// pool restarts nothing: ErrPoolClosed. Nor does a server the config
// holds back: an ErrDisabled saying why, its children left to finish
// their calls.
func (p *Pool) Restart(server string) error {
	if !p.enter() {
		return ErrPoolClosed
	}
	defer p.leave()
	s, err := p.anyServer(server)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.cfg.Disabled {
		// It starts no child; those it has finish their calls and stop.
		err := disabledError(s.cfg)
		s.mu.Unlock()
		return err
	}
	s.forgetResolutionLocked() // a restart looks the package up again
	s.startResolvingLocked()
	resolving := s.resolution != nil
	s.mu.Unlock()
	bs := s.backends()
	if len(bs) == 0 {
		return nil // nothing running: the next session starts it
	}
	for _, b := range bs {
		if resolving {
			b.showResolvingAgain()
		}
		b.restartNow()
	}
	return nil
}

// RestartBackend restarts one child slot, named by its BackendInfo.ID, as
// Restart does the server's: its running child is shut down gracefully
// and started again, a failed one gets a fresh restart budget. The
// server's other children (other roots partitions, other sessions' own)
// are left alone, and so is its resolution: Restart looks the package up
// again.
func (p *Pool) RestartBackend(id uint64) error {
	for _, s := range p.allServers() {
		for _, b := range s.backends() {
			if b.id == id {
				s.mu.Lock()
				held := s.cfg.Disabled
				cfg := s.cfg
				s.mu.Unlock()
				if held {
					return disabledError(cfg)
				}
				b.restartNow()
				return nil
			}
		}
	}
	return fmt.Errorf("backend %d: %w", id, ErrNotFound)
}

// Stop stops every child of the server now: its shared children (one per
// roots partition), its sessions' own (share "session") and those still
// finishing for a config that changed; in-flight requests get an error.
// The next request starts a child again.
func (p *Pool) Stop(server string) error {
	s, err := p.anyServer(server)
	if err != nil {
		return err
	}
	s.mu.Lock()
	stop := append(s.currentsLocked(), s.old...)
	for _, pt := range s.parts {
		pt.current.Store(nil)
	}
	for sess, b := range s.perSession {
		stop = append(stop, b)
		delete(s.perSession, sess) // its session's next request starts another
	}
	s.mu.Unlock()
	for _, b := range stop {
		b.stop(errors.New("stopped by the user"))
	}
	return nil
}

// Cancel ends one in-flight request: the client gets an error saying it
// was cancelled in Switchboard, the child gets notifications/cancelled.
// A request held for its session's roots answer, at no child yet, leaves
// the held queue (session.cancelHeld); one the replay of that queue has
// taken and no request table has yet is ended as it reaches one
// (session.handedOn). A legacy client's call whose 2026-07-28 child's
// questions wait for its client's answers (inputbridge.go), at no child
// now, ends with its questions; once its client answered them, it is
// found under the pool id it was listed with as it waited, and its next
// round is cancelled (goneOn). The client's error is delivered from the
// caller's goroutine, which may start the session's writer: a closed pool
// cancels nothing (ErrPoolClosed), and Close waits for a Cancel under way.
func (p *Pool) Cancel(poolID uint64) error {
	if !p.enter() {
		return ErrPoolClosed
	}
	defer p.leave()
	return p.cancel(poolID)
}

func (p *Pool) cancel(poolID uint64) error {
	p.mu.Lock()
	sessions := make([]*session, 0, len(p.sessions))
	for s := range p.sessions {
		sessions = append(sessions, s)
	}
	p.mu.Unlock()
	for _, s := range sessions {
		if s.cancelHeld(poolID) {
			return nil
		}
	}
	if id := goneOn(sessions, poolID); id != 0 {
		poolID = id // listed as it waited for its client's answers, which came: it goes on as its next round
	}
	if x := p.rounds.ofCall(poolID); x != nil { // its questions wait for its client: no child has it now
		if !x.end(newError(errCancelledByUser, true, x.b.srv.name, x.b.srv.name, x.call.method)) {
			if id := goneOn(sessions, poolID); id != 0 { // answered just now, and already sent on
				return p.cancel(id)
			}
			return fmt.Errorf("request %d: %w (it just ended)", poolID, ErrNotFound)
		}
		return nil
	}
	for _, s := range p.allServers() {
		for _, b := range s.backends() {
			pd := b.reqs.lookup(poolID)
			if pd == nil || pd.reply != nil {
				continue
			}
			if !b.finish(pd, userCancel(b.srv.name, pd.method)) {
				return fmt.Errorf("request %d: %w (it just ended)", poolID, ErrNotFound)
			}
			return nil
		}
	}
	return fmt.Errorf("request %d: %w", poolID, ErrNotFound)
}

// userCancel is how a user's cancel (Pool.Cancel) ends a request of
// server's.
func userCancel(server, method string) outcome {
	o := failure(endByUser, errCancelledByUser, server, method)
	o.reason = "cancelled in Switchboard"
	return o
}

// KillChild kills one of the pool's own children (its whole process
// group) by PID. Its supervisor treats it as a crash. Only PIDs the pool
// started are accepted.
func (p *Pool) KillChild(pid int) error {
	for _, s := range p.allServers() {
		for _, b := range s.backends() {
			if b.pid() == pid && pid > 0 {
				return kill(pid)
			}
		}
	}
	return fmt.Errorf("pid %d is not a child of this pool: %w", pid, ErrNotFound)
}

// ChildPIDs lists the PIDs of the pool's running children.
func (p *Pool) ChildPIDs() []int {
	var out []int
	for _, s := range p.allServers() {
		for _, b := range s.backends() {
			if pid := b.pid(); pid > 0 {
				out = append(out, pid)
			}
		}
	}
	return out
}

func (p *Pool) anyServer(name string) (*server, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.servers[name]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownServer, name)
}
