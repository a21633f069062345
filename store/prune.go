package store

import (
	"fmt"
	"time"
)

// pruneStep deletes at most PruneBatch rows from each table in its own
// short statement: requests older than RetainDays or beyond MaxRows, then
// sessions and backends that ended before the cutoff, then runs that have
// nothing left. It reports whether a step was full (more to do). A backend
// that never recorded an exit is kept: it may be a leaked process.
func (w *writer) pruneStep(now time.Time) (more bool, err error) {
	o := w.s.opts
	n := int64(o.PruneBatch)
	step := func(what, q string, args ...any) {
		if err != nil {
			return
		}
		res, e := w.db.Exec(q, append(args, n)...)
		if e != nil {
			err = fmt.Errorf("prune %s: %w", what, e)
			return
		}
		if k, _ := res.RowsAffected(); k >= n {
			more = true
		}
	}
	if o.RetainDays > 0 {
		cutoff := now.Add(-time.Duration(o.RetainDays) * 24 * time.Hour).UnixMicro()
		step("old requests", `DELETE FROM requests WHERE id IN
			(SELECT id FROM requests WHERE received < ? ORDER BY received LIMIT ?)`, cutoff)
		step("old sessions", `DELETE FROM sessions WHERE (run, id) IN
			(SELECT run, id FROM sessions WHERE disconnected < ?1 OR (run != ?2 AND connected < ?1) LIMIT ?3)`,
			cutoff, w.run)
		step("old backends", `DELETE FROM backends WHERE id IN
			(SELECT id FROM backends WHERE exited < ? LIMIT ?)`, cutoff)
		step("old runs", `DELETE FROM runs WHERE id IN (SELECT id FROM runs r WHERE id != ? AND started < ?
			AND NOT EXISTS (SELECT 1 FROM requests WHERE run = r.id)
			AND NOT EXISTS (SELECT 1 FROM sessions WHERE run = r.id)
			AND NOT EXISTS (SELECT 1 FROM backends WHERE run = r.id) LIMIT ?)`, w.run, cutoff)
	}
	if o.MaxRows > 0 {
		// Row ids grow with arrival, so the newest MaxRows ids stay.
		step("requests beyond the row cap", `DELETE FROM requests WHERE id IN
			(SELECT id FROM requests WHERE id <= (SELECT max(id) FROM requests) - ? ORDER BY id LIMIT ?)`, o.MaxRows)
	}
	return more, err
}

// pruneAll runs pruning steps until nothing is left to delete.
func (w *writer) pruneAll(now time.Time) error {
	for {
		more, err := w.pruneStep(now)
		if err != nil || !more {
			return err
		}
	}
}
