package ui

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/switchboard-mcp/switchboard/pool"
)

// waterfallFixture is two minutes of a pool's life, as the tracker sees
// it: two sessions on notes and one on browser; calls that end ok, with
// an error, cancelled and timed out; notes' child crashing and restarting
// with a stderr tail; a config reload; a call hung on browser and a young
// one in flight.
func waterfallFixture() (*tracker, pool.Snapshot) {
	snap := pool.Snapshot{TakenAt: t0,
		Servers: []pool.ServerInfo{{Name: "notes", State: pool.StateReady}, {Name: "browser", Share: pool.ShareSession, State: pool.StateReady}},
		Sessions: []pool.SessionInfo{
			{ID: "s1", Server: "notes", ClientName: "claude-code", ClientVersion: "2.1.3", Transport: "stdio"},
			{ID: "s2", Server: "notes", ClientName: "cursor", ClientVersion: "1.7.0", Transport: "stdio"},
			{ID: "s3", Server: "browser", ClientName: "vscode", ClientVersion: "1.105.0", Transport: "http"},
		},
		Backends: []pool.BackendInfo{
			{Server: "notes", PID: 4300, State: pool.StateReady, StderrTail: []string{
				"notes: index 1,204 files", "Error: ENOMEM: cannot allocate 2 GiB for the embedding cache",
				"    at Cache.grow (/srv/notes/dist/cache.js:88:11)"}},
			{Server: "browser", PID: 5100, Session: "s3", State: pool.StateReady},
		},
	}
	tr := newTracker(t0.Add(-time.Hour))
	tr.start(pool.Snapshot{TakenAt: t0.Add(-10 * time.Minute), Servers: snap.Servers})
	// Events are gathered, then fed in time order, as the pool emits them.
	var evs []pool.Event
	ev := func(e pool.Event) { evs = append(evs, e) }
	ev(pool.Event{Kind: pool.EventBackendStarted, Time: t0.Add(-10 * time.Minute), Server: "notes", PID: 4242})
	ev(pool.Event{Kind: pool.EventBackendStarted, Time: t0.Add(-5 * time.Minute), Server: "browser", Session: "s3", PID: 5100})
	id := uint64(100)
	call := func(at, queued, took time.Duration, sess, server, name, status string, pid int) {
		id++
		ev(recvEv(at, id, server, sess, "tools/call", name))
		if queued >= 0 {
			ev(writtenEv(at+queued, id, pid))
		}
		if status != "" {
			ev(doneEv(at+took, id, status, map[bool]string{true: "", false: status + ": see the child's log"}[status == pool.StatusOK]))
		}
	}
	// A steady stream on notes, two sessions, some calls overlapping.
	for i := range 40 {
		at := -120*time.Second + time.Duration(i)*2900*time.Millisecond
		if at > -41*time.Second && at < -38*time.Second {
			continue // the crash
		}
		took := time.Duration(40+int(600*math.Abs(math.Sin(float64(i)/3)))) * time.Millisecond
		sess, pid := "s1", 4242
		if i%3 == 1 {
			sess = "s2"
		}
		if at > -40*time.Second {
			pid = 4300
		}
		call(at, 2*time.Millisecond, took, sess, "notes", "search", pool.StatusOK, pid)
		if i%5 == 0 {
			call(at+300*time.Millisecond, time.Millisecond, took*2, "s1", "notes", "read", pool.StatusOK, pid)
		}
	}
	call(-70*time.Second, time.Millisecond, 900*time.Millisecond, "s2", "notes", "index", pool.StatusError, 4242)
	call(-50*time.Second, time.Millisecond, 6*time.Second, "s1", "notes", "summarize", pool.StatusCancelled, 4242)
	call(-110*time.Second, time.Millisecond, 30*time.Second, "s2", "notes", "export", pool.StatusTimeout, 4242)
	// The child crashes with a call on it, which fails; it restarts.
	call(-44*time.Second, time.Millisecond, 4*time.Second, "s2", "notes", "embed", pool.StatusFailed, 4242)
	ev(pool.Event{Kind: pool.EventBackendExited, Time: t0.Add(-40 * time.Second), Server: "notes", PID: 4242, ExitCode: 1, Err: "exit status 1"})
	ev(pool.Event{Kind: pool.EventBackendStarted, Time: t0.Add(-39 * time.Second), Server: "notes", PID: 4300})
	tr.reloaded([]ConfigReload{{Seq: 1, At: t0.Add(-25 * time.Second), Changes: "changed: notes (env; new child); unchanged: 1"}})
	// browser: a few calls, then one that hangs; a young one queued.
	call(-100*time.Second, 3*time.Millisecond, 1500*time.Millisecond, "s3", "browser", "navigate", pool.StatusOK, 5100)
	call(-80*time.Second, 3*time.Millisecond, 2200*time.Millisecond, "s3", "browser", "screenshot", pool.StatusOK, 5100)
	call(-45*time.Second, time.Millisecond, 0, "s3", "browser", "click", "", 5100)
	call(-3*time.Second, -1, 0, "s1", "notes", "search", "", 0)
	slices.SortStableFunc(evs, func(a, b pool.Event) int { return a.Time.Compare(b.Time) })
	for _, e := range evs {
		tr.event(e)
	}
	tr.sync(snap)
	for _, r := range tr.publish(t0).Open {
		snap.InFlight = append(snap.InFlight, pool.RequestInfo{PoolID: r.PoolID, Session: r.Session, Server: r.Server,
			Method: r.Method, Name: r.Name, PID: r.PID, ReceivedAt: r.Received, WrittenToChild: !r.Written.IsZero(), WrittenAt: r.Written})
	}
	return tr, snap
}

