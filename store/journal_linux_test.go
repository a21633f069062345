package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/pool"
)

// tmpfs mounts a tmpfs of size bytes on a directory of the test's, and
// skips the test where it cannot (not root, or not allowed to mount). CI
// runs as root.
func tmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { // after the store's own cleanup closed it
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill fills the file system of dir but for about room bytes.
func fill(t *testing.T, dir string, room int64) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	var n int64
	for {
		m, err := f.Write(chunk)
		n += int64(m)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(max(n-room, 0)); err != nil {
		t.Fatal(err)
	}
}

// openNoFault is openT for a store whose journal may fault: a store into
// a mapped page that the file system has no room for is SIGBUS, which
// fails the test here instead of killing the test binary.
func openNoFault(t *testing.T, path string, o *Options) *Store {
	t.Helper()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Open faulted: %v\n%s", r, debug.Stack())
		}
	}()
	return openT(t, path, o)
}

// On a full disk the journal's 4 MiB cannot be had: the store goes on
// without it, says so, and records every request as it did before the
// journal (each in flight gets its row at the next batch). The first
// edition made the file sparse and mapped it: its first store into the
// map was SIGBUS, and every start of the pool died of it.
func TestJournalOnAFullDisk(t *testing.T) {
	path := filepath.Join(tmpfs(t, 1<<20), "history.db")
	s := openNoFault(t, path, nil)
	if err := s.JournalErr(); err == nil {
		t.Error("JournalErr = nil on a 1 MiB disk; want why there is no journal")
	}
	now := time.Now()
	s.Record(received(1, "s1", "tools/call", "echo", now))
	s.Record(written(1, "s1", 40, now))
	s.Record(done(1, "s1", "tools/call", "echo", pool.StatusOK, 40, now.Add(time.Millisecond)))
	s.Record(received(2, "s1", "tools/call", "slow", now))
	if l, w := s.Journaled(); l != 0 || w != 0 {
		t.Errorf("journaled %d, written %d without a journal", l, w)
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Requests(context.Background(), Filter{})
	if err != nil || len(rs) != 2 || rs[0].Status != StatusInFlight || rs[1].Status != pool.StatusOK {
		t.Errorf("requests: %+v, %v; want request 2 in flight, 1 ok", rs, err)
	}
}

// A journal that a crashed run left sparse (the first edition made it
// so) on a disk with no room to fill it: what it lists is recorded, and
// the store goes on without it.
func TestSparseJournalOnAFullDisk(t *testing.T) {
	dir := tmpfs(t, 16<<20)
	path := filepath.Join(dir, "history.db")
	s := openT(t, path, &Options{FlushInterval: time.Hour})
	now := time.Now()
	s.Record(received(1, "s1", "tools/call", "pay", now))
	s.Record(written(1, "s1", 55, now))
	kill(s)

	// The journal as a sparse file: its header and first slots, holes
	// after them.
	jp := journalPath(path)
	b, err := os.ReadFile(jp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(jp); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(jp, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(journalSize); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b[:64<<10], 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	fill(t, dir, 512<<10) // room for SQLite, not for the journal

	s2 := openNoFault(t, path, nil)
	if err := s2.JournalErr(); err == nil {
		t.Error("JournalErr = nil; want why there is no journal")
	}
	rs, err := s2.Requests(context.Background(), Filter{Status: StatusAbandoned})
	if err != nil || len(rs) != 1 || rs[0].Name != "pay" || rs[0].PID != 55 || !rs[0].WrittenToChild() {
		t.Errorf("abandoned: %+v, %v; want request 1, written to child 55", rs, err)
	}
	if st, err := os.Stat(jp); err != nil || st.Size() != 0 {
		t.Errorf("the journal after its requests were recorded: %v bytes (%v); want it emptied, its blocks given back", st.Size(), err)
	}
}

// Where the file system cannot allocate (fallocate is not supported), the
// journal's blocks are had by writing its bytes back: on a full disk that
// fails, keeps what the file held, and gives back what it took.
func TestRewriteOnAFullDisk(t *testing.T) {
	dir := tmpfs(t, 1<<20)
	f, err := os.OpenFile(filepath.Join(dir, "j"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	had := make([]byte, journalSize)
	copy(had, "a crashed run's journal")
	if _, err := f.Write(had[:4096]); err != nil {
		t.Fatal(err)
	}
	if err := rewrite(f, had, 4096); err == nil {
		t.Fatal("rewrite of 4 MiB on a 1 MiB disk: no error")
	}
	if st, err := f.Stat(); err != nil || st.Size() != 4096 {
		t.Errorf("after a failed rewrite the file has %v bytes (%v); want the 4096 it had", st.Size(), err)
	}
	got := make([]byte, 64)
	if _, err := f.ReadAt(got, 0); err != nil || string(got[:23]) != "a crashed run's journal" {
		t.Errorf("after a failed rewrite the file holds %q (%v)", got, err)
	}
}
