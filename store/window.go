package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Window is what the history holds about a span of time: what the UI's
// waterfall draws after the fact ("the two minutes before the child
// crashed").
type Window struct {
	From, Until time.Time
	// Requests alive at some moment of the span, in the order they were
	// received: answered ones that overlap it, and unanswered ones
	// (in flight, or abandoned by a run that ended or crashed) received
	// before its end whose run lasted into it.
	Requests []Request
	// Truncated says more requests matched than the limit let through
	// (the earliest are kept).
	Truncated bool
	// Backends are the children alive at some moment of the span.
	Backends []Backend
	// Sessions are the sessions Requests came from, where recorded.
	Sessions []Session
	// Runs are the runs alive at some moment of the span.
	Runs []WindowRun
	// Reloads are the config reloads in the span, oldest first.
	Reloads []ConfigReload
}

// WindowRun is a run with its last recorded moment: where a run that
// crashed (it has no Ended) presumably died.
type WindowRun struct {
	Run
	LastSeen time.Time
}

// WindowLookback is how long before a window's start an answered request
// may have been received and still be found alive in it: longer than any
// request timeout in practice. Unanswered requests are found however old.
const WindowLookback = time.Hour

// Window reads what the history holds about [from, until]: at most limit
// requests (<= 0: 20,000). It finds them through a range of row ids
// (request_log's sampled time index) and the partial indexes of
// unanswered rows, never a scan of the whole table.
func (s *Store) Window(ctx context.Context, from, until time.Time, limit int) (Window, error) {
	w := Window{From: from, Until: until}
	if until.Before(from) {
		return w, fmt.Errorf("history: window ends (%s) before it starts (%s)", until.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	live, err := s.LiveRun(ctx)
	if err != nil {
		return w, err
	}
	limit = positiveOr(limit, 20_000)
	f, u, back := from.UnixMicro(), until.UnixMicro(), from.Add(-WindowLookback).UnixMicro()

	// Answered requests that overlap the span, and unanswered ones
	// received in it or in the lookback before it: row ids follow
	// arrival, so these are a range of them (see idBefore).
	after, err := s.idBefore(ctx, from.Add(-WindowLookback))
	if err != nil {
		return w, err
	}
	reqs, err := s.queryRequests(ctx, live, "SELECT "+requestCols+` FROM requests
		WHERE id > ? AND received >= ? AND received <= ? AND (answered IS NULL OR answered >= ?)
		ORDER BY id LIMIT ?`, after, back, u, f, limit+1)
	if err != nil {
		return w, err
	}
	if len(reqs) > limit {
		reqs, w.Truncated = reqs[:limit], true
	}
	// Unanswered requests received before the lookback (the partial
	// indexes keep these cheap). Unanswered ones are kept only if their
	// run lasted into the span.
	old, err := s.queryRequests(ctx, live, "SELECT "+requestCols+" FROM requests WHERE status_code = 0 AND received < ?"+
		" UNION ALL SELECT "+requestCols+" FROM requests WHERE status_code = 7 AND received < ?", back, back)
	if err != nil {
		return w, err
	}

	runs, err := s.windowRuns(ctx, live, from, until)
	if err != nil {
		return w, err
	}
	ends := map[int64]time.Time{} // a run's end; zero while it runs
	for _, r := range runs {
		ends[r.ID] = runEnd(r)
	}
	// runLasts tells whether run was alive at from, reading the runs
	// outside the span once each.
	runLasts := func(id int64) (bool, error) {
		if id == live {
			return true, nil
		}
		end, ok := ends[id]
		if !ok {
			r, err := s.windowRun(ctx, id)
			if err != nil {
				return false, err
			}
			end = runEnd(r)
			ends[id] = end
		}
		return end.IsZero() || !end.Before(from), nil
	}
	kept := make([]Request, 0, len(reqs)+len(old))
	for _, r := range slices.Concat(reqs, old) {
		if r.Answered.IsZero() {
			ok, err := runLasts(r.Run)
			if err != nil {
				return w, err
			}
			if !ok {
				continue // its run ended before the span
			}
		}
		kept = append(kept, r)
	}
	reqs = kept
	slices.SortStableFunc(reqs, func(a, b Request) int { return a.Received.Compare(b.Received) })
	w.Requests = reqs
	w.Runs = runs

	if w.Backends, err = s.windowBackends(ctx, from, until, runLasts); err != nil {
		return w, err
	}
	if w.Sessions, err = s.windowSessions(ctx, reqs); err != nil {
		return w, err
	}
	if w.Reloads, err = s.windowReloads(ctx, from, until); err != nil {
		return w, err
	}
	return w, nil
}

// windowReloads lists the config reloads of [from, until], oldest first.
func (s *Store) windowReloads(ctx context.Context, from, until time.Time) ([]ConfigReload, error) {
	return queryAll(ctx, s.rdb(), "query config reloads", func(sc scanner) (ConfigReload, error) {
		var c ConfigReload
		var at int64
		var msg sql.NullString
		err := sc.Scan(&c.Run, &at, &c.Changes, &msg)
		c.At, c.Err = micros(at), msg.String
		return c, err
	}, `SELECT run, at, changes, error FROM config_reloads
		WHERE at >= ? AND at <= ? ORDER BY at, id`, from.UnixMicro(), until.UnixMicro())
}

// runEnd is where a run ended: its stop, or for one that crashed its
// last recorded moment; zero for a run still going.
func runEnd(r WindowRun) time.Time {
	if !r.Ended.IsZero() {
		return r.Ended
	}
	if r.Crashed {
		return r.LastSeen
	}
	return time.Time{}
}

// windowRuns lists the runs alive at some moment of [from, until].
func (s *Store) windowRuns(ctx context.Context, live int64, from, until time.Time) ([]WindowRun, error) {
	runs, err := queryAll(ctx, s.rdb(), "runs of a window", scanRun, "SELECT "+runCols+` FROM runs
		WHERE started <= ? AND (ended IS NULL OR ended >= ?) ORDER BY id`, until.UnixMicro(), from.UnixMicro())
	if err != nil {
		return nil, err
	}
	var out []WindowRun
	for _, r := range runs {
		wr := WindowRun{Run: r}
		if r.Ended.IsZero() && r.ID != live {
			// A run that ended without a stop: where it died is its last
			// recorded moment. Not alive in the span if that is before it.
			if wr.LastSeen, err = s.lastSeen(ctx, r.ID); err != nil {
				return nil, err
			}
			wr.Crashed = true
			if wr.LastSeen.Before(from) {
				continue
			}
		}
		out = append(out, wr)
	}
	return out, nil
}

// windowRun reads one run, with its last moment if it ended unstopped.
func (s *Store) windowRun(ctx context.Context, id int64) (WindowRun, error) {
	r, err := scanRun(s.rdb().QueryRowContext(ctx, "SELECT "+runCols+" FROM runs WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return WindowRun{Run: Run{ID: id}}, nil // pruned: its requests outlived it
	}
	if err != nil {
		return WindowRun{}, fmt.Errorf("history: run %d: %w", id, err)
	}
	wr := WindowRun{Run: r}
	if r.Ended.IsZero() {
		wr.Crashed = true
		if wr.LastSeen, err = s.lastSeen(ctx, id); err != nil {
			return WindowRun{}, err
		}
	}
	return wr, nil
}

// lastSeen is the last moment run recorded: its newest requests and its
// newest orphaned answer (ranges of row ids, which follow arrival: a
// search of the primary key, however long the run), its children's
// starts and exits, and its heartbeat (recorded while it had requests in
// flight, however long ago their last event was).
func (s *Store) lastSeen(ctx context.Context, run int64) (time.Time, error) {
	var rcv, wr, ans, started, exited, alive sql.NullInt64
	first, orphans, end := run<<runShift, run<<runShift|orphanBase, (run+1)<<runShift
	err := s.rdb().QueryRowContext(ctx, `SELECT max(received), max(written), max(answered) FROM
		(SELECT * FROM (SELECT received, written, answered FROM requests WHERE id >= ? AND id < ? ORDER BY id DESC LIMIT 256)
		UNION ALL SELECT * FROM (SELECT received, written, answered FROM requests WHERE id >= ? AND id < ? ORDER BY id DESC LIMIT 1))`,
		first, orphans, orphans, end).Scan(&rcv, &wr, &ans)
	if err != nil {
		return time.Time{}, fmt.Errorf("history: last moment of run %d: %w", run, err)
	}
	err = s.rdb().QueryRowContext(ctx, `SELECT max(started), max(exited), (SELECT alive FROM runs WHERE id = ?1)
		FROM backends WHERE run = ?1`, run).Scan(&started, &exited, &alive)
	if err != nil {
		return time.Time{}, fmt.Errorf("history: last moment of run %d: %w", run, err)
	}
	var last int64
	for _, n := range []sql.NullInt64{rcv, wr, ans, started, exited, alive} {
		if n.Valid && n.Int64 > last {
			last = n.Int64
		}
	}
	if last == 0 {
		var st int64
		if err := s.rdb().QueryRowContext(ctx, `SELECT started FROM runs WHERE id = ?`, run).Scan(&st); err == nil {
			last = st
		}
	}
	return micros(last), nil
}

// windowBackends lists the children alive at some moment of [from,
// until]: exited in or after it, or never seen exiting in a run that
// lasted into it.
func (s *Store) windowBackends(ctx context.Context, from, until time.Time, runLasts func(int64) (bool, error)) ([]Backend, error) {
	all, err := queryAll(ctx, s.rdb(), "children of a window", scanBackend, "SELECT "+backendCols+` FROM backends
		WHERE started <= ? AND (exited IS NULL OR exited >= ?) ORDER BY started, id`, until.UnixMicro(), from.UnixMicro())
	if err != nil {
		return nil, err
	}
	out := []Backend{}
	for _, b := range all {
		if b.Exited.IsZero() {
			ok, err := runLasts(b.Run)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		out = append(out, b)
	}
	return out, nil
}

// backendCols are the columns scanBackend reads.
const backendCols = `run, server, session, pid, process_start, command, started, exited, exit_code, exit_reason,
	roots, resolved_command`

func scanBackend(sc scanner) (Backend, error) {
	var b Backend
	var cmdJSON string
	var pstart, exited, code sql.NullInt64
	var started int64
	var why, roots, resolved sql.NullString
	if err := sc.Scan(&b.Run, &b.Server, &b.Session, &b.PID, &pstart, &cmdJSON, &started, &exited, &code, &why,
		&roots, &resolved); err != nil {
		return b, err
	}
	_ = json.Unmarshal([]byte(cmdJSON), &b.Command)
	if resolved.Valid {
		_ = json.Unmarshal([]byte(resolved.String), &b.ResolvedCommand)
	}
	if roots.Valid {
		_ = json.Unmarshal([]byte(roots.String), &b.Roots)
	}
	b.ProcessStart, b.Started, b.Exited = nullMicros(pstart), micros(started), nullMicros(exited)
	b.ExitCode, b.ExitReason = int(code.Int64), why.String
	return b, nil
}

// windowSessions reads the recorded sessions of reqs.
func (s *Store) windowSessions(ctx context.Context, reqs []Request) ([]Session, error) {
	type key struct {
		run int64
		id  string
	}
	seen := map[key]bool{}
	out := []Session{}
	for _, r := range reqs {
		k := key{r.Run, r.Session}
		if seen[k] || r.Session == "" {
			continue
		}
		seen[k] = true
		var sess Session
		var peer, disc sql.NullInt64
		var connected int64
		var reason sql.NullString
		err := s.rdb().QueryRowContext(ctx, `SELECT run, id, server, client_name, client_version, transport, peer_pid,
			connected, disconnected, close_reason FROM sessions WHERE run = ? AND id = ?`, k.run, k.id).
			Scan(&sess.Run, &sess.ID, &sess.Server, &sess.ClientName, &sess.ClientVersion, &sess.Transport, &peer,
				&connected, &disc, &reason)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			continue
		case err != nil:
			return nil, fmt.Errorf("history: session %s of run %d: %w", k.id, k.run, err)
		}
		sess.PeerPID, sess.Connected, sess.Disconnected, sess.CloseReason = int(peer.Int64), micros(connected), nullMicros(disc), reason.String
		out = append(out, sess)
	}
	return out, nil
}
