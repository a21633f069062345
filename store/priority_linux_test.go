package store

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestWriterThreadRunsAtLowerPriority: opening a store adds one thread
// at writerNice (the writer's), the test's own thread stays at normal
// priority, and closing the store ends that thread, so no other work
// inherits the lowered priority.
func TestWriterThreadRunsAtLowerPriority(t *testing.T) {
	s, writer := openWatchingTheWriter(t, dbPath(t))
	if n := niceOf(t, "/proc/thread-self/stat"); n != 0 {
		t.Errorf("the opening thread's nice is %d, want 0", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the writer's thread to end", func() bool { return !threadsAtNice(t, writerNice)[writer] })
}

// TestWriterNeverLowersTheMainThread: a goroutine may run on the
// process's main thread (in a test binary, a third of them or more do),
// and that thread outlives a goroutine that exits locked to it. Store
// after store, none leaves a thread at nice 5 behind, the main thread
// least of all.
func TestWriterNeverLowersTheMainThread(t *testing.T) {
	dir := t.TempDir()
	for i := range 40 {
		s, writer := openWatchingTheWriter(t, filepath.Join(dir, strconv.Itoa(i)+".db"))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the writer's thread to end", func() bool { return !threadsAtNice(t, writerNice)[writer] })
	}
	if n := niceOf(t, "/proc/self/task/"+strconv.Itoa(os.Getpid())+"/stat"); n != 0 {
		t.Errorf("the main thread's nice is %d, want 0", n)
	}
}

// openWatchingTheWriter opens a store at path and returns it with the id
// of the thread at writerNice that opening it added. Threads are told
// apart by id, not counted: an earlier store's writer thread may still be
// ending as this one starts.
func openWatchingTheWriter(t *testing.T, path string) (*Store, string) {
	t.Helper()
	before := threadsAtNice(t, writerNice)
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var writer string
	waitFor(t, "the writer's thread at nice 5", func() bool {
		for tid := range threadsAtNice(t, writerNice) {
			if !before[tid] {
				writer = tid
				return true
			}
		}
		return false
	})
	return s, writer
}

// threadsAtNice is the set of this process's threads (their ids) whose
// nice value is nice.
func threadsAtNice(t *testing.T, nice int) map[string]bool {
	t.Helper()
	stats, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, stat := range stats {
		if niceOf(t, stat) == nice {
			out[filepath.Base(filepath.Dir(stat))] = true
		}
	}
	return out
}

// niceOf reads the nice value (field 19) of a /proc stat file; -100 when
// the thread ended meanwhile.
func niceOf(t *testing.T, stat string) int {
	t.Helper()
	b, err := os.ReadFile(stat)
	if err != nil {
		return -100
	}
	// Fields after the command, which is in parentheses and may hold spaces.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	n, err := strconv.Atoi(fields[16]) // field 19 of the whole line
	if err != nil {
		t.Fatalf("%s: nice %q: %v", stat, fields[16], err)
	}
	return n
}
