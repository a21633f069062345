package ui

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/switchboard-mcp/switchboard/pool"
)

// perSessionSnapshot is a share "session" server with two children, one
// each for alice's and bob's session.
func perSessionSnapshot() pool.Snapshot {
	return pool.Snapshot{TakenAt: t0,
		Servers: []pool.ServerInfo{{Name: "per", Share: pool.ShareSession, State: pool.StateReady}},
		Sessions: []pool.SessionInfo{
			{ID: "s1", Server: "per", ClientName: "alice", ConnectedAt: t0.Add(-time.Minute)},
			{ID: "s2", Server: "per", ClientName: "bob", ConnectedAt: t0.Add(-time.Minute)},
		},
		Backends: []pool.BackendInfo{
			{ID: 5, Server: "per", Session: "s1", PID: 4100, State: pool.StateReady, StartedAt: t0.Add(-time.Minute), Sessions: 1},
			{ID: 6, Server: "per", Session: "s2", PID: 4101, State: pool.StateReady, StartedAt: t0.Add(-time.Minute), Sessions: 1},
		},
	}
}

// A Backends row's Restart restarts that row's child only; the
// overview card's restarts the server, and says "all" when the server
// has more than one child. On the first edition the row restarted every
// child of the server: with share "session", alice's Restart killed
// bob's child and failed his call.
func TestBackendRowRestartsItsChildOnly(t *testing.T) {
	fake := newFake(perSessionSnapshot())
	u := newTestUIAsync(t, fake, tabBackends, true)
	u.dash.win.Resize(fyne.NewSize(1000, 660))
	test.Tap(button(t, rowCells(u.dash.backends, "per [s1]"), rowRestart))
	waitCalls(t, fake, "restart backend 5")
	if got := fake.recorded(); slices.Contains(got, "restart per") || slices.Contains(got, "restart backend 6") {
		t.Fatalf("alice's row restarted more than her child: %q", got)
	}

	u.dash.selectTab(tabOverview)
	u.render(fake.Snapshot(), t0)
	card := u.dash.overview.cards[0]
	if card.restart.Text != cardRestartAll {
		t.Errorf("the card of a server with two children says %q, want %q", card.restart.Text, cardRestartAll)
	}
	test.Tap(card.restart)
	waitCalls(t, fake, "restart backend 5", "restart per")
}

// A user's restart is not a crash, live as in the history: its exit is
// marked a stop (Last crash and C skip it) and the next child's start a
// restart. On the first edition the live waterfall counted only stopping
// and stopped as planned, and the restarting state a user's restart
// emits first made the exit a crash.
func TestUserRestartIsNotACrash(t *testing.T) {
	tr := newTracker(t0)
	tr.event(pool.Event{Kind: pool.EventBackendStarted, Time: t0, Server: "per", PID: 100})
	tr.event(pool.Event{Kind: pool.EventBackendState, Time: t0.Add(time.Second), Server: "per", PID: 100, State: pool.StateRestart})
	tr.event(pool.Event{Kind: pool.EventBackendExited, Time: t0.Add(2 * time.Second), Server: "per", PID: 100, Err: "exit status 0"})
	tr.event(pool.Event{Kind: pool.EventBackendStarted, Time: t0.Add(2 * time.Second), Server: "per", PID: 101})
	src := tr.publish(t0.Add(3 * time.Second))
	if m, ok := lastCrash(src); ok {
		t.Errorf("a user's restart is marked %q, a crash: Last crash jumps to it", m.Title)
	}
	var titles []string
	for _, m := range src.Markers {
		titles = append(titles, m.Title)
	}
	want := []string{"per: child PID 100 started", "per: child PID 100 stopped for a restart (exit status 0)",
		"per: child restarted as PID 101"}
	if !slices.Equal(titles, want) {
		t.Errorf("markers %q, want %q", titles, want)
	}
	hist := historySource(HistoryWindow{From: t0, Until: t0.Add(3 * time.Second),
		Children: []HistoryChild{{Server: "per", PID: 100, Started: t0, Exited: t0.Add(2 * time.Second), ExitReason: "exit status 0"}}},
		t0.Add(3*time.Second))
	if _, ok := lastCrash(hist); ok {
		t.Error("the history calls the same exit a crash")
	}

	// A crash still is one: its restarting state comes without a PID.
	tr.event(pool.Event{Kind: pool.EventBackendExited, Time: t0.Add(4 * time.Second), Server: "per", PID: 101, ExitCode: 1, Err: "exit status 1"})
	tr.event(pool.Event{Kind: pool.EventBackendState, Time: t0.Add(4 * time.Second), Server: "per", State: pool.StateRestart})
	if m, ok := lastCrash(tr.publish(t0.Add(5 * time.Second))); !ok || m.PID != 101 {
		t.Errorf("a crash after the restart: last crash %+v, %v", m, ok)
	}
}

