package pool

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// Roots: a shared child never mixes sessions' roots.
//
// A server such as server-filesystem takes the roots its client declares
// as the folders it may touch. One child shared by two clients can hold
// one set of roots, so sessions are partitioned by the roots they declare
// (server.backendFor): same sorted URI set, same child; "declares no
// roots" is a partition of its own. The pool learns a legacy session's
// roots by asking it roots/list once it is initialized (and again after
// its notifications/roots/list_changed), holding the session's requests
// until the answer; it answers a child's roots/list itself from the
// child's partition and never hands that question to a client. A child
// told of roots gets no client request until it asked for them
// (awaitRoots): a server applies its roots once it has them.
// 2026-07-28 clients declare no roots to the pool: they share the "no
// roots" partition.

// rootsAskTimeout bounds how long a session's requests wait for its
// answer to roots/list; past it, the session counts as declaring none.
// A variable for tests.
var rootsAskTimeout = 10 * time.Second

// rootsKey names a partition: its sorted, distinct URIs, each after its
// length in bytes ("12:file:///work"), so that no two sets of URIs name
// one partition whatever bytes the URIs hold. (URIs joined by a line
// break did: the one URI "file:///a\nfile:///b" named the partition of
// the two.) "No roots" is the empty key. The key lives in one pool: a
// hand-over carries a child's roots, not its key (CarriedChild.Roots).
func rootsKey(roots []string) string {
	size := 0
	for _, r := range roots {
		size += len(r) + 4
	}
	var b strings.Builder
	b.Grow(size)
	var digits [20]byte
	for _, r := range roots {
		b.Write(strconv.AppendInt(digits[:0], int64(len(r)), 10))
		b.WriteByte(':')
		b.WriteString(r)
	}
	return b.String()
}

// validRootURI reports whether u may be a root: not empty, and without
// a control character, which no URI holds (RFC 3986 and RFC 3987 allow
// none). A client's roots/list answer is a response, which the pool
// cannot answer with an error: a root it refuses is left out of the
// session's roots, and the others stand.
func validRootURI(u string) bool {
	return u != "" && !strings.ContainsFunc(u, unicode.IsControl)
}

// validRoots reports whether every one of roots may be a root: a
// carried child's roots were taken by an earlier pool, which may have let
// through what this one refuses (adoptCarriedLocked).
func validRoots(roots []string) bool {
	for _, u := range roots {
		if !validRootURI(u) {
			return false
		}
	}
	return true
}

// rootNames are the names a client gave its roots, by URI. A name is a
// label for the child (MCP's Root.name); the URIs alone decide the
// partition. A partition keeps the names of the session that made it:
// a session that comes later with the same URIs under other names shares
// its child, which hears its roots once, and so the first names.
type rootNames map[string]string

// parseRoots reads a roots/list result into sorted, distinct URIs and
// their names (the first a URI is given, when it comes twice), leaving
// out what is no URI (validRootURI): refused counts those.
func parseRoots(result []byte) (roots []string, names rootNames, refused int) {
	var v struct {
		Roots []struct {
			URI  string `json:"uri"`
			Name string `json:"name"`
		} `json:"roots"`
	}
	if json.Unmarshal(result, &v) != nil {
		return nil, nil, 0
	}
	for _, r := range v.Roots {
		if !validRootURI(r.URI) {
			if r.URI != "" {
				refused++
			}
			continue
		}
		roots = append(roots, r.URI)
		if _, ok := names[r.URI]; r.Name != "" && !ok {
			if names == nil {
				names = rootNames{}
			}
			names[r.URI] = r.Name
		}
	}
	slices.Sort(roots)
	return slices.Compact(roots), names, refused
}

// rootsListResult is the pool's answer to a child's roots/list: its
// partition's roots, each with its name if it was given one.
func rootsListResult(roots []string, names rootNames) []byte {
	type root struct {
		URI  string `json:"uri"`
		Name string `json:"name,omitempty"`
	}
	list := make([]root, 0, len(roots))
	for _, u := range roots {
		list = append(list, root{URI: u, Name: names[u]})
	}
	out, _ := json.Marshal(struct {
		Roots []root `json:"roots"`
	}{list})
	return out
}

// rootsResult is what the pool answers the child's roots/list with,
// whatever its era: its partition's roots, or for a session's own child
// that session's, as they are now.
func (b *backend) rootsResult() []byte {
	if b.owner != nil {
		return rootsListResult(b.owner.declaredRoots())
	}
	return rootsListResult(b.roots, b.rootNames)
}

// What a server's children were seen to do once initialized with roots
// (server.asksRoots); once one asked, it holds how long the next are
// waited for (learnRootsLocked), a positive time.Duration.
const (
	rootsUnknown  int64 = 0  // none was told roots yet (or the server's program changed)
	rootsNotAsked int64 = -1 // one was waited for and did not ask in time: the next are not waited for
)

// rootsSettle is how long the clients' lines wait, once the child asked
// for its roots and the answer went ahead of them, for the child to
// apply them. server-filesystem applies the answer only after checking
// each folder on disk (its own I/O, which no message of the protocol
// ends): on a loaded machine, a request right behind the answer ran
// with the server's own folders in 10 tries of 10, one 20 ms behind it
// in 2 of 10, one 50 ms behind it in none of 15; 100 ms is twice that.
const rootsSettle = 100 * time.Millisecond

