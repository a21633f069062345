package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// holdLocked holds the database at path locked for writing, as a DB
// browser's open transaction does, until the test ends or the returned
// func is called.
func holdLocked(t *testing.T, path string) (release func()) {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite3", dsn(path, "_busy_timeout=0"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		_, _ = conn.ExecContext(ctx, "ROLLBACK")
		conn.Close()
		db.Close()
	}
	t.Cleanup(release)
	return release
}

// A program holding the database locked costs a stop busyTimeout in all,
// not that at each of the stop's statements (it took four times as
// long); and the run it could not mark ended is no crash at the next
// start: its journal says it stopped cleanly, so the run is ended and its
// requests are unknown, not abandoned hangs.
func TestStopUnderAnotherProgramsLock(t *testing.T) {
	old := busyTimeout
	busyTimeout = time.Second
	t.Cleanup(func() { busyTimeout = old })
	path := dbPath(t)
	ctx := context.Background()
	s := openT(t, path, &Options{FlushInterval: time.Hour})
	run := s.Run()
	now := time.Now()
	s.Record(received(1, "s1", "tools/call", "answered", now))
	s.Record(written(1, "s1", 40, now))
	s.Record(done(1, "s1", "tools/call", "answered", pool.StatusOK, 40, now.Add(time.Millisecond)))
	s.Record(received(2, "s1", "tools/call", "endless", now)) // its end lost: still open at the stop
	release := holdLocked(t, path)

	start := time.Now()
	err := s.Close()
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "locked") {
		t.Errorf("Close under another program's lock: %v, want it to say the database is locked", err)
	}
	if took > 2*busyTimeout {
		t.Errorf("Close took %v under another program's lock, want at most about busyTimeout (%v)", took, busyTimeout)
	}
	release()

	next := openT(t, path, nil)
	runs, err := next.Runs(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var stopped *Run
	for i := range runs {
		if runs[i].ID == run {
			stopped = &runs[i]
		}
	}
	if stopped == nil || stopped.Crashed || stopped.Ended.IsZero() || stopped.Ended.Before(start.Truncate(time.Microsecond)) {
		t.Fatalf("the run stopped under the lock: %+v, want it ended at its stop, not crashed", stopped)
	}
	rs, err := next.Requests(ctx, Filter{Run: run})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Request{}
	for _, r := range rs {
		got[r.Name] = r
	}
	if r := got["answered"]; r.Status != StatusUnknown || r.Answered.IsZero() || r.Err != unwrittenError(run) {
		t.Errorf("the request answered before the stop: %+v, want answered, its outcome unknown for want of a write", r)
	}
	if r := got["endless"]; r.Status != StatusUnknown || r.Abandoned || r.Err != unknownError {
		t.Errorf("the request whose end was lost: %+v, want unknown, not abandoned", r)
	}
	if hangs, err := next.Hangs(ctx, 0, time.Now()); err != nil || len(hangs) != 0 {
		t.Errorf("Hangs after a clean stop = %+v, %v; want none", hangs, err)
	}
}

// With history off the store records children only and keeps no journal
// mapped: the clean stop it could not mark ended is marked in the
// journal's file, and the next start does not blame a crash either.
func TestStopUnderAnotherProgramsLockChildrenOnly(t *testing.T) {
	old := busyTimeout
	busyTimeout = 200 * time.Millisecond
	t.Cleanup(func() { busyTimeout = old })
	path := dbPath(t)
	s := openT(t, path, &Options{ChildrenOnly: true, FlushInterval: time.Hour})
	run := s.Run()
	s.Record(pool.Event{Kind: pool.EventBackendStarted, Time: time.Now(), Server: "srv", PID: 4242, Command: []string{"srv-mcp"}})
	release := holdLocked(t, path)
	if err := s.Close(); err == nil {
		t.Error("Close under another program's lock: no error")
	}
	release()
	next := openT(t, path, nil)
	runs, err := next.Runs(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.ID == run && (r.Crashed || r.Ended.IsZero()) {
			t.Errorf("the run stopped under the lock: %+v, want it ended, not crashed", r)
		}
	}
}

// A request still open at a clean stop is unknown: it waited until its
// run stopped, not for ever. Its age is bounded by the run's end, as an
// abandoned request's is.
func TestUnknownRequestAgesUntilItsRunEnded(t *testing.T) {
	path := dbPath(t)
	ctx := context.Background()
	s := openT(t, path, &Options{FlushInterval: time.Hour})
	run := s.Run()
	s.Record(received(1, "s1", "tools/call", "endless", time.Now().Add(-time.Second)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	next := openT(t, path, nil)
	runs, err := next.Runs(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ended time.Time
	for _, r := range runs {
		if r.ID == run {
			ended = r.Ended
		}
	}
	rs, err := next.Requests(ctx, Filter{Run: run})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Status != StatusUnknown || ended.IsZero() {
		t.Fatalf("requests %+v, run ended %v; want one unknown request of an ended run", rs, ended)
	}
	r := rs[0]
	want := ended.Sub(r.Received)
	if got := r.Age(time.Now().Add(time.Hour)); got != want {
		t.Errorf("an unknown request's age an hour on: %v, want %v (until its run ended)", got, want)
	}
}

// Open under another program's lock fails with an error IsBusy tells
// from the others: the lock passes, and the app opens the history again
// once it has (a user reading history.db in sqlite3 while a client starts
// the pool). A damaged or foreign file is not busy.
func TestOpenUnderAnotherProgramsLockIsBusy(t *testing.T) {
	old := busyTimeout
	busyTimeout = 100 * time.Millisecond
	t.Cleanup(func() { busyTimeout = old })
	path := dbPath(t)
	s := openT(t, path, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	release := holdLocked(t, path)
	_, err := Open(path, nil)
	if err == nil || !IsBusy(err) {
		t.Fatalf("Open under another program's lock: %v; want an error IsBusy says is busy", err)
	}
	release()
	openT(t, path, nil)
	if IsBusy(fmt.Errorf("history: %w", ErrCorrupt)) || IsBusy(nil) {
		t.Error("IsBusy says a corrupt file, or no error, is busy")
	}
}
