package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// A history found damaged at start is moved aside, but the journal of
// the requests a crashed run had in flight stays at its path: the fresh
// database records them as abandoned, of that run (whose row went with
// the damaged file, so it is recorded as a crashed run it knows nothing
// more of), and `hangs` shows them. They used to go aside with the
// damaged file, and vanish from hangs.
func TestDamagedHistoryKeepsTheCrashsRequests(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, &Options{FlushInterval: time.Hour})
	run := s.Run()
	now := time.Now()
	s.Record(received(1, "s1", "tools/call", "young", now))
	s.Record(received(2, "s1", "tools/call", "written", now))
	s.Record(written(2, "s1", 4242, now))
	crash(t, s)
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, bytes.Repeat([]byte("garbage!"), 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of a damaged file: %v, want ErrCorrupt", err)
	}
	aside, err := MoveAside(path, now)
	if err != nil {
		t.Fatal(err)
	}
	if listed, err := readJournalFile(aside); err != nil || len(listed) != 2 {
		t.Errorf("the journal kept aside with the damaged file lists %+v (%v), want the 2 requests", listed, err)
	}

	fresh := openT(t, path, nil)
	if fresh.Run() <= run {
		t.Errorf("the fresh history's run is %d, want one after the crashed run %d", fresh.Run(), run)
	}
	ctx := context.Background()
	rs, err := fresh.Requests(ctx, Filter{Status: StatusAbandoned})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[uint64]Request{}
	for _, r := range rs {
		byID[r.PoolID] = r
	}
	if len(rs) != 2 || byID[1].Run != run || byID[1].WrittenToChild() || byID[2].Run != run || !byID[2].WrittenToChild() || byID[2].PID != 4242 {
		t.Errorf("abandoned in the fresh history: %+v; want requests 1 and 2 of run %d, 2 written to 4242", rs, run)
	}
	runs, err := fresh.Runs(ctx, 10)
	if err != nil || len(runs) != 2 || runs[1].ID != run || !runs[1].Crashed {
		t.Errorf("runs of the fresh history: %+v, %v; want run %d, crashed, and the fresh one", runs, err, run)
	}

	// A journal of a run older than the history's runs is not recorded
	// again (it is no news to a history that went on after it).
	fresh.Close()
	next := openT(t, path, nil)
	if rs, err := next.Requests(ctx, Filter{Status: StatusAbandoned}); err != nil || len(rs) != 2 {
		t.Errorf("abandoned after another start: %+v, %v; want the same 2", rs, err)
	}
}
