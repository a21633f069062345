package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// Client ids and session ids are stored as integers where they are ones,
// and every one reads back exactly as it was recorded, through the query
// API and through the requests view.
func TestEncodedValuesReadBack(t *testing.T) {
	ids := []string{"1", "0", "-5", "42", `"1"`, `"abc"`, "1.0", "007", "-0", "1e3", "123456789012345678",
		"1234567890123456789", "99999999999999999999", `""`, "-", "[1]"}
	sessions := []string{"s1", "s01", "s0", "s", "abc", "123", "s12x", "s123456789012345678901", ""}
	for _, tc := range []struct {
		in   string
		want any
	}{
		{"1", int64(1)}, {"-5", int64(-5)}, {"0", int64(0)}, {"007", "007"}, {"-0", "-0"}, {`"1"`, `"1"`},
		{"123456789012345678", int64(123456789012345678)}, {"1234567890123456789", "1234567890123456789"},
	} {
		if got := idValue(tc.in); got != tc.want {
			t.Errorf("idValue(%s) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
	if got := sessionValue("s17"); got != int64(17) {
		t.Errorf("sessionValue(s17) = %#v", got)
	}

	path := dbPath(t)
	s := openT(t, path, nil)
	now := time.Now()
	n := uint64(0)
	type rec struct{ session, id string }
	want := map[uint64]rec{}
	for _, sess := range sessions {
		for _, id := range ids {
			n++
			want[n] = rec{sess, id}
			s.Record(pool.Event{Kind: pool.EventRequestReceived, Time: now, Server: "srv", Session: sess, PoolID: n,
				Method: "tools/call", Name: "echo", OriginalID: id})
			s.Record(done(n, sess, "tools/call", "echo", pool.StatusOK, 0, now))
		}
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Requests(context.Background(), Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d requests, want %d", len(got), len(want))
	}
	for _, r := range got {
		if w := want[r.PoolID]; r.Session != w.session || r.OriginalID != w.id {
			t.Errorf("request %d read back as session %q id %q, want %q %q", r.PoolID, r.Session, r.OriginalID, w.session, w.id)
		}
	}
	for _, sess := range sessions {
		rs, err := s.Requests(context.Background(), Filter{Session: sess, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if sess != "" && len(rs) != len(ids) {
			t.Errorf("Requests(session %q) = %d, want %d", sess, len(rs), len(ids))
		}
	}
	view := viewRows(t, path)
	for i, v := range view {
		w := want[uint64(i+1)]
		if prefix := fmt.Sprintf("%d|%d|%s|srv|tools/call|echo|%s|", s.Run(), i+1, w.session, w.id); len(v) < len(prefix) || v[:len(prefix)] != prefix {
			t.Errorf("view row %d = %s, want it to start %s", i+1, v, prefix)
		}
	}
}
