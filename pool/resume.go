package pool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// unansweredTimeout bounds the history lookup of a resumed session.
const unansweredTimeout = 5 * time.Second

// resume takes over a session whose client outlived its earlier pool
// (its `switchboard connect` kept the client's pipes and came back): the
// client's initialize is adopted without a new handshake, so its next
// request simply works, and the requests the earlier pool took and never
// answered are answered now with the at-most-once error: mayHaveExecuted
// when they had reached a child; the initialize itself, if owed, with
// its result (answerLostInitialize). A subscriptions/listen the ledger lists
// as open is told its stream ended, so that its client listens again. It
// runs before the session's reader. The errors go out first: they need no
// child, and the initialize may wait for one to start (an npx server takes
// seconds). c is what the session's ledger lists for the shim since
// before the Welcome (claimResume): the answers release it as they are
// written.
func (s *session) resume(r *wire.Resume, c *resumeClaim) {
	from := resumedFrom(r)
	s.p.log.Info("session reattached", "session", s.id, "server", s.srv.name, "from", from)
	if r.MidLine {
		// The earlier pool died inside a line (an answer cut off): end it
		// before anything else, so that what follows is read whole.
		s.deliver(nil, outFacts{})
	}
	reqs := mergeLost(r, s.lostRequests(r, from))
	answered := len(reqs)
	var init []Unanswered
	if len(r.Initialize) > 0 {
		init = slices.DeleteFunc(slices.Clone(reqs), func(u Unanswered) bool { return !isInitialize(r, u) })
		reqs = slices.DeleteFunc(reqs, func(u Unanswered) bool { return isInitialize(r, u) })
	}
	s.answerLost(r, reqs, c)
	if len(r.Initialize) > 0 {
		if result, err := s.adoptInitialize(r.Initialize, nil); err != nil {
			s.p.log.Warn("a reattached session's initialize was not adopted", "session", s.id, "err", err)
			s.answerLost(r, init, c)
		} else {
			s.keep(wire.State{Initialize: r.Initialize, InitializeID: r.InitializeID}) // for the next pool, too
			s.answerLostInitialize(init, result, c)
			s.resumeStakes(r)
			if s.asksRoots() {
				s.askRoots() // as after notifications/initialized
			}
		}
	}
	if answered > 0 {
		s.p.log.Info("answered a reattached session's lost requests", "session", s.id, "count", answered)
	}
}

// answerLost answers reqs, requests a resumed session's client still
// waits for (r), with the at-most-once error; an open listen with the
// error saying its stream ended. It stops once the session ends
// (deliversNoMore): what it did not answer stays listed in the ledger,
// for the shim.
func (s *session) answerLost(r *wire.Resume, reqs []Unanswered, c *resumeClaim) {
	listens := map[string]bool{}
	for _, l := range r.Lost {
		if l.Listen {
			listens[l.ID] = true
		}
	}
	answered := 0
	for _, u := range reqs {
		if s.deliversNoMore() {
			break
		}
		if u.Method == "" {
			u.Method = "a request"
		}
		err := newError(errPoolRestarting, u.Written, s.srv.name, s.srv.name, u.Method)
		if listens[u.OriginalID] { // an open listen: its stream ended with the pool
			err = newError(errListenRestarted, false, s.srv.name, s.srv.name)
		}
		line := jsonrpc.AppendErrorResponse(nil, []byte(u.OriginalID), asRPCError(err, s.srv.name))
		s.deliverOwing(line, c.take(u.OriginalID))
		answered++
	}
	if testHookLostAnswered != nil {
		testHookLostAnswered(answered)
	}
}

// answerLostInitialize answers init, the initialize a resumed session's
// client still waits for (isInitialize), with result, the initialize the
// session adopted from its shim. The earlier pool told the shim of the
// initialize before it answered it, and released its ledger slot after:
// a client whose initialize is owed may not have had its answer. It gets
// the result, as the session stands initialized, not an error for an
// initialize that succeeded; one that had it reads a second success for
// that id, which clients ignore, where no answer would leave one that had
// not waiting for ever. It stops once the session ends, as answerLost.
func (s *session) answerLostInitialize(init []Unanswered, result []byte, c *resumeClaim) {
	answered := 0
	for _, u := range init {
		if s.deliversNoMore() {
			break
		}
		s.deliverOwing(jsonrpc.AppendResponse(nil, []byte(u.OriginalID), result), c.take(u.OriginalID))
		answered++
	}
	if testHookLostAnswered != nil {
		testHookLostAnswered(answered)
	}
}

// deliversNoMore reports whether the session is ending (closing, or
// being evicted as its queue filled): what it would deliver now is for
// a client it no longer serves.
func (s *session) deliversNoMore() bool { return s.closing.Load() || s.evicting.Load() }

