package pool

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// server is one configured name. Sessions join a server, not a child: each
// request goes to the current backend of the session's roots partition, so
// a config change can start a new child for new requests while the old one
// finishes its own, and sessions that declared different roots never share
// a child (roots.go).
type server struct {
	p    *Pool
	name string
	// hs is the last handshake any child of this server completed: a
	// legacy client's initialize is answered from it before the pool
	// knows which partition the client belongs to.
	hs atomic.Pointer[handshake]
	// asksRoots is what its children were seen to do once initialized
	// with roots: rootsUnknown, rootsNotAsked, or, once one asked, how
	// long its next children are waited for (awaitRoots, learnRoots).
	asksRoots atomic.Int64
	// params is what its tools mirror into Mcp-Param headers, learned
	// from its children's tools/list answers; nil until one is seen
	// (httpparams.go). paramsAsked: the pool asked a child itself.
	params      atomic.Pointer[toolParams]
	paramsAsked atomic.Bool

	mu         sync.Mutex // guards the fields below; never held across I/O
	cfg        ServerConfig
	parts      map[string]*partition // by roots key
	old        []*backend            // replaced by a config change, draining
	perSession map[*session]*backend
	sessions   map[*session]struct{}
	removed    bool
	failure    string      // the current backend's failure, kept after it stopped
	resolution *resolveJob // of cfg's command, shared by its children (resolve.go)
}

// partition is the sessions of a shared server that declared the same
// roots, and the child they share.
type partition struct {
	key   string    // rootsKey(roots)
	roots []string  // sorted URIs; nil for "no roots"
	names rootNames // their names, as the session that made the partition gave them (rootsListResult)
	// current is the backend new requests go to, read lock-free on the
	// hot path; nil until the first request or after idle reaping.
	current atomic.Pointer[backend]

	// Guarded by server.mu.
	members   map[*session]struct{}
	idle      *time.Timer // stops current when no member is left
	idleSince time.Time   // when the last member left, or current started with none
	lastLeft  time.Time   // when a member last left (leavePartLocked)
	unjoined  bool        // current started with no member, and none came since: kept for its warm-up grace alone (idlePolicy)
}

func newServer(p *Pool, cfg ServerConfig) *server {
	return &server{p: p, name: cfg.Name, cfg: cfg, parts: map[string]*partition{},
		perSession: map[*session]*backend{}, sessions: map[*session]struct{}{}}
}

func (s *server) config() ServerConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// requestTimeout is how long a request that comes now may take, from its
// arrival: the config's requestTimeout, or the default (as
// backend.requestTimeoutLocked reads its own copy of the config).
func (s *server) requestTimeout() time.Duration {
	if t := s.config().RequestTimeout; t > 0 {
		return t
	}
	return DefaultRequestTimeout
}

// join adds a session. It joins a partition with its first request.
func (s *server) join(sess *session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return removedError(s.name)
	}
	s.sessions[sess] = struct{}{}
	return nil
}

// leave removes a session. A session-mode child stops with its session; a
// shared child stops after idleTimeout without sessions in its partition.
// quietSince, when not zero, is when a session that ends for having had
// nothing to do since (a server's stateless HTTP session) last did
// something: its partition's idle time counts from then, not from now.
func (s *server) leave(sess *session, quietSince time.Time) {
	s.mu.Lock()
	delete(s.sessions, sess)
	own := s.perSession[sess]
	delete(s.perSession, sess)
	if pt := sess.part.Load(); pt != nil {
		s.leavePartLocked(sess, pt, quietSince)
	}
	s.mu.Unlock()
	if own != nil {
		own.stop(errSessionEnded)
	}
}

// statelessLinger is how long the server's stateless HTTP session stays
// after its last exchange (httpFront.expireIdle): as long as a child kept
// for it alone would run, its idleTimeout, so that sparse 2026-07-28
// requests find one session open rather than each open its own, and at
// least minStatelessLinger. ok is false when the server keeps idle
// children for ever (idleTimeout never): so does it the session.
func (s *server) statelessLinger() (after time.Duration, ok bool) {
	s.mu.Lock()
	idle := s.cfg.idleTimeout()
	s.mu.Unlock()
	if idle < 0 {
		return 0, false
	}
	return max(idle, minStatelessLinger), true
}

