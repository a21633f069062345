package pool

import (
	"context"
	"fmt"
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
// when they had reached a child. It runs before the session's reader.
func (s *session) resume(r *wire.Resume) {
	from := fmt.Sprintf("run %s session %s", r.Run, r.Session)
	s.mu.Lock()
	s.resumed = from
	s.mu.Unlock()
	s.p.log.Info("session reattached", "session", s.id, "server", s.srv.name, "from", from)
	if len(r.Initialize) > 0 {
		if _, err := s.adoptInitialize(r.Initialize); err != nil {
			s.p.log.Warn("a reattached session's initialize was not adopted", "session", s.id, "err", err)
		} else {
			if s.keepState != nil {
				s.keepState(wire.State{Initialize: r.Initialize}) // for the next pool, too
			}
			if s.asksRoots() {
				s.askRoots() // as after notifications/initialized
			}
		}
	}
	reqs := s.lostRequests(r, from)
	for _, u := range reqs {
		msg := fmt.Sprintf("Switchboard restarted while %s was in flight on server %q; it was not re-sent because it may have executed", u.Method, s.srv.name)
		if !u.Written {
			msg = fmt.Sprintf("Switchboard restarted before %s reached server %q; it did not run, send it again", u.Method, s.srv.name)
		}
		s.replyError([]byte(u.OriginalID), &jsonrpc.Error{Code: jsonrpc.CodeBackendDied, Message: msg,
			Data: map[string]any{"retryable": true, "mayHaveExecuted": u.Written, "server": s.srv.name}})
	}
	if len(reqs) > 0 {
		s.p.log.Info("answered a reattached session's lost requests", "session", s.id, "count", len(reqs))
	}
}

// lostRequests is what the client still waits for: the shim's count (its
// Pending ids; the history may lag it by a flush, and may not know an
// answer the shim saw written), told whether each reached a child by the
// earlier run's history where that recorded it (else it may have:
// mayHaveExecuted).
func (s *session) lostRequests(r *wire.Resume, from string) []Unanswered {
	var known []Unanswered
	if s.p.opts.Unanswered != nil && r.Run != "" && r.Session != "" {
		ctx, cancel := context.WithTimeout(context.Background(), unansweredTimeout)
		var err error
		known, err = s.p.opts.Unanswered(ctx, r.Run, r.Session)
		cancel()
		if err != nil {
			s.p.log.Warn("the history of a reattached session's requests is unavailable", "session", s.id, "from", from, "err", err)
		}
	}
	byID := map[string]Unanswered{}
	for _, u := range known {
		byID[u.OriginalID] = u
	}
	out := make([]Unanswered, 0, len(r.Pending))
	for _, id := range r.Pending {
		u, ok := byID[id]
		if !ok {
			u = Unanswered{OriginalID: id, Method: "a request", Written: true}
		}
		out = append(out, u)
	}
	return out
}

// appendAnswerID appends the id of line when it is a response to the
// client's request.
func appendAnswerID(ids []string, line []byte) []string {
	m, err := jsonrpc.Parse(line)
	if err != nil || m.Method != "" {
		return ids
	}
	if id := m.IDBytes(); len(id) > 0 {
		ids = append(ids, string(id))
	}
	return ids
}
