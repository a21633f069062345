package store

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A request in flight past InFlightAfter has a row before it ends, and its
// end updates that row: the cap counts it once. Each way the in-flight row
// and the end meet (an earlier batch, the same batch without a journal,
// payloads captured or not) records 3,000 requests against a cap of 1,000
// and must keep exactly the newest 1,000, not delete one real row too many
// for each.
func TestRowCapCountsAnUpdatedRowOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		// journal: the in-flight row is written by a batch of its own
		// (the request is journaled until it is due); without one it is
		// queued at receipt and meets its end in the same batch.
		journal, capture bool
	}{
		{"in-flight row in an earlier batch", true, false},
		{"in-flight row in an earlier batch, payloads captured", true, true},
		{"in-flight row in the same batch, no journal", false, false},
		{"in-flight row in the same batch, no journal, payloads captured", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			if !tc.journal { // a directory in its place: no journal
				if err := os.Mkdir(path+"-inflight", 0o700); err != nil {
					t.Fatal(err)
				}
			}
			const maxRows, rounds, perRound = 1000, 30, 100
			s := openT(t, path, &Options{MaxRows: maxRows, CapturePayloads: tc.capture, FlushInterval: time.Hour,
				BatchSize: 1 << 20})
			for r := range rounds {
				for i := range perRound {
					id := uint64(r*perRound + i + 1)
					e := received(id, "s1", "tools/call", "slow", at(time.Duration(id)*time.Millisecond))
					e.Payload = []byte(`{"id":1}`)
					s.Record(e)
				}
				if tc.journal { // received an hour ago: each gets its in-flight row now
					if err := s.flush(); err != nil {
						t.Fatal(err)
					}
				}
				for i := range perRound {
					id := uint64(r*perRound + i + 1)
					s.Record(done(id, "s1", "tools/call", "slow", pool.StatusOK, 7, at(time.Duration(id)*time.Millisecond+2*time.Second)))
				}
				if err := s.flush(); err != nil {
					t.Fatal(err)
				}
			}
			if s.Dropped() != 0 {
				t.Fatalf("dropped %d records", s.Dropped())
			}
			var n, minPool, notOK int
			if err := s.rdb().QueryRow(`SELECT count(*), coalesce(min(pool_id), 0), count(*) FILTER (WHERE status != 'ok')
				FROM requests`).Scan(&n, &minPool, &notOK); err != nil {
				t.Fatal(err)
			}
			if want := rounds*perRound - maxRows + 1; n != maxRows || minPool != want || notOK != 0 {
				t.Errorf("kept %d requests from pool id %d, %d not ok; want the newest %d (from %d), all ok",
					n, minPool, notOK, maxRows, want)
			}
		})
	}
}

