package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A client may open sessions without end, and a session that flips its
// roots starts a child each time: the sessions and the children are
// capped as the requests are (MaxSessions, MaxBackends), the oldest ended
// first, but never one still open (a child never seen exiting may be a
// leak) nor one that a request kept in the history refers to.
func TestSessionsAndChildrenAreCapped(t *testing.T) {
	const keep, flood = 10, 60
	s := openT(t, dbPath(t), &Options{MaxSessions: keep, MaxBackends: keep, PruneBatch: 7,
		FlushInterval: time.Hour, BatchSize: 1 << 20})
	ctx := context.Background()
	ev := func(kind pool.EventKind, sess string, pid int, when time.Time) {
		s.Record(pool.Event{Kind: kind, Time: when, Server: "srv", Session: sess, PID: pid})
	}
	// The oldest: s1, its child 100, and its request, which is kept.
	ev(pool.EventSessionOpened, "s1", 0, at(0))
	ev(pool.EventBackendStarted, "s1", 100, at(0))
	s.Record(received(1, "s1", "tools/call", "kept", at(time.Second)))
	s.Record(done(1, "s1", "tools/call", "kept", pool.StatusOK, 100, at(2*time.Second)))
	ev(pool.EventBackendExited, "s1", 100, at(3*time.Second))
	ev(pool.EventSessionClosed, "s1", 0, at(3*time.Second))
	// s2 stays open, its child 200 never exits.
	ev(pool.EventSessionOpened, "s2", 0, at(4*time.Second))
	ev(pool.EventBackendStarted, "s2", 200, at(4*time.Second))
	// The flood: sessions that come and go, a child each, no request.
	for i := range flood {
		sess, when := fmt.Sprintf("s%d", i+3), at(time.Minute+time.Duration(i)*time.Second)
		ev(pool.EventSessionOpened, sess, 0, when)
		ev(pool.EventBackendStarted, sess, 1000+i, when)
		ev(pool.EventBackendExited, sess, 1000+i, when.Add(time.Millisecond))
		ev(pool.EventSessionClosed, sess, 0, when.Add(time.Millisecond))
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.prune(); err != nil {
		t.Fatal(err)
	}
	sessions := column[string](t, s, `SELECT id FROM sessions`)
	pids := column[int](t, s, `SELECT pid FROM backends`)
	wantSessions := []string{"s1", "s2"}
	wantPIDs := []int{100, 200}
	for i := flood - keep + 2; i < flood; i++ { // the newest of the flood
		wantSessions = append(wantSessions, fmt.Sprintf("s%d", i+3))
		wantPIDs = append(wantPIDs, 1000+i)
	}
	slices.Sort(sessions)
	slices.Sort(wantSessions)
	slices.Sort(pids)
	if !slices.Equal(sessions, wantSessions) {
		t.Errorf("kept sessions %v;\nwant %v", sessions, wantSessions)
	}
	if !slices.Equal(pids, wantPIDs) {
		t.Errorf("kept children %v;\nwant %v", pids, wantPIDs)
	}
	tl, err := s.Timeline(ctx, s.run, 1)
	if err != nil || tl.Session == nil || tl.Backend == nil {
		t.Errorf("the kept request's timeline: %+v, %v; want its session and its child", tl, err)
	}
}

// A batch that takes the sessions over their cap calls for pruning then,
// not at the next retention pass (ten minutes later, by default: a client
// opening 1,700 sessions a second would add a million meanwhile).
func TestSessionsCapWithoutWaitingForRetention(t *testing.T) {
	const keep = 10
	// Pruning steps follow batches, every FlushInterval (the default) while
	// the writer has work.
	s := openT(t, dbPath(t), &Options{MaxSessions: keep, PruneBatch: 5, PruneInterval: time.Hour})
	for i := range 100 {
		sess, when := fmt.Sprintf("s%d", i+1), at(time.Duration(i)*time.Second)
		s.Record(pool.Event{Kind: pool.EventSessionOpened, Time: when, Server: "srv", Session: sess})
		s.Record(pool.Event{Kind: pool.EventSessionClosed, Time: when, Server: "srv", Session: sess})
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the sessions within their cap", func() bool {
		var n int
		err := s.rdb().QueryRow(`SELECT count(*) FROM sessions`).Scan(&n)
		return err == nil && n == keep
	})
}