// manyLanesWaterfall is a live waterfall of server "busy" with n
// sessions, each with one call answered, and a call in flight for
// long in session "s<hung>".
func manyLanesWaterfall(t *testing.T, n, hung int) (*UI, *fakeCtrl, *waterfallView, wfReq) {
	t.Helper()
	snap := pool.Snapshot{TakenAt: t0, Servers: []pool.ServerInfo{{Name: "busy", State: pool.StateReady}}}
	tr := newTracker(t0.Add(-time.Hour))
	tr.start(pool.Snapshot{TakenAt: t0.Add(-10 * time.Minute), Servers: snap.Servers})
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		at := -100*time.Second + time.Duration(i)*100*time.Millisecond
		tr.event(pool.Event{Kind: pool.EventSessionOpened, Time: t0.Add(at), Server: "busy", Session: id, Transport: "stdio"})
		tr.event(recvEv(at, uint64(i+1), "busy", id, "tools/call", "quick"))
		tr.event(doneEv(at+50*time.Millisecond, uint64(i+1), pool.StatusOK, ""))
	}
	tr.event(recvEv(-50*time.Second, 9999, "busy", fmt.Sprintf("s%d", hung), "tools/call", "stuck"))
	tr.event(writtenEv(-50*time.Second+time.Millisecond, 9999, 4242))
	tr.sync(snap)
	fake := newFake(snap)
	u := showWaterfall(t, fake, func(u *UI) {
		u.track = tr
		u.wfLive.Store(tr.publish(t0))
	})
	w := u.dash.waterfall
	w.setView(wfView{To: t0, Span: 2 * time.Minute, Follow: true})
	return u, fake, w, findReq(t, u.liveSource(), "stuck")
}

// laneShown says whether the frame on screen shows session's lane.
func laneShown(w *waterfallView, session string) bool {
	return w.frame != nil && slices.ContainsFunc(w.frame.Labels, func(l wfLabel) bool { return l.Lane.Session == session })
}

// A click on the hung tray icon scrolls the waterfall to the hung
// request's own lane, however many session lanes come before it, and
// follows now. On the first edition it scrolled to its server's header:
// with hundreds of sessions the request was off screen.
func TestRevealScrollsToTheRequestsLane(t *testing.T) {
	u, fake, w, hung := manyLanesWaterfall(t, 300, 250)
	w.panBy(-0.5) // the user looked at the past: reveal follows now again
	u.showWaterfallAt("", hung.key())
	if !laneShown(w, "s250") {
		t.Errorf("the hung request's lane is not on screen: scrolled to %d", w.v.Scroll)
	}
	if w.frame.Drawn == 0 {
		t.Error("no request in view")
	}
	if v := w.current(); !v.Follow || hung.Received.Before(v.from()) {
		t.Errorf("view %v..%v follow %v; want it following, from before the request", v.from().Sub(t0), v.To.Sub(t0), v.Follow)
	}
	waitCalls(t, fake, fmt.Sprintf("timeline run 0 request %d", hung.PoolID))
}

