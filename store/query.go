package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// Request is one recorded request, as the CLI and the UI read it. Times
// that did not happen are zero.
type Request struct {
	// ID is the row id: within a run, requests in the order they arrived,
	// its orphaned responses after them; TimelineOf finds a row by it.
	ID         int64
	Run        int64
	PoolID     uint64 // 0 for an orphaned response
	Session    string
	Server     string
	Method     string
	Name       string // tool, prompt or resource
	OriginalID string // the client's id, as its JSON bytes
	// Status is pool.StatusOK and friends, StatusInFlight or
	// StatusAbandoned. A request in flight in a run that is no longer live
	// reads as abandoned even before the next start marks it.
	Status   string
	ErrCode  int
	Err      string
	Received time.Time
	Written  time.Time // fully written to the child's stdin
	Answered time.Time
	PID      int // the child that had it

	RequestSize, ResponseSize       int
	RequestPayload, ResponsePayload string // redacted prefixes, when captured

	// Abandoned says the request will never be answered: its run ended
	// (or crashed) with it in flight.
	Abandoned bool
	// RunEnded is, for an abandoned or unknown request (endsWithRun),
	// when its run stopped or, for one that crashed, its last recorded
	// moment (its last event or heartbeat, whichever is later): where the
	// request stopped waiting. Zero when not known (the run was pruned).
	RunEnded time.Time
}

// WrittenToChild says whether the request's bytes reached the child: if
// so, a side-effecting call may have executed.
func (r Request) WrittenToChild() bool { return !r.Written.IsZero() }

// Age is how long the request waited for an answer: until its answer;
// for an abandoned or unknown one until its run ended (it does not age in
// a run that is gone); else until now.
func (r Request) Age(now time.Time) time.Duration {
	if d, ok := r.Duration(); ok {
		return d
	}
	if !r.endsWithRun() {
		return now.Sub(r.Received)
	}
	// Its own moments are the least the run lived (the journal can know
	// a request the database's last moment predates).
	end := r.RunEnded
	for _, t := range []time.Time{r.Received, r.Written} {
		if t.After(end) {
			end = t
		}
	}
	return end.Sub(r.Received)
}

// endsWithRun says whether the request stopped waiting when its run
// ended: abandoned (a crash, or a stop with it in flight), or unknown (a
// clean stop lost its end).
func (r Request) endsWithRun() bool { return r.Abandoned || r.Status == StatusUnknown }

// Duration is how long the request took, if it was answered.
func (r Request) Duration() (time.Duration, bool) {
	if r.Answered.IsZero() {
		return 0, false
	}
	return r.Answered.Sub(r.Received), true
}

// Statuses are the statuses a recorded request can have, which
// Filter.Status selects by: the pool's, then the store's own.
func Statuses() []string {
	return []string{pool.StatusOK, pool.StatusError, pool.StatusTimeout, pool.StatusCancelled, pool.StatusFailed,
		pool.StatusOrphaned, StatusInFlight, StatusAbandoned, StatusUnknown}
}

// Filter selects requests. Zero fields do not filter.
type Filter struct {
	Server string
	// Session is a session id, which each run numbers from s1 again: Run
	// tells them apart.
	Session string
	Status  string // one of Statuses
	Method  string
	Run     int64
	// Since keeps requests received at or after it.
	Since time.Time
	// After pages on: only the requests listed after it (the last
	// request of the page before: Request.Cursor). Zero does not filter.
	After Cursor
	// Limit is the page size. Default 100.
	Limit int
}

// Cursor is a request's place in the listing of Requests, which is newest
// first by time received, then by row id.
type Cursor struct {
	Received time.Time
	ID       int64
}

// Cursor is r's place in the listing of Requests: Filter.After reads the
// page after it.
func (r Request) Cursor() Cursor { return Cursor{Received: r.Received, ID: r.ID} }

// Session is one recorded client session.
type Session struct {
	Run           int64
	ID            string
	Server        string
	ClientName    string
	ClientVersion string
	Transport     string
	PeerPID       int
	Connected     time.Time
	Disconnected  time.Time
	CloseReason   string
}

// Backend is one recorded child process.
type Backend struct {
	Run          int64
	Server       string
	Session      string // owning session, for share: session
	PID          int
	ProcessStart time.Time
	Command      []string
	// ResolvedCommand is what the child was started as when its command
	// was resolved (npx -> node); nil when it ran Command.
	ResolvedCommand []string
	// Roots is the roots partition the child served; nil for none.
	Roots      []string
	Started    time.Time
	Exited     time.Time
	ExitCode   int
	ExitReason string
}

