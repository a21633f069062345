package store

import (
	"cmp"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// writer is the one goroutine that writes the database. It owns the write
// connection and everything below; nothing else touches them.
type writer struct {
	s   *Store
	db  *sql.DB
	run int64

	insReq, updWritten, updDone, insDone     *sql.Stmt
	insOrphan                                *sql.Stmt
	sessOpen, sessClose, backStart, backExit *sql.Stmt

	// Reused by every flush.
	byPoolID map[uint64]int // pool id -> index into rows
	rows     []reqRow
	merged   []bool // batch[i] was folded into a row
}

// reqRow is a request whose Received event is in the current batch, with
// the Written and Done events of the same batch folded in: under load one
// INSERT records the whole request.
type reqRow struct {
	recv    int // index of the Received event
	done    int // index of the Done event, or -1
	written time.Time
	pid     int
}

const (
	sqlInsReq = `INSERT INTO requests (run, pool_id, session, server, method, name, original_id,
		received, written, answered, status, error_code, error, request_size, response_size, pid,
		request_payload, response_payload)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (run, pool_id) DO NOTHING`
	sqlUpdWritten = `UPDATE requests SET written = ?, pid = ? WHERE run = ? AND pool_id = ?`
	sqlUpdDone    = `UPDATE requests SET answered = ?, status = ?, error_code = ?, error = ?, response_size = ?,
		pid = coalesce(?, pid), written = coalesce(written, ?), response_payload = ?
		WHERE run = ? AND pool_id = ?`
	// A Done whose request row is missing (its Received was dropped)
	// still records what it knows.
	sqlInsDone = `INSERT INTO requests (run, pool_id, session, server, method, name, received,
		written, answered, status, error_code, error, response_size, pid, response_payload)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlInsOrphan = `INSERT INTO requests (run, server, original_id, received, answered, status, error, pid)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	sqlSessOpen = `INSERT INTO sessions (run, id, server, client_name, client_version, transport, peer_pid, connected)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (run, id) DO UPDATE SET
		client_name = coalesce(nullif(excluded.client_name, ''), client_name),
		client_version = coalesce(nullif(excluded.client_version, ''), client_version),
		transport = coalesce(nullif(excluded.transport, ''), transport),
		peer_pid = coalesce(excluded.peer_pid, peer_pid)`
	sqlSessClose = `UPDATE sessions SET disconnected = ?, close_reason = ? WHERE run = ? AND id = ?`
	sqlBackStart = `INSERT INTO backends (run, server, session, pid, process_start, command, started, roots, resolved_command)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlBackExit = `UPDATE backends SET exited = ?, exit_code = ?, exit_reason = ?
		WHERE id = (SELECT max(id) FROM backends WHERE run = ? AND pid = ? AND exited IS NULL)`
)

func newWriter(s *Store) (*writer, error) {
	w := &writer{s: s, db: s.wdb, run: s.run, byPoolID: map[uint64]int{}}
	for _, p := range []struct {
		st  **sql.Stmt
		sql string
	}{
		{&w.insReq, sqlInsReq}, {&w.updWritten, sqlUpdWritten}, {&w.updDone, sqlUpdDone}, {&w.insDone, sqlInsDone},
		{&w.insOrphan, sqlInsOrphan}, {&w.sessOpen, sqlSessOpen}, {&w.sessClose, sqlSessClose},
		{&w.backStart, sqlBackStart}, {&w.backExit, sqlBackExit},
	} {
		st, err := w.db.Prepare(p.sql)
		if err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
		*p.st = st
	}
	return w, nil
}

// alwaysReady is a closed channel: a select case on it is always ready.
var alwaysReady = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// loop receives events and writes them in batches: a transaction per
// BatchSize events or per FlushInterval after a batch's first event.
// Between batches, while retention is due (a minute after start, then
// every PruneInterval), it deletes old rows one small step at a time, so
// neither pruning nor a burst holds the write lock long. It ends when Store.Close closes stop, after draining the queue.
func (w *writer) loop() {
	defer close(w.s.done)
	o := w.s.opts
	batch := make([]pool.Event, 0, o.BatchSize)
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	prune := time.NewTicker(o.PruneInterval)
	defer prune.Stop()
	// The first pruning waits for the app to settle.
	firstPrune := time.NewTimer(min(o.PruneInterval, time.Minute))
	defer firstPrune.Stop()
	pruneDue := false
	for {
		var pruneNow <-chan struct{}
		if pruneDue && len(batch) == 0 {
			pruneNow = alwaysReady
		}
		select {
		case e := <-w.s.queue:
			batch = append(batch, e)
			if len(batch) == 1 {
				flush.Reset(o.FlushInterval)
			}
			if len(batch) >= o.BatchSize {
				flush.Stop()
				batch = w.flush(batch)
			}
		case <-flush.C:
			batch = w.flush(batch)
		case <-prune.C:
			pruneDue = true
		case <-firstPrune.C:
			pruneDue = true
		case <-pruneNow:
			more, err := w.pruneStep(time.Now())
			if err != nil {
				w.s.log.Warn("history: prune", "err", err)
			}
			pruneDue = more && err == nil
		case reply := <-w.s.pruneReq:
			batch = w.drain(batch)
			reply <- w.pruneAll(time.Now())
		case reply := <-w.s.flushReq:
			batch = w.drain(batch)
			reply <- w.s.Err()
		case <-w.s.stop:
			flush.Stop()
			w.finish(batch)
			return
		}
	}
}

// drain writes everything queued so far and returns the emptied batch.
func (w *writer) drain(batch []pool.Event) []pool.Event {
	for {
		select {
		case e := <-w.s.queue:
			batch = append(batch, e)
			if len(batch) >= w.s.opts.BatchSize {
				batch = w.flush(batch)
			}
		default:
			return w.flush(batch)
		}
	}
}

// finish writes what is still queued and closes the run.
func (w *writer) finish(batch []pool.Event) {
	w.drain(batch)
	now := time.Now().UnixMicro()
	// A clean stop ends every request, so a row still in flight lost its
	// end (dropped with the queue full and the overflow too): unknown, not
	// abandoned, which would report a hang that never was.
	if _, err := w.db.Exec(`UPDATE requests SET status = 'unknown',
		error = 'the end of this request was not recorded (history dropped events under load)'
		WHERE run = ? AND status = 'in-flight'`, w.run); err != nil {
		w.fail(fmt.Errorf("close the run's requests: %w", err), 0)
	}
	if _, err := w.db.Exec(`UPDATE runs SET ended = ? WHERE id = ?`, now, w.run); err != nil {
		w.fail(fmt.Errorf("end the run: %w", err), 0)
	}
	_, _ = w.db.Exec(`PRAGMA optimize`)
	for _, st := range []*sql.Stmt{w.insReq, w.updWritten, w.updDone, w.insDone, w.insOrphan, w.sessOpen, w.sessClose, w.backStart, w.backExit} {
		st.Close()
	}
}

// flush writes batch in one transaction and returns it emptied. A failed
// batch is lost: its events count as dropped and Err reports why.
func (w *writer) flush(batch []pool.Event) []pool.Event {
	if len(w.s.queue) == 0 {
		batch = append(batch, w.s.takeOverflow()...) // after every start queued before them
	}
	if len(batch) == 0 {
		return batch
	}
	if err := w.write(batch); err != nil {
		w.fail(err, len(batch))
	} else {
		w.s.setErr(nil)
	}
	clear(batch) // let payloads go
	return batch[:0]
}

func (w *writer) fail(err error, lost int) {
	w.s.dropped.Add(uint64(lost))
	err = fmt.Errorf("history %s: %w", w.s.path, err)
	w.s.setErr(err)
	w.s.log.Warn("history write failed", "err", err, "lostEvents", lost)
}

// fold finds each request whose Received is in batch and folds its
// Written and Done events of the same batch into one row.
func (w *writer) fold(batch []pool.Event) {
	clear(w.byPoolID)
	w.rows = w.rows[:0]
	if cap(w.merged) < len(batch) {
		w.merged = make([]bool, len(batch))
	} else {
		w.merged = w.merged[:len(batch)]
		clear(w.merged)
	}
	for i := range batch {
		e := &batch[i]
		switch e.Kind {
		case pool.EventRequestReceived:
			w.byPoolID[e.PoolID] = len(w.rows)
			w.rows = append(w.rows, reqRow{recv: i, done: -1})
		case pool.EventRequestWritten:
			if j, ok := w.byPoolID[e.PoolID]; ok {
				w.rows[j].written, w.rows[j].pid = e.Time, e.PID
				w.merged[i] = true
			}
		case pool.EventRequestDone:
			if j, ok := w.byPoolID[e.PoolID]; ok && w.rows[j].done < 0 {
				w.rows[j].done = i
				w.merged[i] = true
			}
		}
	}
}

func (w *writer) write(batch []pool.Event) error {
	w.fold(batch)
	tx, err := w.db.Begin()
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	insReq, updWritten, updDone := tx.Stmt(w.insReq), tx.Stmt(w.updWritten), tx.Stmt(w.updDone)
	row := 0
	for i := range batch {
		if w.merged[i] {
			continue
		}
		e := &batch[i]
		var err error
		switch e.Kind {
		case pool.EventRequestReceived:
			err = w.insertRequest(insReq, batch, w.rows[row])
			row++
		case pool.EventRequestWritten:
			_, err = updWritten.Exec(e.Time.UnixMicro(), nullInt(e.PID), w.run, e.PoolID)
		case pool.EventRequestDone:
			var written any
			if e.Written {
				written = e.Time.UnixMicro()
			}
			var res sql.Result
			status, payload := cmp.Or(e.Status, pool.StatusFailed), w.payload(e.Payload)
			res, err = updDone.Exec(e.Time.UnixMicro(), status, nullInt(e.ErrCode), nullStr(e.Err), nullInt(e.Size),
				nullInt(e.PID), written, payload, w.run, e.PoolID)
			if n, _ := rowsAffected(res, err); n == 0 && err == nil {
				_, err = tx.Stmt(w.insDone).Exec(w.run, e.PoolID, e.Session, e.Server, e.Method, e.Name, e.Time.UnixMicro(),
					written, e.Time.UnixMicro(), status, nullInt(e.ErrCode), nullStr(e.Err), nullInt(e.Size), nullInt(e.PID), payload)
			}
		case pool.EventOrphan:
			_, err = tx.Stmt(w.insOrphan).Exec(w.run, e.Server, e.OriginalID, e.Time.UnixMicro(), e.Time.UnixMicro(),
				pool.StatusOrphaned, "a response to an id nobody waits for (a late answer to a cancelled or timed-out request?)",
				nullInt(e.PID))
		case pool.EventSessionOpened:
			_, err = tx.Stmt(w.sessOpen).Exec(w.run, e.Session, e.Server, e.ClientName, e.ClientVersion, e.Transport,
				nullInt(e.PID), e.Time.UnixMicro())
		case pool.EventSessionClosed:
			_, err = tx.Stmt(w.sessClose).Exec(e.Time.UnixMicro(), nullStr(e.Err), w.run, e.Session)
		case pool.EventBackendStarted:
			cmdJSON, _ := json.Marshal(RedactArgs(e.Command))
			var roots any
			if len(e.Roots) > 0 {
				b, _ := json.Marshal(e.Roots)
				roots = string(b)
			}
			var resolved any
			if len(e.ResolvedCommand) > 0 {
				b, _ := json.Marshal(RedactArgs(e.ResolvedCommand))
				resolved = string(b)
			}
			_, err = tx.Stmt(w.backStart).Exec(w.run, e.Server, e.Session, e.PID, nullTime(e.ProcessStart),
				string(cmdJSON), e.Time.UnixMicro(), roots, resolved)
		case pool.EventBackendExited:
			_, err = tx.Stmt(w.backExit).Exec(e.Time.UnixMicro(), e.ExitCode, nullStr(e.Err), w.run, e.PID)
		}
		if err != nil {
			return fmt.Errorf("record %s: %w", e.Kind, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// insertRequest inserts one request row with whatever of its life the
// batch holds.
func (w *writer) insertRequest(st *sql.Stmt, batch []pool.Event, r reqRow) error {
	e := &batch[r.recv]
	status := StatusInFlight
	var written, answered, errCode, errMsg, respSize, respPayload any
	pid := r.pid
	if !r.written.IsZero() {
		written = r.written.UnixMicro()
	}
	if r.done >= 0 {
		d := &batch[r.done]
		status = cmp.Or(d.Status, pool.StatusFailed)
		answered = d.Time.UnixMicro()
		errCode, errMsg, respSize = nullInt(d.ErrCode), nullStr(d.Err), nullInt(d.Size)
		respPayload = w.payload(d.Payload)
		if d.PID != 0 {
			pid = d.PID
		}
		if written == nil && d.Written {
			written = answered
		}
	}
	_, err := st.Exec(w.run, e.PoolID, e.Session, e.Server, e.Method, e.Name, e.OriginalID,
		e.Time.UnixMicro(), written, answered, status, errCode, errMsg, nullInt(e.Size), respSize, nullInt(pid),
		w.payload(e.Payload), respPayload)
	return err
}

// payload is what the database keeps of a captured payload: nothing
// unless capture is on, else the redacted prefix within CaptureBytes.
func (w *writer) payload(b []byte) any {
	if !w.s.opts.CapturePayloads || len(b) == 0 {
		return nil
	}
	r := Redact(b)
	if len(r) > w.s.opts.CaptureBytes {
		r = r[:w.s.opts.CaptureBytes]
	}
	return string(r)
}

func nullInt(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func rowsAffected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