// showWaterfall opens fake's dashboard on the waterfall with src drawn at
// t0, 1000 x 660.
func showWaterfall(t *testing.T, fake *fakeCtrl, setup func(*UI)) *UI {
	t.Helper()
	u := newTestUIWith(t, fake, tabWaterfall, func(u *UI) {
		u.opts.now = func() time.Time { return t0 }
		setup(u)
	})
	u.dash.win.Resize(fyne.NewSize(1000, 660))
	return u
}

// TestWaterfallLiveRenders is the live waterfall's golden screenshot: ok,
// error, failed, cancelled and timed-out calls, a child crash with its
// restart, a config reload, and a hung call selected with its timeline.
func TestWaterfallLiveRenders(t *testing.T) {
	tr, snap := waterfallFixture()
	fake := newFake(snap)
	fake.timeline = []TimelineEntry{
		{At: t0.Add(-45 * time.Second), What: "received tools/call click from session s3 (vscode 1.105.0) with id 7"},
		{At: t0.Add(-45*time.Second + time.Millisecond), What: "written to child PID 5100 of server browser"},
		{What: "still in flight after 45s"},
	}
	u := showWaterfall(t, fake, func(u *UI) {
		u.track = tr
		u.wfLive.Store(tr.publish(t0))
	})
	w := u.dash.waterfall
	w.setView(wfView{To: t0, Span: 2 * time.Minute, Follow: true})
	hung := findReq(t, u.liveSource(), "click")
	w.selectReq(hung)
	waitCalls(t, fake, "timeline run 0 request "+fmt.Sprint(hung.PoolID))
	if w.frame == nil || w.frame.Drawn == 0 {
		t.Fatal("no frame drawn")
	}
	golden(t, "waterfall-live.xml", test.RenderToMarkup(u.dash.win.Canvas()))
	goldenPNG(t, "waterfall-live.png", u.dash.win.Canvas())
}

// TestWaterfallSaysWhereTheCountCapCut: the live waterfall kept only its
// last requests (the count cap); a 2-minute view reaching before them
// says that older requests are in History, and from when.
func TestWaterfallSaysWhereTheCountCapCut(t *testing.T) {
	tr := countCapped()
	u := showWaterfall(t, newFake(pool.Snapshot{TakenAt: t0}), func(u *UI) {
		u.track = tr
		u.wfLive.Store(tr.publish(t0))
	})
	w := u.dash.waterfall
	w.setView(wfView{To: t0, Span: 2 * time.Minute, Follow: true})
	if w.frame == nil || w.frame.Drawn == 0 {
		t.Fatal("no frame drawn")
	}
	want := "requests that ended before " + clockLabel(countCappedAt, time.Second) + " are in History"
	if !strings.Contains(w.note.Text, want) {
		t.Errorf("note = %q, want it to say %q", w.note.Text, want)
	}
	if shown := labelShows(w.note); shown != w.note.Text {
		t.Errorf("at the default width the note shows %q, not %q", shown, w.note.Text)
	}
}

