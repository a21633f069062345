package store

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// helperEnv makes the test binary a recorder process (see crashHelper).
const helperEnv = "STORE_CRASH_HELPER_DB"

// slowID is the crash helper's request that stays in flight: it has had
// its in-flight row (received long ago) before it was written to a child.
const slowID = 1 << 30

// crashHelper records requests into the database named by helperEnv as
// fast as it can, always with about 50 of them in flight, until it is
// killed. After each flush it prints "flushed N" (N requests received so
// far); its first line is "run R".
func crashHelper() int {
	s, err := Open(os.Getenv(helperEnv), &Options{BatchSize: 512, FlushInterval: 5 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("run %d\n", s.Run())
	s.Record(pool.Event{Kind: pool.EventBackendStarted, Time: time.Now(), Server: "srv", PID: os.Getpid(),
		ProcessStart: time.Now(), Command: []string{"fake-mcp"}})
	s.Record(received(slowID, "s1", "tools/call", "slow", time.Now().Add(-time.Hour)))
	if err := s.flush(); err != nil { // its in-flight row, not written
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s.Record(written(slowID, "s1", os.Getpid(), time.Now()))
	for i := uint64(1); ; i++ {
		now := time.Now()
		s.Record(received(i, "s1", "tools/call", "work", now))
		s.Record(written(i, "s1", os.Getpid(), now))
		if i > 50 {
			s.Record(done(i-50, "s1", "tools/call", "work", pool.StatusOK, os.Getpid(), now))
		}
		if i%500 == 0 {
			if err := s.flush(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			fmt.Printf("flushed %d\n", i)
		}
	}
}

// TestCrashMidWrite kills (SIGKILL) a process that is busy recording,
// then reads its database: no corruption, everything it committed is
// there, and its requests in flight (too young for rows of their own),
// with those whose end it had not committed yet, are in its journal. A reader sees them as abandoned at once; the next
// writable open records them so, the one that had an in-flight row
// before it reached its child included; the run crashed, and its child
// is a leak candidate.
func TestCrashMidWrite(t *testing.T) {
	path := dbPath(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	var run int64
	committed := 0
	for sc.Scan() {
		line := sc.Text()
		if r, ok := strings.CutPrefix(line, "run "); ok {
			run, _ = strconv.ParseInt(r, 10, 64)
		}
		if n, ok := strings.CutPrefix(line, "flushed "); ok {
			committed, _ = strconv.Atoi(n)
			if committed >= 20_000 {
				break // it is writing right now: kill it mid-stream
			}
		}
	}
	if committed < 20_000 {
		t.Fatalf("helper stopped early (%v) after %d requests", sc.Err(), committed)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	helper := cmd.Process.Pid

	// Integrity first, before anything writes.
	db, err := sql.Open("sqlite3", dsn(path, "_busy_timeout=5000"))
	if err != nil {
		t.Fatal(err)
	}
	var check string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check = %q, %v", check, err)
	}
	var rowsInFlight int
	if err := db.QueryRow("SELECT count(*) FROM requests WHERE run = ? AND status = 'in-flight'", run).Scan(&rowsInFlight); err != nil {
		t.Fatal(err)
	}
	listed, err := readJournalFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Ends committed in the moment between the commit and the journal's
	// freeing them, and those answered whose end was not committed yet:
	// not owed.
	endedRows, answeredRows := 0, 0
	for _, e := range listed {
		var ended int
		if err := db.QueryRow("SELECT count(*) FROM request_log WHERE id = ? AND status != 0", e.ID).Scan(&ended); err != nil {
			t.Fatal(err)
		}
		endedRows += ended
		if ended == 0 && e.Answered != 0 {
			answeredRows++
		}
	}
	db.Close()
	// In flight: the slow one, 50 or 51 others (the helper's last may not
	// have been written yet), and those whose end was not committed yet.
	inFlight, unwritten := map[int64]bool{}, 0
	for _, e := range listed {
		if e.Written == 0 {
			unwritten++
		} else if e.PID != helper {
			t.Errorf("journaled %+v, want written to %d", e, helper)
		}
		if e.Run != run {
			t.Errorf("journaled %+v, want run %d", e, run)
		}
		inFlight[e.ID] = true
	}
	if n := len(inFlight); n < 51 || unwritten > 1 || rowsInFlight != 1 {
		t.Errorf("the killed run left %d requests in its journal (want the slow one and 50 or more), %d of them not written (want at most 1), and %d rows in flight (want the slow one's)",
			n, unwritten, rowsInFlight)
	}

	// A reader, with no Switchboard running: the journal's requests are
	// abandoned hangs.
	ctx := context.Background()
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	roHangs, err := ro.Hangs(ctx, 0, time.Now())
	ro.Close()
	if err != nil {
		t.Fatal(err)
	}
	owed := len(inFlight) - endedRows - answeredRows
	if len(roHangs) != owed || !roHangs[0].Abandoned || roHangs[0].Name != "slow" || !roHangs[0].WrittenToChild() ||
		roHangs[0].PID != helper {
		t.Errorf("a reader's hangs: %d (want %d), first %+v", len(roHangs), owed, roHangs[0])
	}

	s := openT(t, path, nil)
	var total, abandoned, stillInFlight, unknown int
	if err := s.rdb().QueryRow(`SELECT count(*), count(*) FILTER (WHERE status = 7),
		count(*) FILTER (WHERE status = 0), count(*) FILTER (WHERE status = 8) FROM request_log WHERE run = ?`, run).
		Scan(&total, &abandoned, &stillInFlight, &unknown); err != nil {
		t.Fatal(err)
	}
	if total < committed || abandoned != owed || stillInFlight != 0 || unknown != answeredRows {
		t.Errorf("after reopening: %d requests (committed at least %d), %d abandoned (want %d), %d in flight (want 0), %d answered with their outcome unknown (want %d)",
			total, committed, abandoned, owed, stillInFlight, unknown, answeredRows)
	}
	runs, err := s.Runs(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[1].ID != run || !runs[1].Crashed || !runs[1].Ended.IsZero() {
		t.Errorf("runs = %+v, want run %d crashed", runs, run)
	}
	kids, err := s.ChildrenOfEarlierRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != 1 || kids[0].PID != helper || kids[0].Run != strconv.FormatInt(run, 10) {
		t.Errorf("children of earlier runs = %+v, want the helper %d", kids, helper)
	}
	hangs, err := s.Hangs(ctx, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(hangs) != owed || hangs[0].Name != "slow" {
		t.Fatalf("hangs: %d (want %d), first %+v", len(hangs), owed, hangs[0])
	}
	for _, h := range hangs {
		if !h.Abandoned || !inFlight[h.ID] || h.WrittenToChild() && h.PID != helper {
			t.Errorf("hang %+v, want abandoned, journaled", h)
		}
		if !h.WrittenToChild() {
			unwritten--
		}
	}
	if unwritten != 0 {
		t.Errorf("%d more hangs not written to the child than the journal had", -unwritten)
	}
	if listed, err := readJournalFile(path); err != nil || len(listed) != 0 {
		t.Errorf("the journal still lists %d requests (%v) after they were recorded", len(listed), err)
	}
}

// TestRetention prunes by age and by row cap, in small steps, and keeps
// what must stay: recent rows, the live run, children never seen exit.
func TestRetention(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, &Options{RetainDays: 1, MaxRows: 50, PruneBatch: 7})
	old := time.Now().Add(-50 * time.Hour)
	recent := time.Now().Add(-time.Minute)
	// An old, empty run from long ago (the app started and stopped).
	db, err := sql.Open("sqlite3", dsn(path, "_busy_timeout=5000"))
	if err != nil {
		t.Fatal(err)
	}
	execSQLOn(t, db, `INSERT INTO runs (started, ended, pid) VALUES (?, ?, 1)`, old.UnixMicro(), old.UnixMicro())
	db.Close()
	s.Record(pool.Event{Kind: pool.EventSessionOpened, Time: old, Server: "srv", Session: "s-old"})
	s.Record(pool.Event{Kind: pool.EventSessionClosed, Time: old, Server: "srv", Session: "s-old"})
	s.Record(pool.Event{Kind: pool.EventBackendStarted, Time: old, Server: "srv", PID: 1001})
	s.Record(pool.Event{Kind: pool.EventBackendExited, Time: old, Server: "srv", PID: 1001})
	s.Record(pool.Event{Kind: pool.EventBackendStarted, Time: old, Server: "srv", PID: 1002}) // never exits
	for i := range 30 {
		id := uint64(i + 1)
		s.Record(received(id, "s-old", "tools/list", "", old))
		s.Record(done(id, "s-old", "tools/list", "", pool.StatusOK, 1001, old))
	}
	for i := range 80 {
		id := uint64(100 + i)
		s.Record(received(id, "s1", "tools/list", "", recent))
		s.Record(done(id, "s1", "tools/list", "", pool.StatusOK, 1002, recent))
	}
	if err := s.prune(); err != nil {
		t.Fatal(err)
	}
	var n, minPool, sessions, backends, runs int
	if err := s.rdb().QueryRow(`SELECT count(*), min(pool_id) FROM requests`).Scan(&n, &minPool); err != nil {
		t.Fatal(err)
	}
	if n != 50 || minPool != 130 {
		t.Errorf("kept %d requests from pool id %d, want the newest 50 (from 130)", n, minPool)
	}
	if err := s.rdb().QueryRow(`SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM backends),
		(SELECT count(*) FROM runs)`).Scan(&sessions, &backends, &runs); err != nil {
		t.Fatal(err)
	}
	if sessions != 0 || backends != 1 || runs != 1 {
		t.Errorf("kept %d sessions (want 0), %d backends (want 1, never exited), %d runs (want 1, this one)",
			sessions, backends, runs)
	}
}

// TestRetentionUnderLoad: pruning runs on its schedule while requests
// keep coming (one always in flight younger than InFlightAfter, so the
// writer never idles), a step between batches, and the requests of the
// load are all recorded meanwhile.
func TestRetentionUnderLoad(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, &Options{RetainDays: 1, PruneInterval: 20 * time.Millisecond, PruneBatch: 10,
		FlushInterval: time.Millisecond})
	old := time.Now().Add(-48 * time.Hour)
	for i := uint64(1); i <= 100; i++ {
		s.Record(received(i, "s1", "tools/call", "echo", old))
		s.Record(done(i, "s1", "tools/call", "echo", pool.StatusOK, 7, old.Add(time.Millisecond)))
	}
	s.Record(orphan("5", old))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	oldRows := func() int {
		var n int
		if err := s.rdb().QueryRow(`SELECT count(*) FROM request_log WHERE received < ?`,
			time.Now().Add(-24*time.Hour).UnixMicro()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The load: a request every millisecond, each ended when the next
	// arrives.
	load := time.NewTicker(time.Millisecond) // pacing the load, not synchronising
	defer load.Stop()
	deadline := time.Now().Add(10 * time.Second)
	id := uint64(1000)
	s.Record(received(id, "s1", "tools/call", "echo", time.Now()))
	for oldRows() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d old rows left after 10 s of load (retention due every 20 ms)", oldRows())
		}
		<-load.C
		id++
		s.Record(received(id, "s1", "tools/call", "echo", time.Now()))
		s.Record(done(id-1, "s1", "tools/call", "echo", pool.StatusOK, 7, time.Now()))
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.rdb().QueryRow(`SELECT count(*) FROM request_log WHERE id >= ? AND id < ?`,
		rowID(s.Run(), 1000), rowID(s.Run(), id)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != int(id-1000) || s.Dropped() != 0 {
		t.Errorf("the load's ended requests: %d recorded, %d dropped; want %d and none", n, s.Dropped(), id-1000)
	}
}

func execSQLOn(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentReaders reads through a read-only open and through the
// writer's own query connections while the writer commits batches.
func TestConcurrentReaders(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, &Options{BatchSize: 200, FlushInterval: time.Millisecond})
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	ctx := context.Background()
	const total = 20_000
	writing := make(chan struct{})
	go func() {
		defer close(writing)
		now := time.Now()
		for i := uint64(1); i <= total; i++ {
			s.Record(received(i, "s1", "tools/call", "echo", now))
			s.Record(done(i, "s1", "tools/call", "echo", pool.StatusOK, 1, now))
			if i%1000 == 0 {
				if err := s.flush(); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for _, st := range []*Store{ro, ro, s} {
		wg.Go(func() {
			last, reads := 0, 0
			for done := false; !done; reads++ {
				select {
				case <-writing:
					done = true
				default:
				}
				page, err := st.Requests(ctx, Filter{Limit: 20, Status: pool.StatusOK})
				if err != nil {
					t.Error(err)
					return
				}
				counts, err := st.CountsByStatus(ctx, time.Time{})
				if err != nil {
					t.Error(err)
					return
				}
				if counts["ok"] < last || (len(page) > 0 && counts["ok"] == 0) {
					t.Errorf("read %d: %d ok after %d", reads, counts["ok"], last)
					return
				}
				last = counts["ok"]
			}
			if last != total {
				t.Errorf("the last read saw %d requests, want %d", last, total)
			}
		})
	}
	wg.Wait()
	if s.Dropped() != 0 {
		t.Errorf("dropped %d", s.Dropped())
	}
}

// TestDropsWhenFull: while the database is locked by someone else the
// writer is stuck in a transaction; Record keeps returning at once and
// counts what does not fit in the (tiny) queue. Nothing else is lost.
// The writer waits for the lock as long as the test holds it: every
// Record returned before the lock was let go, so none waited for it.
func TestDropsWhenFull(t *testing.T) {
	old := busyTimeout
	busyTimeout = time.Hour
	t.Cleanup(func() { busyTimeout = old })
	path := dbPath(t)
	s := openT(t, path, &Options{QueueSize: 4, BatchSize: 1})
	other, err := sql.Open("sqlite3", dsn(path, "_txlock=immediate&_busy_timeout=5000"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.Begin() // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s.Record(done(1, "s1", "ping", "", pool.StatusOK, 0, now))
	waitFor(t, "the writer to take the first row", func() bool { return s.rec.pending() == 0 })
	recorded := make(chan struct{})
	go func() {
		defer close(recorded)
		for i := uint64(2); i <= 15; i++ {
			s.Record(done(i, "s1", "ping", "", pool.StatusOK, 0, now))
		}
	}()
	select {
	case <-recorded:
	case <-time.After(10 * time.Second):
		_ = tx.Rollback() // lets a Record that waits for the writer return
		<-recorded
		t.Fatal("14 Record calls did not return while the writer was stuck on the lock")
	}
	if got := s.Dropped(); got != 10 {
		t.Errorf("Dropped = %d, want 10 (14 recorded, queue of 4)", got)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Requests(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Errorf("recorded %d requests, want 5", len(got))
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