// The details of a selected request in flight follow it: once it timed
// out they say so, with its recorded timeline read again. On the first
// edition they said "in flight ... so far" for ever.
func TestWaterfallDetailsFollowTheSelectedRequest(t *testing.T) {
	u, fake, w, hung := manyLanesWaterfall(t, 3, 1)
	w.selectReq(hung)
	if !strings.Contains(w.details.title.Text, "in flight") {
		t.Fatalf("details title %q", w.details.title.Text)
	}
	u.track.event(doneEv(-time.Second, hung.PoolID, pool.StatusTimeout, "did not answer within 49s"))
	u.wfLive.Store(u.track.publish(t0))
	w.repaint()
	if got := w.details.title.Text; !strings.Contains(got, "timed out") {
		t.Errorf("details title %q after the request timed out", got)
	}
	if got := w.details.summary.Text; strings.Contains(got, "so far") || !strings.Contains(got, "did not answer within 49s") {
		t.Errorf("details summary %q after the request timed out", got)
	}
	call := fmt.Sprintf("timeline run 0 request %d", hung.PoolID)
	n := 0
	for _, c := range fake.recorded() {
		if c == call {
			n++
		}
	}
	if n != 2 {
		t.Errorf("the timeline was read %d times, want again once the request ended", n)
	}
}

// longName is a server name wider than a card.
const longName = "a-server-with-a-really-quite-extraordinarily-long-name-that-goes-on-and-on-forever-and-ever"

// absRight is where o ends, from the window's left edge.
func absRight(o fyne.CanvasObject, w float32) float32 {
	return fyne.CurrentApp().Driver().AbsolutePositionForObject(o).X + w
}

// At the default window size (1000 x 660): a long server name is cut
// short of its card's buttons; the Backends table's last button is in
// view; a leak's reason, cut in its cell, is shown whole on selection.
// On the first edition the name was drawn over the buttons, the Kill
// column was clipped, and a leak's row showed nothing on selection.
func TestDashboardFitsTheDefaultWindow(t *testing.T) {
	snap := perSessionSnapshot()
	snap.Servers[0].Name = longName
	for i := range snap.Backends {
		snap.Backends[i].Server = longName
		snap.Backends[i].StderrTail = []string{strings.Repeat("a long line on stderr ", 8)}
	}
	for i := range snap.Sessions {
		snap.Sessions[i].Server = longName
	}
	fake := newFake(snap)
	u := newTestUIWith(t, fake, tabOverview, func(u *UI) {
		u.stats = map[int]procStat{4100: {RSS: 48 << 20, TreeRSS: 148 << 20, TreeProcs: 12, CPU: 100}}
	})
	u.dash.win.Resize(fyne.NewSize(1000, 660))
	u.render(fake.Snapshot(), t0)
	card := u.dash.overview.cards[0]
	var wf *widget.Button
	for _, o := range visible(card.box) {
		if b, ok := o.(*widget.Button); ok && b.Text == "Waterfall" {
			wf = b
		}
	}
	if wf == nil {
		t.Fatal("no Waterfall button on the card")
	}
	name := card.name
	if end, buttons := absRight(name, name.MinSize().Width), fyne.CurrentApp().Driver().AbsolutePositionForObject(wf).X; end > buttons {
		t.Errorf("the card's name %q ends at %.0f, over its buttons at %.0f", name.Text, end, buttons)
	}
	if !strings.HasSuffix(name.Text, "…") || !strings.HasPrefix(longName, strings.TrimSuffix(name.Text, "…")) {
		t.Errorf("the card's name is %q, want the start of the name with an ellipsis", name.Text)
	}

	u.dash.selectTab(tabBackends)
	u.render(fake.Snapshot(), t0)
	row := rowCells(u.dash.backends, longName+" [s1]")
	kill := button(t, row, "Kill")
	if end, width := absRight(kill, kill.Size().Width), u.dash.win.Canvas().Size().Width; end > width {
		t.Errorf("the Kill button ends at %.0f, past the window's %.0f", end, width)
	}
	u.dash.backends.w.Select(widget.TableCellID{Row: 0, Col: 0})
	if got := u.dash.backendDetail.Text; !strings.HasPrefix(got, longName+" [s1], PID 4100") {
		t.Errorf("the selected backend's detail does not name it whole: %q", got)
	}

	u.dash.selectTab(tabLeaks)
	u.render(fake.Snapshot(), t0)
	reason := u.leaks[0].Reason
	u.dash.leaks.w.Select(widget.TableCellID{Row: 0, Col: 4})
	if got := u.dash.leakDetail.Text; !strings.Contains(got, reason) || !strings.Contains(got, u.leaks[0].Command) {
		t.Errorf("the selected leak's detail is %q, want its reason %q and its command", got, reason)
	}
}