// The cap deletes the oldest rows but never the in-flight row of a
// request of the live run that has not ended: a hang stays in
// history --status in-flight, Hangs and Unanswered however many requests
// come after it, and the cap takes the oldest other rows instead. Once
// the request ends, its row is an old row like any other.
func TestRowCapKeepsTheLiveRunsHangs(t *testing.T) {
	const maxRows = 50
	s := openT(t, dbPath(t), &Options{MaxRows: maxRows, FlushInterval: time.Hour, BatchSize: 1 << 20})
	ctx := context.Background()
	s.Record(received(1, "s1", "tools/call", "hung", at(0)))
	s.Record(written(1, "s1", 7, at(time.Millisecond)))
	if err := s.flush(); err != nil { // received an hour ago: its in-flight row now
		t.Fatal(err)
	}
	for id := uint64(2); id <= 101; id++ {
		s.Record(received(id, "s1", "tools/list", "", at(time.Duration(id)*time.Second)))
		s.Record(done(id, "s1", "tools/list", "", pool.StatusOK, 7, at(time.Duration(id)*time.Second+time.Millisecond)))
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	// check says what the history holds: the hang, and the newest others.
	check := func(when string, hung bool, wantMin int) {
		t.Helper()
		var n, minOther int
		if err := s.rdb().QueryRow(`SELECT count(*), coalesce(min(pool_id) FILTER (WHERE pool_id != 1), 0) FROM requests`).
			Scan(&n, &minOther); err != nil {
			t.Fatal(err)
		}
		if n != maxRows || minOther != wantMin {
			t.Errorf("%s: kept %d requests, the others from pool id %d; want %d, from %d", when, n, minOther, maxRows, wantMin)
		}
		inFlight, err := s.Requests(ctx, Filter{Status: StatusInFlight})
		if err != nil {
			t.Fatal(err)
		}
		hangs, err := s.Hangs(ctx, 0, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		known, err := s.Unanswered(ctx, s.run, "s1")
		owed := known.Requests
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if hung {
			want = 1
		}
		if len(inFlight) != want || len(hangs) != want || len(owed) != want {
			t.Fatalf("%s: %d in flight, %d hangs, %d unanswered; want %d each", when, len(inFlight), len(hangs), len(owed), want)
		}
		if hung && (inFlight[0].PoolID != 1 || hangs[0].PoolID != 1 || owed[0].Name != "hung" || !owed[0].Written) {
			t.Errorf("%s: in flight %+v, hangs %+v, unanswered %+v; want request 1, written", when, inFlight[0], hangs[0], owed[0])
		}
	}
	check("after a batch over the cap", true, 101-maxRows+2)
	if err := s.prune(); err != nil {
		t.Fatal(err)
	}
	check("after pruning", true, 101-maxRows+2)

	// It ends: the next batch over the cap deletes it first.
	s.Record(done(1, "s1", "tools/call", "hung", pool.StatusOK, 7, at(200*time.Second)))
	s.Record(received(102, "s1", "tools/list", "", at(201*time.Second)))
	s.Record(done(102, "s1", "tools/list", "", pool.StatusOK, 7, at(201*time.Second+time.Millisecond)))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	check("after it ended", false, 102-maxRows+1)
}

// When the live run's hangs alone exceed the cap, the cap deletes every
// other row and keeps them all: the count is the larger of the cap and
// the hangs, never more.
func TestRowCapWhenHangsFillIt(t *testing.T) {
	const maxRows, hung, others = 5, 8, 4
	s := openT(t, dbPath(t), &Options{MaxRows: maxRows, FlushInterval: time.Hour, BatchSize: 1 << 20})
	for id := uint64(1); id <= others; id++ {
		s.Record(received(id, "s1", "tools/list", "", at(time.Duration(id)*time.Second)))
		s.Record(done(id, "s1", "tools/list", "", pool.StatusOK, 7, at(time.Duration(id)*time.Second+time.Millisecond)))
	}
	for id := uint64(others + 1); id <= others+hung; id++ {
		s.Record(received(id, "s1", "tools/call", "hung", at(time.Duration(id)*time.Second)))
	}
	if err := s.flush(); err != nil { // received an hour ago: in-flight rows now
		t.Fatal(err)
	}
	var n, inFlight int
	if err := s.rdb().QueryRow(`SELECT count(*), count(*) FILTER (WHERE status = 'in-flight') FROM requests`).
		Scan(&n, &inFlight); err != nil {
		t.Fatal(err)
	}
	if n != hung || inFlight != hung {
		t.Errorf("kept %d requests, %d in flight; want the %d hangs alone", n, inFlight, hung)
	}
}

// An end whose in-flight row is gone (pruned by age, or lost with a
// failed batch) inserts its row, and that counts as a row added: the cap
// then deletes it as the oldest of MaxRows+1.
func TestRowCapCountsAnEndWhoseRowIsGone(t *testing.T) {
	const maxRows = 3
	s := openT(t, dbPath(t), &Options{RetainDays: 1, MaxRows: maxRows, FlushInterval: time.Hour, BatchSize: 1 << 20})
	old := time.Now().Add(-50 * time.Hour)
	s.Record(received(1, "s1", "tools/call", "slow", old))
	if err := s.flush(); err != nil { // its in-flight row
		t.Fatal(err)
	}
	if err := s.prune(); err != nil { // gone: older than a day
		t.Fatal(err)
	}
	s.Record(done(1, "s1", "tools/call", "slow", pool.StatusOK, 7, old.Add(time.Second)))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Requests(context.Background(), Filter{})
	if err != nil || len(rs) != 1 || rs[0].PoolID != 1 || rs[0].Status != pool.StatusOK {
		t.Fatalf("after its end: %+v, %v; want request 1, ok", rs, err)
	}
	now := time.Now()
	for id := uint64(2); id <= maxRows+1; id++ {
		s.Record(received(id, "s1", "tools/list", "", now))
		s.Record(done(id, "s1", "tools/list", "", pool.StatusOK, 7, now))
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	var n, minPool int
	if err := s.rdb().QueryRow(`SELECT count(*), min(pool_id) FROM requests`).Scan(&n, &minPool); err != nil {
		t.Fatal(err)
	}
	if n != maxRows || minPool != 2 {
		t.Errorf("kept %d requests from pool id %d; want %d, from 2", n, minPool, maxRows)
	}
}

// The requests earlier runs left unanswered (abandoned by a crash,
// unknown after a stop that lost their ends) are what the hang forensics
// look at after a restart: the cap deletes every other row before them,
// however many requests come after them.
func TestRowCapKeepsEarlierRunsAbandoned(t *testing.T) {
	path := dbPath(t)
	ctx := context.Background()
	// Run 1 crashes with three calls in flight: abandoned.
	s1 := openT(t, path, nil)
	for id := uint64(1); id <= 3; id++ {
		s1.Record(received(id, "s1", "tools/call", "hung", at(time.Duration(id)*time.Second)))
		s1.Record(written(id, "s1", 7, at(time.Duration(id)*time.Second)))
	}
	crash(t, s1)
	// Run 2 stops with one in flight: unknown.
	s2 := openT(t, path, nil)
	s2.Record(received(1, "s1", "tools/call", "open", at(10*time.Second)))
	if err := s2.flush(); err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	const maxRows = 50
	s := openT(t, path, &Options{MaxRows: maxRows, FlushInterval: time.Hour, BatchSize: 1 << 20})
	for id := uint64(1); id <= 3*maxRows; id++ {
		s.Record(received(id, "s1", "tools/list", "", at(time.Minute+time.Duration(id)*time.Millisecond)))
		s.Record(done(id, "s1", "tools/list", "", pool.StatusOK, 7, at(time.Minute+time.Duration(id)*time.Millisecond)))
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.prune(); err != nil {
		t.Fatal(err)
	}
	var n, abandoned, unknown, minOK int
	if err := s.rdb().QueryRow(`SELECT count(*), count(*) FILTER (WHERE status = 'abandoned'),
		count(*) FILTER (WHERE status = 'unknown'), coalesce(min(pool_id) FILTER (WHERE status = 'ok'), 0)
		FROM requests`).Scan(&n, &abandoned, &unknown, &minOK); err != nil {
		t.Fatal(err)
	}
	if want := 3*maxRows - (maxRows - 4) + 1; n != maxRows || abandoned != 3 || unknown != 1 || minOK != want {
		t.Errorf("kept %d requests: %d abandoned, %d unknown, the others from pool id %d; want %d: 3, 1, from %d",
			n, abandoned, unknown, minOK, maxRows, want)
	}
	hangs, err := s.Hangs(ctx, 0, time.Now())
	if err != nil || len(hangs) != 3 {
		t.Errorf("Hangs = %d, %v; want the three abandoned calls", len(hangs), err)
	}
}

// The unanswered requests of earlier runs are bounded on their own
// (MaxAbandoned, the newest kept), so that they cannot fill the history
// themselves, crash after crash; and when they alone exceed MaxRows, the
// cap deletes the oldest of them.
func TestMaxAbandonedKeepsTheNewest(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{"MaxAbandoned", Options{MaxAbandoned: 5, MaxRows: 100}, []string{"hung14", "hung21", "hung22", "hung23", "hung24"}},
		{"MaxRows", Options{MaxRows: 3}, []string{"hung22", "hung23", "hung24"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			for run := range 3 {
				s := openT(t, path, nil)
				for i := uint64(1); i <= 4; i++ {
					when := at(time.Duration(run)*time.Minute + time.Duration(i)*time.Second)
					s.Record(received(i, "s1", "tools/call", fmt.Sprintf("hung%d%d", run, i), when))
				}
				crash(t, s)
			}
			s := openT(t, path, &tc.opts)
			if err := s.prune(); err != nil {
				t.Fatal(err)
			}
			rs, err := s.Requests(context.Background(), Filter{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range rs {
				if r.Status != StatusAbandoned {
					t.Errorf("%s: %s, want abandoned", r.Name, r.Status)
				}
				names = append(names, r.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, tc.want) {
				t.Errorf("kept the abandoned %v; want the newest %d, %v", names, len(tc.want), tc.want)
			}
		})
	}
}
