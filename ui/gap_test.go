package ui

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
)

// withGapReads makes the loop read the history for a gap at once, as
// often as the default does, until the test ends.
func withGapReads(t *testing.T) {
	t.Helper()
	old := gapReads
	gapReads = make([]time.Duration, len(old))
	t.Cleanup(func() { gapReads = old })
}

// histRow is a recorded request of run at t0+received, answered d later
// (d < 0: in flight).
func histRow(run int64, id uint64, sess, status string, received, d time.Duration) HistoryRow {
	h := HistoryRow{Run: run, PoolID: id, Server: "notes", Session: sess, Method: "tools/call", Name: "echo",
		Status: status, ReceivedAt: t0.Add(received)}
	if d >= 0 {
		h.Duration, h.AnsweredAt = d, h.ReceivedAt.Add(d)
	} else {
		h.Status = statusInFlight
	}
	return h
}

// gapMarker is the waterfall's marker of the gap at t0+at.
func gapMarker(t *testing.T, src *wfSource, at time.Duration) wfMarker {
	t.Helper()
	for _, m := range src.Markers {
		if m.Kind == markGap && m.At.Equal(t0.Add(at)) {
			return m
		}
	}
	t.Fatalf("no gap marker at %v in %+v", at, src.Markers)
	return wfMarker{}
}

func sortedBars(src *wfSource) []bar {
	b := bars(src.Done.slice())
	slices.SortFunc(b, func(x, y bar) int { return int(x.ID) - int(y.ID) })
	return b
}