// A run that crashed never recorded its sessions' ends: they ended with
// it, and the cap deletes them as ended, but not the one whose abandoned
// request the history keeps (hangs shows its client).
func TestSessionsCapKeepsACrashsHangsSession(t *testing.T) {
	path := dbPath(t)
	s1 := openT(t, path, nil)
	for i := range 20 {
		s1.Record(pool.Event{Kind: pool.EventSessionOpened, Time: at(time.Duration(i) * time.Second), Server: "srv",
			Session: fmt.Sprintf("s%d", i+1), ClientName: "client"})
	}
	s1.Record(received(1, "s5", "tools/call", "hung", at(30*time.Second)))
	crash(t, s1)
	s := openT(t, path, &Options{MaxSessions: 3})
	if err := s.prune(); err != nil {
		t.Fatal(err)
	}
	var ids []string
	rows, err := s.rdb().Query(`SELECT id FROM sessions`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	slices.Sort(ids)
	if want := []string{"s19", "s20", "s5"}; !slices.Equal(ids, want) {
		t.Errorf("kept sessions %v; want %v (the hang's, and the newest)", ids, want)
	}
	hangs, err := s.Hangs(context.Background(), 0, time.Now())
	if err != nil || len(hangs) != 1 {
		t.Fatalf("Hangs = %+v, %v; want the hung call", hangs, err)
	}
	tl, err := s.Timeline(context.Background(), hangs[0].Run, 1)
	if err != nil || tl.Session == nil || tl.Session.ClientName != "client" {
		t.Errorf("the hang's timeline: %+v, %v; want its session", tl.Session, err)
	}
}

// column is the one column query reads from s's database, as T.
func column[T any](t *testing.T, s *Store, query string) []T {
	t.Helper()
	rows, err := s.rdb().QueryContext(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// With history off (ChildrenOnly) the store still records every child the
// pool starts, for leak detection: a client that makes the pool start
// child after child (a share "session" server and session after session)
// grows the children as much as with history on, and they are capped the
// same, without waiting for retention; a child never seen exiting is kept.
func TestChildrenOnlyChildrenAreCapped(t *testing.T) {
	const keep, flood = 10, 100
	s := openT(t, dbPath(t), &Options{ChildrenOnly: true, MaxBackends: keep, PruneBatch: 5, PruneInterval: time.Hour})
	child := func(kind pool.EventKind, pid int, when time.Time) {
		s.Record(pool.Event{Kind: kind, Time: when, Server: "srv", Session: "s1", PID: pid})
	}
	child(pool.EventBackendStarted, 100, at(0)) // the oldest, still running
	for i := range flood {
		when := at(time.Second + time.Duration(i)*time.Second)
		child(pool.EventBackendStarted, 1000+i, when)
		child(pool.EventBackendExited, 1000+i, when.Add(time.Millisecond))
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the children within their cap", func() bool {
		var n int
		err := s.rdb().QueryRow(`SELECT count(*) FROM backends`).Scan(&n)
		return err == nil && n == keep
	})
	pids := column[int](t, s, `SELECT pid FROM backends ORDER BY pid`)
	want := []int{100}
	for i := flood - keep + 1; i < flood; i++ { // the newest that exited
		want = append(want, 1000+i)
	}
	if !slices.Equal(pids, want) {
		t.Errorf("kept children %v;\nwant %v", pids, want)
	}
}

// With history off the children that exited longer than RetainDays ago go
// as they do with history on; one never seen exiting stays, however old.
func TestChildrenOnlyOldChildrenArePruned(t *testing.T) {
	s := openT(t, dbPath(t), &Options{ChildrenOnly: true, RetainDays: 1, PruneInterval: time.Hour})
	old, recent := time.Now().Add(-72*time.Hour), time.Now().Add(-time.Hour)
	for _, e := range []pool.Event{
		{Kind: pool.EventBackendStarted, Time: old, PID: 1}, // never seen exiting
		{Kind: pool.EventBackendStarted, Time: old, PID: 2},
		{Kind: pool.EventBackendExited, Time: old.Add(time.Second), PID: 2},
		{Kind: pool.EventBackendStarted, Time: recent, PID: 3},
		{Kind: pool.EventBackendExited, Time: recent.Add(time.Second), PID: 3},
	} {
		e.Server = "srv"
		s.Record(e)
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.prune(); err != nil {
		t.Fatal(err)
	}
	if pids, want := column[int](t, s, `SELECT pid FROM backends ORDER BY pid`), []int{1, 3}; !slices.Equal(pids, want) {
		t.Errorf("kept children %v; want %v", pids, want)
	}
}