// Run is one start of the app.
type Run struct {
	ID      int64
	Started time.Time
	Ended   time.Time // zero while running or after a crash
	PID     int
	Version string
	Crashed bool
	// Alive is its last heartbeat (Options.HeartbeatInterval, while it
	// had requests in flight); zero if none.
	Alive time.Time
}

// Step is one moment in a request's life.
type Step struct {
	At   time.Time // zero when the moment is a fact without a time
	What string
}

// Timeline is one request with the session and the child it met: what
// the UI shows for a hung request.
type Timeline struct {
	Request Request
	Session *Session // nil if not recorded
	Backend *Backend // the child it was written to; nil if none
	Run     Run
	// Answers is, for an orphaned response, the request of its run whose
	// pool id the child answered, late (it had ended); nil if none is
	// recorded.
	Answers *Request
	Steps   []Step // in time order; steps without a time last
}

// ChildRecord is a child an earlier run started and never saw exit: a
// candidate leaked backend (leaks.ChildRecord is this type).
type ChildRecord struct {
	PID     int      `json:"pid"`
	Server  string   `json:"server"`
	Command []string `json:"command"`
	// StartedAt is the process start time the pool recorded.
	StartedAt time.Time `json:"startedAt"`
	Run       string    `json:"run"`
}

const requestCols = `id, run, pool_id, session, server, method, name, original_id, received, written,
	answered, status, error_code, error, request_size, response_size, pid, request_payload, response_payload`

type scanner interface{ Scan(dest ...any) error }