// testHookLostAnswered, when set, gets how many lost requests each
// answerLost or answerLostInitialize delivered.
var testHookLostAnswered func(answered int)

// isInitialize reports whether u, a request a resumed session's client
// still waits for, is the initialize its shim carries (r): by the id
// the shim kept with it, or, from a shim that keeps none, by the
// history's name for it.
func isInitialize(r *wire.Resume, u Unanswered) bool {
	if r.InitializeID != "" {
		return u.OriginalID == r.InitializeID
	}
	return u.Method == "initialize"
}

// resumeClaim is what a resumed attached session's ledger lists for its
// shim from before the pool's Welcome: an attached shim forgets what it
// carried once welcomed, so the ledger must list it by then, or a kill
// while the resume waits (for the history, for a child that starts
// slowly) would leave nothing owing it. It lists the requests the earlier
// pool owed (Resume.Lost, an open listen as one), each until its answer
// is written; whether the client's output ends inside a line
// (Resume.MidLine), until the pool ends that line; and the requests among
// the client's input the shim carried, until the session's reader has
// handled them (each then has a slot of its own, or its answer) or handed
// them back (release). For a session without a ledger it is empty.
type resumeClaim struct {
	s       *session
	lost    map[string][]int32 // Resume.Lost's slots, by id
	carried []int32            // the slots of the carried requests; the session's reader's
}

// claimResume lists in s's ledger what a resume (r) with the input
// carried hands the pool, before the Welcome tells the shim it may
// forget them.
func (s *session) claimResume(r *wire.Resume, carried []byte) *resumeClaim {
	c := &resumeClaim{s: s, lost: map[string][]int32{}}
	if s.ledger == nil {
		return c
	}
	if r.MidLine {
		// Ended first, queued before the output starts: the writer that
		// writes it (drain) clears the mark once the line is whole.
		s.ledger.midLine(true)
		s.deliver(nil, outFacts{})
		r.MidLine = false // for resume: ended already
	}
	for _, l := range r.Lost {
		slot := s.ledger.take([]byte(l.ID))
		if slot == 0 {
			continue
		}
		switch {
		case l.Listen:
			s.ledger.listen(slot) // past the listens' share, it is owed as a request
		case l.Written:
			s.ledger.written(slot)
		}
		c.lost[l.ID] = append(c.lost[l.ID], slot)
	}
	for len(carried) > 0 {
		line, rest, whole := bytes.Cut(carried, []byte{'\n'})
		if !whole {
			break // the head of a line the client is still writing: see README
		}
		carried = rest
		if m, err := jsonrpc.Parse(line); err == nil && m.Kind == jsonrpc.KindRequest {
			if slot := s.ledger.take(m.IDBytes()); slot != 0 {
				c.carried = append(c.carried, slot)
			}
		}
	}
	return c
}

// take is the slot that lists the lost request id, for its answer to
// release once written; 0 when none does.
func (c *resumeClaim) take(id string) int32 {
	if c == nil {
		return 0
	}
	slots := c.lost[id]
	if len(slots) == 0 {
		return 0
	}
	for _, extra := range slots[1:] { // an id the ledger listed twice is answered once
		c.s.ledger.release(extra)
	}
	delete(c.lost, id)
	return slots[0]
}

// reader is carried as the session's reader reads it: once that has read
// all of it, and so handled every line in it (a line's handling takes its
// request a slot of its own), the carried requests' slots are released.
func (c *resumeClaim) reader(carried []byte) io.Reader {
	return &claimedReader{r: bytes.NewReader(carried), c: c}
}

// release frees the slots of the carried requests: the session's reader
// has handled them, or hands them back to the shim unanswered (at a
// planned stop, before its Farewell), for the next pool to read again.
// Only the session's reader calls it.
func (c *resumeClaim) release() {
	if c == nil {
		return
	}
	for _, slot := range c.carried {
		c.s.ledger.release(slot)
	}
	c.carried = nil
}

type claimedReader struct {
	r *bytes.Reader
	c *resumeClaim
}

func (cr *claimedReader) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	if err != nil {
		cr.c.release() // asked for more: every line read before is handled
	}
	return n, err
}

// resumeStakes takes up what the client set up in its session with the
// earlier pool: its resource subscriptions, held at the child the session
// routes to now (started for them, as when a session with subscriptions
// moves: carryStakes), and its log level, which that child, or the one
// its next request starts, is set to. A child hears both ahead of the
// client's next request, as after a restart of its own. Past the
// session's share of subscriptions the rest are not taken up.
func (s *session) resumeStakes(r *wire.Resume) {
	s.resumeSubscriptions(r.Subscriptions[:min(len(r.Subscriptions), wire.MaxKeptSubscriptions)])
	if sev, ok := logSeverity[r.LogLevel]; ok {
		s.setLevel(sev)
		if pt := s.part.Load(); pt != nil {
			if b := pt.current.Load(); b != nil {
				b.syncLogLevel() // one not ready yet is set as it becomes ready
			}
		}
	}
}