// labelShows is the text a label draws within its bounds, its lines
// joined by spaces: its text, unless it was cut.
func labelShows(l *widget.Label) string {
	var lines []string
	for _, o := range visible(l) {
		if txt, ok := o.(*canvas.Text); ok && txt.Text != "" && txt.Position().Y+txt.Size().Height <= l.Size().Height {
			lines = append(lines, strings.TrimSpace(txt.Text))
		}
	}
	return strings.Join(lines, " ")
}

// TestWaterfallCountCapWithoutHistory: with the history off, the same
// view says that the older requests are not kept, not that History has
// them.
func TestWaterfallCountCapWithoutHistory(t *testing.T) {
	tr := countCapped()
	tr.setHistory(false)
	fake := newFake(pool.Snapshot{TakenAt: t0})
	fake.noHistory = true
	u := showWaterfall(t, fake, func(u *UI) {
		u.track = tr
		u.wfLive.Store(tr.publish(t0))
	})
	w := u.dash.waterfall
	w.setView(wfView{To: t0, Span: 2 * time.Minute, Follow: true})
	if w.frame == nil || w.frame.Drawn == 0 {
		t.Fatal("no frame drawn")
	}
	want := "requests that ended before " + clockLabel(countCappedAt, time.Second) + " are not kept (the history is off)"
	if !strings.Contains(w.note.Text, want) || strings.Contains(w.note.Text, "in History") {
		t.Errorf("note = %q, want it to say %q", w.note.Text, want)
	}
}

func findReq(t *testing.T, src *wfSource, name string) wfReq {
	t.Helper()
	for _, list := range [][]wfReq{src.Open, src.Done.slice()} {
		for _, r := range list {
			if r.Name == name {
				return r
			}
		}
	}
	t.Fatalf("no request %q", name)
	return wfReq{}
}

// historyFixture is three minutes of history.db: run 11 crashes with
// calls in flight (abandoned), one of them hung long before; run 12
// starts after it.
func historyFixture() HistoryWindow {
	w := HistoryWindow{From: t0.Add(-150 * time.Second), Until: t0.Add(30 * time.Second),
		Runs: []HistoryRun{
			{ID: 11, Started: t0.Add(-2 * time.Hour), LastSeen: t0.Add(-30 * time.Second), Crashed: true, Version: "0.1.0", PID: 900},
			{ID: 12, Started: t0.Add(-22 * time.Second), Version: "0.1.0", PID: 950},
		},
		Sessions: []HistorySession{
			{Run: 11, ID: "s1", Server: "notes", ClientName: "claude-code", ClientVersion: "2.1.3", Transport: "stdio"},
			{Run: 11, ID: "s2", Server: "notes", ClientName: "cursor", ClientVersion: "1.7.0", Transport: "stdio"},
			{Run: 12, ID: "s1", Server: "notes", ClientName: "claude-code", ClientVersion: "2.1.3", Transport: "stdio"},
		},
		Children: []HistoryChild{
			{Run: 11, Server: "notes", PID: 4242, Started: t0.Add(-time.Hour), Exited: t0.Add(-80 * time.Second), ExitCode: 1, ExitReason: "exit status 1"},
			{Run: 11, Server: "notes", PID: 4300, Started: t0.Add(-79 * time.Second)},
			{Run: 12, Server: "notes", PID: 4400, Started: t0.Add(-21 * time.Second)},
		},
	}
	id := uint64(500)
	add := func(run int64, sess string, at, took time.Duration, name, status string, pid int) {
		id++
		r := HistoryRow{Run: run, PoolID: id, Server: "notes", Session: sess, Method: "tools/call", Name: name, Status: status,
			ReceivedAt: t0.Add(at), WrittenAt: t0.Add(at + time.Millisecond), PID: pid, WrittenToChild: true}
		if status != statusAbandoned && status != statusInFlight {
			r.AnsweredAt = t0.Add(at + took)
			r.Duration = took
		}
		if status != pool.StatusOK {
			r.Error = status
		}
		w.Requests = append(w.Requests, r)
	}
	add(11, "s2", -140*time.Second, 0, "reindex", statusAbandoned, 4242) // hung from the start, then abandoned
	for i := range 30 {
		at := -145*time.Second + time.Duration(i)*4*time.Second
		if at > -82*time.Second && at < -78*time.Second {
			continue
		}
		if at > -30*time.Second {
			break
		}
		pid := 4242
		if at > -80*time.Second {
			pid = 4300
		}
		add(11, []string{"s1", "s2"}[i%2], at, time.Duration(80+i*23)*time.Millisecond, "search", pool.StatusOK, pid)
	}
	add(11, "s1", -84*time.Second, 4*time.Second, "embed", pool.StatusFailed, 4242)
	add(11, "s1", -60*time.Second, 700*time.Millisecond, "read", pool.StatusError, 4300)
	add(11, "s1", -50*time.Second, 0, "pay", statusAbandoned, 4300)
	add(11, "s2", -35*time.Second, 0, "search", statusAbandoned, 4300)
	add(12, "s1", -20*time.Second, 60*time.Millisecond, "search", pool.StatusOK, 4400)
	add(12, "s1", -18*time.Second, 120*time.Millisecond, "read", pool.StatusOK, 4400)
	add(12, "s1", -16*time.Second, 90*time.Millisecond, "search", pool.StatusOK, 4400)
	return w
}

