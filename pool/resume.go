package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

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
// runs before the session's reader.
func (s *session) resume(r *wire.Resume) {
	from := resumedFrom(r)
	s.p.log.Info("session reattached", "session", s.id, "server", s.srv.name, "from", from)
	if r.MidLine {
		// The earlier pool died inside a line (an answer cut off): end it
		// before anything else, so that what follows is read whole.
		s.deliver(nil)
	}
	reqs := mergeLost(r, s.lostRequests(r, from))
	answered := len(reqs)
	if len(r.Initialize) > 0 {
		if result, err := s.adoptInitialize(r.Initialize, nil); err != nil {
			s.p.log.Warn("a reattached session's initialize was not adopted", "session", s.id, "err", err)
		} else {
			s.keep(wire.State{Initialize: r.Initialize, InitializeID: r.InitializeID}) // for the next pool, too
			reqs = s.answerLostInitialize(r, reqs, result)
			s.resumeStakes(r)
			if s.asksRoots() {
				s.askRoots() // as after notifications/initialized
			}
		}
	}
	listens := map[string]bool{}
	for _, l := range r.Lost {
		if l.Listen {
			listens[l.ID] = true
		}
	}
	for _, u := range reqs {
		if u.Method == "" {
			u.Method = "a request"
		}
		err := newError(errPoolRestarting, u.Written, s.srv.name, s.srv.name, u.Method)
		if listens[u.OriginalID] { // an open listen: its stream ended with the pool
			err = newError(errListenRestarted, false, s.srv.name, s.srv.name)
		}
		s.replyError([]byte(u.OriginalID), err)
	}
	if answered > 0 {
		s.p.log.Info("answered a reattached session's lost requests", "session", s.id, "count", answered)
	}
}

// answerLostInitialize answers the initialize among reqs, the requests
// a resumed session's client still waits for, with result, the
// initialize the session adopted from its shim (r), and returns the
// others. The earlier pool told the shim of the initialize before it
// answered it, and released its ledger slot after: a client whose
// initialize is owed may not have had its answer. It gets the result,
// as the session stands initialized, not an error for an initialize
// that succeeded; one that had it reads a second success for that id,
// which clients ignore, where no answer would leave one that had not
// waiting for ever.
func (s *session) answerLostInitialize(r *wire.Resume, reqs []Unanswered, result []byte) []Unanswered {
	return slices.DeleteFunc(reqs, func(u Unanswered) bool {
		if !isInitialize(r, u) {
			return false
		}
		s.replyTo(nil, []byte(u.OriginalID), result)
		return true
	})
}

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
			s.keptSubscription(uri, false)
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
		if take {
			s.subs[uri], s.subSince[uri] = b, s.subChanges.Add(1)
		}
		s.mu.Unlock()
		if refusal != nil {
			left++
			s.keptSubscription(uri, false)
		}
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
	if s.keepState != nil {
		s.keepState(s, st)
	}
}

// keptSubscription tells the session's shim that the session now holds a
// subscription to uri (add), or no longer does. One to a URI longer than
// wire.MaxKeptURI is not carried.
func (s *session) keptSubscription(uri string, add bool) {
	if s.keepState == nil || len(uri) > wire.MaxKeptURI {
		return
	}
	if add {
		s.keep(wire.State{Subscribed: &uri})
	} else {
		s.keep(wire.State{Unsubscribed: &uri})
	}
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
func (s *session) lostRequests(r *wire.Resume, from string) []Unanswered {
	if s.p.opts.Unanswered == nil || r.Run == "" || r.Session == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), unansweredTimeout)
	defer cancel()
	known, err := s.p.opts.Unanswered(ctx, r.Run, r.Session)
	if err != nil {
		s.p.log.Warn("the history of a reattached session's requests is unavailable", "session", s.id, "from", from, "err", err)
	}
	return known
}

// endedSessions are the relayed sessions this pool evicted. Their shims
// were not told: the stream a Farewell would have gone on was full, so a
// shim reads on to the stream's end and takes it for a crash. One that
// comes back to resume its session is told it ended instead
// (Welcome.Ended), and exits as after the Farewell. A session is named by
// its run, its id and its shim's PID (unique among the running shims: a
// shim of an earlier pool whose session had the same id is not taken for
// it, with or without a run id). The record holds the last
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
