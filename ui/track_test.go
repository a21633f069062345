package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
)

// ev builds pool events at t0+d for the tracker tests.
func recvEv(d time.Duration, id uint64, server, sess, method, name string) pool.Event {
	return pool.Event{Kind: pool.EventRequestReceived, Time: t0.Add(d), PoolID: id, Server: server, Session: sess, Method: method, Name: name}
}

func writtenEv(d time.Duration, id uint64, pid int) pool.Event {
	return pool.Event{Kind: pool.EventRequestWritten, Time: t0.Add(d), PoolID: id, PID: pid}
}

func doneEv(d time.Duration, id uint64, status, errText string) pool.Event {
	return pool.Event{Kind: pool.EventRequestDone, Time: t0.Add(d), PoolID: id, Status: status, Err: errText}
}

// bar is what a test checks of a request.
type bar struct {
	ID                          uint64
	Session, Status             string
	Received, Written, Answered time.Duration // from t0; -1: did not happen
	PID                         int
}

func bars(rs []wfReq) []bar {
	out := make([]bar, len(rs))
	rel := func(t time.Time) time.Duration {
		if t.IsZero() {
			return -1
		}
		return t.Sub(t0)
	}
	for i, r := range rs {
		out[i] = bar{r.PoolID, r.Session, r.Status, rel(r.Received), rel(r.Written), rel(r.Answered), r.PID}
	}
	return out
}

func TestTrackerRequests(t *testing.T) {
	tr := newTracker(t0.Add(-time.Hour))
	tr.start(pool.Snapshot{TakenAt: t0.Add(-time.Minute), Servers: []pool.ServerInfo{{Name: "notes"}, {Name: "browser"}}})
	for _, e := range []pool.Event{
		{Kind: pool.EventSessionOpened, Time: t0.Add(-50 * time.Second), Server: "notes", Session: "s1", Transport: "stdio"},
		{Kind: pool.EventSessionOpened, Time: t0.Add(-40 * time.Second), Server: "notes", Session: "s2", Transport: "stdio"},
		recvEv(-30*time.Second, 1, "notes", "s1", "tools/call", "echo"),
		writtenEv(-30*time.Second+time.Millisecond, 1, 4242),
		doneEv(-30*time.Second+5*time.Millisecond, 1, pool.StatusOK, ""),
		recvEv(-20*time.Second, 2, "notes", "s1", "tools/call", "search"),
		recvEv(-20*time.Second, 3, "notes", "s1", "tools/list", ""),
		writtenEv(-20*time.Second+time.Millisecond, 2, 4242),
		doneEv(-19*time.Second, 3, pool.StatusError, "boom"),
		recvEv(-10*time.Second, 4, "notes", "s2", "resources/read", ""),
		doneEv(-9*time.Second, 4, pool.StatusCancelled, ""),
		// A request the tracker never saw start: only its end is known.
		{Kind: pool.EventRequestDone, Time: t0.Add(-5 * time.Second), PoolID: 99, Server: "browser", Session: "s3",
			Method: "tools/call", Name: "click", Status: pool.StatusOK, PID: 7},
	} {
		tr.event(e)
	}
	src := tr.publish(t0)
	wantDone := []bar{
		{1, "s1", pool.StatusOK, -30 * time.Second, -30*time.Second + time.Millisecond, -30*time.Second + 5*time.Millisecond, 4242},
		{3, "s1", pool.StatusError, -20 * time.Second, -1, -19 * time.Second, 0},
		{4, "s2", pool.StatusCancelled, -10 * time.Second, -1, -9 * time.Second, 0},
		{99, "s3", pool.StatusOK, -5 * time.Second, -1, -5 * time.Second, 7},
	}
	if d := cmp.Diff(wantDone, bars(src.Done.slice())); d != "" {
		t.Errorf("done (-want +got):\n%s", d)
	}
	wantOpen := []bar{{2, "s1", statusInFlight, -20 * time.Second, -20*time.Second + time.Millisecond, -1, 4242}}
	if d := cmp.Diff(wantOpen, bars(src.Open)); d != "" {
		t.Errorf("open (-want +got):\n%s", d)
	}
	if e := src.Done.At(1).Err; e != "boom" {
		t.Errorf("error = %q", e)
	}

	// Lanes: configured servers in config order, each with its sessions;
	// s1 had two requests in flight at once.
	type lane struct {
		Server, Session, Title string
		Rows                   int
	}
	var lanes []lane
	for _, l := range src.Lanes {
		lanes = append(lanes, lane{l.Server, l.Session, l.Title, l.Rows})
	}
	wantLanes := []lane{
		{"notes", "", "notes", 1},
		{"notes", "s1", "session s1", 2},
		{"notes", "s2", "session s2", 1},
		{"browser", "", "browser", 1},
		{"browser", "s3", "session s3", 1},
	}
	if d := cmp.Diff(wantLanes, lanes); d != "" {
		t.Errorf("lanes (-want +got):\n%s", d)
	}

	// A snapshot names the clients.
	tr.sync(pool.Snapshot{Servers: []pool.ServerInfo{{Name: "notes"}, {Name: "browser"}}, Sessions: []pool.SessionInfo{
		{ID: "s1", Server: "notes", ClientName: "claude-code", ClientVersion: "2.1.3", Transport: "stdio"}}})
	if got := tr.publish(t0).Lanes[1].Title; got != "claude-code 2.1.3" {
		t.Errorf("lane title = %q", got)
	}

	// The overview's figures come from the same events.
	f := tr.figures("notes", t0)
	if f.Calls != 3 || f.Errors != 1 || f.Cancelled != 1 {
		t.Errorf("notes figures = %+v", f)
	}
	if n := f.Spark[statSlots-1].InFlight; n != 1 {
		t.Errorf("in flight now = %d, want 1", n)
	}
	if bf := tr.figures("browser", t0); bf.Calls != 1 || bf.P50 != 0 {
		t.Errorf("browser figures = %+v (a request seen only ending has no duration)", bf)
	}
}