// leavePartLocked takes sess out of pt. The partition's last member to
// go arms its idle timer, counting from when the last member left: now,
// or quietSince for a member that left then in effect (leave), unless
// another left later.
func (s *server) leavePartLocked(sess *session, pt *partition, quietSince time.Time) {
	delete(pt.members, sess)
	now := s.p.clock.Now()
	left := now
	if !quietSince.IsZero() && quietSince.Before(now) {
		left = quietSince
		if pt.lastLeft.After(left) {
			left = pt.lastLeft
		}
	}
	pt.lastLeft = left
	switch {
	case len(pt.members) > 0 || s.removed:
	case pt.current.Load() == nil:
		if s.parts[pt.key] == pt {
			delete(s.parts, pt.key) // nobody in it and no child: nothing to keep
		}
	default:
		s.armIdleLocked(pt, left)
	}
}

// partLocked returns the partition of key, creating it with roots and
// their names.
func (s *server) partLocked(key string, roots []string, names rootNames) *partition {
	pt := s.parts[key]
	if pt == nil {
		pt = &partition{key: key, roots: roots, names: names, members: map[*session]struct{}{}}
		s.parts[key] = pt
	}
	return pt
}

// enterLocked makes pt the session's partition.
func (s *server) enterLocked(sess *session, pt *partition) {
	if old := sess.part.Load(); old == pt {
		return
	} else if old != nil {
		s.leavePartLocked(sess, old, time.Time{})
	}
	pt.members[sess] = struct{}{}
	sess.part.Store(pt)
	pt.unjoined = false
	if pt.idle != nil {
		pt.idle.Stop()
		pt.idle = nil
	}
}

// armIdleLocked starts the partition's idle timer for its current backend,
// which has had no session since left, as the idle policy says: after its
// idleTimeout, and a freshly started child not before its warm-up grace.
func (s *server) armIdleLocked(pt *partition, left time.Time) {
	pt.idleSince = left
	s.idleTimerLocked(pt, pt.idleSince)
}

// idleTimerLocked (re)arms the partition's idle timer as if its last
// session had left at left, under the server's current idleTimeout, or
// stops it when that is never.
func (s *server) idleTimerLocked(pt *partition, left time.Time) {
	b := pt.current.Load()
	if b == nil {
		return
	}
	if pt.idle != nil {
		pt.idle.Stop()
		pt.idle = nil
	}
	wait, ok := s.idlePolicyLocked(pt).stopAfter(b.warmupFrom(), left, s.p.clock.Now())
	if !ok {
		return // never, or not before its process starts, which arms it (processStarted)
	}
	pt.idle = s.p.afterFunc(wait, func() { s.reapIdle(pt, b) })
}

func (s *server) idlePolicyLocked(pt *partition) idlePolicy {
	return idlePolicy{idle: s.cfg.IdleTimeout, warmup: s.p.opts.WarmupGrace, unjoined: pt.unjoined}
}

// reapIdle stops pt's child b, armed by armIdleLocked, unless a session
// came back meanwhile or b was replaced. The policy is asked again, as
// the timer may have fired as it was stopped or re-armed (a changed
// idleTimeout, a session that came and left again). A child still
// answering a call of a session that moved to other roots (or, one no
// session joined, the initialize it was started for) is looked at again
// an idle period later (its grace, for the latter): the call is not cut
// short. A failed one is kept: it runs no process, and the server stays
// failed, its requests failing fast with the reason, until it is
// restarted or its config changes (revived arms the timer again then).
func (s *server) reapIdle(pt *partition, b *backend) {
	s.mu.Lock()
	if len(pt.members) > 0 || pt.current.Load() != b {
		s.mu.Unlock()
		return
	}
	if b.failed() {
		pt.idle = nil
		s.mu.Unlock()
		return
	}
	if wait, ok := s.idlePolicyLocked(pt).stopAfter(b.warmupFrom(), pt.idleSince, s.p.clock.Now()); !ok || wait > 0 {
		s.idleTimerLocked(pt, pt.idleSince)
		s.mu.Unlock()
		return
	}
	if b.reqs.serving() {
		s.idleTimerLocked(pt, s.p.clock.Now())
		s.mu.Unlock()
		return
	}
	s.retireLocked(pt)
	s.mu.Unlock()
	s.p.log.Info("stopping idle child", "server", s.name, "pid", b.pid(), "roots", pt.roots)
	b.stop(errIdle)
}