// TestWaterfallHistoryRenders is the after-the-fact golden screenshot: a
// run that crashed with calls in flight (abandoned, hatched), its child
// crash before, and the next run.
func TestWaterfallHistoryRenders(t *testing.T) {
	fake := newFake(pool.Snapshot{TakenAt: t0})
	fake.window = historyFixture()
	u := showWaterfall(t, fake, func(*UI) {})
	w := u.dash.waterfall
	// One click on the run's crash marker opens the two minutes before it.
	var crash wfMarker
	for _, m := range historySource(fake.window, t0).Markers {
		if m.Kind == markAppCrash {
			crash = m
		}
	}
	w.markerTapped(crash)
	waitCalls(t, fake, "window 09:24:23 09:26:38")
	if w.hist == nil || w.hist.Done.Len() == 0 {
		t.Fatal("the history window did not load")
	}
	if got := w.mode.Selected; got != "2 minutes before 09:26:23" {
		t.Errorf("mode = %q", got)
	}
	golden(t, "waterfall-history.xml", test.RenderToMarkup(u.dash.win.Canvas()))
	goldenPNG(t, "waterfall-history.png", u.dash.win.Canvas())
}

// An orphaned answer (a child's late answer to a request that had ended)
// has no pool id, so no bar of its own to select: the History tab's "Show
// in the waterfall" opens the time around it at its own server's lanes,
// with nothing selected, whatever other orphans the window holds.
func TestWaterfallOpensAroundAnOrphan(t *testing.T) {
	fake := newFake(pool.Snapshot{TakenAt: t0})
	at := t0.Add(-40 * time.Second)
	req := func(id int64, poolID uint64, server, sess string, d time.Duration) HistoryRow {
		r := HistoryRow{ID: id, Run: 3, PoolID: poolID, Server: server, Session: sess, Status: pool.StatusOrphaned,
			ReceivedAt: at.Add(d), AnsweredAt: at.Add(d)}
		if poolID != 0 {
			r.Method, r.Name, r.Status, r.Duration = "tools/call", "echo", pool.StatusOK, time.Second
			r.AnsweredAt = r.ReceivedAt.Add(r.Duration)
		}
		return r
	}
	fake.window = HistoryWindow{Runs: []HistoryRun{{ID: 3, Started: t0.Add(-time.Hour), Version: "0.1.0", PID: 900}},
		Requests: []HistoryRow{req(1, 0, "a", "", 0), req(2, 7, "a", "s1", time.Second), req(3, 8, "b", "s2", 2*time.Second),
			req(4, 0, "b", "", 3*time.Second)}}
	u := showWaterfall(t, fake, func(*UI) {})
	w := u.dash.waterfall
	w.openAround(fake.window.Requests[1])
	if w.v.Selected != (wfKey{Run: 3, PoolID: 7}) {
		t.Fatalf("around request 7: selected %+v", w.v.Selected)
	}
	w.openAround(fake.window.Requests[3])
	y := 0
	for _, l := range w.hist.Lanes {
		if l.Server == "b" && l.Session == "" {
			break
		}
		y += int(float32(laneHeight(l)) * w.scale)
	}
	if w.v.Selected != (wfKey{}) || w.v.Scroll != y || y == 0 {
		t.Errorf("around server b's orphan: selected %+v, scrolled to %d; want nothing selected, server b's lanes at %d",
			w.v.Selected, w.v.Scroll, y)
	}
}

