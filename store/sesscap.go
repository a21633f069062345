package store

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// The sessions and children tables are capped as the requests are: a
// client may open sessions without end (each a row of some hundreds of
// bytes, a client's name and version among them), and a session that
// flips its roots starts a child each time. Their rows have no index by
// time and no request row links to them but by its run and session or
// pid, so the cap works in pruning steps (pruneStep, which the writer
// also runs when a batch takes a table over its cap): each step reads
// the next PruneBatch ended rows oldest first, from a cursor that comes
// round again once it reaches the end, finds which of them a kept request
// refers to by reading the requests received while they lived (one range
// of row ids), and deletes as many of the others as the table is over.

// sessionCursor is where the sessions cap goes on from: the last session
// it looked at, in the order it reads them (connected, run, id).
type sessionCursor struct {
	connected, run int64
	id             string
}

// startCursor is before every session.
var startCursor = sessionCursor{connected: math.MinInt64}

// capState is what the writer keeps of a capped table between steps:
// how many rows it holds (counted at each step and at attach, plus those
// recorded since), and the count the last round left that it could not
// bring down (every row left was open or referred to), which a batch must
// pass by PruneBatch before it calls for a step again.
type capState struct {
	count, floor int64
}

// over says whether the table is far enough over max (negative: no cap)
// for a batch to call for a pruning step.
func (c capState) over(max, batch int) bool {
	return max >= 0 && c.count > int64(max)+int64(batch) && c.count > c.floor+int64(batch)
}

// overCaps says whether a batch took the sessions or the children over
// their caps: pruning is due.
func (w *writer) overCaps() bool {
	batch := w.s.opts.PruneBatch
	return w.sessCap.over(w.lim.maxSessions, batch) || w.backCap.over(w.lim.maxBackends, batch)
}

// capSessions deletes, in one step, ended sessions beyond MaxSessions
// that no kept request refers to, oldest first; open ones never. A
// session of an earlier run that never recorded its end ended with its
// run, by the next run's start; one of this run, once it has been closed
// for arrivalMargin (the end of a request it had may come after its own).
// It says whether there is more to do.
func (w *writer) capSessions(now time.Time) (more bool, err error) {
	o, limit := w.s.opts, w.lim.maxSessions
	if limit < 0 {
		return false, nil
	}
	if err := w.conn.QueryRowContext(w.ctx, `SELECT count(*) FROM sessions`).Scan(&w.sessCap.count); err != nil {
		return false, fmt.Errorf("count the sessions: %w", err)
	}
	over := w.sessCap.count - int64(limit)
	if over <= 0 {
		w.sessCap.floor = 0
		return false, nil
	}
	type session struct {
		sessionCursor
		ended int64
	}
	c := w.sessAfter
	ended, err := queryAll(w.ctx, w.conn, "ended sessions", func(sc scanner) (session, error) {
		var s session
		err := sc.Scan(&s.run, &s.id, &s.connected, &s.ended)
		return s, err
	}, `SELECT run, id, connected, coalesce(disconnected, (SELECT min(started) FROM runs WHERE id > s.run), ?1)
		FROM sessions s WHERE (disconnected < ?7 OR (disconnected IS NULL AND run != ?2)) AND (connected, run, id) > (?3, ?4, ?5)
		ORDER BY connected, run, id LIMIT ?6`, now.UnixMicro(), w.run, c.connected, c.run, c.id, o.PruneBatch,
		now.Add(-arrivalMargin).UnixMicro())
	if err != nil {
		return false, err
	}
	if len(ended) == 0 {
		return w.roundEnded(&w.sessCap, func() { w.sessAfter = startCursor }), nil
	}
	from, until := ended[0].connected, ended[0].ended
	for _, s := range ended {
		until = max(until, s.ended)
	}
	kept, err := w.referenced("session", from, until)
	if err != nil {
		return false, err
	}
	var gone [][2]any
	for _, s := range ended {
		w.sessAfter = s.sessionCursor
		if !kept[refKey{s.run, s.id}] {
			if gone = append(gone, [2]any{s.run, s.id}); int64(len(gone)) == over {
				break
			}
		}
	}
	n, err := w.deleteListed(`DELETE FROM sessions WHERE (run, id) IN
		(SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))`, gone)
	if err != nil {
		return false, fmt.Errorf("keep %d sessions: %w", limit, err)
	}
	w.sessCap.count -= n
	if len(ended) < o.PruneBatch && n < over {
		return w.roundEnded(&w.sessCap, func() { w.sessAfter = startCursor }), nil
	}
	return n < over, nil
}

