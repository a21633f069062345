package store

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/pool"
)

// writer is the one goroutine that writes the database. It owns the write
// connection and everything below; nothing else touches them.
type writer struct {
	s   *Store
	ctx context.Context
	// conn is the write connection, pinned: transactions are BEGIN and
	// COMMIT statements on it, and the rows go in through its driver
	// connection (raw), without database/sql's per-value conversions.
	conn *sql.Conn
	run  int64

	insOneSafe, update                       *sql.Stmt
	sessOpen, sessClose, backStart, backExit *sql.Stmt
	addName                                  *sql.Stmt
	raw                                      rawInserts

	// lim are the limits pruning keeps to: Open's, then SetLimits'
	// (takeLimits). The writer's alone: nothing else reads them.
	lim limits

	names    map[string]int64 // the names table, while it has room
	newNames []string         // added to names by the batch being written
	// count is how many requests the database holds (MaxRows).
	count int64
	// abandonedKept: the requests earlier runs left unanswered are within
	// MaxAbandoned (pruneStep). Those rows change only when a run starts
	// or the writer attaches to another file, which clears it.
	abandonedKept bool
	// The sessions and children caps (capSessions, capBackends): their
	// counts, and where each goes on from.
	sessCap, backCap capState
	sessAfter        sessionCursor
	backAfter        int64

	// Reused by every batch.
	rows    []reqRow
	events  []pool.Event
	reloads []ConfigReload
	args    []driver.NamedValue

	lastErr, lastErrKept string // errText's last error, and what it kept

	// The write failure the log last said, when, and the events lost
	// since that it has not said (fail).
	failSaid   string
	failSaidAt time.Time
	failUnsaid int

	// checked is when the writer last looked whether its database file
	// is still at its path (checkFile). noDB says why it has no database
	// (conn nil): the file was deleted, replaced or truncated, and could
	// not be recreated yet.
	checked time.Time
	noDB    error
	// walChecked is when the writer last looked whether its
	// write-ahead log can be folded into the database (checkWAL).
	walChecked time.Time
	carried    carried // what the file that left had open, until a new one holds it
	// refused is the file at the path when it could not be made the
	// database (nil: none was there), at refusedAt.
	refused   os.FileInfo
	refusedAt time.Time
	// journalErr is why the journal could not be made again, last said.
	journalErr string
	// rowsFailed: the last failed batch carried requests; only a batch
	// that records requests again clears its error (an events-only
	// batch can succeed on a file whose request rows cannot be written).
	rowsFailed bool
	reindexed  bool // the writer rebuilt the indexes once (repair)
	// unrecorded are the requests answered whose end a failed batch lost,
	// as rows answered with their outcome unknown (unrecordedEnd): their
	// journal slots stay answered, so that a crash records them so, not
	// as abandoned hangs, and the next batch writes them, freeing the
	// slots once it is committed. At most one per journal slot.
	unrecorded []reqRow
}

// rawInserts are the row inserts, prepared on the driver connection dc
// (the same one for as long as conn is pinned) and used only inside
// conn.Raw, while dc is valid.
type rawInserts struct {
	dc        any
	many, one driver.Stmt
}

// insBatch is how many rows one INSERT statement carries: fewer
// statements per batch, and fewer round trips through cgo.
const insBatch = 32

// maxNames bounds the names dictionary; past it, and for texts longer
// than maxNameLen, a row holds its text.
const (
	maxNames   = 4096
	maxNameLen = 64
)

// Status codes of request_log.status (migration 0005); a status without
// a code is stored as its text.
var statusNames = [...]string{StatusInFlight, pool.StatusOK, pool.StatusError, pool.StatusTimeout, pool.StatusCancelled,
	pool.StatusFailed, pool.StatusOrphaned, StatusAbandoned, StatusUnknown}

var statusCodes = func() map[string]int64 {
	m := map[string]int64{}
	for i, s := range statusNames {
		m[s] = int64(i)
	}
	return m
}()

func statusValue(s string) any {
	if c, ok := statusCodes[s]; ok {
		return c
	}
	return s
}

// reqCols are the columns the writer inserts; payloads only with capture on.
func reqCols(capture bool) []string {
	cols := []string{"id", "session", "server", "method", "name", "original_id", "received", "written",
		"answered", "status", "error_code", "error", "request_size", "response_size", "pid"}
	if capture {
		cols = append(cols, "request_payload", "response_payload")
	}
	return cols
}

// insertSQL inserts n rows of run; the run is a constant of the
// statement. It has no conflict clause: any (ON CONFLICT, OR IGNORE)
// makes SQLite's insert about four times as costly, so a statement that
// meets a taken id (a pool id twice) fails, and the writer inserts its
// rows again one by one, each that fails again with insOneSQL.
func insertSQL(run int64, cols []string, n int) string {
	one := "(" + strconv.FormatInt(run, 10) + strings.Repeat(", ?", len(cols)) + ")"
	return "INSERT INTO request_log (run, " + strings.Join(cols, ", ") + ") VALUES " +
		strings.TrimSuffix(strings.Repeat(one+", ", n), ", ")
}

