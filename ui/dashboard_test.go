package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
)

// newTestUI is a UI over fake in a fresh fyne test app, with the
// dashboard open on tab and the fixture drawn at t0. Nothing runs in the
// background: the test goroutine is the UI goroutine.
func newTestUI(t *testing.T, fake *fakeCtrl, tab string) *UI {
	t.Helper()
	return newTestUIAsync(t, fake, tab, false)
}

// newTestUIAsync is newTestUI with actions on their own goroutines when
// async, as in the app; a test may then touch no widget while one runs.
func newTestUIAsync(t *testing.T, fake *fakeCtrl, tab string, async bool) *UI {
	t.Helper()
	return newTestUIOpts(t, fake, tab, async, nil)
}

// newTestUIWith is newTestUI with setup run on the UI before it draws.
func newTestUIWith(t *testing.T, fake *fakeCtrl, tab string, setup func(*UI)) *UI {
	t.Helper()
	return newTestUIOpts(t, fake, tab, false, setup)
}

func newTestUIOpts(t *testing.T, fake *fakeCtrl, tab string, async bool, setup func(*UI)) *UI {
	t.Helper()
	a := newTestApp(t)
	u := New(a, fake, &Options{sample: func([]int, time.Time) map[int]procStat { return nil }, inline: !async})
	u.stats = map[int]procStat{4242: {RSS: 48 << 20, CPU: 3}}
	u.leaks = []Leak{
		{PID: 777, Server: "memory", Command: "node /usr/lib/node_modules/server-memory/dist/index.js", StartedAt: t0.Add(-3 * time.Hour),
			RSSBytes: 61 << 20, Reason: "child of an earlier run, still alive (same PID and start time)", Proven: true},
		{PID: 778, Server: "fake", Command: "fakemcp -log x", StartedAt: t0.Add(-20 * time.Minute),
			RSSBytes: 5 << 20, Reason: "matches server fake; its parent is init"},
	}
	if setup != nil {
		setup(u)
	}
	u.showDashboard(tab)
	u.render(fake.Snapshot(), t0)
	t.Cleanup(func() { u.wg.Wait(); fake.wg.Wait() })
	return u
}

// newTestApp is a fresh fyne test app whose widgets a golden picture can
// capture however long the test binary has run: a test that captures a
// canvas builds it on this app, and captures it within a minute.
//
// Fyne's renderer cache (fyne 2.8.1) stamps a renderer it makes or walks
// as alive until a minute after the last time it read the clock, and it
// reads the clock only when it cleans; the test driver cleans only in
// Capture, which cleans before it paints. When the binary had captured
// nothing for a minute (a long suite on a loaded machine), every renderer
// a test then made was born expired: the capture destroyed them all and
// painted new ones that nothing had laid out, a tab bar with its first
// tab only (fyne-io/fyne#6509). Capturing a blank canvas first makes the
// cache read the clock, and clean what is really stale, before this
// test's widgets get a renderer.
func newTestApp(t testing.TB) fyne.App {
	a := test.NewTempApp(t)
	test.NewCanvas().Capture()
	return a
}

// render computes and applies the frame for s at now on the calling
// goroutine: the tests' way to draw a fixed snapshot.
func (u *UI) render(s pool.Snapshot, now time.Time) {
	u.apply(u.frameFor(s, now, u.dash != nil))
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if d := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(got, "\n")); d != "" {
		t.Errorf("%s differs (-want +got), run go test -update if the change is intended:\n%s", path, d)
	}
}

// visible walks the rendered tree (the renderers fyne cached, so the
// objects on screen) and returns the visible objects.
func visible(o fyne.CanvasObject) []fyne.CanvasObject {
	if o == nil || !o.Visible() {
		return nil
	}
	out := []fyne.CanvasObject{o}
	switch c := o.(type) {
	case *fyne.Container:
		for _, child := range c.Objects {
			out = append(out, visible(child)...)
		}
	case fyne.Widget:
		for _, child := range test.WidgetRenderer(c).Objects() {
			out = append(out, visible(child)...)
		}
	}
	return out
}

// rowCells returns the visible cells of the table row whose first
// column reads first, left to right.
func rowCells(tb *table, first string) []*cell {
	var row []*cell
	var y float32 = -1
	for _, o := range visible(tb.w) {
		c, ok := o.(*cell)
		if !ok {
			continue
		}
		if c.label.Visible() && c.label.Text == first && y < 0 {
			y = c.Position().Y
		}
		row = append(row, c)
	}
	var out []*cell
	for _, c := range row {
		if c.Position().Y == y {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *cell) int { return int(a.Position().X - b.Position().X) })
	return out
}

