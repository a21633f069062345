package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// OpenChild is a child that an earlier run started and never saw exit,
// as its row in the backends table holds it: a leak, or a process that
// ended unseen (its run crashed). The store does not look at processes;
// the app tells the two apart and closes the rows of the gone ones
// (CloseGoneChildren), which would otherwise stay open for ever: read by
// every leak scan, and never pruned.
type OpenChild struct {
	ID  int64 // the row
	Run int64
	PID int
	// ProcessStart is the process's start time as the OS reported it
	// when the child started; zero when its run did not record it.
	ProcessStart time.Time
}

// errReadOnly is what a Store opened read-only says when asked what only
// a run's own Store does.
var errReadOnly = errors.New("opened read-only")

// OpenChildrenOfEarlierRuns lists, by row id, up to limit of the children
// that runs before this Store's started and never saw exit, of the rows
// after row id after: a caller pages through them, as many as it means
// to look at. Only a writable Store has a run of its own to tell earlier
// ones from.
func (s *Store) OpenChildrenOfEarlierRuns(ctx context.Context, after int64, limit int) ([]OpenChild, error) {
	if s.run == 0 {
		return nil, fmt.Errorf("history %s: open children of earlier runs: %w", s.path, errReadOnly)
	}
	return queryAll(ctx, s.rdb(), "open children of earlier runs", scanOpenChild, `SELECT id, run, pid, process_start
		FROM backends WHERE exited IS NULL AND run != ? AND id > ? ORDER BY id LIMIT ?`, s.run, after, limit)
}

// scanOpenChild reads an OpenChild from id, run, pid, process_start.
func scanOpenChild(sc scanner) (OpenChild, error) {
	var c OpenChild
	var start sql.NullInt64
	err := sc.Scan(&c.ID, &c.Run, &c.PID, &start)
	c.ProcessStart = nullMicros(start)
	return c, err
}

// goneRequest asks the writer to close the rows of gone children
// (CloseGoneChildren); it replies once on reply, which has room for it.
type goneRequest struct {
	gone  []OpenChild
	at    time.Time
	reply chan goneReply
}

// goneReply is the writer's answer to a goneRequest.
type goneReply struct {
	closed int
	err    error
}

// GoneReason is the exit reason CloseGoneChildren gives a child's row in
// run: no run saw the child exit, and run found it gone.
func GoneReason(run int64) string {
	return fmt.Sprintf("gone; not seen exiting (found by run %d)", run)
}

// CloseGoneChildren records that the children of gone, rows of
// OpenChildrenOfEarlierRuns that the caller found to be no longer
// running, ended unseen by at: exited at at, with no exit code, and
// GoneReason of this Store's run. A row that has ended since it was read
// (an upgrade carried its child over to this run) is left as it is. It
// waits for the writer, which writes them in one transaction between its
// batches, and says how many rows it closed. Only a writable Store
// closes rows.
func (s *Store) CloseGoneChildren(ctx context.Context, gone []OpenChild, at time.Time) (int, error) {
	if s.goneReq == nil {
		return 0, fmt.Errorf("history %s: close the rows of gone children: %w", s.path, errReadOnly)
	}
	if len(gone) == 0 {
		return 0, nil
	}
	req := goneRequest{gone: gone, at: at, reply: make(chan goneReply, 1)}
	select {
	case s.goneReq <- req:
	case <-s.done:
		return 0, fmt.Errorf("history %s: close the rows of gone children: the history is closed", s.path)
	case <-ctx.Done():
		return 0, fmt.Errorf("history %s: close the rows of gone children: %w", s.path, ctx.Err())
	}
	select {
	case r := <-req.reply:
		return r.closed, r.err
	case <-ctx.Done():
		return 0, fmt.Errorf("history %s: close the rows of gone children: %w", s.path, ctx.Err())
	}
}

// sqlBackGone ends the row of a child that its run never saw exit and
// that is gone. The row must still be open, of an earlier run, and of the
// same PID: anything else changed it since it was read.
const sqlBackGone = `UPDATE backends SET exited = ?, exit_code = NULL, exit_reason = ?
	WHERE id = ? AND run != ? AND pid = ? AND exited IS NULL`

// closeGone writes a goneRequest in one transaction.
func (w *writer) closeGone(req goneRequest) (closed int, err error) {
	w.checkFile(time.Now(), false)
	if _, err := w.exec("BEGIN IMMEDIATE"); err != nil {
		return 0, fmt.Errorf("history %s: close the rows of gone children: begin: %w", w.s.path, err)
	}
	defer func() {
		if err != nil {
			_, _ = w.exec("ROLLBACK")
			closed, err = 0, fmt.Errorf("history %s: close the rows of gone children: %w", w.s.path, err)
		}
	}()
	reason := GoneReason(w.run)
	for _, c := range req.gone {
		res, err := w.exec(sqlBackGone, req.at.UnixMicro(), reason, c.ID, w.run, c.PID)
		if err != nil {
			return 0, err
		}
		if n, err := res.RowsAffected(); err == nil {
			closed += int(n)
		}
	}
	if _, err := w.exec("COMMIT"); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return closed, nil
}
