package store

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// lostEndStore records request 1 in flight (its in-flight row committed),
// then its end in a batch that fails: another program holds the database
// locked past busyTimeout, as a DB browser's open transaction does. The
// client had its answer; the database still says in flight.
func lostEndStore(t *testing.T) (s *Store, path string) {
	t.Helper()
	old := busyTimeout
	busyTimeout = 100 * time.Millisecond
	t.Cleanup(func() { busyTimeout = old })
	path = dbPath(t)
	s = openT(t, path, &Options{FlushInterval: time.Hour})
	now := time.Now()
	s.Record(received(1, "s1", "tools/call", "answered", now.Add(-time.Minute))) // past InFlightAfter: a row of its own
	s.Record(written(1, "s1", 40, now.Add(-time.Minute)))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if r := readRequests(t, path)[1]; r.Status != StatusInFlight {
		t.Fatalf("request 1 before its end: %+v, want its in-flight row", r)
	}
	release := holdLocked(t, path)
	s.Record(done(1, "s1", "tools/call", "answered", pool.StatusOK, 40, now))
	if err := s.flush(); err == nil {
		t.Fatal("a batch under another program's lock: no error")
	}
	release()
	return s, path
}

// A request answered whose end a failed batch lost is no hang: a crash
// before anything else is written records it answered, its outcome
// unknown, not abandoned ("stopped before this request was answered",
// although its client had the answer). The failed batch used to free its
// journal slot, and the next start took its in-flight row for a hang.
func TestLostEndIsUnknownAfterACrash(t *testing.T) {
	s, path := lostEndStore(t)
	run := s.Run()
	kill(s)

	next := openT(t, path, nil)
	r := readRequests(t, path)[1]
	if r.Status != StatusUnknown || r.Abandoned || r.Answered.IsZero() || r.Err != answeredError(run) {
		t.Errorf("request 1, its end lost with a failed batch, after a crash: %+v; want answered, its outcome unknown, not abandoned", r)
	}
	if hangs, err := next.Hangs(context.Background(), 0, time.Now()); err != nil || len(hangs) != 0 {
		t.Errorf("Hangs = %+v, %v; want none", hangs, err)
	}
}

// Once the database takes writes again, the next batch records a request
// whose end a failed batch lost as answered, its outcome unknown, and
// only then frees its journal slot: a crash after it finds the row, not
// a request in flight.
func TestLostEndIsRecordedUnknownByTheNextBatch(t *testing.T) {
	s, path := lostEndStore(t)
	s.Record(received(2, "s1", "tools/list", "", time.Now()))
	s.Record(done(2, "s1", "tools/list", "", pool.StatusOK, 40, time.Now()))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	got := readRequests(t, path)
	if r := got[1]; r.Status != StatusUnknown || r.Answered.IsZero() || r.Err != lostEndError {
		t.Errorf("request 1 after the next batch: %+v; want answered, its outcome unknown (%q)", r, lostEndError)
	}
	if r := got[2]; r.Status != pool.StatusOK {
		t.Errorf("request 2: %+v, want ok", r)
	}
	if listed, err := readJournalFile(path); err != nil || len(listed) != 0 {
		t.Errorf("the journal after the next batch lists %+v, %v; want nothing (every end committed)", listed, err)
	}
	kill(s)
	openT(t, path, nil)
	if r := readRequests(t, path)[1]; r.Status != StatusUnknown || r.Abandoned {
		t.Errorf("request 1 after a crash: %+v; want unknown, not abandoned", r)
	}
}

// A run that crashes while another program holds the database locked
// (or the disk is full) cannot record its heartbeats there: the journal
// keeps its last sign of life, and the next start ages its abandoned
// requests up to it. They were aged up to the run's last write the
// database took, which can be the request's own arrival: a call that
// hung for half a minute showed as 0 s old, and `hangs` left it out.
func TestCrashUnderALockAgesFromTheJournal(t *testing.T) {
	old := busyTimeout
	busyTimeout = 50 * time.Millisecond
	t.Cleanup(func() { busyTimeout = old })
	path := dbPath(t)
	s := openT(t, path, &Options{FlushInterval: time.Hour, HeartbeatInterval: 20 * time.Millisecond})
	at := time.Now().Add(-2 * time.Second) // past InFlightAfter: a row of its own
	s.Record(received(1, "s1", "tools/call", "hung", at))
	s.Record(written(1, "s1", 40, at))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	release := holdLocked(t, path)
	locked := time.Now()
	// Heartbeats the database refuses, for a while.
	const held = 400 * time.Millisecond
	waitFor(t, "the journal's sign of life past the lock's first moments", func() bool {
		return readJournalStop(path).Alive >= locked.Add(held).UnixMicro()
	})
	kill(s)
	release()

	next := openT(t, path, nil)
	hangs, err := next.Hangs(context.Background(), 0, time.Now())
	if err != nil || len(hangs) != 1 || !hangs[0].Abandoned {
		t.Fatalf("Hangs = %+v, %v; want request 1 abandoned", hangs, err)
	}
	if age, want := hangs[0].Age(time.Now()), locked.Add(held).Sub(at); age < want {
		t.Errorf("request 1 aged %s, want at least %s: until the journal's last sign of life", age, want)
	}
}