// insOneSQL inserts one row, unless its id is taken.
func insOneSQL(run int64, cols []string) string {
	return insertSQL(run, cols, 1) + " ON CONFLICT (id) DO NOTHING"
}

// updateSQL writes a request's end into its in-flight row. Its parameters
// are numbered as cols, so it takes a row's values as rowArgs makes them;
// the last column (pid, or response_payload) is set, so it takes all of
// them. It is an update, not an upsert: an upsert changes one row whether
// it inserts or updates, and the row count must know which (capRows).
func updateSQL(cols []string) string {
	n := map[string]int{}
	for i, c := range cols {
		n[c] = i + 1
	}
	q := fmt.Sprintf(`UPDATE request_log SET written = ?%d, answered = ?%d, status = ?%d, error_code = ?%d, error = ?%d,
		response_size = ?%d, pid = coalesce(?%d, pid)`,
		n["written"], n["answered"], n["status"], n["error_code"], n["error"], n["response_size"], n["pid"])
	if p, ok := n["response_payload"]; ok {
		q += fmt.Sprintf(", response_payload = ?%d", p)
	}
	return q + fmt.Sprintf(" WHERE id = ?%d", n["id"])
}

const (
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
	// sqlBackCarried ends the row of a carried child in the run that
	// started it: the child is the new run's now, and a row of an
	// earlier run never seen exiting is what leak detection reads as a
	// leak. Its PID is the live child's, so any earlier row with it
	// names a process that is this one or gone.
	sqlBackCarried = `UPDATE backends SET exited = ?, exit_reason = ? WHERE run != ? AND pid = ? AND exited IS NULL`
	sqlAddName     = `INSERT INTO names (text) VALUES (?) ON CONFLICT (text) DO UPDATE SET text = excluded.text RETURNING id`
)

func newWriter(s *Store) (*writer, error) {
	o := s.opts
	w := &writer{s: s, ctx: context.Background(), run: s.run,
		lim: limits{retainDays: o.RetainDays, maxRows: o.MaxRows, maxSessions: o.MaxSessions, maxBackends: o.MaxBackends}}
	if err := w.attach(); err != nil {
		return nil, err
	}
	return w, nil
}

