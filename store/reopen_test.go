package store

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// readRequests is what `switchboard history` shows: the file at path,
// opened read-only.
func readRequests(t *testing.T, path string) map[uint64]Request {
	t.Helper()
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rs, err := ro.Requests(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]Request{}
	for _, r := range rs {
		got[r.PoolID] = r
	}
	return got
}

// A database file deleted while the store runs (alone, or with its WAL,
// shared memory and journal) is said to be gone (Err), and made again at
// its path with the run and what it has open: the child it runs (leak
// detection's record of it), the request in flight with its row; what is
// recorded next goes into it, and a crash finds the journal there too.
// It used to go on writing into the deleted file, saying nothing, until
// the stop took everything with it.
func TestDeletedFileIsRecreated(t *testing.T) {
	for _, tc := range []struct {
		name     string
		suffixes []string
	}{
		{"database", []string{""}},
		{"all", []string{"", "-wal", "-shm", "-inflight"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			ctx := context.Background()
			s := openT(t, path, &Options{FlushInterval: time.Hour})
			now := time.Now()
			s.Record(pool.Event{Kind: pool.EventBackendStarted, Time: now, Server: "srv", PID: 4242, ProcessStart: now,
				Command: []string{"srv-mcp"}})
			s.Record(pool.Event{Kind: pool.EventSessionOpened, Time: now, Server: "srv", Session: "s1", ClientName: "claude-code"})
			s.Record(received(1, "s1", "tools/call", "slow", now.Add(-2*time.Second))) // in flight, with its row
			s.Record(received(2, "s1", "tools/call", "before", now))
			s.Record(done(2, "s1", "tools/call", "before", pool.StatusOK, 4242, now))
			if err := s.flush(); err != nil {
				t.Fatal(err)
			}
			for _, suffix := range tc.suffixes {
				if err := os.Remove(path + suffix); err != nil {
					t.Fatal(err)
				}
			}

			if err := s.Err(); !errors.Is(err, errFileGone) {
				t.Errorf("Err after the file was deleted: %v, want it to say so", err)
			}
			waitFor(t, "the database file made again", func() bool {
				_, err := os.Stat(path)
				return err == nil && s.Err() == nil
			})
			if err := s.flush(); err != nil {
				t.Fatal(err)
			}
			got := readRequests(t, path)
			if r, ok := got[1]; !ok || r.Status != StatusInFlight || r.Run != s.Run() {
				t.Errorf("the request in flight in the new file: %+v (%v), want in flight, of run %d", r, ok, s.Run())
			}
			if _, ok := got[2]; ok {
				t.Error("a request recorded before the deletion is in the new file")
			}

			s.Record(written(1, "s1", 4242, now))
			s.Record(done(1, "s1", "tools/call", "slow", pool.StatusOK, 4242, now.Add(time.Millisecond)))
			s.Record(received(3, "s1", "tools/call", "after", now))
			s.Record(done(3, "s1", "tools/call", "after", pool.StatusOK, 4242, now))
			s.Record(received(4, "s1", "tools/call", "stuck", now)) // in flight at the crash: the journal's
			if err := s.flush(); err != nil {
				t.Fatal(err)
			}
			got = readRequests(t, path)
			for _, id := range []uint64{1, 3} {
				if r := got[id]; r.Status != pool.StatusOK || r.PID != 4242 {
					t.Errorf("request %d in the new file: %+v, want ok, from child 4242", id, r)
				}
			}
			if listed, err := readJournalFile(path); err != nil || len(listed) != 1 || listed[0].PoolID != 4 {
				t.Errorf("the journal at the path lists %+v (%v), want request 4", listed, err)
			}
			if sess, err := s.rdb().Query(`SELECT 1 FROM sessions WHERE run = ? AND id = 's1' AND client_name = 'claude-code'`, s.Run()); err != nil || !sess.Next() {
				t.Errorf("the open session is not in the new file (%v)", err)
			} else {
				sess.Close()
			}

			crash(t, s)
			children, err := ReadChildrenOfEarlierRuns(ctx, path)
			if err != nil || len(children) != 1 || children[0].PID != 4242 {
				t.Errorf("children of earlier runs after a crash: %+v, %v; want child 4242, never seen to exit", children, err)
			}
			next := openT(t, path, nil)
			if rs, err := next.Requests(ctx, Filter{Status: StatusAbandoned}); err != nil || len(rs) != 1 || rs[0].PoolID != 4 {
				t.Errorf("abandoned after the crash: %+v, %v; want request 4, from the journal", rs, err)
			}
		})
	}
}

