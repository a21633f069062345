package store

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A request answered in the moment before a kill (its end not yet
// committed) is recorded as answered, its outcome unknown: not abandoned,
// no hang, nothing owed to its client. The first edition recorded it
// abandoned, "before this request was answered", and a resumed session
// got a second answer for it, an error.
func TestJournalKnowsWhatWasAnswered(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, &Options{FlushInterval: time.Hour})
	run := s.Run()
	now := time.Now().Truncate(time.Microsecond)
	answeredAt := now.Add(5 * time.Millisecond)
	s.Record(received(1, "s1", "tools/call", "echo", now))
	s.Record(written(1, "s1", 40, now))
	s.Record(done(1, "s1", "tools/call", "echo", pool.StatusOK, 40, answeredAt))
	s.Record(received(2, "s1", "tools/call", "slow", now))
	s.Record(written(2, "s1", 40, now))
	if l, w := s.Journaled(); l != 1 || w != 1 {
		t.Errorf("journaled %d, written %d; want the one in flight alone", l, w)
	}
	kill(s)

	ctx := context.Background()
	hangs := func(who string, st *Store) {
		t.Helper()
		hs, err := st.Hangs(ctx, 0, now.Add(time.Minute))
		if err != nil || len(hs) != 1 || hs[0].Name != "slow" {
			t.Errorf("%s: hangs %+v, %v; want the slow one alone", who, hs, err)
		}
	}
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	hangs("a reader before the next start", ro)
	ro.Close()

	s2 := openT(t, path, nil)
	hangs("the next start", s2)
	rs, err := s2.Requests(ctx, Filter{})
	if err != nil || len(rs) != 2 {
		t.Fatalf("requests: %+v, %v", rs, err)
	}
	echo, slow := rs[1], rs[0]
	if echo.Status != StatusUnknown || echo.Abandoned || !echo.Answered.Equal(answeredAt) || echo.PID != 40 ||
		!echo.WrittenToChild() || !strings.Contains(echo.Err, "answered") {
		t.Errorf("the answered request: %+v; want unknown, answered at %s", echo, answeredAt)
	}
	if slow.Status != StatusAbandoned {
		t.Errorf("the one in flight: %s, want abandoned", slow.Status)
	}
	un, err := s2.Unanswered(ctx, run, "s1")
	if err != nil || len(un) != 1 || un[0].OriginalID != "2" {
		t.Errorf("Unanswered: %+v, %v; want request 2 alone", un, err)
	}
}

// A journal of layout version 1 (no answered time: its lengths at 40, its
// texts at 48), left by a crash of a build that wrote it, is read.
func TestJournalReadsVersion1(t *testing.T) {
	le := binary.LittleEndian
	mem := make([]byte, journalHeader+2*journalSlotSize)
	le.PutUint32(mem, journalMagic)
	le.PutUint32(mem[4:], 1)
	le.PutUint64(mem[8:], 7)
	le.PutUint32(mem[16:], journalSlotSize)
	le.PutUint32(mem[20:], 2)
	b := mem[journalHeader+journalSlotSize:] // the second slot; the first is free
	le.PutUint32(b, slotWritten)
	le.PutUint32(b[4:], 55)
	le.PutUint64(b[8:], uint64(rowID(7, 3)))
	le.PutUint64(b[16:], 3)
	le.PutUint64(b[24:], 1000)
	le.PutUint64(b[32:], 2000)
	at := b[48:]
	for i, text := range []string{"s1", "srv", "tools/call", "pay", "3"} {
		b[40+i] = byte(len(text))
		at = at[copy(at, text):]
	}
	want := []journaled{{Run: 7, ID: rowID(7, 3), PoolID: 3, Session: "s1", Server: "srv", Method: "tools/call", Name: "pay",
		OriginalID: "3", Received: 1000, Written: 2000, PID: 55}}
	if d := cmp.Diff(want, readJournal(mem)); d != "" {
		t.Errorf("readJournal (-want +got):\n%s", d)
	}
}
