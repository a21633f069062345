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
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
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
	test.Tap(dialogButton(t, u.dash.win, rowRestart))
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
	test.Tap(dialogButton(t, u.dash.win, cardRestartAll))
	waitCalls(t, fake, "restart backend 5", "restart per")
}

// A user's restart is not a crash, live as in the history: its exit is
// marked a stop (Last crash and C skip it) and the next child's start a
// restart. On the first edition the live waterfall counted only stopping
// and stopped as planned, and the restarting state a user's restart
// emits first made the exit a crash.
func TestUserRestartIsNotACrash(t *testing.T) {
	tr := newTracker(t0.Add(-time.Hour)) // long running: its start is not marked
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

// confirmBefore taps b and checks what the dialog it opens says: each of
// want, and that nothing was done yet.
func confirmBefore(t *testing.T, u *UI, fake *fakeCtrl, b *widget.Button, want ...string) {
	t.Helper()
	before := len(fake.recorded())
	test.Tap(b)
	if got := fake.recorded(); len(got) != before {
		t.Fatalf("acted before asking: %q", got[before:])
	}
	msg := dialogText(t, u.dash.win)
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the confirmation reads %q; want it to say %q", msg, w)
		}
	}
}

// Every row button and server restart asks first, naming what it acts on
// and what happens, and the confirmed action acts on what was named even
// when the rows moved meanwhile. On the first edition Cancel, Kill,
// Restart child, a card's Restart (all) and the tray's Restart and Stop
// acted at the click, on whatever row the button drawn under the pointer
// stood for by then.
func TestActionsAskFirstAndActOnWhatWasConfirmed(t *testing.T) {
	snap := fixture()
	snap.Backends[0].ID, snap.Backends[1].ID = 17, 18
	fake := newFake(snap)
	u := newTestUI(t, fake, tabInFlight)
	u.dash.win.Resize(fyne.NewSize(1000, 660))
	u.render(fake.Snapshot(), t0)
	win := u.dash.win

	// Cancel of the hung request; it ends and the next row moves up
	// before the user confirms: the confirmed one is cancelled.
	confirmBefore(t, u, fake, button(t, rowCells(u.dash.inflight, "sleep"), "Cancel"),
		"tools/call sleep", "s2 (cursor)", "fake")
	fake.update(func(s *pool.Snapshot) { s.InFlight = s.InFlight[1:] })
	u.render(fake.Snapshot(), t0)
	test.Tap(dialogButton(t, win, "Cancel request"))
	waitCalls(t, fake, "cancel 9")
	if slices.Contains(fake.recorded(), "cancel 7") {
		t.Error("the confirmed Cancel cancelled the row that moved under it")
	}

	// Kill and Restart child of a Backends row, while another child's row
	// comes before it.
	u.dash.selectTab(tabBackends)
	u.render(fake.Snapshot(), t0)
	confirmBefore(t, u, fake, button(t, rowCells(u.dash.backends, "fake"), "Kill"),
		"fake (PID 4242)", "3 requests in flight")
	fake.update(func(s *pool.Snapshot) {
		s.Backends = append([]pool.BackendInfo{{ID: 16, Server: "alpha", PID: 4000, State: pool.StateReady}}, s.Backends...)
	})
	u.render(fake.Snapshot(), t0)
	test.Tap(dialogButton(t, win, "Kill"))
	waitCalls(t, fake, "kill 4242")
	confirmBefore(t, u, fake, button(t, rowCells(u.dash.backends, "fake"), rowRestart), "fake (PID 4242)")
	test.Tap(dialogButton(t, win, "Restart child"))
	waitCalls(t, fake, "restart backend 17")
	if got := fake.recorded(); slices.Contains(got, "kill 4000") || slices.Contains(got, "restart backend 16") {
		t.Errorf("acted on the row that came first: %q", got)
	}

	// No is no.
	confirmBefore(t, u, fake, button(t, rowCells(u.dash.backends, "alpha"), "Kill"), "alpha (PID 4000)")
	test.Tap(dialogButton(t, win, "No"))
	if slices.Contains(fake.recorded(), "kill 4000") {
		t.Error("killed after No")
	}

	// A leak's Kill.
	u.dash.selectTab(tabLeaks)
	u.render(fake.Snapshot(), t0)
	confirmBefore(t, u, fake, button(t, rowCells(u.dash.leaks, "777"), "Kill"), "PID 777", "memory")
	test.Tap(dialogButton(t, win, "Kill"))
	waitCalls(t, fake, "killleak 777")

	// The overview card's Restart.
	u.dash.selectTab(tabOverview)
	u.render(fake.Snapshot(), t0)
	confirmBefore(t, u, fake, u.dash.overview.cards[0].restart, "Restart fake", "stopped gracefully")
	test.Tap(dialogButton(t, win, "Restart"))
	waitCalls(t, fake, "restart fake")

	// The tray's Restart and Stop ask on the dashboard, as Kill leaked
	// backends does.
	u.hideDashboard()
	u.menuDo(menuAction{Kind: actRestart, Server: "memory"})
	if !u.dashOpen.Load() {
		t.Fatal("the tray's Restart did not open the dashboard to ask")
	}
	if msg := dialogText(t, win); !strings.Contains(msg, "Restart memory") || slices.Contains(fake.recorded(), "restart memory") {
		t.Errorf("the tray's Restart asks %q; calls so far %q", msg, fake.recorded())
	}
	test.Tap(dialogButton(t, win, "Restart"))
	waitCalls(t, fake, "restart memory")
	u.menuDo(menuAction{Kind: actStop, Server: "fake"})
	if msg := dialogText(t, win); !strings.Contains(msg, "Stop fake") || !strings.Contains(msg, "2 requests in flight get an error") {
		t.Errorf("the tray's Stop asks %q", msg)
	}
	test.Tap(dialogButton(t, win, "Stop"))
	waitCalls(t, fake, "stop fake")
}