// TestGapFilledInFromHistory: the UI's subscription lags during a burst;
// what ended while it was behind is read back from the history, so the
// overview's calls, errors and latency count every request, the
// waterfall shows the requests that began and ended unseen, and the gap
// is marked. A second read adds nothing twice.
func TestGapFilledInFromHistory(t *testing.T) {
	withGapReads(t)
	tr := newTracker(t0.Add(-time.Hour))
	tr.start(pool.Snapshot{TakenAt: t0.Add(-time.Minute), Servers: []pool.ServerInfo{{Name: "notes"}},
		Sessions: []pool.SessionInfo{{ID: "s1", Server: "notes", ClientName: "claude-code"}}})
	for _, e := range []pool.Event{
		recvEv(-10*time.Second, 1, "notes", "s1", "tools/call", "echo"),
		recvEv(-9*time.Second, 2, "notes", "s1", "tools/call", "echo"),
		doneEv(-8*time.Second, 1, pool.StatusOK, ""),
		recvEv(-6*time.Second, 7, "notes", "s1", "tools/call", "echo"),
	} {
		tr.event(e)
	}
	// The event at t0-5s found the buffer full. In the gap: 2 failed, 3
	// (in s1) and 5 (in s9, a session that came and went) began and
	// ended, 4 began; 7 ended just after the new subscription, before
	// its snapshot.
	snap := pool.Snapshot{TakenAt: t0.Add(-time.Second), Servers: []pool.ServerInfo{{Name: "notes"}},
		Sessions: []pool.SessionInfo{{ID: "s1", Server: "notes", ClientName: "claude-code"}},
		InFlight: []pool.RequestInfo{{PoolID: 4, Server: "notes", Session: "s1", Method: "tools/call", Name: "echo",
			ReceivedAt: t0.Add(-3 * time.Second)}}}
	g := tr.openGap(t0.Add(-5*time.Second), t0.Add(-time.Second), snap)
	tr.start(snap)
	if !tr.gapEvent(doneEv(-900*time.Millisecond, 7, pool.StatusOK, ""), []*gap{g}) {
		t.Fatal("the end of 7, which the snapshot no longer had, was not taken in")
	}
	if f, n := tr.figures("notes", t0), tr.stats["notes"].inFlight; f.Calls != 2 || n != 1 {
		t.Errorf("before the history: %d calls, %d in flight; want 2 (1, and 7 from its event) and 1 (4)", f.Calls, n)
	}
	src := tr.publish(t0)
	want := []bar{
		{1, "s1", pool.StatusOK, -10 * time.Second, -1, -8 * time.Second, 0},
		{7, "s1", pool.StatusOK, -6 * time.Second, -1, -900 * time.Millisecond, 0},
	}
	if d := cmp.Diff(want, sortedBars(src)); d != "" {
		t.Errorf("before the history: ended requests (-want +got):\n%s", d)
	}
	if d := gapMarker(t, src, -5*time.Second).Detail; !strings.Contains(d, "being read back from the history") {
		t.Errorf("gap marker before the history = %q", d)
	}

	const live, earlier = 12, 11
	w := HistoryWindow{
		Runs: []HistoryRun{{ID: earlier, Crashed: true}, {ID: live}},
		Requests: []HistoryRow{
			histRow(live, 8, "s1", pool.StatusOK, -40*time.Second, time.Second), // long before the gap
			histRow(live, 1, "s1", pool.StatusOK, -10*time.Second, 2*time.Second),
			histRow(live, 2, "s1", pool.StatusError, -9*time.Second, 5*time.Second),
			histRow(live, 3, "s1", pool.StatusOK, -4500*time.Millisecond, 500*time.Millisecond),
			histRow(live, 5, "s9", pool.StatusTimeout, -4600*time.Millisecond, time.Second),
			histRow(live, 7, "s1", pool.StatusOK, -6*time.Second, 5100*time.Millisecond),
			histRow(live, 4, "s1", "", -3*time.Second, -1),
			histRow(earlier, 3, "s1", pool.StatusOK, -4500*time.Millisecond, 500*time.Millisecond), // another run's 3
			{Run: live, Server: "notes", Status: pool.StatusOrphaned, ReceivedAt: t0.Add(-4 * time.Second)},
		},
		Sessions: []HistorySession{{Run: live, ID: "s9", Server: "notes", ClientName: "cursor", ClientVersion: "1.7.0",
			Transport: "stdio", Connected: t0.Add(-4800 * time.Millisecond), Disconnected: t0.Add(-3500 * time.Millisecond)}},
	}
	g.reads = 1 // the loop started the first read
	if !tr.refill(g, []*gap{g}, w, nil) {
		t.Error("the first read is not followed by a second")
	}
	check := func(when string) {
		t.Helper()
		f := tr.figures("notes", t0)
		if f.Calls != 5 || f.Errors != 2 {
			t.Errorf("%s: %d calls, %d errors; want 5 calls (1, 2, 3, 5, 7), 2 errors (2, 5)", when, f.Calls, f.Errors)
		}
		if f.P99 < 4500*time.Millisecond {
			t.Errorf("%s: p99 %v; 2 took 5s", when, f.P99)
		}
		src := tr.publish(t0)
		want := []bar{
			{1, "s1", pool.StatusOK, -10 * time.Second, -1, -8 * time.Second, 0},
			{2, "s1", pool.StatusError, -9 * time.Second, -1, -4 * time.Second, 0},
			{3, "s1", pool.StatusOK, -4500 * time.Millisecond, -1, -4 * time.Second, 0},
			{5, "s9", pool.StatusTimeout, -4600 * time.Millisecond, -1, -3600 * time.Millisecond, 0},
			{7, "s1", pool.StatusOK, -6 * time.Second, -1, -900 * time.Millisecond, 0},
		}
		if d := cmp.Diff(want, sortedBars(src)); d != "" {
			t.Errorf("%s: ended requests (-want +got):\n%s", when, d)
		}
		if len(src.Open) != 1 || src.Open[0].PoolID != 4 {
			t.Errorf("%s: in flight %v, want 4", when, bars(src.Open))
		}
		var s9 *wfLane
		for i := range src.Lanes {
			if src.Lanes[i].Session == "s9" {
				s9 = &src.Lanes[i]
			}
		}
		if s9 == nil || s9.Title != "cursor 1.7.0" || !s9.Closed {
			t.Errorf("%s: the lane of the session that came and went = %+v", when, s9)
		}
	}
	check("after the first read")
	g.reads = 2
	if tr.refill(g, []*gap{g}, w, nil) {
		t.Error("a third read after the last")
	}
	check("after the second read")
	if d := gapMarker(t, tr.publish(t0), -5*time.Second).Detail; !strings.Contains(d, "3 requests that ended then were read back from the history.") {
		t.Errorf("gap marker after the history = %q", d)
	}
}

