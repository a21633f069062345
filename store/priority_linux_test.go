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
	before := threadsAtNice(t, writerNice)
	s, err := Open(dbPath(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the writer's thread at nice 5", func() bool { return threadsAtNice(t, writerNice) == before+1 })
	if n := niceOf(t, "/proc/thread-self/stat"); n != 0 {
		t.Errorf("the opening thread's nice is %d, want 0", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the writer's thread to end", func() bool { return threadsAtNice(t, writerNice) == before })
}

// TestWriterNeverLowersTheMainThread: a goroutine may run on the
// process's main thread (in a test binary, a third of them or more do),
// and that thread outlives a goroutine that exits locked to it. Store
// after store, none leaves a thread at nice 5 behind, the main thread
// least of all.
func TestWriterNeverLowersTheMainThread(t *testing.T) {
	before := threadsAtNice(t, writerNice)
	dir := t.TempDir()
	for i := range 40 {
		s, err := Open(filepath.Join(dir, strconv.Itoa(i)+".db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the writer's thread to end", func() bool { return threadsAtNice(t, writerNice) == before })
	}
	if n := niceOf(t, "/proc/self/task/"+strconv.Itoa(os.Getpid())+"/stat"); n != 0 {
		t.Errorf("the main thread's nice is %d, want 0", n)
	}
}

// threadsAtNice counts this process's threads whose nice value is nice.
func threadsAtNice(t *testing.T, nice int) int {
	t.Helper()
	stats, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, stat := range stats {
		if niceOf(t, stat) == nice {
			n++
		}
	}
	return n
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
