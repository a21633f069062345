package store

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A request whose texts are longer than a journal slot holds (a
// resources/read of a deep file URI: its name is the URI) is journaled
// with them cut, at a character boundary and marked with "…": a kill
// before its row is written records it abandoned all the same. An id cut
// so is no longer the client's, so a resumed session is not answered
// with it. The first edition did not journal such a request at all: a
// kill lost it.
func TestJournalCutsLongTexts(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, &Options{FlushInterval: time.Hour})
	run := s.Run()
	now := time.Now()
	uri := "file:///x" + strings.Repeat("é", 150) // a byte count cut mid-character
	s.Record(received(1, "s1", "resources/read", uri, now))
	s.Record(written(1, "s1", 40, now))
	longID := received(2, "s1", "tools/call", "echo", now)
	longID.OriginalID = `"` + strings.Repeat("k", 300) + `"`
	s.Record(longID)
	if l, _ := s.Journaled(); l != 2 {
		t.Errorf("journaled %d, want both", l)
	}
	kill(s)

	s2 := openT(t, path, nil)
	ctx := context.Background()
	rs, err := s2.Requests(ctx, Filter{Status: StatusAbandoned})
	if err != nil || len(rs) != 2 {
		t.Fatalf("abandoned: %+v, %v; want both requests", rs, err)
	}
	cut := func(what, got, whole string) {
		t.Helper()
		kept, ok := strings.CutSuffix(got, "…")
		if !ok || !utf8.ValidString(got) || !strings.HasPrefix(whole, kept) || len(kept) < 100 {
			t.Errorf("%s: %q; want a long prefix of %q, cut at a character boundary, ending in …", what, got, whole)
		}
	}
	long, uriReq := rs[0], rs[1] // newest first
	cut("the URI", uriReq.Name, uri)
	if uriReq.Method != "resources/read" || uriReq.Session != "s1" || uriReq.Server != "srv" || uriReq.OriginalID != "1" ||
		uriReq.PID != 40 || !uriReq.WrittenToChild() {
		t.Errorf("the URI's request: %+v; want its other texts whole, written to child 40", uriReq)
	}
	cut("the long id", long.OriginalID, longID.OriginalID)
	if long.Name != "echo" || long.Method != "tools/call" {
		t.Errorf("the long id's request: %+v; want its other texts whole", long)
	}
	known, err := s2.Unanswered(ctx, run, "s1")
	un := known.Requests
	if d := cmp.Diff([]pool.Unanswered{{OriginalID: "1", Method: "resources/read", Name: uriReq.Name, Written: true}}, un); err != nil || d != "" {
		t.Errorf("Unanswered (%v) (-want +got):\n%s", err, d)
	}
}

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
	known, err := s2.Unanswered(ctx, run, "s1")
	un := known.Requests
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

// fit keeps short texts whole and shares the rest of a slot between the
// long ones, each cut at a character boundary.
func TestFit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		texts [5]string
		cut   byte
	}{
		{"all short", [5]string{"s1", "srv", "tools/call", "echo", "1"}, 0},
		{"a long name", [5]string{"s1", "srv", "resources/read", strings.Repeat("é", 200), "1"}, 1 << 3},
		{"a name over 255 alone", [5]string{"", "", "", strings.Repeat("x", 300), ""}, 1 << 3},
		{"a long name and id", [5]string{"s1", "srv", "tools/call", strings.Repeat("n", 300), strings.Repeat("9", 150)}, 1<<3 | 1<<4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			texts := tc.texts
			cut := fit(&texts)
			total := 0
			for i, s := range texts {
				total += len(s)
				if len(s) > 255 || !utf8.ValidString(s) || !strings.HasPrefix(tc.texts[i], s) {
					t.Errorf("text %d: %q", i, s)
				}
				if cut&(1<<i) == 0 && s != tc.texts[i] {
					t.Errorf("text %d cut, not marked", i)
				}
			}
			if cut != tc.cut || total > journalTexts {
				t.Errorf("cut %05b, %d bytes; want %05b, at most %d", cut, total, tc.cut, journalTexts)
			}
		})
	}
}
