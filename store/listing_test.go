package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
)

// orphan is a child's answer to an id nobody waits for.
func orphan(id string, when time.Time) pool.Event {
	return pool.Event{Kind: pool.EventOrphan, Time: when, Server: "srv", OriginalID: id, Status: pool.StatusOrphaned}
}

// The history lists newest first by time received: an orphaned answer
// (whose row id is above every request id of its run) takes its place
// among the requests, and old orphans, however many, never hide newer
// requests.
func TestRequestsNewestFirstWithOrphans(t *testing.T) {
	s := openT(t, dbPath(t), nil)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	const old = 120 // more than a page
	for i := range old {
		s.Record(orphan(fmt.Sprint(1000+i), now.Add(-3*time.Hour+time.Duration(i)*time.Millisecond)))
	}
	for i := uint64(1); i <= 5; i++ {
		at := now.Add(-time.Duration(6-i) * time.Minute)
		s.Record(received(i, "s1", "tools/call", "echo", at))
		s.Record(done(i, "s1", "tools/call", "echo", pool.StatusOK, 7, at.Add(time.Millisecond)))
	}
	s.Record(orphan("3", now.Add(-150*time.Second))) // between requests 3 and 4
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	name := func(r Request) string {
		if r.PoolID == 0 {
			return "orphan " + r.OriginalID
		}
		return fmt.Sprint("request ", r.PoolID)
	}
	page := func(f Filter) []string {
		t.Helper()
		rs, err := s.Requests(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for i, r := range rs {
			if i > 0 && (r.Received.After(rs[i-1].Received) || r.Received.Equal(rs[i-1].Received) && r.ID > rs[i-1].ID) {
				t.Errorf("%+v: %s listed after %s, which is older", f, name(r), name(rs[i-1]))
			}
			out = append(out, name(r))
		}
		return out
	}
	first := page(Filter{Limit: 8})
	want := []string{"request 5", "request 4", "orphan 3", "request 3", "request 2", "request 1", "orphan 1119", "orphan 1118"}
	if d := cmp.Diff(want, first); d != "" {
		t.Errorf("the newest 8 (-want +got):\n%s", d)
	}
	if all := page(Filter{}); len(all) != 100 || all[0] != "request 5" || all[99] != "orphan 1026" {
		t.Errorf("a default page: %d rows, %q first, %q last; want 100 from request 5 to orphan 1026", len(all), all[0], all[len(all)-1])
	}
	if got := page(Filter{Status: pool.StatusOrphaned, Limit: 2}); !cmp.Equal(got, []string{"orphan 3", "orphan 1119"}) {
		t.Errorf("orphans only: %q", got)
	}
	if got := page(Filter{Status: pool.StatusOK, Limit: 2}); !cmp.Equal(got, []string{"request 5", "request 4"}) {
		t.Errorf("ok only: %q", got)
	}
	if got := page(Filter{Since: now.Add(-4*time.Minute + time.Second)}); !cmp.Equal(got, []string{"request 5", "request 4", "orphan 3", "request 3"}) {
		t.Errorf("the last 4 minutes: %q", got)
	}

	// Page by page, from the last row of each: the same order, every row
	// once, however the pages fall between requests and orphans.
	for _, size := range []int{1, 2, 3, 7, 100} {
		var got []string
		f := Filter{Limit: size}
		for n := 0; ; n++ {
			rs, err := s.Requests(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) == 0 || n > 200 {
				break
			}
			for _, r := range rs {
				got = append(got, name(r))
			}
			f.After = rs[len(rs)-1].Cursor()
		}
		if len(got) != old+6 || !cmp.Equal(got[:8], want) || got[len(got)-1] != "orphan 1000" {
			t.Errorf("pages of %d: %d rows, first %q, last %q", size, len(got), got[:min(8, len(got))], got[len(got)-1])
		}
	}
}

// An orphaned response opens a timeline of its own (it has no pool id to
// find it by): the child's answer, after the end of the request whose
// pool id it answered.
func TestOrphanTimeline(t *testing.T) {
	s := openT(t, dbPath(t), nil)
	ctx := context.Background()
	now := time.Now()
	s.Record(received(9, "s2", "tools/call", "sleep", now.Add(-time.Minute)))
	s.Record(done(9, "s2", "tools/call", "sleep", pool.StatusTimeout, 7, now.Add(-30*time.Second)))
	s.Record(orphan("9", now.Add(-20*time.Second)))
	s.Record(orphan(`"x"`, now.Add(-10*time.Second))) // no request's
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Requests(ctx, Filter{Status: pool.StatusOrphaned})
	if err != nil || len(rs) != 2 {
		t.Fatalf("orphans: %d, %v", len(rs), err)
	}
	steps := func(r Request) []string {
		t.Helper()
		tl, err := s.TimelineOf(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, st := range tl.Steps {
			out = append(out, st.What)
		}
		return out
	}
	if d := cmp.Diff([]string{"server srv answered id \"x\": " + orphanError}, steps(rs[0])); d != "" {
		t.Errorf("an orphan of no request (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{
		"request 9 (tools/call sleep from session s2) ended timeout after 30s: timeout happened",
		"server srv answered id 9: the late answer to request 9, which no one waited for any more",
	}, steps(rs[1])); d != "" {
		t.Errorf("the late answer to request 9 (-want +got):\n%s", d)
	}
	if _, err := s.TimelineOf(ctx, rowID(s.Run(), 10)); !errors.Is(err, sql.ErrNoRows) {
		t.Errorf("the timeline of no row: %v, want sql.ErrNoRows", err)
	}
}

// Requests reads each part of a page along an index in the page's order
// (the row ids for requests, request_log_orphaned for orphans), never
// sorting all the rows a filter matches, with SQLite's statistics or
// without.
func TestRequestsQueryPlans(t *testing.T) {
	s := openT(t, dbPath(t), nil)
	ctx := context.Background()
	now := time.Now()
	for i := uint64(1); i <= 2000; i++ {
		at := now.Add(-time.Duration(2001-i) * time.Second)
		s.Record(received(i, fmt.Sprint("s", i%7+1), "tools/call", "echo", at))
		s.Record(done(i, fmt.Sprint("s", i%7+1), "tools/call", "echo", pool.StatusOK, 7, at))
		if i%200 == 0 {
			s.Record(orphan(fmt.Sprint(i), at))
		}
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	filters := []Filter{{}, {Server: "srv"}, {Session: "s2"}, {Method: "tools/call"}, {Run: s.Run()},
		{Status: pool.StatusOrphaned}, {Status: pool.StatusOK}, {Status: StatusInFlight}, {Status: StatusAbandoned},
		{Since: now.Add(-time.Minute)}, {After: Cursor{now.Add(-time.Minute), rowID(s.Run(), 1940)}},
		{Server: "srv", Run: s.Run(), Since: now.Add(-time.Hour), After: Cursor{now.Add(-time.Minute), rowID(s.Run(), 1940)}}}
	check := func(stats string) {
		for _, f := range filters {
			q, args, err := s.requestsQuery(ctx, s.Run(), f)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := s.rdb.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
			if err != nil {
				t.Fatal(err)
			}
			parts := map[int]bool{} // the parts' own nodes
			var plan []string
			orphanIndex := false
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, fmt.Sprintf("%d %d %s", id, parent, detail))
				if strings.HasPrefix(detail, "CO-ROUTINE") {
					parts[id] = true
				}
				if parts[parent] && strings.Contains(detail, "TEMP B-TREE") {
					t.Errorf("%s, %+v: a part sorts what it reads: %s", stats, f, detail)
				}
				orphanIndex = orphanIndex || strings.Contains(detail, "request_log_orphaned")
			}
			rows.Close()
			wantOrphans := strings.Contains(q, "status_code = 6 ")
			if orphanIndex != wantOrphans {
				t.Errorf("%s, %+v: the orphans' part reads request_log_orphaned: %v, want %v", stats, f, orphanIndex, wantOrphans)
			}
			if t.Failed() {
				t.Logf("%s\n%s", q, strings.Join(plan, "\n"))
				return
			}
		}
	}
	check("without statistics")
	db, err := sql.Open("sqlite3", dsn(s.path, "_busy_timeout=5000"))
	if err != nil {
		t.Fatal(err)
	}
	execSQLOn(t, db, "ANALYZE")
	db.Close()
	check("with statistics")
}