// TestTrackerPublishedSourcesStayPut: a source handed to the painter does
// not change when the tracker goes on, trims included.
func TestTrackerPublishedSourcesStayPut(t *testing.T) {
	tr := newTracker(t0.Add(-time.Hour))
	tr.retain = time.Minute
	for i := range uint64(100) {
		at := time.Duration(i) * time.Second
		tr.event(recvEv(at, i, "notes", "s1", "tools/call", "echo"))
		tr.event(doneEv(at+time.Millisecond, i, pool.StatusOK, ""))
		if i == 49 {
			old := tr.publish(t0.Add(at))
			before := bars(old.Done.slice())
			for j := uint64(50); j < 100; j++ {
				at := time.Duration(j) * time.Second
				tr.event(recvEv(at, j, "notes", "s1", "tools/call", "echo"))
				tr.event(doneEv(at+time.Millisecond, j, pool.StatusError, ""))
			}
			tr.trim(t0.Add(100 * time.Second))
			if d := cmp.Diff(before, bars(old.Done.slice())); d != "" {
				t.Fatalf("a published source changed (-before +after):\n%s", d)
			}
			break
		}
	}
	src := tr.publish(t0.Add(100 * time.Second))
	if n := src.Done.Len(); n != 60 {
		t.Errorf("kept %d requests, want the last minute's 60", n)
	}
	if src.Since != t0.Add(40*time.Second) {
		t.Errorf("since = %v, want %v", src.Since.Sub(t0), 40*time.Second)
	}
}

// countCapped is a tracker that took in more requests than it keeps:
// 1,000 in the last 10 s, 100 kept. The 900 dropped ended before the
// 100 kept; the last dropped was received at t0-1.01s and ended 1 ms
// later (countCappedAt).
var countCappedAt = t0.Add(-1010*time.Millisecond + time.Millisecond)

func countCapped() *tracker {
	tr := newTracker(t0.Add(-time.Hour))
	tr.maxDone = 100
	for i := range uint64(1000) {
		at := -10*time.Second + time.Duration(i)*10*time.Millisecond
		tr.event(recvEv(at, i+1, "notes", "s1", "tools/call", "echo"))
		tr.event(doneEv(at+time.Millisecond, i+1, pool.StatusOK, ""))
	}
	tr.trim(t0)
	return tr
}