// capBackends deletes, in one step, the children beyond MaxBackends that
// were seen exiting and that no kept request refers to (by its run and
// pid), oldest first, once they have been gone for arrivalMargin; one
// never seen exiting is kept (it may be a leaked process). It says
// whether there is more to do.
func (w *writer) capBackends(now time.Time) (more bool, err error) {
	o, limit := w.s.opts, w.lim.maxBackends
	if limit < 0 {
		return false, nil
	}
	if err := w.conn.QueryRowContext(w.ctx, `SELECT count(*) FROM backends`).Scan(&w.backCap.count); err != nil {
		return false, fmt.Errorf("count the children: %w", err)
	}
	over := w.backCap.count - int64(limit)
	if over <= 0 {
		w.backCap.floor = 0
		return false, nil
	}
	type backend struct{ id, run, pid, started, exited int64 }
	exited, err := queryAll(w.ctx, w.conn, "exited children", func(sc scanner) (backend, error) {
		var b backend
		err := sc.Scan(&b.id, &b.run, &b.pid, &b.started, &b.exited)
		return b, err
	}, `SELECT id, run, pid, started, exited FROM backends WHERE exited < ? AND id > ? ORDER BY id LIMIT ?`,
		now.Add(-arrivalMargin).UnixMicro(), w.backAfter, o.PruneBatch)
	if err != nil {
		return false, err
	}
	if len(exited) == 0 {
		return w.roundEnded(&w.backCap, func() { w.backAfter = 0 }), nil
	}
	from, until := exited[0].started, exited[0].exited
	for _, b := range exited {
		from, until = min(from, b.started), max(until, b.exited)
	}
	kept, err := w.referenced("pid", from, until)
	if err != nil {
		return false, err
	}
	var gone []int64
	for _, b := range exited {
		w.backAfter = b.id
		if !kept[refKey{b.run, strconv.FormatInt(b.pid, 10)}] {
			if gone = append(gone, b.id); int64(len(gone)) == over {
				break
			}
		}
	}
	n, err := w.deleteListed(`DELETE FROM backends WHERE id IN (SELECT value FROM json_each(?))`, gone)
	if err != nil {
		return false, fmt.Errorf("keep %d children: %w", limit, err)
	}
	w.backCap.count -= n
	if len(exited) < o.PruneBatch && n < over {
		return w.roundEnded(&w.backCap, func() { w.backAfter = 0 }), nil
	}
	return n < over, nil
}

// roundEnded starts a cap's cursor over once it has read every ended
// row, and notes the count it leaves (the floor): until a batch passes
// it, a step would find nothing more to delete. Nothing more to do.
func (w *writer) roundEnded(c *capState, restart func()) bool {
	restart()
	c.floor = c.count
	return false
}

// refKey is a row that a request refers to: a session (by its id) or a
// child (by its pid, in decimal) of a run.
type refKey struct {
	run int64
	ref string
}

// referenced lists the sessions (col "session") or children (col "pid")
// that the requests received from from to until (Unix µs) refer to: the
// rows between idBefore and idAfter of those moments. Orphaned responses
// refer to no session, and a child's late answer is no request of its.
func (w *writer) referenced(col string, from, until int64) (map[refKey]bool, error) {
	var lo sql.NullInt64
	err := w.conn.QueryRowContext(w.ctx, `SELECT id FROM request_log WHERE id % 64 = 0 AND id & ? = 0 AND received < ?
		ORDER BY received DESC LIMIT 1`, orphanBase, time.UnixMicro(from).Add(-arrivalMargin).UnixMicro()).Scan(&lo)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("find the requests of ended rows: %w", err)
	}
	hi, err := idAfter(w.ctx, w.conn, time.UnixMicro(until))
	if err != nil {
		return nil, err
	}
	if hi == 0 {
		hi = math.MaxInt64
	}
	rows, err := w.conn.QueryContext(w.ctx, `SELECT DISTINCT run, `+col+` FROM request_log
		WHERE id > ? AND id < ? AND `+col+` IS NOT NULL`, lo.Int64, hi)
	if err != nil {
		return nil, fmt.Errorf("read the requests' %ss: %w", col, err)
	}
	defer rows.Close()
	kept := map[refKey]bool{}
	for rows.Next() {
		var k refKey
		var v any
		if err := rows.Scan(&k.run, &v); err != nil {
			return nil, fmt.Errorf("read the requests' %ss: %w", col, err)
		}
		switch v := v.(type) {
		case int64:
			k.ref = strconv.FormatInt(v, 10)
			if col == "session" { // the pool's "s<n>", stored as n (sessionValue)
				k.ref = "s" + k.ref
			}
		case []byte:
			k.ref = string(v)
		case string:
			k.ref = v
		}
		kept[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the requests' %ss: %w", col, err)
	}
	return kept, nil
}

// deleteListed runs q, which deletes the rows its one argument lists as
// a JSON array, and says how many went.
func (w *writer) deleteListed(q string, list any) (int64, error) {
	b, err := json.Marshal(list)
	if err != nil {
		return 0, err
	}
	res, err := w.exec(q, string(b))
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return n, nil
}