// TestGapWithoutHistory: with the history off, the requests in flight
// when the gap began still count as calls (their latency and outcome
// unknown), and the marker says what is missing.
func TestGapWithoutHistory(t *testing.T) {
	withGapReads(t)
	tr := newTracker(t0.Add(-time.Hour))
	tr.event(recvEv(-10*time.Second, 1, "notes", "s1", "tools/call", "echo"))
	tr.event(recvEv(-9*time.Second, 2, "notes", "s1", "tools/call", "echo"))
	snap := pool.Snapshot{TakenAt: t0.Add(-time.Second)}
	g := tr.openGap(t0.Add(-5*time.Second), t0.Add(-time.Second), snap)
	tr.start(snap)
	g.reads = 1
	if f, n := tr.figures("notes", t0), tr.stats["notes"].inFlight; f.Calls != 0 || n != 0 {
		t.Errorf("before the history: %d calls, %d in flight; want 0 and 0", f.Calls, n)
	}
	if tr.refill(g, []*gap{g}, HistoryWindow{}, fmt.Errorf("%w: history is off in the config", ErrUnavailable)) {
		t.Error("an unavailable history is read again")
	}
	want := []bar{
		{1, "s1", statusUnseen, -10 * time.Second, -1, -time.Second, 0},
		{2, "s1", statusUnseen, -9 * time.Second, -1, -time.Second, 0},
	}
	if d := cmp.Diff(want, sortedBars(tr.publish(t0))); d != "" {
		t.Errorf("ended requests (-want +got):\n%s", d)
	}
	if f := tr.figures("notes", t0); f.Calls != 2 || f.P50 != 0 {
		t.Errorf("figures: %d calls, p50 %v; want 2 calls of unknown latency", f.Calls, f.P50)
	}
	d := gapMarker(t, tr.publish(t0), -5*time.Second).Detail
	for _, want := range []string{"missing here and from the overview's figures", "history is off in the config", "ended unseen"} {
		if !strings.Contains(d, want) {
			t.Errorf("gap marker %q does not say %q", d, want)
		}
	}
}