func button(t *testing.T, cs []*cell, text string) *widget.Button {
	t.Helper()
	for _, c := range cs {
		if c.btn.Visible() && c.btn.Text == text {
			return c.btn
		}
	}
	t.Fatalf("no visible %q button in the row", text)
	return nil
}

// waitCalls polls the fake until it recorded want.
func waitCalls(t *testing.T, f *fakeCtrl, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := f.recorded()
		ok := true
		for _, w := range want {
			if !slices.Contains(got, w) {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls = %q, want them to include %q", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestViewsRenderTheSnapshot(t *testing.T) {
	for _, tab := range []string{tabSessions, tabInFlight, tabBackends, tabLeaks} {
		t.Run(tab, func(t *testing.T) {
			fake := newFake(fixture())
			u := newTestUI(t, fake, tab)
			name := strings.ReplaceAll(strings.ToLower(tab), " ", "-")
			golden(t, name+".xml", test.RenderToMarkup(u.dash.win.Canvas()))
			writePNG(t, name+".png", u.dash.win.Canvas())
		})
	}
}

// writePNG keeps a picture of a view beside its markup golden, for
// people reviewing a change; it is written with -update, never compared.
func writePNG(t *testing.T, name string, c fyne.Canvas) {
	t.Helper()
	if !*update {
		return
	}
	writePNGFile(t, filepath.Join("testdata", name), c.Capture())
}

func writePNGFile(t *testing.T, path string, img image.Image) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
}

func TestBannerShowsConfigErrorAndHistoryDrops(t *testing.T) {
	fake := newFake(fixture())
	fake.configErr = errorString("config.json: line 3, column 5: invalid character '}'")
	fake.dropped = 12
	u := newTestUI(t, fake, tabSessions)
	if !u.dash.banner.Visible() {
		t.Fatal("banner hidden")
	}
	for _, want := range []string{"Config error: config.json: line 3", "History dropped 12 events"} {
		if !strings.Contains(u.dash.bannerText.Text, want) {
			t.Errorf("banner %q lacks %q", u.dash.bannerText.Text, want)
		}
	}
	fake.update(func(*pool.Snapshot) {})
	fake.mu.Lock()
	fake.configErr, fake.dropped = nil, 0
	fake.mu.Unlock()
	u.render(fake.Snapshot(), t0)
	if u.dash.banner.Visible() {
		t.Error("banner still shown after the error went away")
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func TestHungRequestIsHighlighted(t *testing.T) {
	fake := newFake(fixture())
	u := newTestUI(t, fake, tabInFlight)
	hung := rowCells(u.dash.inflight, "tools/call")
	if len(hung) != len(inflightColumns) {
		t.Fatalf("found %d cells in the hung row, want %d", len(hung), len(inflightColumns))
	}
	for _, c := range hung {
		if c.bg.FillColor != levelColor(levelHung) {
			t.Errorf("hung row cell background = %v, want %v", c.bg.FillColor, levelColor(levelHung))
		}
		if c.label.Visible() && c.label.Importance != widget.DangerImportance {
			t.Errorf("hung row label %q importance = %v, want danger", c.label.Text, c.label.Importance)
		}
	}
	fresh := rowCells(u.dash.inflight, "resources/read")
	if len(fresh) == 0 || fresh[0].bg.FillColor == levelColor(levelHung) || fresh[0].label.Importance == widget.DangerImportance {
		t.Error("a request under the threshold is highlighted as hung")
	}
	if !strings.Contains(u.dash.tabOf[tabInFlight].Text, "1 hung") {
		t.Errorf("tab title %q does not count the hung request", u.dash.tabOf[tabInFlight].Text)
	}
}

func TestTapCancelRestartKill(t *testing.T) {
	snap := fixture()
	snap.Backends[0].ID, snap.Backends[1].ID = 17, 18
	fake := newFake(snap)
	u := newTestUIAsync(t, fake, tabInFlight, true) // the actions touch no widget
	tap := func(b *widget.Button, verb string) {
		t.Helper()
		test.Tap(b)
		test.Tap(dialogButton(t, u.dash.win, verb))
	}
	tap(button(t, rowCells(u.dash.inflight, "sleep"), "Cancel"), "Cancel request")
	waitCalls(t, fake, "cancel 9")

	u.dash.selectTab(tabBackends)
	u.render(fake.Snapshot(), t0)
	row := rowCells(u.dash.backends, "fake")
	tap(button(t, row, rowRestart), rowRestart)
	tap(button(t, row, "Kill"), "Kill")
	waitCalls(t, fake, "restart backend 17", "kill 4242") // the row's child, not the server

	u.dash.selectTab(tabLeaks)
	u.render(fake.Snapshot(), t0)
	tap(button(t, rowCells(u.dash.leaks, "777"), "Kill"), "Kill")
	waitCalls(t, fake, "killleak 777")
	if slices.Contains(fake.recorded(), "killleak 778") {
		t.Error("Kill on one leak killed another")
	}
}

func TestKillAllLeaksAsksFirst(t *testing.T) {
	fake := newFake(fixture())
	u := newTestUI(t, fake, tabLeaks)
	// 778 is a suspect (no run marker): listed, never in Kill all.
	if u.dash.killAll.Disabled() || u.dash.killAll.Text != "Kill all (1)" {
		t.Fatalf("kill all button = %q disabled=%v", u.dash.killAll.Text, u.dash.killAll.Disabled())
	}
	test.Tap(u.dash.killAll)
	yes := dialogButton(t, u.dash.win, "Yes")
	if got := fake.recorded(); len(got) != 0 {
		t.Fatalf("killed before confirming: %q", got)
	}
	test.Tap(yes)
	waitCalls(t, fake, "killleak 777")
	if slices.Contains(fake.recorded(), "killleak 778") {
		t.Error("Kill all killed a suspect")
	}

	// From the tray: the dashboard opens on Leaks and asks too.
	u.menuDo(menuAction{Kind: actKillLeaks})
	if u.dash.tabs.Selected() != u.dash.tabOf[tabLeaks] {
		t.Error("Kill leaked backends did not open the Leaks tab")
	}
	test.Tap(dialogButton(t, u.dash.win, "No"))
}

// dialogButton finds a button in the window's top overlay (a dialog).
func dialogButton(t *testing.T, w fyne.Window, text string) *widget.Button {
	t.Helper()
	top := w.Canvas().Overlays().Top()
	if top == nil {
		t.Fatal("no dialog is shown")
	}
	for _, o := range visible(top) {
		if b, ok := o.(*widget.Button); ok && b.Text == text {
			return b
		}
	}
	t.Fatalf("the dialog has no %q button", text)
	return nil
}

func TestTrayMenuActionsReachTheController(t *testing.T) {
	fake := newFake(fixture())
	u := newTestUI(t, fake, tabSessions)
	u.menuDo(menuAction{Kind: actRestart, Server: "memory"})
	test.Tap(dialogButton(t, u.dash.win, "Restart"))
	u.menuDo(menuAction{Kind: actStop, Server: "fake"})
	test.Tap(dialogButton(t, u.dash.win, "Stop"))
	waitCalls(t, fake, "restart memory", "stop fake")
	u.menuDo(menuAction{Kind: actQuit})
	if fake.quits.Load() != 1 {
		t.Error("Quit did not reach the controller")
	}
	u.menuDo(menuAction{Kind: actRestartApp})
	waitUntil(t, 5*time.Second, "Restart Switchboard to reach the controller", func() bool { return fake.restarts.Load() == 1 })
	u.menuDo(menuAction{Kind: actHistory})
	if u.dash.tabs.Selected() != u.dash.tabOf[tabHistory] {
		t.Error("Open history did not select the History tab")
	}
	// The checkbox toggles from what the controller says, both ways, and
	// the next menu shows the new state.
	u.menuDo(menuAction{Kind: actStartAtLogin})
	waitCalls(t, fake, "restart memory", "stop fake", "start at login true")
	u.menuDo(menuAction{Kind: actStartAtLogin})
	waitCalls(t, fake, "restart memory", "stop fake", "start at login true", "start at login false")
	fake.SetStartAtLogin(true)
	s := fixture()
	if f := u.frameFor(s, t0, false); !checked(f.menu, "Start at login") {
		t.Error("the menu does not show start at login as checked")
	}
}

func checked(items []menuItem, label string) bool {
	for _, it := range items {
		if it.Label == label {
			return it.Checked
		}
	}
	return false
}

func TestAboutShowsTheBuild(t *testing.T) {
	fake := newFake(fixture())
	u := newTestUI(t, fake, tabSessions)
	u.menuDo(menuAction{Kind: actAbout})
	top := u.dash.win.Canvas().Overlays().Top()
	if top == nil {
		t.Fatal("About shows no dialog")
	}
	found := false
	for _, o := range visible(top) {
		if l, ok := o.(*widget.Label); ok && strings.Contains(l.Text, "switchboard 1.2.3 (commit abc1234") {
			found = true
		}
	}
	if !found {
		t.Error("the About dialog does not show the build")
	}
}

func TestHistoryFiltersAndTimeline(t *testing.T) {
	fake := newFake(fixture())
	fake.history = []HistoryRow{
		{ID: 41, Run: 3, PoolID: 17, Server: "fake", Session: "s2", Method: "tools/call", Name: "sleep", Status: "abandoned",
			ReceivedAt: t0.Add(-time.Hour), PID: 4000, WrittenToChild: true},
		{ID: 42, Server: "fake", Session: "s1", Method: "tools/call", Name: "echo", Status: "ok",
			ReceivedAt: t0.Add(-time.Minute), Duration: 3 * time.Millisecond, PID: 4242, WrittenToChild: true},
	}
	fake.timeline = []TimelineEntry{
		{At: t0.Add(-time.Hour), What: "received", Detail: "from s2 (cursor)"},
		{At: t0.Add(-time.Hour + time.Millisecond), What: "written to child", Detail: "PID 4000"},
		{At: t0.Add(-time.Hour + 3*time.Second), What: "child exited", Detail: "the app crashed; never answered"},
		{What: "client", Detail: "cursor 1.7.0 over stdio"},
	}
	u := newTestUI(t, fake, tabHistory)
	h := u.dash.history
	if len(h.results.rows) != 2 {
		t.Fatalf("history shows %d rows, want 2", len(h.results.rows))
	}
	h.status.SetSelected("abandoned")
	waitCalls(t, fake, `history server="" status="abandoned"`)
	h.results.w.Select(widget.TableCellID{Row: 0, Col: 0})
	waitCalls(t, fake, "timeline run 3 request 17")
	if len(h.steps) != 4 {
		t.Fatalf("timeline shows %d steps, want 4", len(h.steps))
	}
	golden(t, "history.xml", test.RenderToMarkup(u.dash.win.Canvas()))
	writePNG(t, "history.png", u.dash.win.Canvas())

	// One click shows it in the waterfall: the history around it.
	test.Tap(h.inWaterfall)
	waitCalls(t, fake, "window 08:25:53 08:27:24")
	if u.dash.tabs.Selected() != u.dash.tabOf[tabWaterfall] || u.dash.waterfall.hist == nil {
		t.Error("Show in the waterfall did not open the history around the request")
	}
}

// TestHistorySaysWhenTheLimitCutTheAnswer: 1,500 requests match, the
// query loads at most historyLimit; the note says that more match, and
// does not give the limit as the total.
func TestHistorySaysWhenTheLimitCutTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		matching int
		want     string
	}{
		{2, "2 requests. Select one to see its timeline."},
		{1000, "1000 requests. Select one to see its timeline."},
		{1500, "The latest 1000 requests (more match: narrow the filter). Select one to see its timeline."},
	} {
		fake := newFake(fixture())
		for i := range tc.matching {
			fake.history = append(fake.history, HistoryRow{ID: int64(tc.matching - i), Server: "fake", Session: "s1",
				Method: "tools/call", Name: "echo", Status: "ok", ReceivedAt: t0.Add(-time.Duration(i) * time.Second)})
		}
		u := newTestUI(t, fake, tabHistory)
		h := u.dash.history
		if n := min(tc.matching, 1000); len(h.results.rows) != n {
			t.Errorf("%d matching: the table has %d rows, want %d", tc.matching, len(h.results.rows), n)
		}
		if h.note.Text != tc.want {
			t.Errorf("%d matching: the note reads %q, want %q", tc.matching, h.note.Text, tc.want)
		}
	}
}

func TestHistoryNotAvailable(t *testing.T) {
	fake := &unavailableHistory{newFake(fixture())}
	a := test.NewTempApp(t)
	u := New(a, fake, &Options{inline: true})
	u.showDashboard(tabHistory)
	if note, want := u.dash.history.note.Text, "History is not available: history is switched off in the config"; note != want {
		t.Errorf("history note = %q, want %q", note, want)
	}
}

type unavailableHistory struct{ *fakeCtrl }

func (unavailableHistory) History(context.Context, HistoryFilter) ([]HistoryRow, error) {
	return nil, fmt.Errorf("%w: history is switched off in the config", ErrUnavailable)
}

// BenchmarkApply measures the UI goroutine's share of a redraw: the
// tables are virtualised, so 5,000 rows cost what 50 do.
func BenchmarkApply(b *testing.B) {
	for _, n := range []int{50, 5000} {
		b.Run(fmt.Sprintf("inflight-%d", n), func(b *testing.B) {
			s := bigSnapshot(1000, n, 20)
			fake := newFake(s)
			u := New(test.NewTempApp(b), fake, &Options{inline: true})
			u.showDashboard(tabInFlight)
			f := u.frameFor(s, t0, true)
			b.ReportAllocs()
			for b.Loop() {
				u.apply(f)
			}
		})
	}
}

// TestDashboardKeysAndMemory: the keyboard moves between views, and the
// window's size, view and the waterfall's zoom come back in the next run
// (the same state file), whether the window was closed or the app quit
// with it open.
func TestDashboardKeysAndMemory(t *testing.T) {
	a := test.NewTempApp(t)
	fake := newFake(fixture())
	state := filepath.Join(t.TempDir(), "state", "dashboard.json")
	u := New(a, fake, &Options{inline: true, StateFile: state})
	u.showDashboard("")
	d := u.dash
	if d.tabs.Selected() != d.tabOf[tabOverview] {
		t.Fatalf("a first dashboard opens on %q, want the overview", d.tabs.Selected().Text)
	}
	ctrl := func(k fyne.KeyName, mods ...fyne.KeyModifier) {
		m := fyne.KeyModifierShortcutDefault
		for _, x := range mods {
			m = x
		}
		typeShortcut(t, d.win.Canvas(), &desktop.CustomShortcut{KeyName: k, Modifier: m})
	}
	ctrl(fyne.Key2)
	if d.tabs.Selected() != d.tabOf[tabWaterfall] {
		t.Errorf("Ctrl+2 selected %q", d.tabs.Selected().Text)
	}
	if d.win.Canvas().Focused() != d.waterfall.plot {
		t.Error("the waterfall does not have the keyboard")
	}
	ctrl(fyne.KeyTab, fyne.KeyModifierControl)
	ctrl(fyne.KeyPageDown, fyne.KeyModifierControl)
	if d.tabs.Selected() != d.tabOf[tabInFlight] {
		t.Errorf("two tabs on: %q, want In flight", d.tabs.Selected().Text)
	}
	ctrl(fyne.KeyTab, fyne.KeyModifierControl|fyne.KeyModifierShift)
	ctrl(fyne.Key7)
	ctrl(fyne.KeyPageDown, fyne.KeyModifierControl) // wraps around
	if d.tabs.Selected() != d.tabOf[tabOverview] {
		t.Errorf("after the last tab: %q, want the first", d.tabs.Selected().Text)
	}

	// Resize, zoom the waterfall, pick a view, close the window.
	ctrl(fyne.Key2)
	d.win.Resize(fyne.NewSize(1180, 710))
	d.waterfall.zoomBy(0.25, 1)
	span := d.waterfall.v.Span
	ctrl(fyne.KeyW)
	if u.dashOpen.Load() {
		t.Fatal("Ctrl+W left the dashboard open")
	}

	// The next run reads the same file.
	u2 := New(a, newFake(fixture()), &Options{inline: true, StateFile: state})
	u2.showDashboard("")
	d2 := u2.dash
	if got := d2.win.Canvas().Size(); got != fyne.NewSize(1180, 710) {
		t.Errorf("size = %v, want 1180x710", got)
	}
	if d2.tabs.Selected() != d2.tabOf[tabWaterfall] {
		t.Errorf("view = %q, want the waterfall", d2.tabs.Selected().Text)
	}
	if got := d2.waterfall.v.Span; got != span || !d2.waterfall.v.Follow {
		t.Errorf("waterfall span %v follow %v, want %v following", got, d2.waterfall.v.Follow, span)
	}

	// Quit with the window open: the app saves before the toolkit stops.
	d2.win.Resize(fyne.NewSize(900, 600))
	d2.selectTab(tabHistory)
	u2.SaveState()
	u3 := New(a, newFake(fixture()), &Options{inline: true, StateFile: state})
	u3.showDashboard("")
	if got := u3.dash.win.Canvas().Size(); got != fyne.NewSize(900, 600) {
		t.Errorf("after a quit: size = %v, want 900x600", got)
	}
	if u3.dash.tabs.Selected() != u3.dash.tabOf[tabHistory] {
		t.Errorf("after a quit: view = %q, want History", u3.dash.tabs.Selected().Text)
	}
}

// TestDashboardStateUnreadable: a state file that is not what the
// dashboard wrote (hand-edited, truncated, another program's) gives the
// defaults and a log line, and the next save replaces it.
func TestDashboardStateUnreadable(t *testing.T) {
	for name, content := range map[string]string{
		"truncated":   `{"width": 1180, "hei`,
		"wrong types": `{"width": "wide", "tab": 7}`,
		"too large":   `{"tab": "` + strings.Repeat("x", maxStateFile) + `"}`,
		"a FIFO":      "", // made below: reading it would block the UI goroutine
		"unknown tab": `{"width": 700, "height": 500, "tab": "Nonsense"}`,
	} {
		t.Run(name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "dashboard.json")
			write := func() error { return os.WriteFile(state, []byte(content), 0o600) }
			if name == "a FIFO" {
				write = func() error { return syscall.Mkfifo(state, 0o600) }
			}
			if err := write(); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			u := New(test.NewTempApp(t), newFake(fixture()), &Options{inline: true, StateFile: state,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			u.showDashboard("")
			d := u.dash
			if d.tabs.Selected() != d.tabOf[tabOverview] {
				t.Errorf("view = %q, want the overview", d.tabs.Selected().Text)
			}
			if name != "unknown tab" {
				if got := d.win.Canvas().Size(); got != defaultSize {
					t.Errorf("size = %v, want the default %v", got, defaultSize)
				}
				if !strings.Contains(logs.String(), "unreadable") {
					t.Errorf("no log line for the unreadable file: %q", logs.String())
				}
			}
			d.selectTab(tabLeaks)
			u.SaveState() // replaces what is there, a FIFO too, without opening it
			var s dashState
			data, err := os.ReadFile(state)
			if err == nil {
				err = json.Unmarshal(data, &s)
			}
			if err != nil || s.Tab != tabLeaks {
				t.Errorf("after a save: %v %+v", err, s)
			}
		})
	}
}

// TestColumnsFitTheirContent: a column is as wide as its widest text, and
// does not shrink for a small change.
func TestColumnsFitTheirContent(t *testing.T) {
	test.NewTempApp(t)
	tb := newTable([]column{{title: "Method"}, {title: "Server"}, {title: "", button: "Cancel"}}, "empty")
	header := tb.widths[0]
	short := []row{{cells: []string{"ping", "a"}}}
	long := []row{{cells: []string{"notifications/resources/list_changed", "a"}}}
	tb.setRows(short)
	if tb.widths[0] != header {
		t.Errorf("a short cell widened the column: %v -> %v", header, tb.widths[0])
	}
	tb.setRows(long)
	want := fyne.MeasureText("notifications/resources/list_changed", theme.TextSize(), fyne.TextStyle{Bold: true}).Width
	if tb.widths[0] < want || tb.widths[0] > want+3*theme.InnerPadding()+theme.Padding() {
		t.Errorf("width %v for a text %v wide", tb.widths[0], want)
	}
	wide := tb.widths[0]
	tb.setRows([]row{{cells: []string{"notifications/resources/list_chang", "a"}}})
	if tb.widths[0] != wide {
		t.Errorf("a slightly shorter text shrank the column %v -> %v", wide, tb.widths[0])
	}
	tb.setRows(short)
	if tb.widths[0] != header {
		t.Errorf("the column stays %v wide for short texts, want %v", tb.widths[0], header)
	}
	if tb.widths[2] < widget.NewButton("Cancel", nil).MinSize().Width {
		t.Errorf("the button column is %v wide, narrower than its button", tb.widths[2])
	}
}

// typeShortcut delivers a shortcut to a canvas as a key press with
// modifiers would: the test driver's canvas wraps a software canvas that
// dispatches them.
func typeShortcut(t *testing.T, c fyne.Canvas, sc fyne.Shortcut) {
	t.Helper()
	type dispatcher interface{ TypedShortcut(fyne.Shortcut) }
	if d, ok := c.(dispatcher); ok {
		d.TypedShortcut(sc)
		return
	}
	v := reflect.ValueOf(c)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	if v.Kind() == reflect.Struct && v.NumField() > 0 {
		if d, ok := v.Field(0).Interface().(dispatcher); ok {
			d.TypedShortcut(sc)
			return
		}
	}
	t.Fatalf("cannot type a shortcut on %T", c)
}

// TestKillLeaksFromTheTray: "Kill leaked backends (N)" counts what it
// would kill (never a suspect), and its confirmation lists the proven
// leaks known when it is clicked, whatever the dashboard's state: never
// opened (its frames had no table rows), or open once with other leaks
// and closed since.
func TestKillLeaksFromTheTray(t *testing.T) {
	fake := newFake(fixture())
	u := New(test.NewTempApp(t), fake, &Options{inline: true})
	t.Cleanup(func() { u.wg.Wait(); fake.wg.Wait() })
	setLeaks := func(ls ...Leak) {
		u.mu.Lock()
		u.leaks = ls
		u.mu.Unlock()
	}
	// draw is one frame of the loop: with table rows only while the
	// dashboard is open.
	draw := func() { u.apply(u.frameFor(fake.Snapshot(), t0, u.dashOpen.Load())) }
	killItem := func() menuItem {
		t.Helper()
		for _, it := range u.last.menu {
			if strings.HasPrefix(it.Label, "Kill leaked backends") {
				return it
			}
		}
		t.Fatal("no Kill leaked backends item")
		return menuItem{}
	}
	suspect := Leak{PID: 778, Server: "fake", Reason: "matches server fake; its parent is init"}

	// Only a suspect: nothing the item would kill.
	setLeaks(suspect)
	draw()
	if it := killItem(); it.Label != "Kill leaked backends (0)" || !it.Disabled {
		t.Errorf("with only a suspect: %q disabled=%v, want (0) disabled", it.Label, it.Disabled)
	}

	// One proven leak, the dashboard never opened.
	setLeaks(Leak{PID: 777, Server: "memory", Reason: "child of an earlier run", Proven: true}, suspect)
	draw()
	if it := killItem(); it.Label != "Kill leaked backends (1)" || it.Disabled {
		t.Errorf("with one proven leak and a suspect: %q disabled=%v, want (1) enabled", it.Label, it.Disabled)
	}
	u.menuDo(menuAction{Kind: actKillLeaks})
	if msg := dialogText(t, u.dash.win); !strings.Contains(msg, "PID 777") || strings.Contains(msg, "778") {
		t.Fatalf("the dashboard closed, the confirmation reads %q; want PID 777 and not the suspect", msg)
	}
	test.Tap(dialogButton(t, u.dash.win, "Yes"))
	waitCalls(t, fake, "killleak 777")
	draw() // the Leaks tab shows 777

	// Closed again; the poller finds another leak meanwhile.
	u.hideDashboard()
	setLeaks(Leak{PID: 779, Server: "notes", Reason: "child of an earlier run", Proven: true})
	draw()
	u.menuDo(menuAction{Kind: actKillLeaks})
	if msg := dialogText(t, u.dash.win); !strings.Contains(msg, "PID 779") || strings.Contains(msg, "777") {
		t.Fatalf("after the dashboard was closed, the confirmation reads %q; want PID 779 only", msg)
	}
	test.Tap(dialogButton(t, u.dash.win, "Yes"))
	waitCalls(t, fake, "killleak 777", "killleak 779")
	if got := fake.recorded(); slices.Contains(got, "killleak 778") || len(got) != 2 {
		t.Errorf("killed %q, want 777 then 779", got)
	}
}

// dialogText is the text of the labels in the window's top overlay.
func dialogText(t *testing.T, w fyne.Window) string {
	t.Helper()
	top := w.Canvas().Overlays().Top()
	if top == nil {
		t.Fatal("no dialog is shown")
	}
	var texts []string
	for _, o := range visible(top) {
		if l, ok := o.(*widget.Label); ok {
			texts = append(texts, l.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// slowTimelines answers each request's timeline with one step naming it;
// while an answer is on its way it runs during once: what the user does
// while the store is slow (the test goroutine is the UI goroutine, and
// queries run on it: during plays the UI goroutine's next turns).
type slowTimelines struct {
	*fakeCtrl
	during func()
}

func (s *slowTimelines) Timeline(_ context.Context, r HistoryRow) (RequestDetail, error) {
	if d := s.during; d != nil {
		s.during = nil
		d()
	}
	return RequestDetail{Steps: []TimelineEntry{{What: fmt.Sprintf("request %d", r.PoolID)}}}, nil
}

// TestHistoryTimelineIsTheSelectedRequests: an answer that comes late,
// after another request was selected or a new search cleared the
// timeline, is dropped: the timeline is always the latest selection's.
func TestHistoryTimelineIsTheSelectedRequests(t *testing.T) {
	fake := newFake(fixture())
	fake.history = []HistoryRow{
		{ID: 1, PoolID: 17, Server: "fake", Method: "tools/call", Status: "ok", ReceivedAt: t0.Add(-time.Minute)},
		{ID: 2, PoolID: 18, Server: "fake", Method: "tools/list", Status: "ok", ReceivedAt: t0.Add(-2 * time.Minute)},
	}
	slow := &slowTimelines{fakeCtrl: fake}
	u := New(test.NewTempApp(t), slow, &Options{inline: true})
	t.Cleanup(func() { u.wg.Wait(); fake.wg.Wait() })
	u.showDashboard(tabHistory)
	h := u.dash.history
	if len(h.results.rows) != 2 {
		t.Fatalf("history shows %d rows, want 2", len(h.results.rows))
	}
	steps := func() []string {
		var out []string
		for _, s := range h.steps {
			out = append(out, s.What)
		}
		return out
	}

	// 17 is selected; while its timeline loads, 18 is selected and its
	// timeline arrives first.
	slow.during = func() { h.results.w.Select(widget.TableCellID{Row: 1, Col: 0}) }
	h.results.w.Select(widget.TableCellID{Row: 0, Col: 0})
	if got := steps(); !slices.Equal(got, []string{"request 18"}) || h.selected.PoolID != 18 {
		t.Errorf("request 18 selected last: the timeline shows %q", got)
	}

	// 17 is selected; while its timeline loads, a new search clears it.
	slow.during = h.query
	h.results.w.Select(widget.TableCellID{Row: 0, Col: 0})
	if got := steps(); len(got) != 0 {
		t.Errorf("a search cleared the timeline, then it shows %q", got)
	}
}

// shownWhole says whether a visible label of the window shows text whole:
// it contains it and does not cut its text.
func shownWhole(w fyne.Window, text string) bool {
	for _, o := range visible(w.Canvas().Content()) {
		if l, ok := o.(*widget.Label); ok && l.Truncation == fyne.TextTruncateOff && strings.Contains(l.Text, text) {
			return true
		}
	}
	return false
}

// TestInFlightShowsWhyARequestWaits: a request its child does not read
// (status --json's stateReason) says so in its row, and whole once
// selected: what tells a stuck child from a Switchboard bug.
func TestInFlightShowsWhyARequestWaits(t *testing.T) {
	const why = "being written: the child is not reading its input (nothing taken for 40s; 24576 of its 40112 bytes written)"
	s := fixture()
	s.InFlight[2].StateReason = why // resources/read, not written
	u := newTestUI(t, newFake(s), tabInFlight)
	row := rowCells(u.dash.inflight, "resources/read")
	if !slices.ContainsFunc(row, func(c *cell) bool { return c.label.Visible() && c.label.Text == why }) {
		t.Error("the row does not say why the request waits")
	}
	u.dash.inflight.w.Select(widget.TableCellID{Row: 2, Col: 1})
	if !shownWhole(u.dash.win, why) {
		t.Error("selecting the row does not show why the request waits, whole")
	}
}

// TestBackendsShowWhyAChildIsInItsState: a child's stateReason (starting:
// waiting for its handshake) shows whole when its row is selected, beside
// its stderr.
func TestBackendsShowWhyAChildIsInItsState(t *testing.T) {
	const why = "waiting for its handshake (server/discover, initialize): restarted if it does not answer within 1m0s"
	s := fixture()
	s.Backends[0].State, s.Backends[0].StateReason = pool.StateStarting, why
	u := newTestUI(t, newFake(s), tabBackends)
	u.dash.backends.w.Select(widget.TableCellID{Row: 0, Col: 2})
	if !shownWhole(u.dash.win, why) {
		t.Errorf("selecting the row shows %q, not why the child is starting", u.dash.backendDetail.Text)
	}
	if !strings.Contains(u.dash.backendDetail.Text, "fake: ready") {
		t.Errorf("the reason replaced the stderr: %q", u.dash.backendDetail.Text)
	}
}

// TestLeaksTellProvenFromSuspects: Switchboard kills only the leaks it
// proves its own (app/leaks refuses a suspect), so a suspect's row offers
// no Kill and says why; the Leaks tab's header, its title, the status bar
// and the tray count the proven leaks and the suspects apart.
func TestLeaksTellProvenFromSuspects(t *testing.T) {
	fake := newFake(fixture())
	u := newTestUI(t, fake, tabLeaks) // 777 proven, 778 a suspect
	d := u.dash
	if !slices.ContainsFunc(rowCells(d.leaks, "777"), func(c *cell) bool { return c.btn.Visible() && c.btn.Text == "Kill" }) {
		t.Error("a proven leak offers no Kill")
	}
	suspect := rowCells(d.leaks, "778")
	if slices.ContainsFunc(suspect, func(c *cell) bool { return c.btn.Visible() }) {
		t.Error("a suspect offers Kill, which would be refused")
	}
	if !slices.ContainsFunc(suspect, func(c *cell) bool {
		return c.label.Visible() && strings.HasPrefix(c.label.Text, "Suspect, never killed")
	}) {
		t.Error("a suspect's row does not say why it has no Kill")
	}
	d.leaks.w.Select(widget.TableCellID{Row: 1, Col: 1})
	if got := d.leakDetail.Text; !strings.Contains(got, "kill 778") {
		t.Errorf("a selected suspect's detail does not say how to end it: %q", got)
	}
	for _, c := range []struct{ what, got, want string }{
		{"header", d.leakNote.Text, "1 leaked backend: an MCP server process nobody uses any more. " +
			"1 suspect: maybe a leaked backend, but Switchboard cannot prove it its own, so it lists it and never kills it."},
		{"tab", d.tabOf[tabLeaks].Text, "Leaks (2, 1 suspect)"},
		{"status bar", d.status.Text, "3 sessions · 3 in flight (1 hung) · 1 child · 1 leak, 1 suspect · failed: memory"},
		{"tray", trayMenu(fixture(), u.last.sum)[3].Label, "Leaked backends: 1, suspects: 1"},
	} {
		if c.got != c.want {
			t.Errorf("the %s reads %q, want %q", c.what, c.got, c.want)
		}
	}
}