// rowsQuerier is the read pool, or the writer's connection.
type rowsQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryAll runs q on db (the read pool, or the writer's connection) and
// scans every row with scan; what names the query in errors. The rows
// are closed before it returns, so a caller may query again for each.
func queryAll[T any](ctx context.Context, db rowsQuerier, what string, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("history: %s: %w", what, err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("history: %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("history: %s: %w", what, err)
	}
	return out, nil
}

func scanRequest(sc scanner, live int64) (Request, error) {
	var r Request
	var poolID, written, answered, errCode, reqSize, respSize, pid sql.NullInt64
	var received int64
	var errMsg, reqPayload, respPayload sql.NullString
	if err := sc.Scan(&r.ID, &r.Run, &poolID, &r.Session, &r.Server, &r.Method, &r.Name, &r.OriginalID,
		&received, &written, &answered, &r.Status, &errCode, &errMsg, &reqSize, &respSize, &pid,
		&reqPayload, &respPayload); err != nil {
		return r, err
	}
	r.PoolID = uint64(poolID.Int64)
	r.Received = micros(received)
	r.Written = nullMicros(written)
	r.Answered = nullMicros(answered)
	r.ErrCode, r.Err = int(errCode.Int64), errMsg.String
	r.RequestSize, r.ResponseSize, r.PID = int(reqSize.Int64), int(respSize.Int64), int(pid.Int64)
	r.RequestPayload, r.ResponsePayload = reqPayload.String, respPayload.String
	if r.Status == StatusInFlight && r.Run != live {
		r.Status = StatusAbandoned
		if r.Err == "" {
			r.Err = abandonedError(r.Run)
		}
	}
	r.Abandoned = r.Status == StatusAbandoned
	return r, nil
}

func micros(us int64) time.Time { return time.UnixMicro(us) }

func nullMicros(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.UnixMicro(n.Int64)
}

// LiveRun is the run whose in-flight requests may still be answered: a
// writable Store's own run; for a read-only Store the newest run, if it
// has not ended and a Switchboard holds the database (its writer lock);
// else 0. Requests in flight in any other run read as abandoned.
func (s *Store) LiveRun(ctx context.Context) (int64, error) {
	if s.run != 0 { // writable
		return s.run, nil
	}
	if !writerAlive(s.path + ".lock") {
		return 0, nil
	}
	var id int64
	var ended sql.NullInt64
	err := s.rdb().QueryRowContext(ctx, "SELECT id, ended FROM runs ORDER BY id DESC LIMIT 1").Scan(&id, &ended)
	if errors.Is(err, sql.ErrNoRows) || ended.Valid {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("history: find the live run: %w", err)
	}
	return id, nil
}

// Requests lists requests newest first, by time received then by row id,
// one page of f.Limit. Row ids follow arrival, except an orphaned
// response's (above every request id of its run: orphanRowID), so it
// reads the requests along the row ids and the orphans along their own
// index (request_log_orphaned), a page of each, and merges them.
func (s *Store) Requests(ctx context.Context, f Filter) ([]Request, error) {
	live, err := s.LiveRun(ctx)
	if err != nil {
		return nil, err
	}
	q, args, err := s.requestsQuery(ctx, live, f)
	if err != nil {
		return nil, err
	}
	rows, err := s.queryRequests(ctx, live, q, args...)
	if err != nil {
		return nil, err
	}
	return rows, s.withRunEnds(ctx, rows)
}

// clauses are the conditions of a WHERE and their arguments.
type clauses struct {
	conds []string
	args  []any
}

func (c *clauses) add(cond string, args ...any) {
	c.conds = append(c.conds, cond)
	c.args = append(c.args, args...)
}

// requestsQuery is Requests' query and its arguments.
func (s *Store) requestsQuery(ctx context.Context, live int64, f Filter) (string, []any, error) {
	// both filter both parts, reqs the requests' walk along the row ids
	// (which place no orphan in time), orph the orphans' along their index.
	var both, reqs, orph clauses
	orph.add("status_code = 6") // request_log_orphaned
	if f.After != (Cursor{}) {
		below, err := idAfter(ctx, s.rdb(), f.After.Received)
		if err != nil {
			return "", nil, err
		}
		if below > 0 {
			reqs.add("id < ?", below)
		}
		r := f.After.Received.UnixMicro()
		both.add("received <= ? AND (received < ? OR id < ?)", r, r, f.After.ID)
	}
	if !f.Since.IsZero() {
		after, err := s.idBefore(ctx, f.Since)
		if err != nil {
			return "", nil, err
		}
		reqs.add("id > ?", after)
		both.add("received >= ?", f.Since.UnixMicro())
	}
	if f.Server != "" {
		ref, err := s.nameRef(ctx, f.Server)
		if err != nil {
			return "", nil, err
		}
		both.add("server_ref = ?", ref)
	}
	if f.Session != "" {
		both.add("session_ref = ?", sessionValue(f.Session))
	}
	if f.Method != "" {
		ref, err := s.nameRef(ctx, methodText(f.Method)) // a long one as its row keeps it
		if err != nil {
			return "", nil, err
		}
		both.add("method_ref = ?", ref)
	}
	if f.Run != 0 {
		reqs.add("id >= ? AND id < ?", f.Run<<runShift, (f.Run+1)<<runShift) // the run's rows (rowID)
		orph.add("run = ?", f.Run)
	}
	// An orphan has no session, method or name.
	requests, orphans := true, f.Session == "" && f.Method == ""
	switch f.Status {
	case "":
		reqs.add("status_code != 6") // not an orphan (code 6)
	case StatusInFlight:
		both.add("status_code = 0 AND run = ?", live)
		orphans = false
	case StatusAbandoned:
		both.add("(status_code = 7 OR (status_code = 0 AND run != ?))", live)
		orphans = false
	case pool.StatusOrphaned:
		requests = false
	default:
		both.add("status_code = ?", statusValue(f.Status))
		orphans = false
	}
	limit := positiveOr(f.Limit, 100)
	var parts []string
	var args []any
	part := func(order string, where ...clauses) {
		q := "SELECT " + requestCols + " FROM requests"
		var conds []string
		for _, c := range where {
			conds = append(conds, c.conds...)
			args = append(args, c.args...)
		}
		if len(conds) > 0 {
			q += " WHERE " + strings.Join(conds, " AND ")
		}
		parts = append(parts, "SELECT * FROM ("+q+" ORDER BY "+order+" LIMIT ?)")
		args = append(args, limit)
	}
	if requests {
		part("id DESC", both, reqs)
	}
	if orphans {
		part("received DESC, id DESC", both, orph)
	}
	return strings.Join(parts, " UNION ALL ") + " ORDER BY received DESC, id DESC LIMIT ?", append(args, limit), nil
}

// nameRef is what request_log holds for a server, method or tool name:
// its id in names, or the text itself (see the writer's name).
func (s *Store) nameRef(ctx context.Context, text string) (any, error) {
	if text == "" {
		return int64(0), nil
	}
	var id int64
	err := s.rdb().QueryRowContext(ctx, `SELECT id FROM names WHERE text = ?`, text).Scan(&id)
	switch {
	case err == nil:
		return id, nil
	case errors.Is(err, sql.ErrNoRows):
		return text, nil
	default:
		return nil, fmt.Errorf("history: look up %q: %w", text, err)
	}
}

// arrivalMargin is how far apart, at most, the order of two requests'
// row ids and the order of their receipt may be: the pool numbers a
// request and notes its time in one step, so microseconds, except across
// a clock set back.
const arrivalMargin = 10 * time.Second

// idBefore is a row id below every request received at or after t: that
// of the last request of request_log_time received before t less the
// margin, or 0. Row ids follow arrival, so the rows received since t are
// among the rows after it, the margin's few extra ones filtered out by
// time. An orphaned response cannot be that row, though every 64th is in
// the index: its id is above every request id of its run (orphanRowID),
// so it would hide the requests its run received after it.
func (s *Store) idBefore(ctx context.Context, t time.Time) (int64, error) {
	if t.IsZero() {
		return 0, nil
	}
	var id sql.NullInt64
	if err := s.rdb().QueryRowContext(ctx, `SELECT id FROM request_log WHERE id % 64 = 0 AND id & ? = 0 AND received < ?
		ORDER BY received DESC LIMIT 1`, orphanBase, t.Add(-arrivalMargin).UnixMicro()).Scan(&id); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("history: find the requests since %s: %w", t.Format(time.RFC3339), err)
	}
	return id.Int64, nil
}

// rowQuerier is a database, or the writer's connection.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// idAfter is a row id above every request received at or before t: that
// of the first request of request_log_time received after t plus the
// margin, or 0 if there is none (every request may be). It is idBefore's
// mirror: the requests received up to t are among the rows before it. Like
// idBefore's, it is never an orphaned response's row.
func idAfter(ctx context.Context, db rowQuerier, t time.Time) (int64, error) {
	var id sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT id FROM request_log WHERE id % 64 = 0 AND id & ? = 0 AND received > ?
		ORDER BY received LIMIT 1`, orphanBase, t.Add(arrivalMargin).UnixMicro()).Scan(&id); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("history: find the requests up to %s: %w", t.Format(time.RFC3339), err)
	}
	return id.Int64, nil
}

func positiveOr(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

func (s *Store) queryRequests(ctx context.Context, live int64, q string, args ...any) ([]Request, error) {
	return queryAll(ctx, s.rdb(), "query requests", func(sc scanner) (Request, error) { return scanRequest(sc, live) }, q, args...)
}

// withRunEnds sets RunEnded on the requests of rows that ended with their
// run (endsWithRun), reading each run's end once.
func (s *Store) withRunEnds(ctx context.Context, rows []Request) error {
	ends := map[int64]time.Time{}
	for i := range rows {
		r := &rows[i]
		if !r.endsWithRun() {
			continue
		}
		end, ok := ends[r.Run]
		if !ok {
			wr, err := s.windowRun(ctx, r.Run)
			if err != nil {
				return err
			}
			end = runEnd(wr)
			ends[r.Run] = end
		}
		r.RunEnded = end
	}
	return nil
}

// Hangs lists the requests of the live run (see LiveRun) in flight for at
// least over at now, and the requests earlier runs abandoned (kept for
// RetainDays) that had waited at least over when their run ended, oldest
// first (Request.Age).
func (s *Store) Hangs(ctx context.Context, over time.Duration, now time.Time) ([]Request, error) {
	live, err := s.LiveRun(ctx)
	if err != nil {
		return nil, err
	}
	// Each half from its small partial index; sorted here (an ORDER BY
	// would have SQLite walk the whole table instead).
	all, err := s.queryRequests(ctx, live, "SELECT "+requestCols+" FROM requests WHERE status_code = 0"+
		" UNION ALL SELECT "+requestCols+" FROM requests WHERE status_code = 7")
	if err != nil {
		return nil, err
	}
	if all, err = s.withJournal(ctx, live, all); err != nil {
		return nil, err
	}
	if err := s.withRunEnds(ctx, all); err != nil {
		return nil, err
	}
	sortByArrival(all)
	out := all[:0]
	for _, r := range all {
		if r.Age(now) >= over {
			out = append(out, r)
		}
	}
	return out, nil
}

// CountsByStatus counts the requests received since since, by status.
func (s *Store) CountsByStatus(ctx context.Context, since time.Time) (map[string]int, error) {
	live, err := s.LiveRun(ctx)
	if err != nil {
		return nil, err
	}
	after, err := s.idBefore(ctx, since)
	if err != nil {
		return nil, err
	}
	rows, err := s.rdb().QueryContext(ctx, `SELECT status, status = 0 AND run != ?, count(*) FROM request_log
		WHERE id > ? AND received >= ? GROUP BY 1, 2`, live, after, since.UnixMicro())
	if err != nil {
		return nil, fmt.Errorf("history: count by status: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var code any
		var dead bool
		var n int
		if err := rows.Scan(&code, &dead, &n); err != nil {
			return nil, fmt.Errorf("history: count by status: %w", err)
		}
		st := statusText(code)
		if dead {
			st = StatusAbandoned
		}
		out[st] += n
	}
	return out, rows.Err()
}

// Runs lists the newest runs first. limit <= 0 means 100.
func (s *Store) Runs(ctx context.Context, limit int) ([]Run, error) {
	return queryAll(ctx, s.rdb(), "list runs", scanRun,
		"SELECT "+runCols+" FROM runs ORDER BY id DESC LIMIT ?", positiveOr(limit, 100))
}

// runCols are the columns scanRun reads.
const runCols = "id, started, ended, pid, version, crashed, alive"

func scanRun(sc scanner) (Run, error) {
	var r Run
	var started int64
	var ended, alive sql.NullInt64
	err := sc.Scan(&r.ID, &started, &ended, &r.PID, &r.Version, &r.Crashed, &alive)
	r.Started, r.Ended, r.Alive = micros(started), nullMicros(ended), nullMicros(alive)
	return r, err
}

// ChildrenOfEarlierRuns lists the children that runs other than the live
// one started and never saw exit, for leak detection (it makes a Store a
// leaks.Source through a conversion of each record). It selects only
// what schema version childrenSchema had: ReadChildrenOfEarlierRuns
// reads databases that old.
func (s *Store) ChildrenOfEarlierRuns(ctx context.Context) ([]ChildRecord, error) {
	live, err := s.LiveRun(ctx)
	if err != nil {
		return nil, err
	}
	return queryAll(ctx, s.rdb(), "children of earlier runs", scanChild, `SELECT pid, server, command, coalesce(process_start, started), run
		FROM backends WHERE exited IS NULL AND run != ? ORDER BY id`, live)
}

// RecordedChildren lists every child the database records, of any run,
// exited or not: the evidence that a process carrying a run's marker is
// in the process group or session of a child that run started (it makes
// a Store a leaks.ChildSource). It selects only what schema version
// childrenSchema had, as ChildrenOfEarlierRuns does.
func (s *Store) RecordedChildren(ctx context.Context) ([]ChildRecord, error) {
	return queryAll(ctx, s.rdb(), "recorded children", scanChild, `SELECT pid, server, command, coalesce(process_start, started), run
		FROM backends ORDER BY id`)
}

// scanChild reads a ChildRecord from pid, server, command, start, run.
func scanChild(sc scanner) (ChildRecord, error) {
	var c ChildRecord
	var cmdJSON string
	var start, run int64
	if err := sc.Scan(&c.PID, &c.Server, &cmdJSON, &start, &run); err != nil {
		return c, err
	}
	_ = json.Unmarshal([]byte(cmdJSON), &c.Command)
	c.StartedAt, c.Run = micros(start), strconv.FormatInt(run, 10)
	return c, nil
}

// Timeline is the life of request poolID of run runID, with its session
// and child. A request that is not recorded wraps sql.ErrNoRows.
func (s *Store) Timeline(ctx context.Context, runID int64, poolID uint64) (Timeline, error) {
	return s.timeline(ctx, rowID(runID, poolID), fmt.Sprintf("request %d of run %d", poolID, runID))
}

// TimelineOf is the life of the request or orphaned response whose row id
// is id (Request.ID): an orphan has no pool id to find it by. A row that
// is not recorded wraps sql.ErrNoRows.
func (s *Store) TimelineOf(ctx context.Context, id int64) (Timeline, error) {
	return s.timeline(ctx, id, fmt.Sprintf("row %d", id))
}

// timeline is the life of row id; what names it in errors.
func (s *Store) timeline(ctx context.Context, id int64, what string) (Timeline, error) {
	live, err := s.LiveRun(ctx)
	if err != nil {
		return Timeline{}, err
	}
	var t Timeline
	t.Request, err = s.requestByID(ctx, live, id)
	if err != nil {
		return t, fmt.Errorf("history: %s: %w", what, err)
	}
	r := t.Request
	runID := r.Run
	if r.Status == pool.StatusOrphaned && r.PoolID == 0 {
		// The child answered a pool id (its run's): that request's.
		if n, err := strconv.ParseUint(r.OriginalID, 10, 64); err == nil && n > 0 && n < orphanBase {
			q, err := s.requestByID(ctx, live, rowID(runID, n))
			switch {
			case err == nil:
				t.Answers = &q
			case !errors.Is(err, sql.ErrNoRows):
				return t, fmt.Errorf("history: request %d of run %d: %w", n, runID, err)
			}
		}
	}
	if t.Run, err = scanRun(s.rdb().QueryRowContext(ctx, "SELECT "+runCols+" FROM runs WHERE id = ?", runID)); err != nil {
		return t, fmt.Errorf("history: run %d: %w", runID, err)
	}
	var sess Session
	var peer, disc sql.NullInt64
	var connected int64
	var reason sql.NullString
	err = s.rdb().QueryRowContext(ctx, `SELECT run, id, server, client_name, client_version, transport, peer_pid,
		connected, disconnected, close_reason FROM sessions WHERE run = ? AND id = ?`, runID, r.Session).
		Scan(&sess.Run, &sess.ID, &sess.Server, &sess.ClientName, &sess.ClientVersion, &sess.Transport, &peer,
			&connected, &disc, &reason)
	switch {
	case err == nil:
		sess.PeerPID, sess.Connected, sess.Disconnected, sess.CloseReason = int(peer.Int64), micros(connected), nullMicros(disc), reason.String
		t.Session = &sess
	case !errors.Is(err, sql.ErrNoRows):
		return t, fmt.Errorf("history: session %s: %w", r.Session, err)
	}
	if r.PID != 0 {
		b, err := scanBackend(s.rdb().QueryRowContext(ctx, "SELECT "+backendCols+
			` FROM backends WHERE run = ? AND pid = ? ORDER BY id DESC LIMIT 1`, runID, r.PID))
		switch {
		case err == nil:
			t.Backend = &b
		case !errors.Is(err, sql.ErrNoRows):
			return t, fmt.Errorf("history: child %d: %w", r.PID, err)
		}
	}
	t.Steps = steps(t)
	return t, nil
}

// requestByID reads the row id, a request or an orphaned response.
func (s *Store) requestByID(ctx context.Context, live, id int64) (Request, error) {
	return scanRequest(s.rdb().QueryRowContext(ctx, "SELECT "+requestCols+" FROM requests WHERE id = ?", id), live)
}

// steps tells a request's life in order.
func steps(t Timeline) []Step {
	r := t.Request
	if r.Status == pool.StatusOrphaned && r.PoolID == 0 {
		return orphanSteps(t)
	}
	var out []Step
	from := "session " + r.Session
	if s := t.Session; s != nil && s.ClientName != "" {
		from += fmt.Sprintf(" (%s %s)", s.ClientName, s.ClientVersion)
	}
	what := r.Method
	if r.Name != "" {
		what += " " + r.Name
	}
	out = append(out, Step{r.Received, fmt.Sprintf("received %s from %s with id %s", what, from, r.OriginalID)})
	if r.WrittenToChild() {
		where := fmt.Sprintf("written to child PID %d of server %s", r.PID, r.Server)
		if b := t.Backend; b != nil && len(b.Roots) > 0 {
			where += " (roots " + strings.Join(b.Roots, ", ") + ")"
		}
		if b := t.Backend; b != nil && len(b.ResolvedCommand) > 0 {
			where += ", started as " + strings.Join(b.ResolvedCommand, " ")
		}
		out = append(out, Step{r.Written, where})
	}
	end := r.Answered
	if end.IsZero() {
		end = time.Now()
	}
	if b := t.Backend; b != nil && !b.Exited.IsZero() && b.Exited.After(r.Received) && !b.Exited.After(end) {
		out = append(out, Step{b.Exited, fmt.Sprintf("child PID %d exited (%s)", b.PID, cmp.Or(b.ExitReason, "code "+strconv.Itoa(b.ExitCode)))})
	}
	if s := t.Session; s != nil && !s.Disconnected.IsZero() && s.Disconnected.After(r.Received) && !s.Disconnected.After(end) {
		out = append(out, Step{s.Disconnected, "session disconnected: " + cmp.Or(s.CloseReason, "closed")})
	}
	switch {
	case !r.Answered.IsZero():
		d, _ := r.Duration()
		msg := fmt.Sprintf("ended %s after %s", r.Status, d.Round(time.Microsecond))
		if r.Err != "" {
			msg += ": " + r.Err
		}
		out = append(out, Step{r.Answered, msg})
	case r.Abandoned:
		msg := "abandoned: " + cmp.Or(r.Err, "its run ended without an answer")
		if t.Run.Crashed {
			msg += fmt.Sprintf(" (run %d crashed)", t.Run.ID)
		}
		out = append(out, Step{t.Run.Ended, msg})
	default:
		out = append(out, Step{time.Time{}, fmt.Sprintf("still in flight after %s", time.Since(r.Received).Round(time.Millisecond))})
	}
	if !r.WrittenToChild() {
		out = append(out, Step{time.Time{}, "never written to a child (queued, or the child was not ready)"})
	}
	return inTimeOrder(out)
}

// orphanSteps tells an orphaned response: a child's answer to an id no
// request waits for, after the request it answers, when known.
func orphanSteps(t Timeline) []Step {
	r := t.Request
	who := "server " + r.Server
	if r.PID != 0 {
		who = fmt.Sprintf("child PID %d of server %s", r.PID, r.Server)
	}
	q := t.Answers
	if q == nil {
		return []Step{{r.Received, fmt.Sprintf("%s answered id %s: %s", who, r.OriginalID, cmp.Or(r.Err, orphanError))}}
	}
	what := q.Method
	if q.Name != "" {
		what += " " + q.Name
	}
	req := fmt.Sprintf("request %d (%s from session %s)", q.PoolID, what, q.Session)
	end := Step{q.Received, req + " received, never answered"}
	if d, ok := q.Duration(); ok {
		end = Step{q.Answered, fmt.Sprintf("%s ended %s after %s", req, q.Status, d.Round(time.Microsecond))}
		if q.Err != "" {
			end.What += ": " + q.Err
		}
	}
	return inTimeOrder([]Step{end,
		{r.Received, fmt.Sprintf("%s answered id %s: the late answer to request %d, which no one waited for any more", who, r.OriginalID, q.PoolID)}})
}

// inTimeOrder sorts steps by time, those without one last.
func inTimeOrder(out []Step) []Step {
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].At, out[j].At
		if a.IsZero() || b.IsZero() {
			return !a.IsZero() && b.IsZero()
		}
		return a.Before(b)
	})
	return out
}

// Unanswered lists the requests session took in run that were never
// answered (the run ended under them), oldest first: what a client that
// kept its session across a pool restart still waits for. It says which
// process was the session's shim (its peer PID, 0 when the history does
// not know it): the pool gives the requests to that process alone.
func (s *Store) Unanswered(ctx context.Context, run int64, session string) (pool.Owed, error) {
	peer, err := s.sessionPeer(ctx, run, session)
	if err != nil {
		return pool.Owed{}, err
	}
	owed, err := s.unanswered(ctx, run, session)
	return pool.Owed{PeerPID: peer, Requests: owed}, err
}

// sessionPeer is the PID of session's shim in run, as its pool saw it; 0
// for a session the history does not know, or knows no PID of.
func (s *Store) sessionPeer(ctx context.Context, run int64, session string) (int, error) {
	var peer sql.NullInt64
	err := s.rdb().QueryRowContext(ctx, `SELECT peer_pid FROM sessions WHERE run = ? AND id = ?`, run, session).Scan(&peer)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("history: the shim of run %d session %s: %w", run, session, err)
	}
	return int(peer.Int64), nil
}

// unanswered is Unanswered's requests.
func (s *Store) unanswered(ctx context.Context, run int64, session string) ([]pool.Unanswered, error) {
	rows, err := s.rdb().QueryContext(ctx, `SELECT original_id, method, name, written IS NOT NULL, received, id FROM requests
		WHERE status_code = 0 AND run = ?1 AND session = ?2 AND answered IS NULL
		UNION ALL SELECT original_id, method, name, written IS NOT NULL, received, id FROM requests
		WHERE status_code = 7 AND run = ?1 AND session = ?2 AND answered IS NULL`, run, session)
	if err != nil {
		return nil, fmt.Errorf("history: unanswered requests of run %d session %s: %w", run, session, err)
	}
	defer rows.Close()
	type owed struct {
		u            pool.Unanswered
		received, id int64
	}
	var all []owed
	for rows.Next() {
		var o owed
		if err := rows.Scan(&o.u.OriginalID, &o.u.Method, &o.u.Name, &o.u.Written, &o.received, &o.id); err != nil {
			return nil, err
		}
		all = append(all, o)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sort.Slice(all, func(i, j int) bool {
		return all[i].received < all[j].received || all[i].received == all[j].received && all[i].id < all[j].id
	})
	var out []pool.Unanswered
	for _, o := range all {
		if !json.Valid([]byte(o.u.OriginalID)) {
			continue // an id cut (by the journal, or to maxIDBytes): no answer can carry the client's
		}
		out = append(out, o.u)
	}
	return out, nil
}

// statusText is a status as request_log stores it (a code, or text), as
// a name.
func statusText(v any) string {
	switch c := v.(type) {
	case int64:
		if c >= 0 && c < int64(len(statusNames)) {
			return statusNames[c]
		}
		return strconv.FormatInt(c, 10)
	case string:
		return c
	case []byte:
		return string(c)
	}
	return fmt.Sprint(v)
}

// abandonedError is the error of a request of run that was in flight
// when run stopped without ending it.
func abandonedError(run int64) string {
	return fmt.Sprintf("Switchboard stopped (run %d) before this request was answered", run)
}

// unwrittenError is the error of a request of run that was answered when
// run stopped cleanly but could not write its last rows.
func unwrittenError(run int64) string {
	return fmt.Sprintf("answered, but Switchboard stopped (run %d) unable to record the outcome (the history database was locked or failing)", run)
}

// answeredError is the error of a request of run that was answered when
// run crashed before its end was recorded.
func answeredError(run int64) string {
	return fmt.Sprintf("answered, but Switchboard stopped (run %d crashed or was killed) before it recorded the outcome", run)
}

// journalOwed reports whether what run's journal lists is still owed: the
// run is recorded and never ended (it crashed). A run that ended cleanly
// wrote its requests; one pruned away has nothing to add.
func journalOwed(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, run int64) (bool, error) {
	var ended sql.NullInt64
	switch err := q.QueryRowContext(ctx, `SELECT ended FROM runs WHERE id = ?`, run).Scan(&ended); {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("history: the journal's run: %w", err)
	}
	return !ended.Valid, nil
}

// withJournal adds to a read-only Store's hangs the requests that a run
// which crashed (and whose database no Switchboard has opened since) had
// in flight too young for a row, and brings up to date those that had
// one: its journal lists them. Those it lists as answered are no hangs.
// A writable Store has recorded its journal's at Open.
func (s *Store) withJournal(ctx context.Context, live int64, rows []Request) ([]Request, error) {
	if s.run != 0 { // writable
		return rows, nil
	}
	listed, err := readJournalFile(s.path)
	if err != nil || len(listed) == 0 || listed[0].Run == live {
		return rows, err
	}
	if owed, err := journalOwed(ctx, s.rdb(), listed[0].Run); err != nil || !owed {
		return rows, err
	}
	have := map[int64]int{}
	for i, r := range rows {
		have[r.ID] = i
	}
	answered := map[int]bool{} // rows the journal knows were answered
	// A request whose end was committed in the moment before the crash
	// (the journal frees it just after) is no hang.
	ids := make([]int64, len(listed))
	for i, e := range listed {
		ids[i] = e.ID
	}
	idsJSON, _ := json.Marshal(ids)
	ended := map[int64]bool{}
	q, err := s.rdb().QueryContext(ctx, `SELECT id FROM request_log WHERE id IN (SELECT value FROM json_each(?)) AND status != 0`,
		string(idsJSON))
	if err != nil {
		return nil, fmt.Errorf("history: the journal's requests: %w", err)
	}
	defer q.Close()
	for q.Next() {
		var id int64
		if err := q.Scan(&id); err != nil {
			return nil, fmt.Errorf("history: the journal's requests: %w", err)
		}
		ended[id] = true
	}
	if err := q.Err(); err != nil {
		return nil, fmt.Errorf("history: the journal's requests: %w", err)
	}
	for _, e := range listed {
		if ended[e.ID] {
			continue
		}
		if e.Answered != 0 { // no hang, whatever its row says
			if i, ok := have[e.ID]; ok {
				answered[i] = true
			}
			continue
		}
		if i, ok := have[e.ID]; ok {
			// Its row is older than its last moment, which the journal saw.
			if r := &rows[i]; r.Written.IsZero() && e.Written != 0 {
				r.Written, r.PID = micros(e.Written), e.PID
			}
			continue
		}
		rows = append(rows, Request{ID: e.ID, Run: e.Run, PoolID: e.PoolID, Session: e.Session, Server: e.Server,
			Method: e.Method, Name: e.Name, OriginalID: e.OriginalID, Status: StatusAbandoned,
			Err:      abandonedError(e.Run),
			Received: micros(e.Received), Written: nullMicros(sql.NullInt64{Int64: e.Written, Valid: e.Written != 0}),
			PID: e.PID, Abandoned: true})
	}
	if len(answered) > 0 {
		kept := rows[:0]
		for i, r := range rows {
			if !answered[i] {
				kept = append(kept, r)
			}
		}
		rows = kept
	}
	return rows, nil
}

// sortByArrival orders requests oldest first.
func sortByArrival(rs []Request) {
	sort.SliceStable(rs, func(i, j int) bool {
		if !rs[i].Received.Equal(rs[j].Received) {
			return rs[i].Received.Before(rs[j].Received)
		}
		return rs[i].ID < rs[j].ID
	})
}
