package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// tableRows is how many rows the table of the history holds.
func tableRows(t *testing.T, s *Store, table string) int {
	t.Helper()
	var n int
	if err := s.rdb().QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// recordEnded records the requests from id first to last, ended, at
// when, and writes them.
func recordEnded(t *testing.T, s *Store, first, last uint64, when time.Time) {
	t.Helper()
	for id := first; id <= last; id++ {
		s.Record(received(id, "s1", "tools/list", "", when))
		s.Record(done(id, "s1", "tools/list", "", pool.StatusOK, 7, when.Add(time.Millisecond)))
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
}

// A lower MaxRows set while the store runs (a config reload, or the
// first config that loads after a start with none) caps the history
// without a restart: as at a start over the cap, the count comes down as
// requests are recorded, by at most PruneBatch rows a batch beyond what
// the batch adds, so that no transaction grows large, down to the cap,
// which keeps the newest. Until SetLimits the store opened with no cap
// ran uncapped until its next start.
func TestSetLimitsCapsRowsLive(t *testing.T) {
	const batch, maxRows, per = 10, 50, 5
	s := openT(t, dbPath(t), &Options{RetainDays: -1, MaxRows: -1, PruneBatch: batch, PruneInterval: time.Hour,
		FlushInterval: time.Hour, BatchSize: 1 << 20})
	recordEnded(t, s, 1, 200, at(0))
	if n := tableRows(t, s, "request_log"); n != 200 {
		t.Fatalf("holds %d requests with no cap, want all 200", n)
	}
	s.SetLimits(-1, maxRows)
	next := uint64(201)
	waitFor(t, "the history down to the new cap", func() bool {
		before := tableRows(t, s, "request_log")
		recordEnded(t, s, next, next+per-1, at(time.Duration(next)*time.Millisecond))
		next += per
		after := tableRows(t, s, "request_log")
		if after < before+per-batch {
			t.Fatalf("a batch of %d took the count from %d to %d: more than %d rows deleted at once", per, before, after, batch)
		}
		return after == maxRows
	})
	var minPool uint64
	if err := s.rdb().QueryRow(`SELECT min(pool_id) FROM requests`).Scan(&minPool); err != nil {
		t.Fatal(err)
	}
	if want := next - maxRows; minPool != want {
		t.Errorf("kept the requests from pool id %d, want the newest %d (from %d)", minPool, maxRows, want)
	}
}

// A RetainDays set while the store runs prunes the rows older than it
// without a restart, and without waiting for the next retention pass
// (PruneInterval, ten minutes by default).
func TestSetLimitsRetainsLive(t *testing.T) {
	s := openT(t, dbPath(t), &Options{RetainDays: -1, MaxRows: -1, PruneBatch: 7, PruneInterval: time.Hour})
	recordEnded(t, s, 1, 30, time.Now().Add(-72*time.Hour))
	recordEnded(t, s, 31, 50, time.Now().Add(-time.Hour))
	if n := tableRows(t, s, "request_log"); n != 50 {
		t.Fatalf("holds %d requests kept forever, want all 50", n)
	}
	s.SetLimits(1, -1)
	waitFor(t, "the requests older than a day pruned", func() bool { return tableRows(t, s, "request_log") == 20 })
	var minPool int
	if err := s.rdb().QueryRow(`SELECT min(pool_id) FROM requests`).Scan(&minPool); err != nil {
		t.Fatal(err)
	}
	if minPool != 31 {
		t.Errorf("kept the requests from pool id %d, want the recent ones (from 31)", minPool)
	}
}

// The sessions and children caps follow a MaxRows set while the store
// runs as they follow Open's: a tenth of it, at least 1,000, none when
// it is negative.
func TestSetLimitsCapsSessionsLive(t *testing.T) {
	const sessions = 1100
	s := openT(t, dbPath(t), &Options{RetainDays: -1, MaxRows: -1, PruneBatch: 100, PruneInterval: time.Hour})
	for i := range sessions {
		sess, when := fmt.Sprintf("s%d", i+1), at(time.Duration(i)*time.Millisecond)
		s.Record(pool.Event{Kind: pool.EventSessionOpened, Time: when, Server: "srv", Session: sess})
		s.Record(pool.Event{Kind: pool.EventSessionClosed, Time: when, Server: "srv", Session: sess})
		s.Record(pool.Event{Kind: pool.EventBackendStarted, Time: when, Server: "srv", Session: sess, PID: 1000 + i})
		s.Record(pool.Event{Kind: pool.EventBackendExited, Time: when, Server: "srv", Session: sess, PID: 1000 + i})
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.prune(); err != nil {
		t.Fatal(err)
	}
	if n, m := tableRows(t, s, "sessions"), tableRows(t, s, "backends"); n != sessions || m != sessions {
		t.Fatalf("holds %d sessions and %d children with no cap, want all %d", n, m, sessions)
	}
	s.SetLimits(-1, 50) // a tenth is 5: the caps are 1,000
	waitFor(t, "the sessions and children down to 1,000", func() bool {
		return tableRows(t, s, "sessions") == 1000 && tableRows(t, s, "backends") == 1000
	})
}