// A Restart child confirmed for one process restarts nothing when that
// process is gone by then: the slot's next child is not what was asked.
func TestRestartChildOfAGoneProcessRestartsNothing(t *testing.T) {
	snap := fixture()
	snap.Backends[0].ID = 17
	fake := newFake(snap)
	u := newTestUI(t, fake, tabBackends)
	u.dash.win.Resize(fyne.NewSize(1000, 660))
	u.render(fake.Snapshot(), t0)
	confirmBefore(t, u, fake, button(t, rowCells(u.dash.backends, "fake"), rowRestart), "fake (PID 4242)")
	fake.update(func(s *pool.Snapshot) { s.Backends[0].PID = 4343 }) // it crashed and was restarted
	test.Tap(dialogButton(t, u.dash.win, "Restart child"))
	if got := fake.recorded(); slices.Contains(got, "restart backend 17") {
		t.Errorf("restarted PID 4343 after the user confirmed PID 4242: %q", got)
	}
	if msg := dialogText(t, u.dash.win); !strings.Contains(msg, "4242") {
		t.Errorf("the dialog after the confirmation reads %q; want it to say PID 4242 is gone", msg)
	}
}

// A child slot with no process (a failed server's, PID —) has no Kill:
// there is nothing to kill. Its Restart child stays: it starts the child
// again with a fresh restart budget. On the first edition Kill was there
// and answered "pid 0 is not a child of this pool".
func TestNoKillWithoutAProcess(t *testing.T) {
	snap := fixture()
	snap.Backends[1].ID = 18
	fake := newFake(snap)
	u := newTestUI(t, fake, tabBackends)
	u.dash.win.Resize(fyne.NewSize(1000, 660))
	u.render(fake.Snapshot(), t0)
	row := rowCells(u.dash.backends, "memory")
	for _, c := range row {
		if c.btn.Visible() && c.btn.Text == "Kill" {
			t.Error("a slot with no process has a Kill button")
		}
	}
	confirmBefore(t, u, fake, button(t, row, rowRestart), "memory", "fresh restart budget")
	test.Tap(dialogButton(t, u.dash.win, "Restart child"))
	waitCalls(t, fake, "restart backend 18")
}