// liveWaterfall is the live fixture on screen at t0, following now.
func liveWaterfall(t *testing.T) (*UI, *fakeCtrl, *waterfallView) {
	t.Helper()
	tr, snap := waterfallFixture()
	fake := newFake(snap)
	fake.window = historyFixture()
	u := showWaterfall(t, fake, func(u *UI) {
		u.track = tr
		u.wfLive.Store(tr.publish(t0))
	})
	w := u.dash.waterfall
	w.setView(wfView{To: t0, Span: 2 * time.Minute, Follow: true})
	return u, fake, w
}

// plotPos is where a point of the frame's image is, in the plot.
func plotPos(f *wfFrame, x, y int32) fyne.Position {
	return fyne.NewPos(wfGutter+float32(x)/f.scale, float32(y)/f.scale)
}

func TestWaterfallZoomPanFollow(t *testing.T) {
	_, _, w := liveWaterfall(t)
	p := w.plot
	mid := fyne.NewPos(wfGutter+(p.Size().Width-wfGutter)/2, 100)

	// The wheel zooms in around the pointer: the middle stays put, and
	// the view stops following.
	before := w.current()
	p.Scrolled(&fyne.ScrollEvent{PointEvent: fyne.PointEvent{Position: mid}, Scrolled: fyne.Delta{DY: 10}})
	if w.v.Span >= before.Span || w.v.Follow {
		t.Fatalf("after the wheel: span %v follow %v; want narrower, not following", w.v.Span, w.v.Follow)
	}
	midAt := func(v wfView) time.Time { return v.from().Add(v.Span / 2) }
	if d := midAt(w.v).Sub(midAt(before)); d > 10*time.Millisecond || d < -10*time.Millisecond {
		t.Errorf("the moment under the pointer moved by %v", d)
	}
	if w.frame.view.Span != w.v.Span {
		t.Errorf("the frame shows span %v, the view is %v: not repainted", w.frame.view.Span, w.v.Span)
	}
	// F follows now again; A pans into the past and stops following;
	// End follows again.
	p.TypedRune('f')
	if !w.v.Follow || !w.current().To.Equal(t0) {
		t.Errorf("F: follow %v, right edge %v", w.v.Follow, w.current().To)
	}
	p.TypedRune('a')
	if w.v.Follow || !w.v.To.Before(t0) {
		t.Errorf("A: follow %v, right edge %v before now", w.v.Follow, t0.Sub(w.v.To))
	}
	p.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEnd})
	if !w.v.Follow {
		t.Error("End did not follow now")
	}
	// W zooms in at the right edge while following, and keeps following.
	span := w.v.Span
	p.TypedRune('w')
	if !w.v.Follow || w.v.Span >= span {
		t.Errorf("W: follow %v, span %v (was %v)", w.v.Follow, w.v.Span, span)
	}
	// Dragging right shows the past.
	p.Dragged(&fyne.DragEvent{Dragged: fyne.Delta{DX: 200}})
	if w.v.Follow || !w.v.To.Before(t0) {
		t.Errorf("drag: follow %v, right edge %v before now", w.v.Follow, t0.Sub(w.v.To))
	}
	// The wheel over the lane names scrolls them (as far as they go).
	p.Scrolled(&fyne.ScrollEvent{PointEvent: fyne.PointEvent{Position: fyne.NewPos(20, 100)}, Scrolled: fyne.Delta{DY: -30}})
	if w.v.Scroll != min(30, w.frame.maxScroll()) {
		t.Errorf("scroll = %d, want %d", w.v.Scroll, min(30, w.frame.maxScroll()))
	}
}