// revived is told by b's supervisor that b, failed, starts again (a
// restart, a config change that kept its process): with no session in
// its partition, it is stopped an idle period from now, as a child
// started with none is, since reapIdle kept it while it was failed.
func (s *server) revived(b *backend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pt := range s.parts {
		if pt.current.Load() == b && len(pt.members) == 0 && !s.removed {
			s.armIdleLocked(pt, s.p.clock.Now())
		}
	}
}

// processStarted is told by b's supervisor that a process of b's
// started: its warm-up counts from now. With no session in its
// partition, the idle timer armed before (when the slot was made, when
// its last session left: maybe while its package was resolved, or its
// last process crashed) is armed again, still counting the idle time from
// when the last session left.
func (s *server) processStarted(b *backend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pt := range s.parts {
		if pt.current.Load() == b && len(pt.members) == 0 && !s.removed {
			s.idleTimerLocked(pt, pt.idleSince)
		}
	}
}

// retireLocked takes pt's child out of the server and returns it, for the
// caller to stop once it has let go of s.mu: pt's idle timer is stopped
// and pt forgotten (a session that comes next makes it anew).
func (s *server) retireLocked(pt *partition) *backend {
	b := pt.current.Load()
	pt.current.Store(nil)
	if pt.idle != nil {
		pt.idle.Stop()
		pt.idle = nil
	}
	if s.parts[pt.key] == pt {
		delete(s.parts, pt.key)
	}
	return b
}

// backendFor returns the backend a session's next request goes to,
// starting a child if there is none: its own (share "session"), else its
// partition's.
func (s *server) backendFor(sess *session) (*backend, error) { return s.backendAs(sess, nil) }

// backendAs is backendFor; a child it starts is told the client can do
// what caps says, or what the session declared when caps is nil.
func (s *server) backendAs(sess *session, caps *clientCaps) (*backend, error) {
	if pt := sess.part.Load(); pt != nil && !sess.ownChild {
		if b := pt.current.Load(); b != nil {
			return b, nil
		}
	}
	roots, names := sess.declaredRoots()
	s.mu.Lock()
	b, reclaimed, made, err := s.backendAsLocked(sess, roots, names, caps)
	s.mu.Unlock()
	s.stopReclaimed(reclaimed)
	if made {
		b.takeStakes()
	}
	return b, err
}

// backendAsLocked is backendAs under s.mu; made says b is a backend it
// made, whose sessions' stakes the caller carries to it (takeStakes)
// once it has let go of s.mu.
func (s *server) backendAsLocked(sess *session, roots []string, names rootNames, caps *clientCaps) (b, reclaimed *backend, made bool, err error) {
	if s.removed {
		return nil, nil, false, removedError(s.name)
	}
	if s.cfg.Disabled {
		return nil, nil, false, disabledError(s.cfg)
	}
	if _, ok := s.sessions[sess]; !ok {
		return nil, nil, false, errSessionEnded
	}
	if sess.ownChild {
		if b := s.perSession[sess]; b != nil {
			return b, nil, false, nil
		}
		// Each session's child is a process, and a thread of the pool's
		// (child.go): a local process opening session after session must
		// not start child after child.
		if running := len(s.perSession); running >= s.p.opts.MaxRootsChildren {
			return nil, nil, false, newError(errSessionChildren, false, s.name, s.name, running)
		}
		b := newBackend(s, s.cfg, sess, roots, nil, capsOf(sess, caps)) // its session's roots, as they are when asked
		s.perSession[sess] = b
		return b, nil, true, nil
	}
	if s.cfg.Share == ShareGlobal {
		roots, names = nil, nil
	}
	pt := s.partLocked(rootsKey(roots), roots, names)
	s.enterLocked(sess, pt)
	return s.currentLocked(pt, capsOf(sess, caps))
}

