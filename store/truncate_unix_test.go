//go:build unix

package store

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// childEnv names the test a child process of the test binary runs (see
// inChild).
const childEnv = "STORE_TEST_IN_CHILD"

// inChild runs the test in a child process of the test binary and says
// whether it did (the caller then returns); in that child it says false,
// and the caller runs the test. A store into a mapped page past its
// file's end is SIGBUS, which kills a process whatever goroutine made it:
// a test of what a truncated journal does must fail, not end the test
// binary with the tests after it.
func inChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		return false
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s, run in a child process: %v\n%s", t.Name(), err, out)
	}
	t.Logf("%s, run in a child process:\n%s", t.Name(), out)
	return true
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// journalWhole says whether the journal of the database at path has its
// whole size.
func journalWhole(path string) bool {
	fi, err := os.Stat(journalPath(path))
	return err == nil && fi.Size() == journalSize
}

// queuedEnd says whether the end of the request with originalID waits
// for the writer.
func queuedEnd(s *Store, originalID string) bool {
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	for _, r := range s.rec.rows {
		if r.originalID == originalID && r.answered != 0 {
			return true
		}
	}
	return false
}

// The ways a file is truncated in place (the same file, shorter): `: >
// file`, `truncate -s 0`, logrotate's copytruncate; and `cp` of a
// smaller file over it.
var truncations = []struct {
	name string
	do   func(path string) error
}{
	{"emptied", func(p string) error { return os.Truncate(p, 0) }},
	{"copied over", func(p string) error { return os.WriteFile(p, []byte("a smaller file\n"), 0o600) }},
}

// A store or load past the end of a journal's file truncated under its
// mapping faults: each method that touches the mapping loses it instead
// (a lost journal does nothing, and its slots are none of the next
// mapping's), and mapped again from the file, whole, the journal records
// again. The first edition died of SIGBUS at the first such store.
func TestJournalMethodsSurviveATruncatedFile(t *testing.T) {
	if inChild(t) {
		return
	}
	now := time.Now().UnixMicro()
	row := reqRow{id: 1, poolID: 1, session: "s1", server: "srv", method: "tools/call", name: "echo", originalID: "1", received: now}
	for _, tc := range []struct {
		name string
		use  func(j *journal, slots []int32)
		// header says it touches the header alone, which a short file
		// keeps mapped: only an empty one faults.
		header bool
	}{
		{"take", func(j *journal, _ []int32) {
			for range 32 { // past the first page, which a short file keeps
				if j.take(&row) == 0 {
					return
				}
			}
		}, false},
		{"written", func(j *journal, slots []int32) { j.written(slots[len(slots)-1], now, 42) }, false},
		{"answered", func(j *journal, slots []int32) { j.answered(slots[len(slots)-1], now, now, 42) }, false},
		{"release", func(j *journal, slots []int32) { j.release(slots[len(slots)-1]) }, false},
		{"reset", func(j *journal, _ []int32) { j.reset(1) }, false},
		{"markStopped", func(j *journal, _ []int32) { j.markStopped(now) }, true},
	} {
		for _, tr := range truncations {
			if tc.header && tr.name != "emptied" {
				continue
			}
			t.Run(tc.name+"/"+tr.name, func(t *testing.T) {
				path := dbPath(t)
				j, _, err := openJournal(path)
				if err != nil {
					t.Fatal(err)
				}
				defer j.close()
				j.reset(1)
				var slots []int32
				for range 32 { // the last one past the first page
					slots = append(slots, j.take(&row))
				}
				if err := tr.do(journalPath(path)); err != nil {
					t.Fatal(err)
				}
				tc.use(j, slots)
				if j.mem != nil {
					t.Fatal("after a fault the journal is still mapped")
				}
				if l, w := j.inUse(); l != 0 || w != 0 {
					t.Errorf("a lost journal lists %d in flight, %d written; want none", l, w)
				}
				// A lost journal does nothing, and slots it gave before are
				// none of a journal mapped since.
				if j.take(&row) != 0 {
					t.Error("a lost journal gave a slot")
				}
				j.written(slots[0], now, 42)
				j.release(slots[0])

				fresh, _, err := openJournal(path)
				if err != nil {
					t.Fatal(err)
				}
				j.moveTo(fresh)()
				if !journalWhole(path) {
					t.Error("the journal mapped again has not its whole size")
				}
				first := j.take(&row)
				if first == 0 || first == slots[0] {
					t.Fatalf("the journal mapped again gave slot %d (the lost one gave %d)", first, slots[0])
				}
				j.release(slots[0]) // of the lost mapping: not the new request's
				j.written(first, now, 42)
				if l, w := j.inUse(); l != 1 || w != 1 {
					t.Errorf("the journal mapped again lists %d in flight, %d written; want 1, 1", l, w)
				}
				if listed, err := readJournalFile(path); err != nil || len(listed) != 1 || listed[0].Run != 1 || listed[0].PID != 42 {
					t.Errorf("the file lists %+v (%v); want the one request, written to 42", listed, err)
				}
			})
		}
	}
}

