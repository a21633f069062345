package store

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// A database its run stopped cleanly (no -wal or -shm left) in a
// directory the reader cannot write (a backup, another user's home it may
// only read) is read: SQLite cannot make the -shm a WAL database is read
// with, so the reader opens it immutable. The first edition failed with
// "attempt to write a readonly database".
func TestOpenReadOnlyInAReadOnlyDirectory(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs a directory its user cannot write (a mode of 0500 is no such thing on Windows)")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "history.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s.Record(received(1, "s1", "tools/call", "echo", now))
	s.Record(done(1, "s1", "tools/call", "echo", "ok", 7, now))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path + "-wal", path + "-shm"} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Fatalf("%s after a clean stop: %v; want none", filepath.Base(f), err)
		}
	}
	path = filepath.Join(readOnlyView(t, dir), "history.db")

	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	ctx := context.Background()
	rs, err := ro.Requests(ctx, Filter{})
	if err != nil || len(rs) != 1 || rs[0].Name != "echo" {
		t.Errorf("requests: %+v, %v; want the one recorded", rs, err)
	}
	if _, err := ro.Hangs(ctx, 0, now); err != nil {
		t.Errorf("hangs: %v", err)
	}
	if _, err := ReadChildrenOfEarlierRuns(ctx, path); err != nil {
		t.Errorf("children of earlier runs: %v", err)
	}
}

// chmodReadOnly turns dir's write bits off for the test: its user (not
// root) may no longer write it.
func chmodReadOnly(t *testing.T, dir string) string {
	t.Helper()
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) }) // for TempDir's removal
	return dir
}