// TestGapEndsTheSessionsAndChildrenThatEndedInIt: a session closes and
// a child exits (another replacing it) while the dashboard is behind the
// pool's events. They end when the history recorded it, or, without the
// history, at the gap's end: the lane is shown closed, the server's
// header names the live child only, and both are let go once older than
// the retention.
func TestGapEndsTheSessionsAndChildrenThatEndedInIt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		w     HistoryWindow
		err   error
		ended time.Duration
	}{
		{name: "recorded", ended: -4 * time.Second, w: HistoryWindow{Runs: []HistoryRun{{ID: 12}},
			Sessions: []HistorySession{{Run: 12, ID: "s1", Server: "notes", ClientName: "claude-code",
				Connected: t0.Add(-time.Minute), Disconnected: t0.Add(-4 * time.Second)}},
			Children: []HistoryChild{{Run: 12, Server: "notes", PID: 100, Started: t0.Add(-time.Minute), Exited: t0.Add(-4 * time.Second)},
				{Run: 12, Server: "notes", PID: 200, Started: t0.Add(-3 * time.Second)}}}},
		{name: "history off", ended: -time.Second, err: fmt.Errorf("%w: history is off in the config", ErrUnavailable)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withGapReads(t)
			tr := newTracker(t0.Add(-time.Hour))
			tr.start(pool.Snapshot{TakenAt: t0.Add(-time.Minute), Servers: []pool.ServerInfo{{Name: "notes"}},
				Sessions: []pool.SessionInfo{{ID: "s1", Server: "notes", ClientName: "claude-code"}},
				Backends: []pool.BackendInfo{{Server: "notes", PID: 100, StartedAt: t0.Add(-time.Minute)}}})
			snap := pool.Snapshot{TakenAt: t0.Add(-time.Second), Servers: []pool.ServerInfo{{Name: "notes"}},
				Backends: []pool.BackendInfo{{Server: "notes", PID: 200, StartedAt: t0.Add(-3 * time.Second)}}}
			g := tr.openGap(t0.Add(-5*time.Second), t0.Add(-time.Second), snap)
			tr.start(snap)
			g.reads = len(gapReads)
			tr.refill(g, []*gap{g}, tc.w, tc.err)

			tr.trim(t0)
			src := tr.publish(t0)
			var lanes []string
			for _, l := range src.Lanes {
				lanes = append(lanes, fmt.Sprintf("%s %s closed=%v", l.Title, l.Sub, l.Closed))
			}
			want := []string{"notes PID 200 closed=false", "claude-code s1 closed=true"}
			if d := cmp.Diff(want, lanes); d != "" {
				t.Errorf("lanes (-want +got):\n%s", d)
			}
			if s := tr.sessions["s1"]; s == nil || !s.closed.Equal(t0.Add(tc.ended)) {
				t.Errorf("s1 = %+v, want it closed at %v", s, tc.ended)
			}
			if c := tr.children[100]; c == nil || !c.Exited.Equal(t0.Add(tc.ended)) {
				t.Errorf("child 100 = %+v, want it exited at %v", c, tc.ended)
			}
			if c := tr.children[200]; c == nil || !c.Exited.IsZero() {
				t.Errorf("child 200 = %+v, want it running", c)
			}

			later := t0.Add(liveRetain + time.Minute)
			tr.trim(later)
			if _, ok := tr.sessions["s1"]; ok || tr.children[100] != nil || len(tr.children) != 1 {
				t.Errorf("past the retention, the tracker keeps session s1 (%v) or children %v", ok, slices.Collect(maps.Keys(tr.children)))
			}
		})
	}
}

// upgradeWindow is what the history holds of the 15 minutes before an
// upgrade at t0-2s: run 11 served s1 and s2 with children 90 (which
// crashed) and 100 (carried over), and reloaded its config; run 12, the
// live one, started at t0-1s and, before the dashboard subscribed at
// t0+200ms, answered 1 in s1, 2 in s3 (which came and went) and 3, and
// reloaded its config too; 4 was in flight then (the dashboard follows
// it: a lag's gap may hold it).
func upgradeWindow() HistoryWindow {
	return HistoryWindow{
		Runs: []HistoryRun{{ID: 11, Started: t0.Add(-time.Hour), Ended: t0.Add(-2 * time.Second), Version: "1.0", PID: 50},
			{ID: 12, Started: t0.Add(-time.Second), Version: "1.1", PID: 51}},
		Requests: []HistoryRow{
			histRow(11, 1, "s1", pool.StatusOK, -5*time.Minute, time.Second),
			histRow(11, 2, "s2", pool.StatusError, -3*time.Minute, 2*time.Second),
			histRow(11, 3, "s1", "", -10*time.Second, -1), // the upgrade abandoned it
			histRow(12, 1, "s1", pool.StatusOK, -500*time.Millisecond, 100*time.Millisecond),
			histRow(12, 2, "s3", pool.StatusOK, -800*time.Millisecond, 100*time.Millisecond),
			histRow(12, 3, "s1", pool.StatusOK, 50*time.Millisecond, 50*time.Millisecond),
			histRow(12, 4, "s1", pool.StatusOK, 100*time.Millisecond, 200*time.Millisecond), // in flight at the snapshot
		},
		Sessions: []HistorySession{
			{Run: 11, ID: "s1", Server: "notes", ClientName: "claude-code", ClientVersion: "2.0", Connected: t0.Add(-time.Hour)},
			{Run: 11, ID: "s2", Server: "notes", ClientName: "cursor", ClientVersion: "1.7", Connected: t0.Add(-time.Hour),
				Disconnected: t0.Add(-time.Minute)},
			{Run: 12, ID: "s1", Server: "notes", ClientName: "claude-code", ClientVersion: "2.0", Connected: t0.Add(-900 * time.Millisecond)},
			{Run: 12, ID: "s3", Server: "notes", ClientName: "cursor", ClientVersion: "1.7", Connected: t0.Add(-850 * time.Millisecond),
				Disconnected: t0.Add(-600 * time.Millisecond)},
		},
		Children: []HistoryChild{
			{Run: 11, Server: "notes", PID: 90, Started: t0.Add(-20 * time.Minute), Exited: t0.Add(-8 * time.Minute), ExitCode: 1},
			{Run: 11, Server: "notes", PID: 100, Started: t0.Add(-20 * time.Minute)},
			{Run: 12, Server: "notes", PID: 100, Started: t0.Add(-20 * time.Minute)},
		},
		Reloads: []ConfigReload{{At: t0.Add(-4 * time.Minute), Changes: "notes: changed (args)"},
			{At: t0.Add(-500 * time.Millisecond), Changes: "memory: added"}},
	}
}