// Errors notified on the desktop go through desktopNote: no markup on
// Linux, nothing PowerShell would run on Windows, cut to length. The
// sanitiser was tested only by calling it; a UI that sent the raw
// notification passed every test.
func TestNotificationsAreSanitised(t *testing.T) {
	fake := newFake(fixture())
	u := newTestUI(t, fake, tabOverview)
	u.hideDashboard() // errors then go to the desktop
	err := errors.New(`restart <a href="https://evil.example">x</a> "$(calc)" ` + strings.Repeat("long ", 200))
	n := fyne.NewNotification("Switchboard", err.Error())
	want := desktopNote(runtime.GOOS, n)
	if want.Content == n.Content {
		t.Fatalf("desktopNote changes nothing on %s: the test shows nothing", runtime.GOOS)
	}
	test.AssertNotificationSent(t, want, func() { u.showError(err) })
}

// historyCtrl is fakeCtrl with History and Window of the test's own.
type historyCtrl struct {
	*fakeCtrl
	history func(HistoryFilter) []HistoryRow
	window  func(from, until time.Time) HistoryWindow
}

func (c *historyCtrl) History(ctx context.Context, f HistoryFilter) ([]HistoryRow, error) {
	if c.history == nil {
		return c.fakeCtrl.History(ctx, f)
	}
	return c.history(f), nil
}

func (c *historyCtrl) Window(ctx context.Context, from, until time.Time) (HistoryWindow, error) {
	if c.window == nil {
		return c.fakeCtrl.Window(ctx, from, until)
	}
	return c.window(from, until), nil
}

// A search answered after a newer one is dropped: the newer one's rows
// stay. Here the user searches again while the first search is read.
func TestOlderHistorySearchDoesNotOverwriteANewerOne(t *testing.T) {
	fake := newFake(fixture())
	ctrl := &historyCtrl{fakeCtrl: fake}
	u := newTestUIWith(t, fake, tabOverview, func(u *UI) { u.ctrl = ctrl })
	h := u.dash.history
	row := func(server string) []HistoryRow {
		return []HistoryRow{{ID: 1, PoolID: 1, Server: server, Method: "tools/call", Status: "ok", ReceivedAt: t0}}
	}
	reading := false
	ctrl.history = func(f HistoryFilter) []HistoryRow {
		if f.Status == "error" && !reading {
			reading = true
			h.status.SetSelected("ok") // the user's newer search, answered first
			return row("older")
		}
		return row("newer")
	}
	h.status.SetSelected("error")
	if !reading {
		t.Fatal("the first search did not run")
	}
	if got := h.results.rows; len(got) != 1 || got[0].server != "newer" {
		t.Errorf("the results show %v, want the newer search's", cells(got))
	}
}

// A wider window of the history read for a pan arrives after the user
// went back to live: it is dropped, the view stays live.
func TestHistoryWindowReadAfterGoingLiveIsDropped(t *testing.T) {
	tr, snap := waterfallFixture()
	fake := newFake(snap)
	fake.window = historyFixture()
	ctrl := &historyCtrl{fakeCtrl: fake}
	u := showWaterfall(t, fake, func(u *UI) {
		u.ctrl = ctrl
		u.track = tr
		u.wfLive.Store(tr.publish(t0))
	})
	w := u.dash.waterfall
	w.mode.SetSelected("History: last 15 minutes")
	if w.hist == nil {
		t.Fatal("the history window is not shown")
	}
	extended := false
	ctrl.window = func(from, until time.Time) HistoryWindow {
		extended = true
		w.mode.SetSelected(modeLive) // the user goes back to live meanwhile
		return HistoryWindow{From: from, Until: until}
	}
	w.panBy(-0.5)
	if !extended {
		t.Fatal("panning out of the window read no more history")
	}
	if w.hist != nil {
		t.Errorf("a history window read before going live replaced the live view (%v..%v)", w.hist.Since, w.hist.Until)
	}
}