// A column of ages keeps its width as they tick: a button after it
// stays where the pointer is. On the first edition "9m56s" becoming
// "10m00s" widened the column, and a click aimed at a Kill missed.
func TestTickingColumnsKeepTheirWidth(t *testing.T) {
	test.NewTempApp(t)
	at := func(age time.Duration) pool.Snapshot {
		s := fixture()
		for i := range s.InFlight {
			s.InFlight[i].ReceivedAt = t0.Add(-age)
		}
		for i := range s.Backends {
			s.Backends[i].StartedAt = t0.Add(-age)
		}
		for i := range s.Sessions {
			s.Sessions[i].ConnectedAt = t0.Add(-age)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		cols []column
		rows func(s pool.Snapshot) []row
	}{
		{"in flight", inflightColumns, func(s pool.Snapshot) []row { return inflightRows(s, t0, time.Hour) }},
		{"backends", backendColumns, func(s pool.Snapshot) []row {
			return backendRows(s, t0, map[int]procStat{4242: {RSS: 9 << 20, CPU: 3}})
		}},
		{"sessions", sessionColumns, func(s pool.Snapshot) []row { return sessionRows(s, t0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTable(tc.cols, "empty")
			for _, age := range []time.Duration{7 * time.Second, 9*time.Minute + 56*time.Second} {
				tb.setRows(tc.rows(at(age)))
			}
			before := slices.Clone(tb.widths)
			for _, age := range []time.Duration{10 * time.Minute, 59*time.Minute + 59*time.Second, time.Hour, 23*time.Hour + 59*time.Minute} {
				tb.setRows(tc.rows(at(age)))
				if !slices.Equal(tb.widths, before) {
					t.Errorf("at age %v the widths are %v, were %v", age, tb.widths, before)
				}
			}
		})
	}
}

// tabTitleShown says whether the tab bar shows the title of tab name
// whole, within the window.
func tabTitleShown(d *dashboard, name string) bool {
	width := d.win.Canvas().Size().Width
	for _, o := range visible(d.tabs) {
		if txt, ok := o.(*canvas.Text); ok && txt.Text == d.tabOf[name].Text && absRight(txt, txt.MinSize().Width) <= width {
			return true
		}
	}
	return false
}

// inView says whether the row's button reading text is drawn, within
// the window's width.
func inView(d *dashboard, row []*cell, text string) bool {
	for _, c := range row {
		if b := c.btn; b.Visible() && b.Text == text {
			x := fyne.CurrentApp().Driver().AbsolutePositionForObject(b).X
			return x >= 0 && x+b.Size().Width <= d.win.Canvas().Size().Width
		}
	}
	return false
}

// In a small window (560 x 380) the selected view's tab is in the tab
// bar, every row's buttons are in view, and the waterfall does not ask
// for a larger window. On the first edition the tabs folded into "…"
// (the selected one with them), Cancel and Kill lay right of the window
// behind a scroll, and choosing the waterfall made the window 876 x 462.
func TestDashboardFitsASmallWindow(t *testing.T) {
	fake := newFake(fixture())
	u := newTestUI(t, fake, tabInFlight)
	d := u.dash
	small := fyne.NewSize(560, 380)
	d.win.Resize(small)
	u.render(fake.Snapshot(), t0)
	if !tabTitleShown(d, tabInFlight) {
		t.Errorf("the selected tab's title %q is not in the tab bar", d.tabOf[tabInFlight].Text)
	}
	for _, name := range []string{"sleep", "search"} {
		if !inView(d, rowCells(d.inflight, name), "Cancel") {
			t.Errorf("the Cancel of %s is out of view", name)
		}
	}

	d.selectTab(tabBackends)
	u.render(fake.Snapshot(), t0)
	if !tabTitleShown(d, tabBackends) {
		t.Errorf("the selected tab's title %q is not in the tab bar", d.tabOf[tabBackends].Text)
	}
	row := rowCells(d.backends, "fake")
	for _, text := range []string{rowRestart, "Kill"} {
		if !inView(d, row, text) {
			t.Errorf("the %s of fake's row is out of view", text)
		}
	}

	d.selectTab(tabLeaks)
	u.render(fake.Snapshot(), t0)
	if !inView(d, rowCells(d.leaks, "777"), "Kill") {
		t.Error("a leak's Kill is out of view")
	}

	for _, name := range []string{tabOverview, tabWaterfall, tabSessions, tabInFlight, tabBackends, tabHistory, tabLeaks} {
		d.selectTab(name)
		u.render(fake.Snapshot(), t0)
		if m := d.win.Content().MinSize(); m.Width > small.Width || m.Height > small.Height {
			t.Errorf("with %s shown the window asks to be at least %v, more than %v", name, m, small)
		}
	}
}

// A failed server's reason is cut to its card, with an ellipsis. On the
// first edition it was cut at 66 characters, wider than the card: it ran
// under the card's edge, cut mid-word.
func TestCardNoteFitsItsCard(t *testing.T) {
	snap := fixture()
	snap.Servers[1].Error = `server "memory" failed: it exited 5 times in 1m0s (last: start memory: exec: "server-memory": not found)`
	fake := newFake(snap)
	u := newTestUI(t, fake, tabOverview)
	u.dash.win.Resize(fyne.NewSize(1000, 660))
	u.render(fake.Snapshot(), t0)
	card := u.dash.overview.cards[1]
	var note *canvas.Text
	for _, l := range card.children {
		if l.Text != "" && l.Color == theme.Color(theme.ColorNameError) {
			note = l
		}
	}
	if note == nil {
		t.Fatal("the failed server's card shows no reason")
	}
	room := cardSize.Width - 2*cardPad
	if w := fyne.MeasureText(note.Text, note.TextSize, note.TextStyle).Width; w > room || !strings.HasSuffix(note.Text, "…") {
		t.Errorf("the reason %q is %.0f wide in a card with room for %.0f; want it cut to fit, with an ellipsis", note.Text, w, room)
	}
}

// A dashboard shown again shows the pool as it is from its first frame.
// On the first edition it showed the tables as they were when it was
// closed until the loop's next frame: a session closed meanwhile was
// listed, a new one missing.
func TestReopenedDashboardShowsTheCurrentState(t *testing.T) {
	fake := newFake(fixture())
	u := newTestUI(t, fake, tabSessions)
	u.hideDashboard()
	fake.update(func(s *pool.Snapshot) {
		s.Sessions = append(s.Sessions[1:], pool.SessionInfo{ID: "s4", Server: "fake", ClientName: "zed", ConnectedAt: t0})
		s.InFlight = nil
	})
	u.apply(u.frameFor(fake.Snapshot(), t0, u.dashOpen.Load())) // the loop's, while closed: no rows
	u.showDashboard("")
	var ids []string
	for _, r := range u.dash.sessions.rows {
		ids = append(ids, r.cells[6])
	}
	if want := []string{"s2", "s3", "s4"}; !slices.Equal(ids, want) {
		t.Errorf("the reopened dashboard lists sessions %q, want %q", ids, want)
	}
	if n := len(u.dash.inflight.rows); n != 0 || u.dash.tabOf[tabInFlight].Text != tabInFlight {
		t.Errorf("the reopened dashboard shows %d requests in flight, titled %q; want none", n, u.dash.tabOf[tabInFlight].Text)
	}
	if got := u.dash.overview.header.text.Text; !strings.HasPrefix(got, "3 sessions") {
		t.Errorf("the reopened overview's header is %q, want 3 sessions", got)
	}
}