func capsOf(sess *session, caps *clientCaps) clientCaps {
	if caps != nil {
		return *caps
	}
	return sess.capabilities()
}

// currentLocked returns the partition's backend, starting one (made).
// Past the server's share of children (Options.MaxRootsChildren), the
// child of another partition that no session is in makes room
// (spareLocked): it is taken out here and returned as reclaimed, for the
// caller to stop once it has let go of s.mu (stopReclaimed). When every
// child has sessions, the request is refused. The caller carries a made
// backend's sessions' stakes to it (takeStakes) once it has let go of s.mu.
func (s *server) currentLocked(pt *partition, caps clientCaps) (b, reclaimed *backend, made bool, err error) {
	if b := pt.current.Load(); b != nil {
		return b, nil, false, nil
	}
	if running := s.runningLocked(); running >= s.p.opts.MaxRootsChildren {
		spare := s.spareLocked()
		if spare == nil {
			return nil, nil, false, newError(errRootsChildren, false, s.name, s.name, running)
		}
		reclaimed = s.retireLocked(spare)
	}
	b = newBackend(s, s.cfg, nil, pt.roots, pt.names, caps)
	s.startedLocked(pt, b)
	return b, reclaimed, true, nil
}

// startedLocked makes b, a child just started, pt's current one. Started
// with no session in pt (for a client's initialize, before its roots are
// known: handshake), it is idle from its start, and stopped after its
// warm-up grace unless a session joins it (idlePolicy).
func (s *server) startedLocked(pt *partition, b *backend) {
	pt.current.Store(b)
	pt.unjoined = len(pt.members) == 0
	if pt.unjoined {
		s.armIdleLocked(pt, s.p.clock.Now())
	}
}

// runningLocked is how many children the server's partitions run.
func (s *server) runningLocked() int {
	n := 0
	for _, pt := range s.parts {
		if pt.current.Load() != nil {
			n++
		}
	}
	return n
}

// spareLocked is the partition whose child makes room for other roots, or
// nil: of those no session is in, the oldest child that owes no client an
// answer, else the oldest. A session that moved to other roots may still
// have a call running on the child it left, so an idle child goes first;
// but one that owes answers is taken too, or a session that leaves a call
// hanging on each child it leaves could keep every other session's new
// roots out.
func (s *server) spareLocked() *partition {
	var idle, busy *partition
	older := func(a, b *partition) bool {
		return b == nil || a.current.Load().createdAt.Before(b.current.Load().createdAt)
	}
	for _, pt := range s.parts {
		b := pt.current.Load()
		if b == nil || len(pt.members) > 0 {
			continue
		}
		if b.reqs.serving() {
			if older(pt, busy) {
				busy = pt
			}
		} else if older(pt, idle) {
			idle = pt
		}
	}
	if idle != nil {
		return idle
	}
	return busy
}

// stopReclaimed stops a child currentLocked took out to make room, if any,
// without waiting for it: the request that needed the room goes on.
func (s *server) stopReclaimed(b *backend) {
	if b == nil {
		return
	}
	s.p.log.Info("stopping a child no session is in, to make room for other roots", "server", s.name, "pid", b.pid())
	s.p.wg.Go(func() { b.stop(errMadeRoom) })
}

// handshake returns a handshake of this server's children, to answer a
// legacy client's initialize before its roots are known: the last one any
// child completed, else the "no roots" partition's child's, started for it
// (it is idle-reaped after its warm-up grace if no session joins it).
// The client's initialize waits in flight on that child as w (nil: a
// resumed session's, which nobody waits for).
func (s *server) handshake(sess *session, w *handshakeWait) (*handshake, error) {
	if hs := s.hs.Load(); hs != nil {
		return hs, nil
	}
	if sess.ownChild {
		b, err := s.backendFor(sess)
		if err != nil {
			return nil, err
		}
		return sess.awaitHandshakeFor(b, w)
	}
	s.mu.Lock()
	switch {
	case s.removed:
		s.mu.Unlock()
		return nil, removedError(s.name)
	case s.cfg.Disabled:
		err := disabledError(s.cfg)
		s.mu.Unlock()
		return nil, err
	}
	b, reclaimed, made, err := s.currentLocked(s.partLocked("", nil, nil), sess.capabilities())
	s.mu.Unlock()
	s.stopReclaimed(reclaimed)
	if err != nil {
		return nil, err
	}
	if made {
		b.takeStakes()
	}
	return sess.awaitHandshakeFor(b, w)
}

