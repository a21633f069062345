package store

import (
	"fmt"
	"math"
	"time"
)

// capRows keeps at most MaxRows requests, in the transaction of each
// batch, given that the database holds count (exactly: writeRows counts
// only the rows it inserts): what a batch adds over the cap, the same
// batch deletes, oldest first (row ids follow arrival). A database that
// is far over the cap (a lower maxRows, at a start or from SetLimits; an
// upgrade) comes down by PruneBatch rows a batch beyond that, so that no
// transaction grows large. It returns the count after the deletion.
//
// It never deletes the in-flight row of a request of this run that has
// not ended (its end, if it came in this batch, is written already): that
// is a hang the user is looking for (Requests by status, Hangs,
// Unanswered), however many requests came after it. It deletes the
// requests earlier runs left unanswered (abandoned, unknown) last, once
// no other row is left: those are the hangs a restart after a crash is
// for finding, which a client flooding calls after it would otherwise
// push out within a minute (they are bounded on their own: MaxAbandoned,
// pruneStep). It deletes the oldest other rows instead, so the count
// stays at the cap unless the run's hangs alone exceed it: the count is
// at most the larger of MaxRows and the run's hangs. Those are bounded by
// what is in flight (the pool's MaxPending a child, the recorder's
// maxOpen) plus the ends history dropped under load, until the run stops:
// in practice a few, against the tenth of the cap (100,000 rows by
// default) the README allows over.
func (w *writer) capRows(count int64) (int64, error) {
	maxRows := w.lim.maxRows
	over := count - int64(maxRows)
	if maxRows <= 0 || over <= 0 {
		return count, nil
	}
	n := min(over, int64(max(w.s.opts.PruneBatch, 2*len(w.rows))))
	// Fewer than n other rows: all of them (the max).
	res, err := w.exec(`DELETE FROM request_log WHERE id <= coalesce((SELECT id FROM request_log
		WHERE `+capped+` ORDER BY id LIMIT 1 OFFSET ?2), (SELECT max(id) FROM request_log))
		AND `+capped, w.run, n-1)
	if err != nil {
		return count, fmt.Errorf("keep %d requests: %w", maxRows, err)
	}
	deleted, _ := res.RowsAffected()
	if deleted < n { // no other row left: the oldest unanswered of earlier runs
		res, err = w.exec(`DELETE FROM request_log WHERE id IN (SELECT id FROM request_log
			WHERE status IN (7, 8) AND run != ? ORDER BY id LIMIT ?)`, w.run, n-deleted)
		if err != nil {
			return count, fmt.Errorf("keep %d requests: %w", maxRows, err)
		}
		k, _ := res.RowsAffected()
		deleted += k
	}
	return count - deleted, nil
}

// capped selects the rows capRows deletes first, given the live run as
// ?1: not its requests in flight (status 0), which it never deletes, nor
// earlier runs' abandoned (7) and unknown (8) requests, which it deletes
// last.
const capped = `NOT (status = 0 AND run = ?1) AND NOT (status IN (7, 8) AND run != ?1)`

// capNow runs capRows in a transaction of its own, and says whether it
// deleted anything.
func (w *writer) capNow() (deleted bool, err error) {
	if _, err := w.exec("BEGIN IMMEDIATE"); err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	count, err := w.capRows(w.count)
	if err == nil {
		_, err = w.exec("COMMIT")
	}
	if err != nil {
		_, _ = w.exec("ROLLBACK")
		return false, err
	}
	deleted = count < w.count
	w.count = count
	return deleted, nil
}

