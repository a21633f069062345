package store

import (
	"fmt"
	"time"
)

// capRows keeps at most MaxRows requests, in the transaction of each
// batch, given that the database holds count: what a batch adds over the
// cap, the same batch deletes, oldest first (row ids follow arrival). A
// database that starts far over the cap (a lower maxRows, an upgrade)
// comes down by PruneBatch rows a batch beyond that, so that no
// transaction grows large. It returns the count after the deletion.
func (w *writer) capRows(count int64) (int64, error) {
	o := w.s.opts
	over := count - int64(o.MaxRows)
	if o.MaxRows <= 0 || over <= 0 {
		return count, nil
	}
	n := min(over, int64(max(o.PruneBatch, 2*len(w.rows))))
	res, err := w.exec(`DELETE FROM request_log WHERE id <= (SELECT id FROM request_log ORDER BY id LIMIT 1 OFFSET ?)`, n-1)
	if err != nil {
		return count, fmt.Errorf("keep %d requests: %w", o.MaxRows, err)
	}
	deleted, _ := res.RowsAffected()
	if deleted < n { // fewer rows than counted: count them
		if err := w.conn.QueryRowContext(w.ctx, `SELECT count(*) FROM request_log`).Scan(&count); err != nil {
			return count, fmt.Errorf("count the requests: %w", err)
		}
		return count, nil
	}
	return count - deleted, nil
}

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
// short statement: requests older than RetainDays, then sessions and
// backends that ended before the cutoff, then runs that have nothing
// left. It reports whether a step was full (more to do). A backend that
// never recorded an exit is kept: it may be a leaked process.
func (w *writer) pruneStep(now time.Time) (more bool, err error) {
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
	if o.RetainDays > 0 {
		cutoff := now.Add(-time.Duration(o.RetainDays) * 24 * time.Hour).UnixMicro()
		// Row ids follow arrival: the old rows are the first ones.
		w.count -= step("old requests", `DELETE FROM request_log WHERE id IN
			(SELECT id FROM request_log WHERE received < ? ORDER BY id LIMIT ?)`, cutoff)
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
	return more, err
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