// reconfigure applies a changed config. Pool-side settings apply at once;
// a change to how the child is started retires the current child: it
// finishes what it has in flight and stops, while new requests start a new
// one, and so do the stakes its sessions hold (startForStakes).
func (s *server) reconfigure(cfg ServerConfig) {
	s.mu.Lock()
	old := s.cfg
	if cfg.unchanged(old, s.p.opts.Restart) {
		s.mu.Unlock()
		return
	}
	s.cfg = cfg
	if !cfg.sameProcess(old) {
		s.asksRoots.Store(rootsUnknown) // another program: whether it asks roots is seen again
		s.forgetResolutionLocked()
		s.startResolvingLocked()
	}
	var retire, keep []*backend
	var members []*session // of the partitions whose child is replaced
	for _, pt := range s.parts {
		b := pt.current.Load()
		switch {
		case b == nil:
		case !cfg.sameProcess(old) || cfg.Disabled:
			retire = append(retire, b)
			pt.current.Store(nil)
			s.old = append(s.old, b)
			if !cfg.Disabled {
				for sess := range pt.members {
					members = append(members, sess)
				}
			}
		default:
			keep = append(keep, b)
			if cfg.idleTimeout() != old.idleTimeout() && len(pt.members) == 0 {
				s.idleTimerLocked(pt, pt.idleSince) // it counts from when the last session left
			}
		}
	}
	// The sessions' own children (share "session") follow the change as
	// their partitions' would: replaced, each session's next request
	// starting its new one (at once if it holds stakes), or kept with
	// the new settings.
	for sess, b := range s.perSession {
		if cfg.sameProcess(old) && !cfg.Disabled {
			keep = append(keep, b)
			continue
		}
		retire = append(retire, b)
		delete(s.perSession, sess)
		s.old = append(s.old, b)
		if !cfg.Disabled {
			members = append(members, sess)
		}
	}
	s.failure = ""
	s.hs.Store(nil)
	s.mu.Unlock()
	reason := errConfigChanged
	if cfg.Disabled {
		reason = disabledStop(cfg) // its requests get nowhere if sent again
	}
	for _, b := range retire {
		s.p.log.Info("server changed: draining the old child", "server", s.name, "pid", b.pid())
		b.drain(reason)
	}
	for _, b := range keep {
		b.setConfig(cfg)
		if b.failed() {
			b.restartNow()
		}
	}
	s.startForStakes(members)
}

// startForStakes starts the new child of the partitions whose child a
// config change replaced, if one of their sessions holds a subscription
// or an open listen, as that session's request would (session.backend):
// the child's takeStakes carries every session's stakes of the partition
// to it, so a session that only listens goes on getting changes without
// sending anything. A partition whose sessions hold nothing gets its
// child with its next request. A session that closed meanwhile starts
// nothing; a start refused otherwise (the server removed or disabled
// meanwhile, its children all taken) is logged, and the stakes wait for
// the partition's next request, as before.
func (s *server) startForStakes(members []*session) {
	for _, sess := range members {
		held, x := sess.heldStakes()
		if !held {
			continue
		}
		// Once a holder started its partition's child, its other
		// holders find it there.
		if _, err := sess.backend(x); err != nil && !errors.Is(err, errSessionEnded) {
			s.p.log.Warn("server changed: could not start the new child for its sessions' subscriptions",
				"server", s.name, "session", sess.id, "error", err)
		}
	}
}