// upgradeSnapshot is the live run's at t0+200ms: s1 resumed, child 100
// carried over.
func upgradeSnapshot() pool.Snapshot {
	return pool.Snapshot{TakenAt: t0.Add(200 * time.Millisecond), Servers: []pool.ServerInfo{{Name: "notes"}},
		Sessions: []pool.SessionInfo{{ID: "s1", Server: "notes", ClientName: "claude-code", ClientVersion: "2.0",
			ConnectedAt: t0.Add(-900 * time.Millisecond)}},
		Backends: []pool.BackendInfo{{Server: "notes", PID: 100, StartedAt: t0.Add(-20 * time.Minute), CarriedOver: true}}}
}

// TestStartFilledInFromHistory: after an upgrade the live waterfall's
// 15 minutes are filled in from the history, as the History view shows
// them: the earlier run's requests, sessions, children and markers
// under its run, and what this run did before the dashboard subscribed
// as live. They go as they age past the retention.
func TestStartFilledInFromHistory(t *testing.T) {
	withGapReads(t)
	tr := newTracker(t0)
	snap := upgradeSnapshot()
	tr.start(snap)
	g := tr.startGap(snap)
	g.reads = 1
	w := upgradeWindow()
	w.From, w.Until = g.from.Add(-gapSlack), g.until // as readGap reads it
	if tr.refill(g, []*gap{g}, w, nil) {
		t.Error("the start is read again")
	}
	now := t0.Add(time.Second)
	tr.trim(now)
	src := tr.publish(now)
	if !src.Since.Equal(now.Add(-liveRetain)) {
		t.Errorf("since %v, want the retention", src.Since.Sub(t0))
	}
	var reqs []string
	src.Done.each(func(_ int, r *wfReq) {
		reqs = append(reqs, fmt.Sprintf("run %d #%d %s %s %v..%v", r.Run, r.PoolID, r.Session, r.Status, r.Received.Sub(t0), r.Answered.Sub(t0)))
	})
	want := []string{
		"run 11 #1 s1 ok -5m0s..-4m59s",
		"run 11 #2 s2 error -3m0s..-2m58s",
		"run 11 #3 s1 abandoned -10s..-2s",
		"run 0 #2 s3 ok -800ms..-700ms",
		"run 0 #1 s1 ok -500ms..-400ms",
		"run 0 #3 s1 ok 50ms..100ms",
	}
	if d := cmp.Diff(want, reqs); d != "" {
		t.Errorf("ended requests (-want +got):\n%s", d)
	}
	var lanes []string
	for _, l := range src.Lanes {
		lanes = append(lanes, fmt.Sprintf("%d %s | %s | closed=%v", l.Run, l.Title, l.Sub, l.Closed))
	}
	wantLanes := []string{
		"0 notes | PID 100 | closed=false",
		"11 claude-code 2.0 | s1 · run 11 | closed=true",
		"11 cursor 1.7 | s2 · run 11 | closed=true",
		"0 claude-code 2.0 | s1 | closed=false",
		"0 cursor 1.7 | s3 | closed=true",
	}
	if d := cmp.Diff(wantLanes, lanes); d != "" {
		t.Errorf("lanes (-want +got):\n%s", d)
	}
	wantMarks := []mark{
		{-8 * time.Minute, markChildCrash, "notes: child PID 90 crashed (exit code 1)"},
		{-4 * time.Minute, markReload, "config reloaded"},
		{-2 * time.Second, markAppStop, "Switchboard 1.0 (run 11, PID 50) stopped"},
		{-time.Second, markAppStart, "Switchboard 1.1 (run 12, PID 51) started"},
	}
	if d := cmp.Diff(wantMarks, marksOf(src, t0)); d != "" {
		t.Errorf("markers (-want +got):\n%s", d)
	}
	var children []string
	for _, c := range src.Children {
		end := "running"
		if !c.Exited.IsZero() {
			end = c.Exited.Sub(t0).String()
		}
		children = append(children, fmt.Sprintf("%d %v..%s", c.PID, c.Started.Sub(t0), end))
	}
	slices.Sort(children)
	if d := cmp.Diff([]string{"100 -20m0s..running", "90 -20m0s..-8m0s"}, children); d != "" {
		t.Errorf("children (-want +got):\n%s", d)
	}
	if f := tr.figures("notes", now); f.Calls != 1 {
		t.Errorf("the overview counts %d calls since the start, want 1 (run 12's 3)", f.Calls)
	}
	if !tr.gapEvent(doneEv(100*time.Millisecond, 3, pool.StatusOK, ""), []*gap{g}) {
		t.Error("the late event of a request read back is taken in again")
	}

	later := t0.Add(liveRetain + time.Minute)
	tr.trim(later)
	src = tr.publish(later)
	if n := src.Done.Len(); n != 0 || len(src.Markers) != 0 || len(src.Children) != 1 || len(src.Lanes) != 2 {
		t.Errorf("past the retention: %d requests, markers %v, %d children, lanes %+v", n, marksOf(src, t0), len(src.Children), src.Lanes)
	}
}

