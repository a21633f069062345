package pool

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// server is one configured name. Sessions join a server, not a child: each
// request goes to the server's current backend, so a config change can
// start a new child for new requests while the old one finishes its own.
type server struct {
	p    *Pool
	name string
	// current is the shared backend new requests go to, read lock-free on
	// the hot path; nil until the first request or after idle reaping.
	current atomic.Pointer[backend]

	mu         sync.Mutex // guards the fields below; never held across I/O
	cfg        ServerConfig
	old        []*backend // replaced by a config change, draining
	perSession map[*session]*backend
	sessions   map[*session]struct{}
	removed    bool
	idle       *time.Timer // stops current when no session is left
	failure    string      // the current backend's failure, kept after it stopped
}

func newServer(p *Pool, cfg ServerConfig) *server {
	return &server{p: p, name: cfg.Name, cfg: cfg,
		perSession: map[*session]*backend{}, sessions: map[*session]struct{}{}}
}

func (s *server) config() ServerConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// join adds a session; the idle timer stops while anyone is connected.
func (s *server) join(sess *session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return fmt.Errorf("%w %q (it was removed from the config)", ErrUnknownServer, s.name)
	}
	s.sessions[sess] = struct{}{}
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	return nil
}

// leave removes a session. A session-mode child stops with its session; a
// shared child stops after idleTimeout without sessions.
func (s *server) leave(sess *session) {
	s.mu.Lock()
	delete(s.sessions, sess)
	own := s.perSession[sess]
	delete(s.perSession, sess)
	if len(s.sessions) == 0 && !s.removed {
		s.armIdleLocked()
	}
	s.mu.Unlock()
	if own != nil {
		own.stop(errSessionEnded)
	}
}

// armIdleLocked starts the idle timer for the current backend. A freshly
// started child is kept at least for its warm-up grace.
func (s *server) armIdleLocked() {
	idle := s.cfg.IdleTimeout
	if idle == 0 {
		idle = defaultIdleTimeout
	}
	b := s.current.Load()
	if idle < 0 || b == nil {
		return
	}
	if s.idle != nil {
		s.idle.Stop()
	}
	wait := idle
	if grace := time.Until(b.createdAt.Add(s.p.opts.WarmupGrace)); grace > wait {
		wait = grace // Options.WarmupGrace
	}
	s.idle = time.AfterFunc(wait, func() { s.reapIdle(b) })
}

func (s *server) reapIdle(b *backend) {
	s.mu.Lock()
	if len(s.sessions) > 0 || s.current.Load() != b {
		s.mu.Unlock()
		return
	}
	s.current.Store(nil)
	s.idle = nil
	s.mu.Unlock()
	s.p.log.Info("stopping idle child", "server", s.name, "pid", b.pid())
	b.stop(errIdle)
}

// backendFor returns the backend a session's next request goes to,
// starting a child if there is none.
func (s *server) backendFor(sess *session) (*backend, error) {
	if b := s.current.Load(); b != nil && !sess.ownChild {
		return b, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return nil, fmt.Errorf("server %q was removed from the config", s.name)
	}
	if s.cfg.Disabled {
		return nil, fmt.Errorf("%w: %q", ErrDisabled, s.name)
	}
	if sess.ownChild {
		if b := s.perSession[sess]; b != nil {
			return b, nil
		}
		if _, ok := s.sessions[sess]; !ok {
			return nil, errSessionEnded
		}
		b := newBackend(s, s.cfg, sess)
		s.perSession[sess] = b
		return b, nil
	}
	if b := s.current.Load(); b != nil {
		return b, nil
	}
	b := newBackend(s, s.cfg, nil)
	s.current.Store(b)
	if len(s.sessions) == 0 {
		s.armIdleLocked()
	}
	return b, nil
}