// remove retires everything: no new requests; in-flight ones finish
// (bounded by their timeouts), then the children stop and the sessions end.
func (s *server) remove() {
	s.mu.Lock()
	s.removed = true
	var all []*backend
	for _, pt := range s.parts {
		if pt.idle != nil {
			pt.idle.Stop()
			pt.idle = nil
		}
		if b := pt.current.Load(); b != nil {
			all = append(all, b)
			s.old = append(s.old, b)
			pt.current.Store(nil)
		}
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
	// Each session ends once nothing of its own is in flight, so a
	// removal never cuts off an answer already on its way, and an idle
	// session does not wait for the calls of a busy one. Each wait ends
	// with its session.
	why := removedEnd{server: s.name}
	for _, sess := range sessions {
		s.p.wg.Go(func() { sess.closeWhenIdle(why) })
	}
	s.maybeDrained()
}

// backendDone forgets a backend that stopped for good.
func (s *server) backendDone(b *backend) {
	s.mu.Lock()
	for _, pt := range s.parts {
		if pt.current.Load() == b {
			pt.current.Store(nil)
			if msg := b.failureMessage(); msg != "" {
				s.failure = msg
			}
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
	done := s.removed && len(s.currentsLocked()) == 0 && len(s.old) == 0 && len(s.perSession) == 0
	s.mu.Unlock()
	if done {
		s.p.drained(s)
	}
}

// backends lists every live backend of the server.
func (s *server) backends() []*backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append(slices.Clone(s.old), s.currentsLocked()...)
	for _, b := range s.perSession {
		out = append(out, b)
	}
	return out
}

// currentsLocked lists the partitions' current backends, sorted by
// their roots so that snapshots are stable.
func (s *server) currentsLocked() []*backend {
	parts := slices.Collect(maps.Values(s.parts))
	slices.SortFunc(parts, func(a, b *partition) int { return slices.Compare(a.roots, b.roots) })
	var out []*backend
	for _, pt := range parts {
		if b := pt.current.Load(); b != nil {
			out = append(out, b)
		}
	}
	return out
}

// membersOf lists the sessions that route to b: its partition's members.
func (s *server) membersOf(b *backend) []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pt := range s.parts {
		if pt.current.Load() == b {
			out := make([]*session, 0, len(pt.members))
			for sess := range pt.members {
				out = append(out, sess)
			}
			return out
		}
	}
	return nil
}

// info sums up the server's children, its partitions' and its sessions'
// own (share "session") alike, as ServerInfo says: ready when one is,
// else as the newest is, with its reason; its error is why the newest
// failed one failed. Children a config change replaced, still draining,
// do not count, but for a removed server those are all it has: its
// state is theirs while they finish what they have in flight
// (Draining). With none, a server whose package is being resolved (at
// config load, before any client asked) is starting, and says so: its
// first client waits for that resolution.
func (s *server) info() ServerInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := ServerInfo{Name: s.name, Share: s.cfg.Share, Disabled: s.cfg.Disabled, State: StateStopped,
		Error: s.failure, Draining: s.removed}
	if info.Share == "" {
		info.Share = ShareShared
	}
	children := s.currentsLocked()
	for _, b := range s.perSession {
		children = append(children, b)
	}
	if s.removed {
		children = append(children, s.old...)
	}
	var newest, newestFailed uint64 // backend ids grow with each child slot made
	ready := false
	for _, b := range children {
		st, why := b.shownState()
		ready = ready || st == StateReady
		if b.id > newest {
			newest, info.State, info.StateReason = b.id, st, why
		}
		if msg := b.failureMessage(); msg != "" && b.id > newestFailed {
			newestFailed, info.Error = b.id, msg
		}
	}
	switch {
	case s.cfg.Disabled:
		info.State, info.StateReason = "disabled", ""
	case ready:
		info.State, info.StateReason = StateReady, ""
	case len(children) == 0 && s.resolvingLocked():
		info.State, info.StateReason = StateStarting, resolvingReason
	}
	return info
}

// backendsOf lists the backends a session may have requests on, and so
// questions from: its own child and its own draining ones (share
// "session": a config change retires the child while its calls finish,
// and their questions are still this session's to answer), or the
// server's current ones (a session that moved partition may still have
// requests on its old one) and the draining ones no session owns.
func (s *server) backendsOf(sess *session) []*backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*backend
	if sess.ownChild {
		if b := s.perSession[sess]; b != nil {
			out = append(out, b)
		}
	} else {
		out = s.currentsLocked()
	}
	for _, b := range s.old {
		if b.owner == sess || b.owner == nil && !sess.ownChild {
			out = append(out, b)
		}
	}
	return out
}