// rootsSettleMax bounds rootsSettleFor.
const rootsSettleMax = time.Second

// rootsSettleFor is how long the clients' lines wait after the ask of a
// child that took took to start and be initialized: rootsSettle, or a
// quarter of took when that is longer (at most rootsSettleMax). What
// slows a start on a loaded machine slows the child's checking of its
// folders as much: with 100 ms alone, server-filesystem started among
// other busy processes on two cores served one session's first call in
// seven with its own folders.
func rootsSettleFor(took time.Duration) time.Duration {
	return min(max(rootsSettle, took/4), rootsSettleMax)
}

// rootsStartSpan is how many Options.RootsWait after initialized a
// child that was not waited for may ask for its roots during a client's
// call and still count as a child that asks at start (learnRootsLocked).
const rootsStartSpan = 5

// awaitRoots makes the clients' lines wait for c, a legacy child just
// handshaken that was declared roots, until it has its roots: until it
// asked for them (roots/list, answered by the pool), and
// rootsSettleFor(took) after, took being how long c took to start and be
// initialized. A server such as server-filesystem asks once initialized and
// serves its own folders until it applied the answer: a request it takes
// before runs with them, not the partition's. The wait for the ask is
// bounded by what the server's children were seen to do: Options.RootsWait
// while none was seen; once one asked, twice as long as it took (at least
// RootsWait, at most the handshake timeout); once one did not ask in time,
// no wait, until one of its children is seen to ask (learnRootsLocked).
// The lines wait in the backend's queue (writeLoop); the pool's own (its
// subscribes, the log level, its answers) go on.
func (b *backend) awaitRoots(c *child, hs *handshake, took time.Duration) {
	if !b.caps.roots || hs.era != EraLegacy || b.p.opts.RootsWait < 0 {
		return // a 2026-07-28 child asks within a call (inputbridge.go)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c.rootsHeld = true
	c.rootsSince = b.p.clock.Now()
	c.rootsSettle = rootsSettleFor(took)
	if c.askedRoots { // during its handshake: the answer is ahead of the clients' lines
		b.learnRootsLocked(c, 0)
		b.holdForRootsLocked(c, true, c.rootsSettle)
		return
	}
	b.holdForAskLocked(c) // not held, its ask, if it comes soon, is learned all the same
}

// holdForAskLocked makes the clients' lines wait for c's ask for its
// roots, as long as what the server's children were seen to do bounds
// it (awaitRoots): not at all once one did not ask in time.
func (b *backend) holdForAskLocked(c *child) {
	wait := b.p.opts.RootsWait
	switch seen := b.srv.asksRoots.Load(); {
	case seen == rootsNotAsked:
		return
	case seen > 0:
		wait = time.Duration(seen)
	}
	b.holdForRootsLocked(c, false, wait)
}

// holdForRootsLocked makes the clients' lines wait for c for wait: for
// its ask for its roots, or, once it asked (asked), for it to apply the
// answer. The timer of an earlier wait that fires late ends nothing.
func (b *backend) holdForRootsLocked(c *child, asked bool, wait time.Duration) {
	c.rootsWait = true
	c.rootsRound++
	round := c.rootsRound
	c.rootsTimer = b.p.afterFunc(wait, func() { b.rootsWaited(c, round, asked, wait) })
}

// tellRootsChanged tells b's child, a session's own, that its session's
// roots changed, and holds the clients' lines behind that again, as for
// a new child (awaitRoots): until it asked for them again, and
// rootsSettle more. The server's first child starts as its session's
// initialize is answered, before the pool has the session's roots: what
// it asked at start was answered none, and a call right behind the
// notice ran with the server's own folders. An ask again teaches nothing
// of how the server's children start (rootsSince zero), nor does its
// absence.
func (b *backend) tellRootsChanged() {
	b.mu.Lock()
	if b.stopErr != nil && b.child == nil {
		b.mu.Unlock()
		return
	}
	b.queue = append(b.queue, outItem{line: []byte(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)})
	var t *time.Timer
	if c := b.child; c != nil && (c.askedRoots || !c.rootsWait) {
		// Not waiting for an ask already (which reads the roots as they
		// are now): a child that asked is waited for again; one not held
		// yet (in its handshake) is held for its ask by awaitRoots.
		if c.askedRoots {
			c.askedRoots, c.rootsSince = false, time.Time{}
		}
		if c.rootsHeld {
			old, round := c.rootsTimer, c.rootsRound
			b.holdForAskLocked(c)
			if c.rootsRound != round {
				t = old // replaced: its wait is over
			}
		}
	}
	b.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	b.signal()
}

// answerRootsList answers the child's roots/list itself: a client is
// never asked. The answer goes ahead of every client's line in the queue
// (behind only the rest of a line the child has the start of), so that
// the child has its roots before any client request; the clients' lines
// waiting for its first ask (awaitRoots) go on rootsSettle later.
func (b *backend) answerRootsList(c *child, childID []byte) {
	line := jsonrpc.AppendResponse(nil, childID, b.rootsResult())
	b.mu.Lock()
	if b.child != c {
		b.mu.Unlock()
		return // the child is gone: its question with it
	}
	i := 0
	for i < len(b.queue) && b.queue[i].restFor != nil {
		i++
	}
	b.queue = slices.Insert(b.queue, i, outItem{line: line})
	var t *time.Timer
	if c.rootsWait && !c.askedRoots {
		t = c.rootsTimer
		b.holdForRootsLocked(c, true, max(c.rootsSettle, rootsSettle))
	}
	if !c.askedRoots && !c.rootsSince.IsZero() {
		b.learnRootsLocked(c, b.p.clock.Now().Sub(c.rootsSince))
	}
	c.askedRoots = true
	b.mu.Unlock()
	if t != nil {
		t.Stop() // the wait for the ask: over
	}
	b.signal()
}

// learnRootsLocked takes c's first ask for its roots, took after it was
// initialized, for what the server's next children do when it looks
// like an ask made at start (server-filesystem's): then they are waited
// for twice as long as c took (at least Options.RootsWait, at most the
// handshake timeout). An ask with no client call in flight is one. One
// during a call may be the call's own (a server that asks only when a
// tool needs them): it counts when it comes within rootsStartSpan
// RootsWaits of initialized, from a child that was not waited for (one
// waited for in vain told already what it does at start). The guess
// errs toward waiting, and a wrong one costs little either way: a server
// that asks only within calls, taken for one that asks at start, makes
// every other new child wait about RootsWait for an ask that does not
// come (that marks it as not asking again); a server that asks at start,
// once marked as not asking (one ask came too late), is learned again
// by its next child's ask, which usually comes while that child's first
// call runs (the call that started it): two children run a first call
// before they have their roots (the late one and the next), not all.
func (b *backend) learnRootsLocked(c *child, took time.Duration) {
	opts := b.p.opts
	if b.reqs.callsAt(c.pid) && (c.rootsMissed || took > rootsStartSpan*opts.RootsWait) {
		return
	}
	b.srv.asksRoots.Store(int64(max(opts.RootsWait, min(2*took, opts.HandshakeTimeout))))
}

// rootsWaited ends c's wait round for its roots (awaitRoots) after it
// waited wait: rootsSettle after its ask (asked), or the bound on the
// ask, which it did not make. Then the clients' lines go on; a child that
// did not ask once initialized makes the server's next children go
// unwaited for (until one of them asks), unless it died meanwhile: that
// says nothing of its server. A timer of a wait that is over or was
// replaced (the ask came as it fired) does nothing.
func (b *backend) rootsWaited(c *child, round uint32, asked bool, wait time.Duration) {
	b.mu.Lock()
	ends := c.rootsWait && c.rootsRound == round
	if ends {
		c.rootsWait, c.rootsTimer = false, nil
	}
	missed := ends && !asked
	if missed {
		select {
		case <-c.exited:
			missed = false
		default:
			if !c.rootsSince.IsZero() { // not an ask again (tellRootsChanged)
				c.rootsMissed = true
				b.srv.asksRoots.Store(rootsNotAsked)
			}
		}
	}
	b.mu.Unlock()
	if !ends {
		return
	}
	b.signal()
	if missed {
		b.log.Info("the child did not ask for its roots: requests go to it without waiting for that", "pid", c.pid, "waited", wait)
	}
}

// clientsLocked reports whether the line is a client's (a request or a
// notification), not the pool's own; under the request table's lock.
func (it *outItem) clientsLocked() bool {
	return it.from != nil || it.p != nil && it.p.sess != nil
}

// declaredRoots are the session's roots and their names.
func (s *session) declaredRoots() ([]string, rootNames) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.roots, s.rootNames
}