// resumeSubscriptions is resumeStakes' for the subscriptions, uris. One
// not taken up is one the session does not hold: its shim is told, so
// that it keeps it no longer (the client's unsubscribe of it, no change
// here, would not tell it).
func (s *session) resumeSubscriptions(uris []string) {
	if len(uris) == 0 {
		return
	}
	b, err := s.srv.backendFor(s)
	if err != nil {
		s.p.log.Warn("a reattached session's subscriptions were not taken up", "session", s.id, "count", len(uris), "err", err)
		for _, uri := range uris {
			s.mu.Lock()
			kept := s.keptSubscriptionLocked(uri, false)
			s.mu.Unlock()
			kept()
		}
		return
	}
	left := 0
	for _, uri := range uris {
		if len(uri) > wire.MaxKeptURI {
			continue
		}
		s.mu.Lock()
		_, had := s.subs[uri]
		refusal := s.overSubscribedLocked(!had, 1)
		take := !had && refusal == nil
		kept := noKept
		if take {
			s.subs[uri], s.subSince[uri] = b, s.subChanges.Add(1)
		} else if refusal != nil {
			left++
			kept = s.keptSubscriptionLocked(uri, false)
		}
		s.mu.Unlock()
		kept()
		if !take {
			continue
		}
		if err := b.send(b.newSubscriptionChange(s, uri, true)); err != nil && !errors.Is(err, errNotForChild) {
			s.dropSubscription(b, uri) // b stopped, or is full: the session holds nothing there
		}
	}
	if left > 0 {
		s.p.log.Warn("a reattached session's subscriptions past its share were not taken up", "session", s.id, "count", left)
	}
}

// keep tells the session's shim st, a change in what it keeps to resume
// the session with another pool; a session with no such shim has none.
func (s *session) keep(st wire.State) {
	s.mu.Lock()
	kept := s.keepLocked(st)
	s.mu.Unlock()
	kept()
}

// keepLocked is keep for a change made under s.mu, which the caller
// holds: the line is queued before mu is released, so that the shim
// hears the session's changes in the order they were made (a drop of a
// subscription and the client's subscribe again, told after mu, could
// reach it the other way round, and a resume restore what the session
// no longer held). The queue never waits. It returns what is left to do
// once mu is released (a flush, a writer's start), for the caller to
// call then.
func (s *session) keepLocked(st wire.State) (kept func()) {
	if s.keepState == nil {
		return noKept
	}
	after := s.keepState(s, st)
	return func() {
		if testHookKept != nil {
			testHookKept(st)
		}
		if after != nil {
			after()
		}
	}
}

// stateKeeper queues st for s's shim, never waiting (its caller holds
// s.mu: session.keepLocked), and returns what is left to do once mu is
// released, or nil.
type stateKeeper func(s *session, st wire.State) func()

// noKept is keepLocked's nothing left to do.
func noKept() {}

// testHookKept, when set, runs as a change the session told its shim of
// is done with, after s.mu is released.
var testHookKept func(wire.State)

// keptSubscriptionLocked is keepLocked telling the session's shim that
// the session now holds a subscription to uri (add), or no longer does.
// One to a URI longer than wire.MaxKeptURI is not carried.
func (s *session) keptSubscriptionLocked(uri string, add bool) (kept func()) {
	if s.keepState == nil || len(uri) > wire.MaxKeptURI {
		return noKept
	}
	if add {
		return s.keepLocked(wire.State{Subscribed: &uri})
	}
	return s.keepLocked(wire.State{Unsubscribed: &uri})
}

// resumedFrom names the session a resuming shim comes back with, or ""
// for a new one.
func resumedFrom(r *wire.Resume) string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf("run %s session %s", r.Run, r.Session)
}

// resumedBegan is when a resumed session began, as its shim says: zero
// when it does not, or says a time after now, which no session began at.
func resumedBegan(began, now time.Time) time.Time {
	if began.After(now) {
		return time.Time{}
	}
	return began
}