// TestLoopFillsInTheStretchBeforeItsStart: the loop reads the 15 minutes
// before it started from the history, so that after an upgrade the live
// waterfall shows the earlier run's requests, not a blank; with the
// history off it marks the stretch as not kept, and reads nothing.
func TestLoopFillsInTheStretchBeforeItsStart(t *testing.T) {
	withGapReads(t)
	now := time.Now()
	s := pool.Snapshot{TakenAt: now, Servers: []pool.ServerInfo{{Name: "notes", State: pool.StateReady}},
		Backends: []pool.BackendInfo{{Server: "notes", PID: 100, StartedAt: now.Add(-time.Hour), CarriedOver: true}}}
	t.Run("history on", func(t *testing.T) {
		fake := newFake(s)
		fake.window = HistoryWindow{Runs: []HistoryRun{{ID: 11, Ended: now.Add(-time.Second)}, {ID: 12, Started: now.Add(-time.Second)}},
			Requests: []HistoryRow{{Run: 11, PoolID: 1, Server: "notes", Session: "s1", Method: "tools/call", Name: "echo",
				Status: pool.StatusOK, ReceivedAt: now.Add(-time.Minute), Duration: time.Second, AnsweredAt: now.Add(-59 * time.Second)}}}
		u := startLive(t, fake, tabWaterfall)
		waitUntil(t, 5*time.Second, "run 11's request in the live waterfall, the start not marked", func() bool {
			src := u.liveSource()
			if src == nil || src.Done.Len() != 1 || src.Done.At(0).Run != 11 {
				return false
			}
			return !slices.ContainsFunc(src.Markers, func(m wfMarker) bool { return m.Kind == markGap })
		})
	})
	t.Run("history off", func(t *testing.T) {
		fake := newFake(s)
		fake.noHistory = true
		u := startLive(t, fake, tabWaterfall)
		waitUntil(t, 5*time.Second, "the start marked", func() bool {
			src := u.liveSource()
			return src != nil && slices.ContainsFunc(src.Markers, func(m wfMarker) bool {
				return m.Kind == markGap && m.Title == "not seen by this run: what came before is not kept"
			})
		})
		if got := fake.recorded(); len(got) != 0 {
			t.Errorf("with the history off the loop called %q", got)
		}
	})
}