// reconfigure applies a changed config. Pool-side settings apply at once;
// a change to how the child is started retires the current child: it
// finishes what it has in flight and stops, while new requests start a new
// one.
func (s *server) reconfigure(cfg ServerConfig) {
	s.mu.Lock()
	old := s.cfg
	s.cfg = cfg
	var retire *backend
	if b := s.current.Load(); b != nil && (!cfg.sameProcess(old) || cfg.Disabled) {
		retire = b
		s.current.Store(nil)
		s.old = append(s.old, b)
	}
	s.failure = ""
	s.mu.Unlock()
	if retire != nil {
		s.p.log.Info("server changed: draining the old child", "server", s.name, "pid", retire.pid())
		retire.drain(errConfigChanged)
	} else if b := s.current.Load(); b != nil {
		b.setConfig(cfg)
		if b.failed() {
			b.restartNow()
		}
	}
}

// remove retires everything: no new requests; in-flight ones finish
// (bounded by their timeouts), then the children stop and the sessions end.
func (s *server) remove() {
	s.mu.Lock()
	s.removed = true
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	var all []*backend
	if b := s.current.Load(); b != nil {
		all = append(all, b)
		s.old = append(s.old, b)
		s.current.Store(nil)
	}
	for _, b := range s.perSession {
		all = append(all, b)
	}
	sessions := make([]*session, 0, len(s.sessions))
	for sess := range s.sessions {
		sessions = append(sessions, sess)
	}
	s.mu.Unlock()
	for _, b := range all {
		b.drain(errServerRemoved)
	}
	go func() {
		// Sessions end once nothing of theirs is in flight, so a removal
		// never cuts off an answer already on its way.
		for _, sess := range sessions {
			sess.closeWhenIdle(errServerRemoved)
		}
	}()
	s.maybeDrained()
}

// backendDone forgets a backend that stopped for good.
func (s *server) backendDone(b *backend) {
	s.mu.Lock()
	if s.current.Load() == b {
		s.current.Store(nil)
		if msg := b.failureMessage(); msg != "" {
			s.failure = msg
		}
	}
	s.old = slices.DeleteFunc(s.old, func(x *backend) bool { return x == b })
	for sess, x := range s.perSession {
		if x == b {
			delete(s.perSession, sess)
		}
	}
	s.mu.Unlock()
	s.maybeDrained()
}

func (s *server) maybeDrained() {
	s.mu.Lock()
	done := s.removed && s.current.Load() == nil && len(s.old) == 0 && len(s.perSession) == 0
	s.mu.Unlock()
	if done {
		s.p.drained(s)
	}
}

// backends lists every live backend of the server.
func (s *server) backends() []*backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.old)
	if b := s.current.Load(); b != nil {
		out = append(out, b)
	}
	for _, b := range s.perSession {
		out = append(out, b)
	}
	return out
}

// sessionList copies the sessions of the server, for fan-out.
func (s *server) sessionList() []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*session, 0, len(s.sessions))
	for sess := range s.sessions {
		out = append(out, sess)
	}
	return out
}

func (s *server) sessionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

func (s *server) info() ServerInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := ServerInfo{Name: s.name, Share: s.cfg.Share, Disabled: s.cfg.Disabled, State: StateStopped,
		Error: s.failure, Draining: s.removed}
	if info.Share == "" {
		info.Share = ShareShared
	}
	if b := s.current.Load(); b != nil {
		info.State = b.stateName()
		if msg := b.failureMessage(); msg != "" {
			info.Error = msg
		}
	}
	if s.cfg.Disabled {
		info.State = "disabled"
	}
	return info
}

// backendsOf lists the backends a session may have requests on: its own
// child, or the server's current and draining ones.
func (s *server) backendsOf(sess *session) []*backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.perSession[sess]; b != nil {
		return []*backend{b}
	}
	out := make([]*backend, 0, 1+len(s.old))
	if b := s.current.Load(); b != nil {
		out = append(out, b)
	}
	return append(out, s.old...)
}