// TestTrackerCountCapMovesSince: when the count cap, not the retention,
// drops bars, the source says it knows only from the last dropped one's
// end, and marks there that older requests are in the history; or, with
// the history off, that they are not kept.
func TestTrackerCountCapMovesSince(t *testing.T) {
	src := countCapped().publish(t0)
	if n := src.Done.Len(); n != 100 {
		t.Fatalf("kept %d requests, want 100", n)
	}
	lastDropped := countCappedAt
	if !src.Trimmed || !src.Since.Equal(lastDropped) {
		t.Errorf("since = %v (trimmed %v), want %v (true): the view claims bars it dropped",
			src.Since.Sub(t0), src.Trimmed, lastDropped.Sub(t0))
	}
	if d := cmp.Diff([]mark{{lastDropped.Sub(t0), markGap, "older requests are in History"}}, marksOf(src, t0)); d != "" {
		t.Errorf("markers (-want +got):\n%s", d)
	}
	off := countCapped()
	off.setHistory(false)
	if src := off.publish(t0); !src.NoHistory || len(src.Markers) != 1 || strings.Contains(src.Markers[0].Detail, "History") {
		t.Errorf("history off: source (no history %v) marks %+v; want a mark that does not point to History", src.NoHistory, src.Markers)
	} else if d := cmp.Diff([]mark{{lastDropped.Sub(t0), markGap, "older requests are not kept"}}, marksOf(src, t0)); d != "" {
		t.Errorf("history off: markers (-want +got):\n%s", d)
	}
	// Within the retention and under the cap, nothing is marked.
	tr := newTracker(t0.Add(-time.Hour))
	tr.event(recvEv(-time.Second, 1, "notes", "s1", "tools/call", "echo"))
	tr.event(doneEv(-time.Second+time.Millisecond, 1, pool.StatusOK, ""))
	tr.trim(t0)
	if src := tr.publish(t0); len(src.Markers) != 0 || !src.Since.Equal(t0.Add(-tr.retain)) {
		t.Errorf("under the cap: since %v, markers %v", src.Since.Sub(t0), marksOf(src, t0))
	}
}