// A stop with the database file deleted, asked nothing before, writes
// its last rows and the run's end into a file made at the path, not into
// the deleted one.
func TestStopAfterTheFileWasDeleted(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, &Options{FlushInterval: time.Hour})
	run := s.Run()
	now := time.Now()
	s.Record(pool.Event{Kind: pool.EventBackendStarted, Time: now, Server: "srv", PID: 4242, Command: []string{"srv-mcp"}})
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	s.Record(received(1, "s1", "tools/call", "last", now))
	s.Record(done(1, "s1", "tools/call", "last", pool.StatusOK, 4242, now))
	s.Record(pool.Event{Kind: pool.EventBackendExited, Time: now, Server: "srv", PID: 4242})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if r := readRequests(t, path)[1]; r.Status != pool.StatusOK {
		t.Errorf("the last request in the file at the path: %+v, want ok", r)
	}
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	runs, err := ro.Runs(context.Background(), 10)
	if err != nil || len(runs) != 1 || runs[0].ID != run || runs[0].Ended.IsZero() || runs[0].Crashed {
		t.Errorf("runs in the file at the path: %+v, %v; want run %d, ended", runs, err, run)
	}
	if children, err := ro.ChildrenOfEarlierRuns(context.Background()); err != nil || len(children) != 0 {
		t.Errorf("children never seen to exit: %+v, %v; want none (child 4242 exited)", children, err)
	}
}

// putAnotherHistory moves a history that has had runs runs of its own to
// path, the file of s, and waits until s refuses it.
func putAnotherHistory(t *testing.T, s *Store, path string, runs int) {
	t.Helper()
	other := dbPath(t)
	for range runs {
		o := openT(t, other, nil)
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the store to refuse the file", func() bool {
		err := s.Err()
		return err != nil && strings.Contains(err.Error(), "cannot be made again")
	})
}

// Another history's file put in the database file's place (it has later
// runs: its rows and this run's would mix) is left as it is: the store
// records nothing meanwhile and says why, and makes its own file again
// once the path is free.
func TestReplacedByAnotherHistory(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, &Options{FlushInterval: time.Hour})
	putAnotherHistory(t, s, path, 3)
	now := time.Now()
	s.Record(received(1, "s1", "tools/call", "lost", now))
	s.Record(done(1, "s1", "tools/call", "lost", pool.StatusOK, 0, now))
	if err := s.flush(); err == nil || s.Dropped() == 0 {
		t.Errorf("a batch with no file to write: %v, %d dropped; want an error and drops", err, s.Dropped())
	}
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := ro.Runs(context.Background(), 10)
	ro.Close()
	if err != nil || len(runs) != 3 || runs[0].Crashed || runs[0].ID != 3 {
		t.Errorf("the other history's runs: %+v, %v; want its 3 runs as they were", runs, err)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the file made again", func() bool { return s.flush() == nil })
	s.Record(received(2, "s1", "tools/call", "kept", now))
	s.Record(done(2, "s1", "tools/call", "kept", pool.StatusOK, 0, now))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if r := readRequests(t, path)[2]; r.Status != pool.StatusOK || r.Run != s.Run() {
		t.Errorf("request 2 in the file made again: %+v, want ok, of run %d", r, s.Run())
	}
}

// A database file truncated in place while the store runs (`: > file`,
// logrotate's copytruncate) is the same file, with nothing in it: it is
// said to be gone, what is left of it is moved aside (SQLite would write
// its WAL's pages back into it as it closed it), and a new one is made at
// the path with the run and what it has open. A read-only open of it
// meanwhile (`switchboard history`) refuses it as it is, and deletes
// nothing: SQLite reads a file with no page as an empty database and
// deletes the WAL beside it, the running store's. It used to say nothing
// (the same file), the read-only open said "older schema (schema version
// 0)" and deleted the WAL, and what the store wrote from then on went into
// the deleted WAL, lost at the stop.
func TestTruncatedFileIsRecreated(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, &Options{FlushInterval: time.Hour})
	now := time.Now()
	s.Record(pool.Event{Kind: pool.EventBackendStarted, Time: now, Server: "srv", PID: 4242, ProcessStart: now,
		Command: []string{"srv-mcp"}})
	s.Record(received(1, "s1", "tools/call", "before", now))
	s.Record(done(1, "s1", "tools/call", "before", pool.StatusOK, 4242, now))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	wal, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}

	const refused = "history.db is empty or damaged (was it truncated?)"
	if _, err := OpenReadOnly(path); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("read-only open of the truncated file: %v; want %q", err, refused)
	}
	if now, err := os.Stat(path + "-wal"); err != nil || !os.SameFile(wal, now) {
		t.Errorf("the WAL after a read-only open of the truncated file: %v; want it left as it was", err)
	}
	if _, err := ReadChildrenOfEarlierRuns(context.Background(), path); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("children of earlier runs from the truncated file: %v; want %q", err, refused)
	}

	if err := s.Err(); !errors.Is(err, errFileGone) || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("Err after the file was truncated: %v, want it to say so", err)
	}
	waitFor(t, "the database file made again", func() bool { return s.Err() == nil })
	aside, _ := filepath.Glob(path + ".damaged-*")
	if len(aside) == 0 {
		t.Error("what was left of the truncated file was not moved aside")
	}
	s.Record(received(2, "s1", "tools/call", "after", now))
	s.Record(done(2, "s1", "tools/call", "after", pool.StatusOK, 4242, now))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got := readRequests(t, path)
	if r := got[2]; r.Status != pool.StatusOK || r.Run != s.Run() {
		t.Errorf("the request recorded after the truncation: %+v, want ok, of run %d", r, s.Run())
	}
	if children, err := ReadChildrenOfEarlierRuns(context.Background(), path); err != nil || len(children) != 1 || children[0].PID != 4242 {
		t.Errorf("children of earlier runs in the new file: %+v, %v; want child 4242, never seen to exit", children, err)
	}
}