// TestWaterfallTapAndHover: a tap on a bar selects its request and loads
// its recorded timeline and payloads; hovering a crash marker shows the
// child's stderr tail; a tap on it opens the two minutes before.
func TestWaterfallTapAndHover(t *testing.T) {
	u, fake, w := liveWaterfall(t)
	fake.payload = [2]string{`{"method":"tools/call","params":{"name":"click"}}`, ""}
	f := w.frame
	var hung wfHit
	for _, h := range f.Hits {
		if f.req(h).Name == "click" {
			hung = h
		}
	}
	w.plot.Tapped(&fyne.PointEvent{Position: plotPos(f, (hung.X0+hung.X1)/2, (hung.Y0+hung.Y1)/2)})
	if w.sel.Name != "click" || w.v.Selected.PoolID != w.sel.PoolID {
		t.Fatalf("tap selected %+v", w.sel)
	}
	waitCalls(t, fake, fmt.Sprintf("timeline run 0 request %d", w.sel.PoolID))
	if got := w.details.request.Text; got != fake.payload[0] {
		t.Errorf("request payload = %q", got)
	}
	if !strings.Contains(w.details.title.Text, "tools/call click — in flight") {
		t.Errorf("details title = %q", w.details.title.Text)
	}
	// Escape clears the selection.
	w.plot.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
	if w.sel.PoolID != 0 || w.v.Selected.PoolID != 0 {
		t.Error("Escape kept the selection")
	}

	var crash wfMarkHit
	for _, m := range w.frame.Marks {
		if m.Marker.Kind == markChildCrash {
			crash = m
		}
	}
	at := plotPos(w.frame, crash.X, crash.Y0+4)
	w.plot.MouseMoved(&desktop.MouseEvent{PointEvent: fyne.PointEvent{Position: at}})
	if !w.plot.tip.Visible() || !strings.Contains(w.plot.tip.Text, "ENOMEM") || !strings.Contains(w.plot.tip.Text, "crashed") {
		t.Errorf("tip over the crash marker = %q (visible %v)", w.plot.tip.Text, w.plot.tip.Visible())
	}
	w.plot.MouseOut()
	if w.plot.tip.Visible() {
		t.Error("the tip stays after the pointer left")
	}
	w.plot.Tapped(&fyne.PointEvent{Position: at})
	waitCalls(t, fake, "window 09:24:13 09:26:28")
	if w.hist == nil || !strings.HasPrefix(w.mode.Selected, "2 minutes before 09:26:13 (PID 4242)") {
		t.Errorf("after the crash marker: history %v, mode %q", w.hist != nil, w.mode.Selected)
	}
	// Follow now returns to live.
	w.followBtn.OnTapped()
	if w.hist != nil || !w.v.Follow || w.mode.Selected != modeLive {
		t.Errorf("follow now: history %v, follow %v, mode %q", w.hist != nil, w.v.Follow, w.mode.Selected)
	}
	_ = u
}

func TestWaterfallHistoryChoices(t *testing.T) {
	_, fake, w := liveWaterfall(t)
	w.mode.SetSelected("History: last hour")
	waitCalls(t, fake, "window 08:26:53 09:26:53")
	if w.hist == nil || w.v.Follow || w.v.Span != time.Hour {
		t.Fatalf("history: loaded %v, follow %v, span %v", w.hist != nil, w.v.Follow, w.v.Span)
	}
	// Without a history, the view says why.
	fake.mu.Lock()
	fake.windowErr = fmt.Errorf("%w: history is switched off in the config", ErrUnavailable)
	fake.mu.Unlock()
	w.mode.SetSelected("History: last 24 hours")
	if want := "History is not available: history is switched off in the config"; w.frame.Empty != want || !w.plot.empty.Visible() {
		t.Errorf("empty = %q (shown %v), want %q", w.frame.Empty, w.plot.empty.Visible(), want)
	}
}

// TestRevealHungRequest: the tray's hung icon opens the waterfall at the
// hung request: in view, selected.
func TestRevealHungRequest(t *testing.T) {
	u, fake, w := liveWaterfall(t)
	w.setView(wfView{To: t0, Span: 10 * time.Second, Follow: true}) // too short to show it
	u.dash.selectTab(tabOverview)
	hung := findReq(t, u.liveSource(), "click")
	u.showWaterfallAt("", hung.key())
	if u.dash.tabs.Selected() != u.dash.tabOf[tabWaterfall] {
		t.Fatal("the waterfall is not shown")
	}
	v := w.current()
	if hung.Received.Before(v.from()) || !v.Follow {
		t.Errorf("view %v..%v (follow %v) does not show the request received at %v", v.from().Sub(t0), v.To.Sub(t0), v.Follow, hung.Received.Sub(t0))
	}
	if w.sel.PoolID != hung.PoolID {
		t.Errorf("selected %d, want %d", w.sel.PoolID, hung.PoolID)
	}
	if !laneShown(w, hung.Session) {
		t.Errorf("scrolled to %d: the lane of session %s is not on screen", w.v.Scroll, hung.Session)
	}
	waitCalls(t, fake, fmt.Sprintf("timeline run 0 request %d", hung.PoolID))
}

