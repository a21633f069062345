package store

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// While another history's file holds the path, every batch fails the
// same way: the log says so once, not once a batch (a busy pool writes
// one every FlushInterval), and says again when the failure changes.
// It used to warn at each batch.
func TestRefusedFileIsLoggedOnce(t *testing.T) {
	path := dbPath(t)
	var logged logBuffer
	s := openT(t, path, &Options{FlushInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	putAnotherHistory(t, s, path, 1)
	now := time.Now()
	for i := range uint64(5) {
		s.Record(received(i+1, "s1", "tools/call", "lost", now))
		s.Record(done(i+1, "s1", "tools/call", "lost", pool.StatusOK, 0, now))
		if err := s.flush(); err == nil {
			t.Fatalf("batch %d with no file to write: no error", i+1)
		}
	}
	if n := strings.Count(logged.String(), "history write failed"); n != 1 {
		t.Errorf("5 batches refused alike were logged %d times, want once:\n%s", n, logged.String())
	}
	if s.Dropped() < 5 {
		t.Errorf("%d records dropped, want at least the 5 refused", s.Dropped())
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the file made again", func() bool { return s.flush() == nil })
	s.Record(received(9, "s1", "tools/call", "kept", now))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if r := readRequests(t, path)[9]; r.Run != s.Run() {
		t.Errorf("request 9 in the file made again: %+v, want it of run %d", r, s.Run())
	}
}

// logBuffer is a log the test reads while the writer writes it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