// copyInPlace writes the file at from over the file at to, as `cp` does:
// the same file (inode), its content replaced. It writes before it cuts
// the length, so the file is never short of a header meanwhile.
func copyInPlace(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(to, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		t.Fatal(err)
	}
}

// integrity is what SQLite's integrity_check says of the file at path.
func integrity(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite3", dsn(path, "mode=ro"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&out); err != nil {
		return err.Error()
	}
	return out
}

// A whole database copied over the database file in place while the
// store runs (`cp old.db history.db`: the same file, another content)
// is noticed: SQLite would read its pages mixed with the WAL's, the
// running store's, and both histories would be damaged. An older copy of
// the same history takes the running run on; another history's is left
// as it is, and Err says why. It used to go unnoticed: the file was
// "malformed" from then on, Err said nothing, and the next start moved it
// all aside.
func TestCopiedOverInPlace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		other bool
	}{{"older copy of the same history", false}, {"another history", true}} {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			old := filepath.Join(t.TempDir(), "old.db")
			src := path
			if tc.other {
				src = old
			}
			for i := range 3 {
				if i == 2 && !tc.other { // the copy is older than the file
					copyInPlace(t, path, createdFile(t, old))
				}
				o := openT(t, src, nil)
				o.Record(received(1, "s1", "tools/call", "earlier", time.Now()))
				o.Record(done(1, "s1", "tools/call", "earlier", pool.StatusOK, 0, time.Now()))
				if err := o.Close(); err != nil {
					t.Fatal(err)
				}
			}
			s := openT(t, path, &Options{FlushInterval: time.Hour})
			now := time.Now()
			for i := range 2000 { // many pages, some of them written back into the file
				s.Record(received(uint64(100+i), "s1", "tools/call", strings.Repeat("x", 100), now))
				s.Record(done(uint64(100+i), "s1", "tools/call", strings.Repeat("x", 100), pool.StatusOK, 0, now))
				if i%500 == 0 {
					if err := s.flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := s.flush(); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(old); err != nil || fi.Size() <= minDBSize {
				t.Fatalf("the copy: %v, %v; want a whole database", fi, err)
			}
			copyInPlace(t, old, path)

			if err := s.Err(); !errors.Is(err, errFileGone) {
				t.Errorf("Err after a database was copied over the file: %v, want it to say so", err)
			}
			if tc.other {
				waitFor(t, "the store to refuse the file", func() bool {
					err := s.Err()
					return err != nil && strings.Contains(err.Error(), "cannot be made again")
				})
			} else {
				waitFor(t, "the database file made again", func() bool { return s.Err() == nil })
				s.Record(received(9999, "s1", "tools/call", "after", now))
				s.Record(done(9999, "s1", "tools/call", "after", pool.StatusOK, 0, now))
			}
			if err := s.Close(); err != nil && !tc.other {
				t.Fatal(err)
			}
			if got := integrity(t, path); got != "ok" {
				t.Fatalf("integrity of the file at the path: %s", got)
			}
			ro, err := OpenReadOnly(path)
			if err != nil {
				t.Fatal(err)
			}
			runs, err := ro.Runs(context.Background(), 10)
			ro.Close()
			if tc.other {
				if err != nil || len(runs) != 3 || runs[0].ID != 3 {
					t.Errorf("the other history's runs: %+v, %v; want its 3 runs as they were", runs, err)
				}
				return
			}
			if err != nil || len(runs) != 3 || runs[0].ID != s.Run() {
				t.Errorf("runs: %+v, %v; want the 2 of the copy and run %d", runs, err, s.Run())
			}
			if r := readRequests(t, path)[9999]; r.Status != pool.StatusOK || r.Run != s.Run() {
				t.Errorf("the request recorded after the copy: %+v, want ok, of run %d", r, s.Run())
			}
		})
	}
}

// createdFile makes an empty file at path and returns path.
func createdFile(t *testing.T, path string) string {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