func TestTrackerChildrenAndMarkers(t *testing.T) {
	tr := newTracker(t0.Add(-time.Hour))
	for _, e := range []pool.Event{
		{Kind: pool.EventBackendStarted, Time: t0.Add(-60 * time.Second), Server: "notes", PID: 100, Command: []string{"npx", "-y", "notes"},
			ResolvedCommand: []string{"node", "/cache/notes/index.js"}},
		{Kind: pool.EventBackendExited, Time: t0.Add(-50 * time.Second), Server: "notes", PID: 100, ExitCode: 1, Err: "exit status 1"},
		{Kind: pool.EventBackendStarted, Time: t0.Add(-49 * time.Second), Server: "notes", PID: 101},
		{Kind: pool.EventBackendState, Time: t0.Add(-20 * time.Second), Server: "notes", PID: 101, State: pool.StateStopping},
		{Kind: pool.EventBackendExited, Time: t0.Add(-19 * time.Second), Server: "notes", PID: 101, Err: "signal: terminated"},
		{Kind: pool.EventBackendStarted, Time: t0.Add(-10 * time.Second), Server: "notes", PID: 102, Roots: []string{"file:///src/a"}},
	} {
		tr.event(e)
	}
	tr.reloaded([]ConfigReload{{Seq: 1, At: t0.Add(-15 * time.Second), Changes: "notes: changed (args)"}})
	tr.reloaded([]ConfigReload{{Seq: 1, At: t0.Add(-15 * time.Second)}, {Seq: 2, At: t0.Add(-5 * time.Second), Err: "line 3: invalid character"}})
	// The next snapshot gives the crashed child's stderr.
	tr.sync(pool.Snapshot{Servers: []pool.ServerInfo{{Name: "notes"}}, Backends: []pool.BackendInfo{
		{Server: "notes", PID: 102, Roots: []string{"file:///src/a"}, StderrTail: []string{"ready"}},
		{Server: "notes", PID: 0, StderrTail: []string{"Error: Cannot find module 'x'", "    at node:internal"}},
	}})
	src := tr.publish(t0)
	got := marksOf(src, t0)
	want := []mark{
		{-60 * time.Second, markChildStart, "notes: child PID 100 started"},
		{-50 * time.Second, markChildCrash, "notes: child PID 100 crashed (exit status 1)"},
		{-49 * time.Second, markChildStart, "notes: child restarted as PID 101"},
		{-19 * time.Second, markChildStop, "notes: child PID 101 stopped (signal: terminated)"},
		{-10 * time.Second, markChildStart, "notes: child PID 102 started"},
		{-15 * time.Second, markReload, "config reloaded"},
		{-5 * time.Second, markReloadFailed, "config not applied"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("markers (-want +got):\n%s", d)
	}
	if d := src.Markers[0].Detail; d != "started as: node /cache/notes/index.js" {
		t.Errorf("start detail = %q", d)
	}
	// The stderr of the slot the crashed child ran in (no roots), not of
	// the child in another partition.
	if d := src.Markers[1].Detail; !strings.Contains(d, "Cannot find module") || strings.Contains(d, "ready") {
		t.Errorf("crash detail = %q", d)
	}
	if !src.Markers[1].Kind.crash() || src.Markers[3].Kind.crash() {
		t.Error("a stop counts as a crash, or a crash does not")
	}
	if got := src.Lanes[0].Sub; got != "PID 102" {
		t.Errorf("header lane = %q, want the live child", got)
	}
	if len(src.Children) != 3 || src.Children[0].Exited.IsZero() || !src.Children[2].Exited.IsZero() {
		t.Errorf("children = %+v", src.Children)
	}
}

// TestTrackerAfterLagging: a subscription renewed after falling behind
// brings a snapshot; requests that ended unseen are closed as such, and
// requests that started unseen are picked up.
func TestTrackerAfterLagging(t *testing.T) {
	tr := newTracker(t0.Add(-time.Hour))
	tr.event(recvEv(-10*time.Second, 1, "notes", "s1", "tools/call", "a"))
	tr.event(recvEv(-9*time.Second, 2, "notes", "s1", "tools/call", "b"))
	tr.start(pool.Snapshot{TakenAt: t0, InFlight: []pool.RequestInfo{
		{PoolID: 2, Server: "notes", Session: "s1", Method: "tools/call", Name: "b", ReceivedAt: t0.Add(-9 * time.Second)},
		{PoolID: 3, Server: "notes", Session: "s1", Method: "tools/call", Name: "c", ReceivedAt: t0.Add(-2 * time.Second),
			WrittenToChild: true, WrittenAt: t0.Add(-time.Second), PID: 9},
	}})
	src := tr.publish(t0)
	if d := cmp.Diff([]bar{{1, "s1", statusUnseen, -10 * time.Second, -1, 0, 0}}, bars(src.Done.slice())); d != "" {
		t.Errorf("done (-want +got):\n%s", d)
	}
	want := []bar{
		{2, "s1", statusInFlight, -9 * time.Second, -1, -1, 0},
		{3, "s1", statusInFlight, -2 * time.Second, -time.Second, -1, 9},
	}
	if d := cmp.Diff(want, bars(src.Open)); d != "" {
		t.Errorf("open (-want +got):\n%s", d)
	}
	if f := tr.figures("notes", t0); f.Calls != 0 || f.Spark[statSlots-1].InFlight != 2 {
		t.Errorf("figures after lagging = calls %d, in flight %d; want 0 and 2", f.Calls, f.Spark[statSlots-1].InFlight)
	}
}

// TestTrackerNamesAShortSessionFromItsEvents: the pool announces a
// session again once its client named itself; a session that opens,
// calls and closes between two snapshots takes its lane's name from
// that event.
func TestTrackerNamesAShortSessionFromItsEvents(t *testing.T) {
	tr := newTracker(t0.Add(-time.Hour))
	tr.start(pool.Snapshot{TakenAt: t0, Servers: []pool.ServerInfo{{Name: "notes"}}})
	for _, e := range []pool.Event{
		{Kind: pool.EventSessionOpened, Time: t0, Server: "notes", Session: "s7", Transport: "stdio"},
		{Kind: pool.EventSessionOpened, Time: t0, Server: "notes", Session: "s7", Transport: "stdio",
			ClientName: "claude-code", ClientVersion: "2.0"},
		recvEv(time.Millisecond, 1, "notes", "s7", "tools/call", "echo"),
		doneEv(2*time.Millisecond, 1, pool.StatusOK, ""),
		{Kind: pool.EventSessionClosed, Time: t0.Add(3 * time.Millisecond), Server: "notes", Session: "s7"},
	} {
		tr.event(e)
	}
	var got []string
	for _, l := range tr.publish(t0.Add(time.Second)).Lanes {
		if l.Session != "" {
			got = append(got, l.Title+" / "+l.Sub)
		}
	}
	if d := cmp.Diff([]string{"claude-code 2.0 / s7 · stdio"}, got); d != "" {
		t.Errorf("session lanes (-want +got):\n%s", d)
	}
}

// TestTrackerMarksWhatCameBeforeItsStart: after an upgrade, a restart
// or a crash the live waterfall starts empty; until the history fills
// the retention before its start in, it knows from its start only and
// marks there that what came before is in History, or, with the history
// off, not kept.
func TestTrackerMarksWhatCameBeforeItsStart(t *testing.T) {
	tr := newTracker(t0)
	tr.start(pool.Snapshot{TakenAt: t0, Servers: []pool.ServerInfo{{Name: "notes"}},
		Backends: []pool.BackendInfo{{Server: "notes", PID: 100, StartedAt: t0.Add(-time.Hour), CarriedOver: true}}})
	src := tr.publish(t0.Add(time.Minute))
	if !src.Since.Equal(t0) || !src.Trimmed {
		t.Errorf("since %v (trimmed %v), want the start (true)", src.Since.Sub(t0), src.Trimmed)
	}
	if d := cmp.Diff([]mark{{0, markGap, "not seen by this run: what came before is in History"}}, marksOf(src, t0)); d != "" {
		t.Errorf("markers (-want +got):\n%s", d)
	}
	tr.setHistory(false)
	src = tr.publish(t0.Add(time.Minute))
	if d := cmp.Diff([]mark{{0, markGap, "not seen by this run: what came before is not kept"}}, marksOf(src, t0)); d != "" {
		t.Errorf("history off: markers (-want +got):\n%s", d)
	}
	if len(src.Markers) == 1 && (strings.Contains(src.Markers[0].Detail, "History") || !strings.Contains(src.Markers[0].Detail, "the history is off")) {
		t.Errorf("history off: the marker says %q", src.Markers[0].Detail)
	}
	// Once the retention has passed the start, nothing is marked.
	if src := tr.publish(t0.Add(liveRetain + time.Second)); len(src.Markers) != 0 || !src.Since.Equal(t0.Add(time.Second)) {
		t.Errorf("past the retention: since %v, markers %v", src.Since.Sub(t0), marksOf(src, t0))
	}
}

func TestLaneRows(t *testing.T) {
	reqs := []wfReq{
		{Session: "a", Received: t0, Answered: t0.Add(time.Second)},
		{Session: "a", Received: t0.Add(500 * time.Millisecond), Answered: t0.Add(2 * time.Second)},
		{Session: "a", Received: t0.Add(time.Second), Answered: t0.Add(3 * time.Second)}, // starts as the first ends
		{Session: "b", Received: t0, Status: statusInFlight},
	}
	for range 10 {
		reqs = append(reqs, wfReq{Session: "c", Received: t0, Status: statusInFlight})
	}
	got := laneRows(reqs, t0.Add(time.Hour))
	if d := cmp.Diff(map[string]int{"a": 2, "b": 1, "c": maxLaneRows}, got); d != "" {
		t.Errorf("rows (-want +got):\n%s", d)
	}
}

// TestHistorySource: a window from history.db with a run that crashed
// with a request in flight, the run after it, and children that crashed
// and stopped.
func TestHistorySource(t *testing.T) {
	w := HistoryWindow{From: t0.Add(-2 * time.Minute), Until: t0.Add(10 * time.Second),
		Runs: []HistoryRun{
			{ID: 1, Started: t0.Add(-time.Hour), LastSeen: t0.Add(-30 * time.Second), Crashed: true, Version: "0.1.0", PID: 500},
			{ID: 2, Started: t0, Version: "0.1.0", PID: 600},
		},
		Sessions: []HistorySession{
			{Run: 1, ID: "s1", Server: "notes", ClientName: "claude-code", ClientVersion: "2.1.3", Transport: "stdio"},
			{Run: 2, ID: "s1", Server: "notes", ClientName: "cursor", ClientVersion: "1.7.0", Transport: "stdio"},
		},
		Children: []HistoryChild{
			{Run: 1, Server: "notes", PID: 4242, Started: t0.Add(-time.Hour), Exited: t0.Add(-31 * time.Second), ExitCode: 1, ExitReason: "exit status 1"},
			{Run: 1, Server: "notes", PID: 4300, Started: t0.Add(-31 * time.Second)}, // alive when the run crashed
			{Run: 1, Server: "browser", PID: 4400, Started: t0.Add(-100 * time.Second), Exited: t0.Add(-50 * time.Second), ExitReason: "signal: terminated"},
			{Run: 2, Server: "notes", PID: 5000, Started: t0.Add(time.Second)},
		},
		Requests: []HistoryRow{
			{Run: 1, PoolID: 7, Server: "notes", Session: "s1", Method: "tools/call", Name: "pay", Status: statusAbandoned,
				ReceivedAt: t0.Add(-90 * time.Second), WrittenAt: t0.Add(-90 * time.Second), PID: 4242},
			{Run: 1, PoolID: 8, Server: "notes", Session: "s1", Method: "tools/list", Status: pool.StatusOK,
				ReceivedAt: t0.Add(-80 * time.Second), WrittenAt: t0.Add(-80 * time.Second), AnsweredAt: t0.Add(-79 * time.Second), PID: 4242},
			{Run: 2, PoolID: 1, Server: "notes", Session: "s1", Method: "tools/call", Name: "sleep", Status: statusInFlight,
				ReceivedAt: t0.Add(2 * time.Second)},
		},
		Reloads: []ConfigReload{
			{At: t0.Add(-40 * time.Second), Changes: "changed: notes"},
			{At: t0.Add(3 * time.Second), Err: "line 3: invalid character '}'"},
		},
	}
	src := historySource(w, t0.Add(5*time.Second))
	if d := cmp.Diff([]bar{
		{7, "s1", statusAbandoned, -90 * time.Second, -90 * time.Second, -30 * time.Second, 4242},
		{8, "s1", pool.StatusOK, -80 * time.Second, -80 * time.Second, -79 * time.Second, 4242},
	}, bars(src.Done.slice())); d != "" {
		t.Errorf("done (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]bar{{1, "s1", statusInFlight, 2 * time.Second, -1, -1, 0}}, bars(src.Open)); d != "" {
		t.Errorf("open (-want +got):\n%s", d)
	}
	type lane struct {
		Run                    int64
		Server, Session, Title string
		Sub                    string
	}
	var lanes []lane
	for _, l := range src.Lanes {
		lanes = append(lanes, lane{l.Run, l.Server, l.Session, l.Title, l.Sub})
	}
	if d := cmp.Diff([]lane{
		{0, "browser", "", "browser", "no child"},
		{0, "notes", "", "notes", "PID 5000"},
		{1, "notes", "s1", "claude-code 2.1.3", "s1 · stdio · run 1"},
		{2, "notes", "s1", "cursor 1.7.0", "s1 · stdio · run 2"},
	}, lanes); d != "" {
		t.Errorf("lanes (-want +got):\n%s", d)
	}
	marks := marksOf(src, t0)
	if d := cmp.Diff([]mark{
		{-100 * time.Second, markChildStart, "browser: child PID 4400 started"},
		{-50 * time.Second, markChildStop, "browser: child PID 4400 exited (signal: terminated)"},
		{-40 * time.Second, markReload, "config reloaded"},
		{-31 * time.Second, markChildCrash, "notes: child PID 4242 crashed (exit status 1)"},
		{-31 * time.Second, markChildStart, "notes: child PID 4300 started"},
		{-30 * time.Second, markAppCrash, "Switchboard 0.1.0 (run 1, PID 500) crashed"},
		{0, markAppStart, "Switchboard 0.1.0 (run 2, PID 600) started"},
		{time.Second, markChildStart, "notes: child PID 5000 started"},
		{3 * time.Second, markReloadFailed, "config not applied"},
	}, marks); d != "" {
		t.Errorf("markers (-want +got):\n%s", d)
	}
	// The child alive when its run crashed ends with the run.
	for _, c := range src.Children {
		if c.PID == 4300 && !c.Exited.Equal(t0.Add(-30*time.Second)) {
			t.Errorf("child 4300 ends at %v, want the run's crash", c.Exited.Sub(t0))
		}
	}
}

// BenchmarkTrackerEvents is the loop's cost per request: its received,
// written and done events.
func BenchmarkTrackerEvents(b *testing.B) {
	tr := newTracker(t0)
	id := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		id++
		at := t0.Add(time.Duration(id) * time.Microsecond)
		sess := "s" + string(rune('a'+id%64))
		tr.event(pool.Event{Kind: pool.EventRequestReceived, Time: at, PoolID: id, Server: "notes", Session: sess, Method: "tools/call", Name: "echo"})
		tr.event(pool.Event{Kind: pool.EventRequestWritten, Time: at, PoolID: id, PID: 1})
		tr.event(pool.Event{Kind: pool.EventRequestDone, Time: at.Add(time.Millisecond), PoolID: id, Status: pool.StatusOK})
		if id%10_000 == 0 {
			tr.trim(at)
		}
	}
}

// slice copies a list, for tests.
func (l *reqList) slice() []wfReq {
	out := make([]wfReq, 0, l.Len())
	l.each(func(_ int, r *wfReq) { out = append(out, *r) })
	return out
}

// TestReqList: appends never move what a snapshot holds; dropping the
// oldest drops whole chunks.
func TestReqList(t *testing.T) {
	var l reqList
	for i := range 3*reqChunk + 10 {
		l.add(wfReq{PoolID: uint64(i)})
	}
	snap := l.snapshot()
	first := snap.At(0)
	for i := range reqChunk {
		l.add(wfReq{PoolID: uint64(1_000_000 + i)})
	}
	l.dropWhile(func(r *wfReq) bool { return r.PoolID < uint64(2*reqChunk+5) })
	if snap.Len() != 3*reqChunk+10 || snap.At(0) != first || snap.At(snap.Len()-1).PoolID != uint64(3*reqChunk+9) {
		t.Fatalf("a snapshot changed: len %d, first %d, last %d", snap.Len(), snap.At(0).PoolID, snap.At(snap.Len()-1).PoolID)
	}
	if l.Len() != 4*reqChunk+10-(2*reqChunk+5) || l.At(0).PoolID != uint64(2*reqChunk+5) || len(l.chunks) != 3 {
		t.Errorf("after dropping: len %d, first %d, %d chunks", l.Len(), l.At(0).PoolID, len(l.chunks))
	}
	n := 0
	l.each(func(i int, r *wfReq) {
		if l.At(i) != r {
			t.Fatalf("each and At disagree at %d", i)
		}
		n++
	})
	if n != l.Len() {
		t.Errorf("each visited %d of %d", n, l.Len())
	}
	l.dropWhile(func(*wfReq) bool { return true })
	if l.Len() != 0 {
		t.Errorf("%d left after dropping all", l.Len())
	}
	l.add(wfReq{PoolID: 7})
	if l.Len() != 1 || l.At(0).PoolID != 7 {
		t.Error("cannot add after dropping all")
	}
}

// mark is a marker as the tests compare it: when (from t0), what, and
// its title.
type mark struct {
	At    time.Duration
	Kind  markerKind
	Title string
}

// marksOf lists src's markers as marks.
func marksOf(src *wfSource, t0 time.Time) []mark {
	var marks []mark
	for _, m := range src.Markers {
		marks = append(marks, mark{m.At.Sub(t0), m.Kind, m.Title})
	}
	return marks
}