// capabilities are what the session declared, for the child it starts.
func (s *session) capabilities() clientCaps {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.caps
}

// asksRoots reports whether the pool should ask this session its roots:
// it declared them, it is a legacy session that can receive a request
// now, and the server partitions by roots.
func (s *session) asksRoots() bool {
	if s.srv.config().Share == ShareGlobal {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.caps.roots && s.era == EraLegacy && s.receivesLocked()
}

// askRootsOrOwe asks the session its roots (asksRoots), or, when only
// the client's means to receive a request is missing (an HTTP client
// whose GET stream is not open yet), owes the question to the stream's
// opening (streamOpened). It looks for the stream and records the debt
// under one hold of s.mu, which streamOpened takes after the stream
// opened: either the stream is seen here, or the debt is seen there.
func (s *session) askRootsOrOwe() {
	partitions := s.srv.config().Share != ShareGlobal
	s.mu.Lock()
	wants := partitions && s.caps.roots && s.era == EraLegacy
	ask := wants && s.receivesLocked()
	s.rootsOwed = wants && !ask
	s.mu.Unlock()
	if ask {
		s.askRoots()
		return
	}
	if testHookOwing != nil && wants {
		testHookOwing(s)
	}
}

// streamOpened is told that the client can now be sent requests (an HTTP
// session's GET stream opened): a roots question owed is asked now.
func (s *session) streamOpened() {
	s.mu.Lock()
	owed := s.rootsOwed
	s.rootsOwed = false
	s.mu.Unlock()
	if owed && s.asksRoots() {
		s.askRoots()
	}
	if testHookStreamOpened != nil {
		testHookStreamOpened(s)
	}
}

// testHookOwing, when set, runs in askRootsOrOwe once it found that the
// client cannot be asked its roots yet (its debt is recorded).
var testHookOwing func(*session)

// testHookStreamOpened, when set, runs at the end of streamOpened.
var testHookStreamOpened func(*session)

// askRoots sends the client roots/list and holds its requests until the
// answer (or rootsAskTimeout). The reader goes on reading: the answer
// comes through it. A client that closed its input is not asked: it
// cannot answer (inputEnded).
func (s *session) askRoots() {
	id := `"switchboard-roots-` + strconv.FormatUint(s.p.newAskID(), 10) + `"`
	s.mu.Lock()
	if s.inputDone {
		s.mu.Unlock()
		return
	}
	s.rootsAsk = id
	s.mu.Unlock()
	s.p.afterFunc(rootsAskTimeout, func() { s.rootsAnswered(id, nil, nil) })
	s.deliver([]byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"roots/list"}`), outFacts{method: "roots/list", id: wireID{text: id}})
}

// heldMessage is a message held while the session's roots are asked,
// and the exchange that carried it (HTTP), which gets what answers it;
// its session's heldQueue links it, under s.mu.
type heldMessage struct {
	line   []byte
	x      *exchange
	change bool     // a notifications/roots/list_changed
	req    *arrival // a request's arrival; nil for a notification

	prev, next *heldMessage // arrival order (heldQueue)
}

// arrival is a client's request as the pool took it while no pending
// can carry it yet (its session's roots, being asked, decide the child):
// its pool id, when it came, and its ledger slot (ledger.go), taken as it
// was read. The request is owed from then, as one in flight is: the
// snapshot lists it (heldInfos), a shim whose pool is killed finds it in
// its ledger (the next pool answers it as not run), and a hand-back
// takes it back unanswered (takeHeld). The pending made for it when it
// goes on takes the three over (take, takeSlot), so that its history
// and its timeout count from its arrival; a slot no pending took is
// released once the pool's own answer to it is written (replayHeld).
// Only the goroutine that holds it (the session's, under s.mu, while it
// is held; then the replay's, or a user's cancel's: cancelHeld) touches
// it.
type arrival struct {
	id       uint64
	received time.Time
	slot     int32
	method   string
	name     string // the tool, prompt or resource
	origID   []byte // the client's id bytes

	// While it is held (heldQueue): its key among its session's requests
	// (keyOf), the requestTimeout it ends at (its server's as it came:
	// expireHeld), its place among the held by deadline (heldDue; -1
	// while in none), and whether its client's notifications/cancelled
	// came (clientCancelsLocked).
	key       string
	timeout   time.Duration
	at        int
	cancelled bool
}

// take gives the pending made for the request its pool id and arrival
// time, once. A nil arrival, or one taken (a logging/setLevel that
// waited for its child's handshake goes on as a request of its own),
// gives a new id and now.
func (a *arrival) take(p *Pool) (uint64, time.Time) {
	if a == nil || a.id == 0 {
		return p.nextID.Add(1), time.Now()
	}
	id, at := a.id, a.received
	a.id = 0
	return id, at
}

// takeSlot gives the pending made for the request its ledger slot, once.
func (a *arrival) takeSlot() int32 {
	if a == nil {
		return 0
	}
	slot := a.slot
	a.slot = 0
	return slot
}

// heldReason is the stateReason of a request held for its session's
// roots, as the snapshot shows it.
const heldReason = "waiting for the client's answer to roots/list: its roots decide which child runs it"

// heldInfos lists the session's requests held for its roots answer, in
// flight as the snapshot shows them: not yet at any child.
func (s *session) heldInfos(now time.Time) []RequestInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []RequestInfo
	for h := s.held.first; h != nil; h = h.next {
		if a := h.req; a != nil {
			out = append(out, RequestInfo{PoolID: a.id, Session: s.id, Server: s.srv.name, Method: a.method, Name: a.name,
				OriginalID: string(a.origID), ReceivedAt: a.received, AgeMs: now.Sub(a.received).Milliseconds(),
				StateReason: heldReason})
		}
	}
	return out
}

// cancelHeld is a user's cancel (Pool.Cancel) of the request held for
// the session's roots answer whose pool id is poolID, if the session
// holds it: it leaves the queue (the rest stay held, in order) and is
// answered as a user's cancel of any request no child was written is
// (finish, by endByUser's rule): the same error, mayHaveExecuted false,
// the same count and history status; its ledger slot is released once
// that answer is written, and history records it once: received as it
// arrived, ended cancelled. It and expireHeld are the ends of a request
// besides finish's: a held request is in no backend's table, since its
// roots, still asked, decide its child. One the replay took from the queue and
// no request table took yet is marked cancelled instead, under the same
// hold of s.mu that finds the queue without it: the table refuses it,
// and its taker ends it so (handedOn). It reports whether the session
// held it, or was handing it on.
func (s *session) cancelHeld(poolID uint64) bool {
	s.mu.Lock()
	h := s.held.byID[poolID]
	if h == nil {
		// Marked already (by its client): it ends so, a cancel all the same.
		v := s.handingOn.Load()
		marked := poolID != 0 && v&^handOnCancels == poolID &&
			(v != poolID || s.handingOn.CompareAndSwap(poolID, poolID|handOnByUser))
		s.mu.Unlock()
		return marked
	}
	s.endHeldLocked(h, userCancel(s.srv.name, h.req.method))
	return true
}

// expireHeld runs on the session's one timer for its held requests
// (heldQueue): it ends each whose requestTimeout (its server's when it
// came) has passed, earliest first, as finish ends a request no child
// was written at its timeout: -32001, mayHaveExecuted false, history's
// timeout; then it arms the timer for the earliest deadline left. A
// request no longer held has gone on (its table refuses it past its
// deadline: requestTable.register), been cancelled or handed back; one
// its client cancelled is not timed, and ends as that cancel when it
// goes on; nothing is answered to a closed session.
func (s *session) expireHeld() {
	for {
		s.mu.Lock()
		if len(s.held.due) == 0 || isClosed(s.closed) {
			s.mu.Unlock()
			return
		}
		h := s.held.due[0]
		if wait := time.Until(h.req.deadline()); wait > 0 {
			s.held.timer.Reset(wait)
			s.mu.Unlock()
			return
		}
		s.endHeldLocked(h, failure(endTimedOut, errTimeout, s.srv.name, h.req.method, h.req.timeout))
	}
}

// endHeldLocked ends h, a request held, with o, whose kind answers it:
// it leaves the queue, the rest held in order, and history records it
// received as it arrived; then it ends as finish ends a request of its
// kind that no child had (settle): counted, answered (its ledger slot
// released once the answer is written), and recorded once. Called with
// s.mu held, which it lets go.
func (s *session) endHeldLocked(h *heldMessage, o outcome) {
	s.held.remove(h)
	s.heldBytes -= len(h.line)
	s.answering++ // until its answer is queued (answer)
	s.mu.Unlock()

	a := h.req
	received := Event{Kind: EventRequestReceived, Time: a.received, Server: s.srv.name, Session: s.id, PoolID: a.id,
		Method: a.method, Name: a.name, OriginalID: string(a.origID), Size: len(h.line), Payload: s.p.capture(h.line)}
	if h.x != nil && h.x.stateless {
		received.ClientName, received.ClientVersion = h.x.client.Name, h.x.client.Version
	}
	s.p.emit(&received)
	p := &pending{id: a.id, sess: s, origID: a.origID, x: h.x, method: a.method, name: a.name}
	settle(nil, p, ended{sess: s, origID: a.origID, x: h.x, route: routeHeld, slot: a.takeSlot()}, o)
}

// The marks of session.handingOn (pool ids never reach them): a cancel
// of the request being handed on came, by its user (cancelHeld) or its
// client (holdForRoots).
const (
	handOnByUser   = 1 << 63
	handOnByClient = 1 << 62
	handOnCancels  = handOnByUser | handOnByClient
)

// handedOn is told, under a request table's lock, that the table takes
// the request id of the session (nil: the pool's own). It says
// registered, unless id is the held request the replay is handing on
// (replayHeld) and a cancel came first: then the table refuses it
// (cancelledByUser, cancelledByClient), and its taker ends it as that
// cancel (handOnCancel), never written. Either way it is no longer
// handed on: a cancel from now finds it in the table, or ended.
func (s *session) handedOn(id uint64) registration {
	if s == nil || id == 0 {
		return registered
	}
	for {
		v := s.handingOn.Load()
		switch {
		case v&^handOnCancels != id:
			return registered
		case !s.handingOn.CompareAndSwap(v, 0):
			continue // a cancel marked it meanwhile
		case v&handOnByUser != 0:
			return cancelledByUser
		case v&handOnByClient != 0:
			return cancelledByClient
		}
		return registered
	}
}

// handOnCancel is how a request ends that its table refused as r says
// (handedOn): as a user's cancel (answered), or as its client's.
func handOnCancel(r registration, server, method string) outcome {
	if r == cancelledByClient {
		return outcome{kind: endByClient, reason: "cancelled by the client"}
	}
	return userCancel(server, method)
}

// clientCancelsLocked takes a client's notifications/cancelled as it is
// held: a request it names that is held too, or that the replay has in
// hand (not yet in a request table), is marked, and ends as its client
// cancelled it when it goes on (handedOn), never written. The
// notification stays held all the same, within the session's bounds: a
// request the replay sent on before the mark is cancelled by it in order
// (past them it goes on at once: holdForRoots).
func (s *session) clientCancelsLocked(msg *jsonrpc.Message) {
	params := msg.Params.Of(msg.Raw)
	rid := jsonrpc.Member(params, "requestId")
	if !rid.Present() {
		return
	}
	key := string(rid.Of(params))
	if h := s.held.byKey[key]; h != nil {
		h.req.cancelled = true
		s.held.undue(h) // it ends as that cancel when it goes on, not at its timeout
	}
	if v := s.handingOn.Load(); v != 0 && v&handOnCancels == 0 && s.handingOnKey == key {
		s.handingOn.CompareAndSwap(v, v|handOnByClient) // else a table took it: the notification cancels it there
	}
}

// inputEnded is told that the client closed its input: it can answer no
// roots/list any more. None is asked from now on, and an open ask ends at
// once with the roots last answered (none, if none was), so that what is
// held goes on now rather than after rootsAskTimeout.
func (s *session) inputEnded() {
	s.mu.Lock()
	s.inputDone, s.rootsOwed = true, false
	id, roots, names := s.rootsAsk, s.roots, s.rootNames
	s.mu.Unlock()
	if id != "" {
		s.rootsAnswered(id, roots, names)
	}
}

// holdForRoots queues a message while the session's roots are being
// asked; it reports whether it did. A request held is taken as it is
// read (its arrival): owed and in flight from then, and timed from then
// too, by its server's requestTimeout as it is read, set before it is
// listed in flight, so that a config applied once it shows held does not
// change it (expireHeld, forwardCounted); so it is refused as any
// request in flight past the session's share is (overCountLocked), or
// under an id the session has in flight. What it holds counts against the session's bytes
// (Options.MaxSessionBytes), and its notifications against
// maxHeldNotifications, so that a client that does not answer cannot
// pile up messages without end: past them it refuses the message (a
// notification is dropped, a request answered with the refusal), and
// says so in the log, once a session; but a notifications/cancelled,
// which frees rather than costs, is not held then: it goes on at once,
// to the request it names at its child. A
// roots/list_changed behind one still held is one already: the ask it
// makes reads the roots as they are then, so however many came, the
// client is asked once more. A client's notifications/cancelled, held
// or not, marks the request it names, held or being handed on
// (clientCancelsLocked).
func (s *session) holdForRoots(msg *jsonrpc.Message, x *exchange) (held bool, refusal *jsonrpc.Error) {
	line, change := msg.Raw, msg.Method == "notifications/roots/list_changed"
	var timeout time.Duration
	if msg.Kind == jsonrpc.KindRequest {
		timeout = s.srv.requestTimeout() // before s.mu: a server's lock is taken before a session's (backendAsLocked)
	}
	s.mu.Lock()
	if s.rootsAsk == "" && !s.replaying {
		s.mu.Unlock()
		return false, nil
	}
	if change && s.changeHeld {
		s.mu.Unlock()
		return true, nil
	}
	var key string
	if msg.Kind == jsonrpc.KindRequest {
		key = keyOf(msg.IDBytes(), x)
		if refusal := s.heldRefusalLocked(key, msg.IDBytes()); refusal != nil {
			s.mu.Unlock()
			return false, refusal
		}
	}
	cancel := msg.Method == "notifications/cancelled"
	if cancel {
		s.clientCancelsLocked(msg)
	}
	if refusal := s.heldOverLocked(msg.Kind, len(line)); refusal != nil {
		if cancel { // it frees rather than costs: it goes on now (onNotification), the request it names if held marked
			s.mu.Unlock()
			return false, nil
		}
		first := !s.heldRefused
		s.heldRefused = true
		s.mu.Unlock()
		if first {
			s.p.log.Warn("refusing what a client sends while it does not answer the pool's roots/list: notifications dropped, requests refused (said once a session)",
				"session", s.id, "server", s.srv.name, "why", refusal.Message)
		}
		return false, refusal
	}
	h := &heldMessage{line: append([]byte(nil), line...), x: x, change: change}
	if msg.Kind == jsonrpc.KindRequest {
		id := append([]byte(nil), msg.IDBytes()...)
		h.req = &arrival{id: s.p.nextID.Add(1), received: time.Now(), slot: s.ledger.take(id),
			method: msg.Method, name: aboutName(msg.Params.Of(msg.Raw)), origID: id, key: key, at: -1}
	}
	s.held.push(h)
	if h.req != nil && s.held.setDue(h, timeout) {
		s.armHeldLocked()
	}
	s.heldBytes += len(line)
	s.changeHeld = s.changeHeld || change
	s.mu.Unlock()
	if h.req != nil && testHookHeld != nil {
		testHookHeld(s)
	}
	return true, nil
}

// maxHeldNotifications bounds the notifications a session holds while
// its roots are asked, beside their bytes (Options.MaxSessionBytes; its
// requests have their own count, overCountLocked): a tiny notification
// (30 bytes) costs the pool 96 bytes held, so by bytes alone a client
// could hold 4 million, 400 MB, where its bytes allow 128 MiB. A client
// sends a few while it is asked (initialized, cancelled, progress).
const maxHeldNotifications = 4096

// heldOverLocked refuses a message of size bytes, of kind, that the
// session would hold past its bounds: its bytes, or for a notification
// maxHeldNotifications.
func (s *session) heldOverLocked(kind jsonrpc.Kind, size int) *jsonrpc.Error {
	if limit := s.p.opts.MaxSessionBytes; s.heldBytes > 0 && s.heldBytes+size > limit {
		return newError(errHeldForRoots, false, "", s.heldBytes, size, limit)
	}
	if kind == jsonrpc.KindNotification && s.held.notes >= maxHeldNotifications {
		return newError(errHeldNotes, false, "", s.held.notes)
	}
	return nil
}

// testHookHeld, when set, runs in holdForRoots once a request it held
// is in the queue (listed in flight) and its lock let go.
var testHookHeld func(*session)

// heldRefusalLocked refuses a request to be held under key (its id is
// id) as the session refuses any request it takes (forwardCounted): one
// under a key in flight (held, at a child, an open listen), or one past
// its share of requests in flight.
func (s *session) heldRefusalLocked(key string, id []byte) *jsonrpc.Error {
	if s.idInFlightLocked(key) || s.held.byKey[key] != nil {
		return newError(errDuplicateID, false, "", id)
	}
	return s.overCountLocked()
}

// armHeldLocked sets the session's timer for its held requests to fire at
// the earliest deadline among them.
func (s *session) armHeldLocked() {
	wait := time.Until(s.held.due[0].req.deadline())
	if s.held.timer == nil {
		s.held.timer = s.p.afterFunc(wait, s.expireHeld)
		return
	}
	s.held.timer.Reset(wait)
}

// answerRoots takes the client's answer to the pool's roots/list.
func (s *session) answerRoots(msg *jsonrpc.Message) bool {
	id := string(msg.IDBytes())
	s.mu.Lock()
	mine := s.rootsAsk != "" && id == s.rootsAsk
	s.mu.Unlock()
	if !mine {
		return false
	}
	var roots []string
	var names rootNames
	if msg.Result.Present() {
		var refused int
		roots, names, refused = parseRoots(msg.Result.Of(msg.Raw))
		if refused > 0 {
			s.p.log.Warn("a client declared roots that are no URIs (a control character): left out of its roots",
				"session", s.id, "server", s.srv.name, "refused", refused)
		}
	}
	s.rootsAnswered(id, roots, names)
	return true
}

// rootsAnswered ends the ask id: the session's partition follows the new
// roots for its next requests (in-flight ones finish where they are), and
// the held messages go on in order. It may run on the ask's timer while
// the reader reads on: what the reader gets meanwhile is held behind
// them, so that nothing (a cancel) overtakes what it follows.
func (s *session) rootsAnswered(id string, roots []string, names rootNames) {
	s.mu.Lock()
	if s.rootsAsk != id {
		s.mu.Unlock()
		return // answered already, or a newer ask is out
	}
	s.rootsAsk = ""
	// An answer the same as the last (or an ask that ran out with none
	// known) leaves the session's own child alone: a notice would make
	// it ask again, and hold the session's calls behind that.
	changed := !slices.Equal(s.roots, roots) || !maps.Equal(s.rootNames, names)
	s.roots, s.rootNames = roots, names
	running := s.replaying // an ask made by a held message, answered while they go on
	s.replaying = true
	s.mu.Unlock()
	from := s.srv.move(s)
	if changed {
		s.srv.rootsChanged(s)
	}
	s.carryStakes(from)
	if !running {
		s.replayHeld()
	}
	s.mu.Lock()
	s.quietLocked() // a draining session may be waiting on this ask
	s.mu.Unlock()
}

// replayHeld handles what is held, in order, taking each message from the
// queue only as it handles it, until none is left. It stops, leaving the
// rest held, when a held message made the pool ask the client's roots
// again: that ask's answer goes on. What it has not taken stays where a
// hand-back takes it (takeHeld), so a message it had not reached is
// handed back rather than put back after the shim got what was held.
func (s *session) replayHeld() {
	for {
		s.mu.Lock()
		s.held.inHand = nil // the last one taken is in the session's table of requests in flight, or ended
		h := s.held.first
		if s.rootsAsk != "" || h == nil {
			s.replaying = false
			s.mu.Unlock()
			return
		}
		s.held.remove(h) // its table times it from now (requestTable.register)
		s.heldBytes -= len(h.line)
		if h.change {
			s.changeHeld = false
		}
		if h.req != nil { // a cancel finds it until a request table has it (cancelHeld, clientCancelsLocked)
			s.held.inHand = h.req // in flight all the same (forwardCounted)
			v := h.req.id
			if h.req.cancelled {
				v |= handOnByClient
			}
			s.handingOn.Store(v)
			s.handingOnKey = h.req.key
		}
		s.mu.Unlock()
		if testHookReplaying != nil {
			testHookReplaying(s)
		}
		if msg, err := jsonrpc.Parse(h.line); err == nil { // it was, when it was held
			s.dispatch(&msg, h.x, h.req)
		}
		s.handingOn.Store(0) // taken by a table, or answered by the pool itself
		if h.req != nil {
			s.releaseWhenWritten(h.req.takeSlot()) // no pending took it: the pool answered it itself
		}
		if testHookReplayed != nil {
			testHookReplayed(s)
		}
	}
}

// testHookReplayed, when set, runs in replayHeld after each held message
// it handled.
var testHookReplayed func(*session)

// testHookReplaying, when set, runs in replayHeld between its take of a
// held message and the message's handling.
var testHookReplaying func(*session)

// rootsChanged tells a session's own child, if it runs, that its roots
// (its session's) may have changed: it asks them again. A shared child's
// roots never change; a session whose roots do moves to another child.
func (s *server) rootsChanged(sess *session) {
	if !sess.ownChild {
		return
	}
	s.mu.Lock()
	own := s.perSession[sess]
	s.mu.Unlock()
	if own != nil && own.caps.roots {
		own.tellRootsChanged()
	}
}

// move puts a session into the partition its roots name (so that it gets
// that child's list_changed, logs and questions from now on); its next
// request starts the partition's child if need be. It returns the child of
// the partition the session left, if it left one that has a child.
func (s *server) move(sess *session) (from *backend) {
	if sess.ownChild {
		return nil // its child follows its roots (rootsChanged)
	}
	roots, names := sess.declaredRoots()
	if s.config().Share == ShareGlobal {
		roots, names = nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[sess]; !ok {
		return nil
	}
	old, pt := sess.part.Load(), s.partLocked(rootsKey(roots), roots, names)
	s.enterLocked(sess, pt)
	if old == nil || old == pt {
		return nil
	}
	return old.current.Load()
}

// carryStakes takes what the session held at the child of the roots it
// left (from) to the child of its new roots: its subscriptions (the old
// child hears its last holder's unsubscribe, the new one its first
// holder's subscribe, so resources/updated keep coming), and its log level
// (each child logs at what its own sessions ask). The old child's
// questions to it stay: its calls there finish there.
func (s *session) carryStakes(from *backend) {
	if from != nil {
		from.leftBy(s)
	}
	if pt := s.part.Load(); pt != nil {
		if to := pt.current.Load(); to != nil && to != from {
			to.syncLogLevel()
			if s.promisesChanges() {
				to.syncUpstream() // with the list changes it was promised
			}
		}
	}
	s.mu.Lock()
	held := len(s.subs)
	s.mu.Unlock()
	if held == 0 || s.ownChild {
		return
	}
	to, err := s.srv.backendFor(s) // the session holds subscriptions: its child starts now
	if err != nil {
		return // no child for its roots: updates come with the next that starts, as its requests say
	}
	s.moveStakes(to)
}

// heldStakes reports whether the live session holds what a child must
// keep telling it about, a subscription or an open listen, and the
// exchange of one such listen (nil over stdio): a child started for the
// listen is told what its request declared, as for the listen itself
// (session.backend).
func (s *session) heldStakes() (held bool, x *exchange) {
	if !s.alive() {
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.listens {
		held = true
		if x == nil {
			x = l.to
		}
	}
	return held || len(s.subs) > 0, x
}

// moveStakes moves the session's subscriptions held at other children to
// to, the child it routes to now: each old child hears its last holder's
// unsubscribe, to its first holder's subscribe (as it becomes ready, if
// it is not yet). A stake to cannot take (it stopped, its table is full)
// is forgotten, as is one to refuses when it hears it, so that the
// session's next subscribe reaches the child. Its open listens move too
// (moveListens): they stay open, and get to's changes.
func (s *session) moveStakes(to *backend) {
	s.moveListens(to)
	type stake struct {
		uri  string
		from *backend
	}
	var moved []stake
	s.mu.Lock()
	for uri, b := range s.subs {
		if b != to {
			moved = append(moved, stake{uri, b})
			s.subs[uri] = to
		}
	}
	s.mu.Unlock()
	if testHookCarrying != nil && len(moved) > 0 {
		testHookCarrying(s)
	}
	for _, m := range moved {
		m.from.changeSubscription(s, m.uri, false)
		if err := to.send(to.newSubscriptionChange(s, m.uri, true)); err != nil && !errors.Is(err, errNotForChild) {
			s.dropSubscription(to, m.uri) // to stopped, or is full: the session holds nothing there
		}
	}
	// Meanwhile the session may have let a stake go (its unsubscribe found
	// nothing counted here yet), or closed (its close may have released
	// what it held on to before the stakes above were counted): what it
	// no longer holds at to is released now (a stake it does not hold
	// counts nothing).
	// A release counts only if the session changed none of its
	// subscriptions since it was decided (a subscribe again in between
	// was answered {} on the stake it would take): else it is decided
	// again.
	left := make([]string, 0, len(moved))
	for _, m := range moved {
		left = append(left, m.uri)
	}
	for len(left) > 0 {
		alive := s.alive()
		var gone []string
		s.mu.Lock()
		gen := s.subChanges.Load()
		for _, uri := range left {
			if !alive || s.subs[uri] != to {
				gone = append(gone, uri)
			}
		}
		s.mu.Unlock()
		if testHookReleasing != nil && len(gone) > 0 {
			testHookReleasing(s)
		}
		left = left[:0]
		for _, uri := range gone {
			p := to.newSubscriptionChange(s, uri, false)
			p.sub.changes, p.sub.gen = &s.subChanges, gen
			if errors.Is(to.send(p), errSubChanged) {
				left = append(left, uri)
			}
		}
	}
}

// testHookCarrying, when set, runs in moveStakes between the session's
// record of its stakes' new child and their count there.
var testHookCarrying func(*session)

// testHookReleasing, when set, runs in moveStakes between its decision to
// release stakes the session let go as they moved and their release.
var testHookReleasing func(*session)