// TestLoopFillsInWhatItMissedWhileLagging: the loop's subscription lags;
// the loop subscribes again, reads the gap from the history and shows
// the requests that began and ended in it in the live waterfall, the gap
// marked.
func TestLoopFillsInWhatItMissedWhileLagging(t *testing.T) {
	withGapReads(t)
	now := time.Now()
	s := pool.Snapshot{TakenAt: now, Servers: []pool.ServerInfo{{Name: "notes", State: pool.StateReady}},
		Sessions: []pool.SessionInfo{{ID: "s1", Server: "notes", ClientName: "claude-code", ConnectedAt: now.Add(-time.Minute)}}}
	fake := newFake(s)
	u := startLive(t, fake, tabWaterfall)
	waitUntil(t, 5*time.Second, "the first subscription", func() bool { return fake.subscribes.Load() == 1 })
	recv := func(id uint64, at time.Time) pool.Event {
		return pool.Event{Kind: pool.EventRequestReceived, Time: at, PoolID: id, Server: "notes", Session: "s1",
			Method: "tools/call", Name: "echo"}
	}
	fake.emit(recv(1, now.Add(-3*time.Second)))
	fake.emit(pool.Event{Kind: pool.EventRequestDone, Time: now.Add(-2900 * time.Millisecond), PoolID: 1, Status: pool.StatusOK})
	fake.emit(recv(2, now.Add(-2800*time.Millisecond)))
	waitUntil(t, 5*time.Second, "1 ended and 2 in flight", func() bool {
		src := u.liveSource()
		return src != nil && src.Done.Len() == 1 && len(src.Open) == 1
	})

	// The burst: the event at now-2s found the buffer full. In the gap,
	// 2 ended and 3 began and ended; the history has them.
	fake.mu.Lock()
	fake.window = HistoryWindow{Runs: []HistoryRun{{ID: 5}}, Requests: []HistoryRow{
		{Run: 5, PoolID: 1, Server: "notes", Session: "s1", Method: "tools/call", Name: "echo", Status: pool.StatusOK,
			ReceivedAt: now.Add(-3 * time.Second), Duration: 100 * time.Millisecond, AnsweredAt: now.Add(-2900 * time.Millisecond)},
		{Run: 5, PoolID: 2, Server: "notes", Session: "s1", Method: "tools/call", Name: "echo", Status: pool.StatusError,
			ReceivedAt: now.Add(-2800 * time.Millisecond), Duration: time.Second, AnsweredAt: now.Add(-1800 * time.Millisecond)},
		{Run: 5, PoolID: 3, Server: "notes", Session: "s1", Method: "tools/call", Name: "echo", Status: pool.StatusOK,
			ReceivedAt: now.Add(-1900 * time.Millisecond), Duration: 200 * time.Millisecond, AnsweredAt: now.Add(-1700 * time.Millisecond)},
	}}
	fake.mu.Unlock()
	fake.lag(now.Add(-2 * time.Second))

	waitUntil(t, 10*time.Second, "the gap filled in from the history", func() bool {
		src := u.liveSource()
		if src == nil || src.Done.Len() != 3 {
			return false
		}
		for _, m := range src.Markers {
			if m.Kind == markGap && strings.HasSuffix(m.Detail, "2 requests that ended then were read back from the history.") {
				return true
			}
		}
		return false
	})
	src := u.liveSource()
	got := map[uint64]string{}
	src.Done.each(func(_ int, r *wfReq) { got[r.PoolID] = r.Status })
	if d := cmp.Diff(map[uint64]string{1: pool.StatusOK, 2: pool.StatusError, 3: pool.StatusOK}, got); d != "" {
		t.Errorf("ended requests (-want +got):\n%s", d)
	}
	if n := fake.subscribes.Load(); n != 2 {
		t.Errorf("%d subscriptions, want 2", n)
	}
}