// mergeLost is what the client still waits for: with a ledger (an
// attached shim's) or a count (a relaying shim's), the requests it lists,
// named from the history where it knows them; with neither, what the
// earlier run's history lists, and what the shim lists besides (a ledger
// the earlier pool may not have written all of).
func mergeLost(r *wire.Resume, history []Unanswered) []Unanswered {
	if !r.Ledger && !r.Counted {
		at := map[string]int{}
		for i, h := range history {
			at[h.OriginalID] = i
		}
		for _, l := range r.Lost {
			if i, ok := at[l.ID]; ok {
				history[i].Written = history[i].Written || l.Written
				continue
			}
			at[l.ID] = len(history)
			history = append(history, Unanswered{OriginalID: l.ID, Written: l.Written})
		}
		return history
	}
	known := map[string]Unanswered{}
	for _, h := range history {
		known[h.OriginalID] = h
	}
	out := make([]Unanswered, 0, len(r.Lost))
	seen := map[string]bool{}
	for _, l := range r.Lost {
		if seen[l.ID] {
			continue
		}
		seen[l.ID] = true
		// The history can confirm "written", never "not written": it
		// hears of a write after the write, and records it a few
		// milliseconds later, so a pool killed in between leaves it
		// saying "not written" of a request the child has. A relaying
		// shim cannot tell and says written; only both saying "not
		// written" is "did not run".
		h := known[l.ID]
		written := l.Written || h.Written
		out = append(out, Unanswered{OriginalID: l.ID, Method: h.Method, Name: h.Name, Written: written})
	}
	return out
}

// lostRequests is what the client still waits for, by the earlier run's
// history: its requests of this session that were never answered. The
// history is written in batches (every 50 ms), so a request taken in the
// last moments before a kill may be missing (its client waits on it), and
// one answered then may be listed (its client gets a second, error answer
// for an id it already saw, which clients ignore). The shim's ledger,
// when it has one, is exact.
//
// The run and the session are the shim's word, and any local process can
// learn them (`status --json`, a Welcome): the history is given only to
// the process the history says was the session's shim (a shim is one
// process for its session's whole life, across pools), as the socket
// tells it (shimPeerPID), and never for a session this pool runs (its
// shim is still connected). To anyone else nothing is known.
func (s *session) lostRequests(r *wire.Resume, from string) []Unanswered {
	if s.p.opts.Unanswered == nil || r.Run == "" || r.Session == "" {
		return nil
	}
	if r.Run == s.p.opts.RunID && s.p.runsSession(r.Session) {
		s.p.log.Warn("a resume named a session this pool runs; it is given nothing of that session's",
			"session", s.id, "from", from, "pid", s.peerPID)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), unansweredTimeout)
	defer cancel()
	owed, err := s.p.opts.Unanswered(ctx, r.Run, r.Session)
	if err != nil {
		s.p.log.Warn("the history of a reattached session's requests is unavailable", "session", s.id, "from", from, "err", err)
	}
	if owed.PeerPID == 0 || owed.PeerPID != s.peerPID {
		if owed.PeerPID != 0 || len(owed.Requests) > 0 {
			s.p.log.Warn("a resume came from another process than the session's shim; it is given nothing of that session's",
				"session", s.id, "from", from, "pid", s.peerPID, "shim", owed.PeerPID)
		}
		return nil
	}
	return owed.Requests
}

// runsSession reports whether a session of this pool is id.
func (p *Pool) runsSession(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.sessions {
		if s.id == id {
			return true
		}
	}
	return false
}

// endedSessions are the stdio sessions this pool ended without telling
// their shims: it evicted them, or their server was removed, and the
// stream a Farewell would have gone on was full, so a shim reads on to
// the stream's end and takes it for a crash. One that
// comes back to resume its session is told it ended instead
// (Welcome.Ended), and exits as after the Farewell. A session is named by
// its run, its id and its shim's PID, as the socket tells it
// (shimPeerPID: unique among the running shims, so a shim of an earlier
// pool whose session had the same id is not taken for it, with or
// without a run id, and no other process takes the notice from the
// session's shim). The record holds the last
// maxEndedSessions; a shim comes back as soon as its client has read what
// was written before the eviction.
type endedSessions struct {
	mu   sync.Mutex
	why  map[endedSession]string
	ring [maxEndedSessions]endedSession // the recorded, oldest at next once full
	next int
}

// maxEndedSessions bounds endedSessions: a few tens of kilobytes.
const maxEndedSessions = 1024

type endedSession struct {
	session string
	pid     int
}

// add records that session id, whose shim is pid, ended for reason.
func (e *endedSessions) add(id string, pid int, reason error) {
	k := endedSession{session: id, pid: pid}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.why == nil {
		e.why = map[endedSession]string{}
	}
	delete(e.why, e.ring[e.next]) // the oldest, once the ring is full
	e.ring[e.next] = k
	e.next = (e.next + 1) % maxEndedSessions
	e.why[k] = reason.Error()
}

// take reports why the session a shim (pid) resumes with r ended, if this
// pool (run) ended it, and forgets it.
func (e *endedSessions) take(r *wire.Resume, run string, pid int) (string, bool) {
	if r == nil || r.Run != run {
		return "", false
	}
	k := endedSession{session: r.Session, pid: pid}
	e.mu.Lock()
	defer e.mu.Unlock()
	why, ok := e.why[k]
	delete(e.why, k)
	return why, ok
}