// attach makes the writer write s.wdb: its connection, statements, names
// and row count.
func (w *writer) attach() (err error) {
	s := w.s
	w.names, w.raw = map[string]int64{}, rawInserts{}
	w.abandonedKept = false
	w.sessAfter, w.backAfter = startCursor, 0
	w.sessCap, w.backCap = capState{}, capState{}
	if w.conn, err = s.wdb.Conn(w.ctx); err != nil {
		return fmt.Errorf("the write connection: %w", err)
	}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	cols := reqCols(s.opts.CapturePayloads)
	for _, p := range []struct {
		st  **sql.Stmt
		sql string
	}{
		{&w.insOneSafe, insOneSQL(s.run, cols)}, {&w.update, updateSQL(cols)},
		{&w.sessOpen, sqlSessOpen}, {&w.sessClose, sqlSessClose}, {&w.backStart, sqlBackStart}, {&w.backExit, sqlBackExit},
		{&w.addName, sqlAddName},
	} {
		st, err := w.conn.PrepareContext(w.ctx, p.sql)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		*p.st = st
	}
	rows, err := w.conn.QueryContext(w.ctx, `SELECT id, text FROM names ORDER BY id LIMIT ?`, maxNames)
	if err != nil {
		return fmt.Errorf("read names: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var text string
		if err := rows.Scan(&id, &text); err != nil {
			return fmt.Errorf("read names: %w", err)
		}
		w.names[text] = id
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read names: %w", err)
	}
	rows.Close()
	if err := w.conn.QueryRowContext(w.ctx, `SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM backends)`).
		Scan(&w.sessCap.count, &w.backCap.count); err != nil {
		return fmt.Errorf("count the sessions and children: %w", err)
	}
	return w.recount()
}

// close releases the statements and the pinned connection: the writer
// has none until it attaches again.
func (w *writer) close() {
	if w.conn == nil {
		return
	}
	for _, st := range []*sql.Stmt{w.insOneSafe, w.update, w.sessOpen, w.sessClose, w.backStart, w.backExit, w.addName} {
		if st != nil {
			st.Close()
		}
	}
	_ = w.conn.Raw(func(any) error {
		for _, st := range []driver.Stmt{w.raw.many, w.raw.one} {
			if st != nil {
				st.Close()
			}
		}
		return nil
	})
	w.conn.Close()
	w.conn = nil
	w.insOneSafe, w.update, w.sessOpen, w.sessClose, w.backStart, w.backExit, w.addName = nil, nil, nil, nil, nil, nil, nil
	w.raw = rawInserts{}
}

// exec runs q on the write connection.
func (w *writer) exec(q string, args ...any) (sql.Result, error) {
	if w.conn == nil {
		return nil, w.noDB
	}
	return w.conn.ExecContext(w.ctx, q, args...)
}

// recount reads how many requests the database holds into w.count.
func (w *writer) recount() error {
	if w.conn == nil {
		return w.noDB
	}
	if err := w.conn.QueryRowContext(w.ctx, `SELECT count(*) FROM request_log`).Scan(&w.count); err != nil {
		return fmt.Errorf("count the requests: %w", err)
	}
	return nil
}

// alwaysReady is a closed channel: a select case on it is always ready.
var alwaysReady = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// loop writes batches: FlushInterval after Record hands an idle writer
// work, or as soon as BatchSize rows and events wait; between batches,
// while there is work, it wakes every FlushInterval, and it sleeps
// without a timer when there is none. While requests are in flight (as
// of its last batch: a request's receipt and its end each bring one) it
// records its run's heartbeat every HeartbeatInterval; while none is, it
// does not wake for it. While retention is due (a minute after start,
// then every PruneInterval, and once a batch takes the sessions or the
// children over their caps) it deletes old rows one small step at a time:
// back to back while it has no work, else one step after each batch
// (under steady load it always has), so neither pruning nor a burst holds
// the write lock long, and neither waits for the other to end. At a
// batch, a heartbeat or a retention tick, at most every
// fileCheckInterval, and when Err finds the file gone, it makes sure its
// files are still at their paths (checkFile). It ends when Store.Close
// closes stop, after writing what waits. Open runs it at lower priority
// (runAtLowerPriority).
func (w *writer) loop() {
	defer close(w.s.done)
	o := w.s.opts
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	timing := false // flush is set
	prune := time.NewTicker(o.PruneInterval)
	defer prune.Stop()
	// The first pruning waits for the app to settle.
	firstPrune := time.NewTimer(min(o.PruneInterval, time.Minute))
	defer firstPrune.Stop()
	pruneDue := false
	batched := true // a batch was written since the last pruning step
	beat := time.NewTimer(time.Hour)
	beat.Stop()
	beating := false // beat is set
	beatIfInFlight := func() {
		inFlight := w.s.rec.inFlight()
		switch {
		case inFlight && !beating:
			beat.Reset(o.HeartbeatInterval)
		case !inFlight && beating:
			beat.Stop()
		}
		beating = inFlight
	}
	batch := func() {
		w.batch(time.Now())
		batched = true
		if w.overCaps() { // sessions or children over their caps: prune them now
			pruneDue = true
		}
		timing = w.s.rec.rearm()
		if timing {
			flush.Reset(o.FlushInterval)
		} else {
			flush.Stop()
		}
		beatIfInFlight()
	}
	for {
		var pruneNow <-chan struct{}
		if pruneDue && (!timing || batched) {
			pruneNow = alwaysReady
		}
		select {
		case <-w.s.wake:
			if !timing {
				timing = true
				flush.Reset(o.FlushInterval)
			}
		case <-w.s.full:
			batch()
		case <-flush.C:
			batch()
		case <-beat.C:
			beating = false
			w.heartbeat(time.Now())
			beatIfInFlight()
		case <-w.s.recheck:
			w.checkFile(time.Now(), true)
		case <-w.s.limitsSet:
			if w.takeLimits() {
				pruneDue = true // the new limits may leave rows to prune
			}
		case <-prune.C:
			w.checkFile(time.Now(), false)
			pruneDue = true
		case <-firstPrune.C:
			pruneDue = true
		case <-pruneNow:
			batched = false
			more, err := w.pruneStep(time.Now())
			if err == nil && !more {
				err = w.recount() // once a pass: a check; the count is exact (writeRows) unless the file was edited
			}
			if err != nil {
				w.s.log.Warn("history: prune", "err", err)
			}
			pruneDue = more && err == nil
		case reply := <-w.s.pruneReq:
			batch()
			reply <- w.pruneAll(time.Now())
		case reply := <-w.s.flushReq:
			batch()
			reply <- w.s.Err()
		case req := <-w.s.goneReq:
			n, err := w.closeGone(req)
			req.reply <- goneReply{closed: n, err: err}
		case <-w.s.stop:
			flush.Stop()
			beat.Stop()
			w.finish()
			return
		}
	}
}

// takeLimits makes the limits SetLimits last set the ones pruning keeps
// to. Rows over a lower MaxRows go as batches come (capRows), a step at
// a time; a lower cap of the sessions or the children, or a shorter
// retention, is pruning due now. It says whether the limits changed.
func (w *writer) takeLimits() (changed bool) {
	l := w.s.newLimits.Load()
	if l == nil || *l == w.lim {
		return false
	}
	w.s.log.Info("history: limits changed", "path", w.s.path, "retainDays", l.retainDays, "maxRows", l.maxRows,
		"maxSessions", l.maxSessions, "maxBackends", l.maxBackends)
	w.lim = *l
	return true
}

// heartbeat records that the run is alive at now. A failure is logged
// and not counted as a drop: the next heartbeat tries again.
func (w *writer) heartbeat(now time.Time) {
	w.checkFile(now, false)
	w.markAlive(now)
	if _, err := w.exec(`UPDATE runs SET alive = ? WHERE id = ?`, now.UnixMicro(), w.run); err != nil {
		w.s.log.Warn("history: record the run's heartbeat", "path", w.s.path, "err", err)
	}
}

// batch writes what waits, and the in-flight rows due at now, in one
// transaction. A failed batch is lost: its rows and events count as
// dropped and Err reports why; but an answered request it carried is
// recorded by the next batch as answered, its outcome unknown (write).
func (w *writer) batch(now time.Time) {
	w.checkFile(now, false)
	w.s.rec.take(w, now.Add(-w.s.opts.InFlightAfter))
	w.write(true)
	w.checkWAL(now)
}

// walCheckInterval is how often, at most, a batch checks the write-ahead
// log (checkWAL); walStuckBytes is the size past which a log a checkpoint
// cannot fold in is reported. SQLite folds the log in every 1000 pages
// (4 MiB), so a healthy log stays far below it. Vars for tests.
var (
	walCheckInterval       = 10 * time.Second
	walStuckBytes    int64 = 64 << 20
)

// checkWAL checkpoints the write-ahead log as far as readers let it and
// reports, as the store's error (Err), a log that has grown past
// walStuckBytes with pages the checkpoint could not fold into the
// database: a program that holds a read transaction on the file open
// (a database browser left in one), or a database file that cannot be
// written. Such a log grows with every batch, unseen: its rows are
// recorded, but the disk fills. The report ends once the log is folded
// in.
func (w *writer) checkWAL(now time.Time) {
	if w.conn == nil || now.Sub(w.walChecked) < walCheckInterval {
		return
	}
	w.walChecked = now
	var busy, frames, folded int
	if err := w.conn.QueryRowContext(w.ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &folded); err != nil {
		return // the batches' own errors say what is wrong
	}
	var stuck error
	if fi, err := os.Stat(w.s.path + "-wal"); err == nil && fi.Size() > walStuckBytes && folded < frames {
		stuck = fmt.Errorf("history %s: its write-ahead log (%s-wal) is %d MiB and a checkpoint folded %d of its %d pages into the database: "+
			"another program may hold a read transaction open on it (a database browser), or the database file cannot be written",
			w.s.path, filepath.Base(w.s.path), fi.Size()>>20, folded, frames)
	}
	if was := w.s.setWALErr(stuck); stuck != nil && was == nil {
		w.s.log.Warn("history: the write-ahead log is not folded into the database", "err", stuck)
	} else if stuck == nil && was != nil {
		w.s.log.Info("history: the write-ahead log is folded into the database again", "path", w.s.path)
	}
}

// write writes the rows and events taken, with the ends earlier failed
// batches lost (unrecorded), and frees the journal slots of the requests
// whose end it recorded. When it fails, the answered requests whose end
// it carried keep their slots, answered (a crash records them as
// answered, their outcome unknown, not as hangs), and with keep set
// they wait in unrecorded for the next batch; the rest of the batch is
// lost.
func (w *writer) write(keep bool) bool {
	taken := len(w.rows) + len(w.events) + len(w.reloads)
	if taken+len(w.unrecorded) == 0 {
		return true
	}
	w.rows = append(w.rows, w.unrecorded...)
	clear(w.unrecorded)
	w.unrecorded = w.unrecorded[:0]
	err := w.writeTx()
	if err != nil && isCorrupt(err) {
		err = w.repair(err)
	}
	if err != nil {
		w.fail(err, taken)
		w.rowsFailed = w.rowsFailed || len(w.rows) > 0
	} else if len(w.rows) > 0 || !w.rowsFailed {
		w.s.setErr(nil)
		w.wrote()
		w.rowsFailed = false
	}
	switch {
	case err == nil:
		w.s.rec.committed(w.rows)
	case keep:
		w.keepUnrecorded()
	}
	clear(w.rows) // let texts and payloads go
	clear(w.events)
	w.rows, w.events, w.reloads = w.rows[:0], w.events[:0], w.reloads[:0]
	return err == nil
}

// keepUnrecorded keeps, of the rows of a failed batch, the ends of the
// requests that hold a journal slot (answered), for the next batch.
func (w *writer) keepUnrecorded() {
	for i := range w.rows {
		if w.rows[i].slot != 0 {
			w.unrecorded = append(w.unrecorded, unrecordedEnd(&w.rows[i]))
		}
	}
}

// unrecordedEnd is the row of an answered request whose end was lost:
// answered, its outcome unknown. It updates the request's in-flight row,
// or is inserted when there is none; it keeps no payload.
func unrecordedEnd(r *reqRow) reqRow {
	return reqRow{id: r.id, poolID: r.poolID, session: r.session, server: r.server, method: r.method, name: r.name,
		originalID: r.originalID, received: r.received, written: r.written, answered: r.answered,
		status: StatusUnknown, err: lostEndError, reqSize: r.reqSize, respSize: r.respSize, pid: r.pid,
		exists: true, slot: r.slot}
}

// finish writes what waits, ends the requests still in flight (a clean
// stop ends every request, so one still open lost its end: unknown, not
// abandoned, which would report a hang that never was), ends the run and
// empties the journal. It waits for another program's lock on the
// database (a DB browser's open transaction) busyTimeout in all, not at
// each statement: a stop must not hang on it. A run it cannot mark ended
// is marked stopped in the journal, so that the next start ends it
// rather than blame a crash.
func (w *writer) finish() {
	defer w.close()
	if w.s.killed.Load() {
		return // as a killed process: nothing more
	}
	w.checkFile(time.Now(), true) // the last writes must go into the file at the path
	deadline := time.Now().Add(busyTimeout)
	w.s.rec.take(w, time.Time{}) // no in-flight rows: takeOpen ends every open request
	w.rows = w.s.rec.takeOpen(w.rows)
	w.waitUntil(deadline)
	ok := w.write(false)
	w.waitUntil(deadline)
	if _, err := w.exec(`UPDATE request_log SET status = ?, error = ? WHERE run = ? AND status = 0`,
		statusCodes[StatusUnknown], unknownError, w.run); err != nil {
		w.fail(fmt.Errorf("close the run's requests: %w", err), 0)
		ok = false
	}
	w.waitUntil(deadline)
	stopped := time.Now()
	if _, err := w.exec(`UPDATE runs SET ended = ? WHERE id = ?`, stopped.UnixMicro(), w.run); err != nil {
		w.fail(fmt.Errorf("end the run: %w", err), 0)
		ok = false
		if merr := w.markStopped(stopped); merr != nil {
			w.s.log.Error("history: this run could not be marked as stopped (another program holds the database locked, or it fails): the next start will report it as crashed",
				"path", w.s.path, "err", err, "journal", merr)
		} else {
			w.s.log.Warn("history: this run could not be marked as stopped (another program holds the database locked, or it fails): its journal records the clean stop for the next start",
				"path", w.s.path, "err", err)
		}
	}
	if ok { // else the journal is the record of what was in flight
		w.s.rec.mu.Lock()
		w.s.rec.journal.reset(w.run)
		w.s.rec.mu.Unlock()
	}
	if w.waitUntil(deadline) {
		_, _ = w.exec(`PRAGMA optimize`)
	}
}

// waitUntil makes the next statements wait for a lock at most until
// deadline, and says whether any time is left.
func (w *writer) waitUntil(deadline time.Time) bool {
	left := max(time.Until(deadline), 0)
	_, _ = w.exec(fmt.Sprintf("PRAGMA busy_timeout = %d", left.Milliseconds()))
	return left > 0
}

// markAlive records in the journal that this run was alive at now,
// whether or not the database takes the heartbeat that follows.
func (w *writer) markAlive(now time.Time) {
	r := &w.s.rec
	r.mu.Lock()
	r.journal.markAlive(now.UnixMicro())
	r.mu.Unlock()
}

// markStopped records in the journal that this run stopped cleanly at.
func (w *writer) markStopped(at time.Time) error {
	r := &w.s.rec
	r.mu.Lock()
	mapped := r.journal.markStopped(at.UnixMicro())
	r.mu.Unlock()
	if mapped {
		return nil
	}
	return markStoppedFile(w.s.path, w.run, at.UnixMicro())
}

// repair answers SQLite finding the file damaged (cause) while writing a
// batch. The common damage, an index entry that no longer matches its
// row, passes quick_check at open and fails every delete that reaches it
// (the row cap's, each batch): rebuilding the indexes, once a run, mends
// it, and the batch is written again. Damage it does not mend marks the
// file to be moved aside at the next start (damagedSuffix).
func (w *writer) repair(cause error) error {
	if w.reindexed || w.conn == nil {
		return w.markDamaged(cause)
	}
	w.reindexed = true
	if _, err := w.exec("REINDEX"); err != nil {
		return w.markDamaged(fmt.Errorf("%w; rebuild the indexes: %w", cause, err))
	}
	if err := w.writeTx(); err != nil {
		if isCorrupt(err) {
			return w.markDamaged(fmt.Errorf("after rebuilding the indexes: %w", err))
		}
		return err
	}
	w.s.log.Warn("history: the database was damaged: rebuilt its indexes, and recording goes on",
		"path", w.s.path, "err", cause)
	w.s.errMu.Lock()
	w.s.repaired = fmt.Errorf("history %s: rebuilt the indexes at %s after: %w", w.s.path,
		time.Now().Format(time.RFC3339), cause)
	w.s.errMu.Unlock()
	return nil
}

// markDamaged leaves the marker that makes the next start move the file
// aside, and returns err saying so.
func (w *writer) markDamaged(err error) error {
	if merr := os.WriteFile(w.s.path+damagedSuffix, nil, 0o600); merr != nil {
		return fmt.Errorf("%w (the file could not be marked to be moved aside: %v)", err, merr)
	}
	return fmt.Errorf("%w (it will be moved aside at the next start)", err)
}

// fail records a failed write: its lost events count as dropped, and
// Err says why. The log says it when the failure is new, and again at
// most every failRepeat while it lasts, with the events lost since: a
// file the writer cannot use (another history's) fails every batch
// alike, one every FlushInterval.
func (w *writer) fail(err error, lost int) {
	w.s.dropped.Add(uint64(lost))
	err = fmt.Errorf("history %s: %w", w.s.path, err)
	w.s.setErr(err)
	w.failUnsaid += lost
	now := time.Now()
	if msg := err.Error(); msg != w.failSaid || now.Sub(w.failSaidAt) >= failRepeat {
		w.s.log.Warn("history write failed", "err", err, "lostEvents", w.failUnsaid)
		w.failSaid, w.failSaidAt, w.failUnsaid = msg, now, 0
	}
}

// failRepeat is how often, at most, the log says again a write failure
// that has not changed.
const failRepeat = time.Minute

// wrote says the last batch was written: a failure after it is new.
func (w *writer) wrote() { w.failSaid = "" }

func (w *writer) writeTx() (err error) {
	if _, err := w.exec("BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_, _ = w.exec("ROLLBACK")
			for _, n := range w.newNames { // not in the database after all
				delete(w.names, n)
			}
		}
		w.newNames = w.newNames[:0]
	}()
	added, err := w.writeRows()
	if err != nil {
		return err
	}
	for i := range w.events {
		if err := w.writeEvent(&w.events[i]); err != nil {
			return fmt.Errorf("record %s: %w", w.events[i].Kind, err)
		}
	}
	for _, c := range w.reloads {
		if _, err := w.exec(`INSERT INTO config_reloads (run, at, changes, error) VALUES (?, ?, ?, ?)`,
			w.run, c.At.UnixMicro(), c.Changes, nullStr(w.errText(c.Err))); err != nil {
			return fmt.Errorf("record a config reload: %w", err)
		}
	}
	count, err := w.capRows(w.count + added)
	if err != nil {
		return err
	}
	if _, err := w.exec("COMMIT"); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	w.count = count
	return nil
}