// The journal (history.db-inflight) truncated in place while the pool
// runs: the pool goes on answering, status says the journal was lost
// until it is made again at the next check, the request in flight that
// the journal listed gets its row (a crash must still find it), and
// later requests are journaled and recorded. The first edition died of
// SIGBUS at the next request: its file is mapped, and a store past the
// end of a mapped file is one.
func TestJournalTruncatedUnderThePool(t *testing.T) {
	if inChild(t) {
		return
	}
	for _, tr := range truncations {
		t.Run(tr.name, func(t *testing.T) {
			path := dbPath(t)
			var logs logBuffer
			s := openT(t, path, &Options{FlushInterval: time.Hour, Logger: logs.logger()})
			_, sock := servePool(t, &pool.Options{Record: s.Record})
			c := dialPool(t, sock)
			c.send(t, `{"jsonrpc":"2.0","id":"before","method":"tools/call","params":{"name":"sleep","arguments":{"ms":60000}}}`)
			waitFor(t, "the call in flight to be journaled as written", func() bool {
				l, w := s.Journaled()
				return l == 1 && w == 1
			})
			if err := s.flush(); err != nil { // nothing due: the writer looks at its files
				t.Fatal(err)
			}

			if err := tr.do(journalPath(path)); err != nil {
				t.Fatal(err)
			}
			const calls = 20 // past the journal's first page, which a short file keeps
			for i := range calls {
				c.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":"after-%d","method":"tools/call","params":{"name":"echo","arguments":{"text":"t%d"}}}`, i, i))
				if got := c.recv(t); !strings.Contains(got, fmt.Sprintf(`"id":"after-%d"`, i)) || !strings.Contains(got, `"result"`) {
					t.Fatalf("call %d after the journal was truncated: %s", i, got)
				}
			}
			waitFor(t, "the last call's end to reach the store", func() bool { return queuedEnd(s, fmt.Sprintf(`"after-%d"`, calls-1)) })
			if err := s.JournalErr(); err == nil || !strings.Contains(err.Error(), "truncated") {
				t.Errorf("JournalErr after the journal was truncated: %v; want it to say so", err)
			}
			waitFor(t, "the journal made again, and the log to say so", func() bool {
				return s.JournalErr() == nil && journalWhole(path) && strings.Contains(logs.String(), "recreated the journal")
			})

			c.send(t, `{"jsonrpc":"2.0","id":"later","method":"tools/call","params":{"name":"sleep","arguments":{"ms":60000}}}`)
			waitFor(t, "the later call to be journaled as written", func() bool {
				l, w := s.Journaled()
				return l == 1 && w == 1
			})
			if err := s.flush(); err != nil {
				t.Fatal(err)
			}
			if listed, err := readJournalFile(path); err != nil || len(listed) != 1 || listed[0].OriginalID != `"later"` || listed[0].Run != s.Run() {
				t.Errorf("the journal made again lists %+v (%v); want the later call, of run %d", listed, err, s.Run())
			}
			byID := map[string]Request{}
			for _, r := range readRequests(t, path) {
				byID[r.OriginalID] = r
			}
			if r := byID[`"before"`]; r.Status != StatusInFlight || !r.WrittenToChild() {
				t.Errorf("the call in flight when the journal was lost: %+v; want its in-flight row, written to its child", r)
			}
			for i := range calls {
				if r := byID[fmt.Sprintf(`"after-%d"`, i)]; r.Status != pool.StatusOK {
					t.Errorf("call %d after the journal was truncated: %+v; want ok", i, r)
				}
			}
			if s.Dropped() != 0 {
				t.Errorf("dropped %d events", s.Dropped())
			}
		})
	}
}