// TestLastCrash: C (or the Last crash button) opens the two minutes
// before the latest crash in view, else the latest in the history.
func TestLastCrash(t *testing.T) {
	_, fake, w := liveWaterfall(t)
	w.plot.TypedRune('c')
	waitCalls(t, fake, "window 09:24:13 09:26:28") // the notes child's crash, in the live view
	// Back to live with nothing crashed in view: the history is asked.
	w.plot.TypedRune('l')
	if w.hist != nil {
		t.Fatal("L did not go back to live")
	}
	w.u.wfLive.Store(&wfSource{live: true, Since: t0.Add(-time.Minute)})
	w.openLastCrash()
	waitCalls(t, fake, "window 09:26:53 09:26:53", // the last day (the fake answers its fixture)
		"window 09:24:23 09:26:38") // then the two minutes before run 11's crash in it
	if !strings.HasPrefix(w.mode.Selected, "2 minutes before 09:26:23") {
		t.Errorf("mode = %q", w.mode.Selected)
	}
}

// TestHistoryWindowFollowsTheView: panning a history window past its
// edge reads the history it now shows, keeping the view.
func TestHistoryWindowFollowsTheView(t *testing.T) {
	_, fake, w := liveWaterfall(t)
	w.mode.SetSelected("History: last 15 minutes")
	waitCalls(t, fake, "window 09:11:53 09:26:53")
	w.panBy(-0.5) // 7.5 minutes further back
	waitCalls(t, fake, "window 09:11:53 09:26:53", "window 08:56:53 09:26:53")
	if v := w.current(); !v.To.Equal(t0.Add(-450*time.Second)) || v.Span != 15*time.Minute {
		t.Errorf("the view moved: %v..%v", v.from().Sub(t0), v.To.Sub(t0))
	}
	if !w.hist.Since.Equal(t0.Add(-30 * time.Minute)) {
		t.Errorf("the window now starts %v ago, want 30m", t0.Sub(w.hist.Since))
	}
	// Within the window: no read.
	n := len(fake.recorded())
	w.zoomBy(0.5, 0.5)
	if got := len(fake.recorded()); got != n {
		t.Errorf("zooming in read the history again: %q", fake.recorded()[n:])
	}
}

// TestPainterNeverDrawsIntoTheFrameOnScreen: the painter draws into a
// spare image, never into the one fyne shows, while the UI goroutine takes
// each painted frame on screen as fast as it can. The hand-over must be
// one step: a frame seen between "no longer on its way" and "on screen"
// looks free, and the painter would draw into the image being shown.
func TestPainterNeverDrawsIntoTheFrameOnScreen(t *testing.T) {
	fake := newFake(fixture())
	u := New(test.NewTempApp(t), fake, nil) // no goroutines: this test plays both
	t.Cleanup(fake.wg.Wait)
	src := &wfSource{Since: t0.Add(-time.Minute), Lanes: []wfLane{{Server: "fake", Title: "fake", Rows: 1}}}
	job := &paintJob{hist: src, view: wfView{To: t0, Span: time.Minute}, w: 4, h: 4, scale: 1}

	var stop atomic.Bool
	var ui sync.WaitGroup
	ui.Go(func() { // the UI goroutine: fyne's test driver runs fyne.Do here
		for !stop.Load() {
			u.postFrame()
		}
	})
	defer func() { stop.Store(true); ui.Wait() }()
	deadline := time.Now().Add(time.Second)
	frames := 0
	for ; time.Now().Before(deadline) && frames < 100_000; frames++ {
		f := u.paint(job, t0)
		// The UI goroutine can have taken only what was on its way when
		// paint began, so an image on screen now was busy then.
		if shown := u.frameOnScreen(); shown != nil && shown.img == f.img {
			t.Fatalf("frame %d was drawn into the image on screen", frames)
		}
		u.offerFrame(f)
	}
	t.Logf("%d frames painted, %d shown", frames, u.WaterfallFrames())
}