// writeRows inserts the new rows, insBatch to a statement, then updates
// those that may exist already (one's in-flight row may be in this very
// batch), inserting each that does not (its in-flight row was lost with a
// failed batch, or pruned). It returns how many rows it added: exactly,
// as capRows deletes as many.
func (w *writer) writeRows() (added int64, err error) {
	// The values first: a new name is added to names on the way, which
	// cannot run inside Raw.
	w.args = w.args[:0]
	for i := range w.rows {
		if !w.rows[i].exists {
			if w.args, err = w.rowArgs(w.args, &w.rows[i]); err != nil {
				return 0, err
			}
		}
	}
	cols := reqCols(w.s.opts.CapturePayloads)
	per := len(cols)
	var retry [][]driver.NamedValue // the rows of statements that met a taken id
	err = w.conn.Raw(func(dc any) error {
		if err := w.raw.prepare(dc, w.run, cols); err != nil {
			return err
		}
		exec := func(st driver.Stmt, args []driver.NamedValue) error {
			res, err := st.(driver.StmtExecContext).ExecContext(w.ctx, args)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			added += n
			return nil
		}
		all := w.args
		for len(all) >= insBatch*per {
			if exec(w.raw.many, ordinals(all[:insBatch*per])) != nil {
				// SQLite undid the statement: its rows one by one.
				for i := 0; i < insBatch*per; i += per {
					retry = append(retry, all[i:i+per])
				}
			}
			all = all[insBatch*per:]
		}
		for ; len(all) > 0; all = all[per:] {
			if exec(w.raw.one, ordinals(all[:per])) != nil {
				retry = append(retry, all[:per])
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("record requests: %w", err)
	}
	for _, row := range retry {
		if err := w.execCounted(w.insOneSafe, row, &added); err != nil {
			return 0, err
		}
	}
	clear(w.args)
	for i := range w.rows {
		r := &w.rows[i]
		if !r.exists {
			continue
		}
		args, err := w.rowArgs(nil, r)
		if err != nil {
			return 0, err
		}
		var updated int64
		if err := w.execCounted(w.update, args, &updated); err != nil {
			return 0, err
		}
		if updated == 0 {
			if err := w.execCounted(w.insOneSafe, args, &added); err != nil {
				return 0, err
			}
		}
	}
	return added, nil
}

// execCounted runs st with one row's values and adds the rows it changed.
func (w *writer) execCounted(st *sql.Stmt, row []driver.NamedValue, added *int64) error {
	args := make([]any, len(row))
	for i, v := range row {
		args[i] = v.Value
	}
	res, err := st.ExecContext(w.ctx, args...)
	if err != nil {
		return fmt.Errorf("record a request: %w", err)
	}
	n, _ := res.RowsAffected()
	*added += n
	return nil
}

// ordinals numbers a statement's values from 1, in place.
func ordinals(args []driver.NamedValue) []driver.NamedValue {
	for i := range args {
		args[i].Ordinal = i + 1
	}
	return args
}

// prepare makes the inserts on dc, once per driver connection.
func (r *rawInserts) prepare(dc any, run int64, cols []string) error {
	if r.dc == dc {
		return nil
	}
	p, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return fmt.Errorf("the sqlite3 driver cannot prepare in a context")
	}
	ctx := context.Background()
	var err error
	if r.many, err = p.PrepareContext(ctx, insertSQL(run, cols, insBatch)); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	if r.one, err = p.PrepareContext(ctx, insertSQL(run, cols, 1)); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	r.dc = dc
	return nil
}

// rowArgs appends r's values in reqCols order, as driver values.
func (w *writer) rowArgs(args []driver.NamedValue, r *reqRow) ([]driver.NamedValue, error) {
	server, err := w.name(r.server)
	if err != nil {
		return nil, err
	}
	method, err := w.name(methodText(r.method))
	if err != nil {
		return nil, err
	}
	name, err := w.name(RedactName(r.name))
	if err != nil {
		return nil, err
	}
	id := idValue(cut(r.originalID, maxIDBytes, len(r.originalID)))
	for _, v := range [...]any{r.id, sessionValue(r.session), server, method, name, id, r.received,
		since(r.written, r.received), since(r.answered, r.received), statusValue(r.status),
		nullInt(r.errCode), nullStr(w.errText(r.err)), nullInt(r.reqSize), nullInt(r.respSize), nullInt(r.pid)} {
		args = append(args, driver.NamedValue{Value: v})
	}
	if w.s.opts.CapturePayloads {
		args = append(args, driver.NamedValue{Value: w.payload(r.reqPayload)}, driver.NamedValue{Value: w.payload(r.respPayload)})
	}
	return args, nil
}

// since is t as microseconds after from, or NULL when t did not happen.
func since(t, from int64) any {
	if t == 0 {
		return nil
	}
	return t - from
}

// name is what a row stores for a server, method or tool name: its id in
// names, adding it while the dictionary has room, else the text; 0 for
// none.
func (w *writer) name(text string) (any, error) {
	if text == "" {
		return int64(0), nil
	}
	if id, ok := w.names[text]; ok {
		return id, nil
	}
	if len(w.names) >= maxNames || len(text) > maxNameLen {
		return text, nil
	}
	var id int64
	if err := w.addName.QueryRowContext(w.ctx, text).Scan(&id); err != nil {
		return nil, fmt.Errorf("record the name %q: %w", text, err)
	}
	w.names[text] = id
	w.newNames = append(w.newNames, text)
	return id, nil
}

func (w *writer) writeEvent(e *pool.Event) error {
	var err error
	switch e.Kind {
	case pool.EventSessionOpened:
		_, err = w.sessOpen.ExecContext(w.ctx, w.run, e.Session, e.Server, cut(e.ClientName, maxClientBytes, len(e.ClientName)),
			cut(e.ClientVersion, maxClientBytes, len(e.ClientVersion)), cut(e.Transport, maxClientBytes, len(e.Transport)),
			nullInt(e.PID), e.Time.UnixMicro())
		w.sessCap.count++
	case pool.EventSessionClosed:
		_, err = w.sessClose.ExecContext(w.ctx, e.Time.UnixMicro(), nullStr(w.errText(e.Err)), w.run, e.Session)
	case pool.EventBackendStarted:
		cmdJSON, _ := json.Marshal(RedactArgs(e.Command))
		var resolved any
		if len(e.ResolvedCommand) > 0 {
			b, _ := json.Marshal(RedactArgs(e.ResolvedCommand))
			resolved = string(b)
		}
		_, err = w.backStart.ExecContext(w.ctx, w.run, e.Server, e.Session, e.PID, nullTime(e.ProcessStart),
			string(cmdJSON), e.Time.UnixMicro(), rootsText(e.Roots), resolved)
		w.backCap.count++
		if err == nil && e.Carried {
			_, err = w.conn.ExecContext(w.ctx, sqlBackCarried, e.Time.UnixMicro(),
				fmt.Sprintf("carried over to run %d by an upgrade", w.run), w.run, e.PID)
		}
	case pool.EventBackendExited:
		_, err = w.backExit.ExecContext(w.ctx, e.Time.UnixMicro(), e.ExitCode, nullStr(w.errText(e.Err)), w.run, e.PID)
	}
	return err
}

// What a row keeps, capture on or off, of the texts a client or a child
// chooses: a client's request id, and a request's error (its child's
// message, which may echo the whole request) or any other error text (why
// a session or a child ended, why a config reload was not applied). Past
// these bounds a text is cut, with a mark of its length (cut).
const (
	maxIDBytes    = 256 // more than the journal's room (journalTexts): an id it keeps whole, a row does too
	maxErrorBytes = 1024
)

// What a row keeps of the other texts a client chooses, cut as above: the
// name and version its initialize gave and its transport, a request's
// method and name (a tool's, a prompt's, or a resource's URI, which may be
// a deep path), and the roots it declared that a child serves, as JSON:
// each root within maxRootBytes, and as many as fit (rootsText).
const (
	maxClientBytes = 256
	maxMethodBytes = 256
	maxNameBytes   = 1024
	maxRootBytes   = maxErrorBytes
	maxRootsBytes  = 4096
)

// cut is s, whole bytes long before any redaction, within max bytes: s if
// it fits, else its longest prefix that ends at a character and leaves
// room for a mark saying it was cut. The mark makes a cut id invalid JSON
// (Unanswered leaves it out).
func cut(s string, max, whole int) string {
	if len(s) <= max && whole <= max {
		return s
	}
	mark := fmt.Sprintf("… [cut from %d bytes]", whole)
	return prefix(s, max-len(mark)) + mark
}

// prefix is s's longest prefix of at most n bytes that ends at a
// character (for UTF-8; other bytes are cut anywhere).
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for i := 0; i < utf8.UTFMax && n > 0 && !utf8.RuneStart(s[n]); i++ {
		n--
	}
	return s[:n]
}

// errText is what a row keeps of an error text (a request's error, a
// session's or a child's end, a config reload's failure): redacted as a
// payload is and cut to maxErrorBytes (redactedCut). The last one is
// remembered: a failing server tends to repeat itself.
func (w *writer) errText(s string) string {
	if s == "" {
		return ""
	}
	if s == w.lastErr {
		return w.lastErrKept
	}
	kept := redactedCut(s, maxErrorBytes)
	w.lastErr, w.lastErrKept = s, kept
	return kept
}

// redactedCut is s redacted (RedactText) and cut to max bytes. Only the
// part that can be kept is redacted, told it was cut when it was: a token
// at its end may be the start of a credential.
func redactedCut(s string, max int) string {
	return cut(redactText(prefix(s, max), len(s) > max), max, len(s))
}

// methodText is what a row keeps of a request's method, and so what a
// filter by method looks for.
func methodText(m string) string { return cut(m, maxMethodBytes, len(m)) }

// rootsText is what a child's row keeps of the roots it serves, NULL for
// none: a JSON array of them, each redacted (a URI may carry a password
// or a token) and cut to maxRootBytes, as many whole as fit in
// maxRootsBytes, in order; when some do not, its last element says how
// many more there were.
func rootsText(roots []string) any {
	if len(roots) == 0 {
		return nil
	}
	var kept [][]byte
	size := 1 // "[", and "," or "]" after each
	for _, r := range roots {
		b, _ := json.Marshal(RedactRoot(r))
		if size+len(b)+1 <= maxRootsBytes {
			kept, size = append(kept, b), size+len(b)+1
			continue
		}
		for { // the mark in place of as many of the last as it takes
			mark, _ := json.Marshal(fmt.Sprintf("… and %d more", len(roots)-len(kept)))
			if size+len(mark)+1 <= maxRootsBytes || len(kept) == 0 {
				kept = append(kept, mark)
				break
			}
			size -= len(kept[len(kept)-1]) + 1
			kept = kept[:len(kept)-1]
		}
		break
	}
	return "[" + string(bytes.Join(kept, []byte(","))) + "]"
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
	return int64(n) // a driver value
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

// lostEndError is the error of a request answered whose end a failed
// batch lost (the database locked by another program past busyTimeout,
// or the disk full): the next batch records it answered, its outcome
// unknown.
const lostEndError = "answered, but its outcome was not recorded: a write of the history database failed (locked by another program, or the disk full?)"