// pruneStep deletes at most PruneBatch rows from each table in its own
// short statement: the requests earlier runs left unanswered beyond the
// newest MaxAbandoned, requests and orphaned responses older than
// RetainDays, then sessions and backends that ended before the cutoff,
// then runs that have nothing left, then ended sessions and backends
// beyond MaxSessions and MaxBackends (capSessions, capBackends). It reports whether a step was full
// (more to do). A backend that never recorded an exit is kept: it may be
// a leaked process.
func (w *writer) pruneStep(now time.Time) (more bool, err error) {
	if w.conn == nil {
		return false, w.noDB
	}
	o := w.s.opts
	n := int64(o.PruneBatch)
	// step deletes one batch and returns how many rows went.
	step := func(what, q string, args ...any) int64 {
		if err != nil {
			return 0
		}
		res, e := w.exec(q, append(args, n)...)
		if e != nil {
			err = fmt.Errorf("prune %s: %w", what, e)
			return 0
		}
		k, _ := res.RowsAffected()
		if k >= n {
			more = true
		}
		return k
	}
	if o.MaxAbandoned >= 0 && !w.abandonedKept {
		// Earlier runs' rows only change when the writer attaches (a
		// start): this walk of the table (no index has the unknown rows)
		// runs until they are within the bound, then no more.
		k := step("unanswered requests of earlier runs", `DELETE FROM request_log WHERE id IN
			(SELECT id FROM request_log WHERE status IN (7, 8) AND run != ?1 ORDER BY id DESC LIMIT ?3 OFFSET ?2)`,
			w.run, o.MaxAbandoned)
		w.count -= k
		w.abandonedKept = err == nil && k < n
	}
	if days := w.lim.retainDays; days > 0 {
		at := now.Add(-time.Duration(days) * 24 * time.Hour)
		cutoff := at.UnixMicro()
		// Row ids follow arrival: the old rows are the first ones, below a
		// row received after the cutoff, where the search ends rather than
		// at the end of the table. Orphaned responses, above their run's
		// requests, are found by their own index.
		below, e := idAfter(w.ctx, w.conn, at)
		if e != nil {
			return false, fmt.Errorf("prune: %w", e)
		}
		if below == 0 {
			below = math.MaxInt64
		}
		w.count -= step("old requests", `DELETE FROM request_log WHERE id IN
			(SELECT id FROM request_log WHERE received < ? AND id < ? ORDER BY id LIMIT ?)`, cutoff, below)
		w.count -= step("old orphaned responses", `DELETE FROM request_log WHERE id IN
			(SELECT id FROM request_log WHERE status = 6 AND received < ? LIMIT ?)`, cutoff)
		step("old sessions", `DELETE FROM sessions WHERE (run, id) IN
			(SELECT run, id FROM sessions WHERE disconnected < ?1 OR (run != ?2 AND connected < ?1) LIMIT ?3)`,
			cutoff, w.run)
		step("old backends", `DELETE FROM backends WHERE id IN
			(SELECT id FROM backends WHERE exited < ? LIMIT ?)`, cutoff)
		step("old config reloads", `DELETE FROM config_reloads WHERE id IN
			(SELECT id FROM config_reloads WHERE at < ? LIMIT ?)`, cutoff)
		step("old runs", `DELETE FROM runs WHERE id IN (SELECT id FROM runs r WHERE id != ? AND started < ?
			AND NOT EXISTS (SELECT 1 FROM request_log WHERE id >= r.id << 40 AND id < (r.id + 1) << 40)
			AND NOT EXISTS (SELECT 1 FROM sessions WHERE run = r.id)
			AND NOT EXISTS (SELECT 1 FROM backends WHERE run = r.id)
			AND NOT EXISTS (SELECT 1 FROM config_reloads WHERE run = r.id) LIMIT ?)`, w.run, cutoff)
	}
	w.capTables(now, &more, &err)
	return more, err
}

// capTables runs a step of the sessions and children caps, after any
// error of the steps before it, and notes whether either has more to do.
func (w *writer) capTables(now time.Time, more *bool, err *error) {
	for _, capStep := range []func() (bool, error){
		func() (bool, error) { return w.capSessions(now) },
		func() (bool, error) { return w.capBackends(now) },
	} {
		if *err != nil {
			return
		}
		m, e := capStep()
		*more = *more || m
		*err = e
	}
}

// pruneAll runs pruning steps until nothing is left to delete, and brings
// the row count within MaxRows.
func (w *writer) pruneAll(now time.Time) error {
	for {
		more, err := w.pruneStep(now)
		if err != nil || !more {
			break
		}
	}
	for {
		if deleted, err := w.capNow(); err != nil || !deleted {
			return err
		}
	}
}
