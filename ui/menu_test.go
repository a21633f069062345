package ui

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
)

func TestTrayMenu(t *testing.T) {
	s := fixture()
	sum := summarize(s, t0, 30*time.Second, 2)
	sum.Killable = 1 // the other leak is a suspect: listed, never killed
	got := trayMenu(s, sum)
	sep := menuItem{Separator: true}
	want := []menuItem{
		{Label: "Sessions: 3", Disabled: true},
		{Label: "In flight: 3 (1 hung)", Disabled: true},
		{Label: "Children: 1", Disabled: true},
		{Label: "Leaked backends: 1, suspects: 1", Disabled: true},
		sep,
		{Label: "Open dashboard", Action: menuAction{Kind: actDashboard}},
		{Label: "Show hung request: tools/call sleep on fake, 1m35s", Action: menuAction{Kind: actWaterfall}},
		sep,
		{Label: "fake — ready, PID 4242", Children: []menuItem{
			{Label: "State: ready", Disabled: true},
			{Label: "PID: 4242", Disabled: true},
			{Label: "Sessions: 2", Disabled: true},
			sep,
			{Label: "Restart", Action: menuAction{Kind: actRestart, Server: "fake"}},
			{Label: "Stop", Action: menuAction{Kind: actStop, Server: "fake"}},
		}},
		{Label: "memory — failed", Children: []menuItem{
			{Label: "State: failed (error: crashed 5 times in 60s)", Disabled: true},
			{Label: "PID: —", Disabled: true},
			{Label: "Sessions: 1", Disabled: true}, // s3, with no child to count it
			sep,
			{Label: "Restart", Action: menuAction{Kind: actRestart, Server: "memory"}},
			{Label: "Stop", Disabled: true, Action: menuAction{Kind: actStop, Server: "memory"}},
		}},
		sep,
		{Label: "Kill leaked backends (1)", Action: menuAction{Kind: actKillLeaks}},
		{Label: "Open config file", Action: menuAction{Kind: actOpenConfig}},
		{Label: "Open history", Action: menuAction{Kind: actHistory}},
		sep,
		{Label: "Start at login", Checkable: true, Action: menuAction{Kind: actStartAtLogin}},
		{Label: "About Switchboard", Action: menuAction{Kind: actAbout}},
		{Label: "Restart Switchboard", Action: menuAction{Kind: actRestartApp}},
		{Label: "Quit", Action: menuAction{Kind: actQuit}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("trayMenu (-want +got):\n%s", d)
	}
}

// TestServerMenuCountsSessionsOfAStoppedServer: after Stop the server
// has no child, and its three sessions stay attached; its submenu says
// 3, as the overview and status --json do.
func TestServerMenuCountsSessionsOfAStoppedServer(t *testing.T) {
	s := pool.Snapshot{
		Servers: []pool.ServerInfo{{Name: "notes", Share: pool.ShareShared, State: pool.StateStopped},
			{Name: "browser", Share: pool.ShareShared, State: pool.StateReady}},
		Sessions: []pool.SessionInfo{{ID: "a", Server: "notes"}, {ID: "b", Server: "notes"}, {ID: "c", Server: "browser"},
			{ID: "d", Server: "notes"}},
		Backends: []pool.BackendInfo{{Server: "notes", State: pool.StateStopped},
			{Server: "browser", PID: 4300, State: pool.StateReady, Sessions: 1}},
	}
	sessions := map[string]string{}
	for _, it := range trayMenu(s, summarize(s, t0, 30*time.Second, 0)) {
		for _, c := range it.Children {
			if strings.HasPrefix(c.Label, "Sessions: ") {
				sessions[it.Label] = c.Label
			}
		}
	}
	want := map[string]string{"notes — stopped": "Sessions: 3", "browser — ready, PID 4300": "Sessions: 1"}
	if d := cmp.Diff(want, sessions); d != "" {
		t.Errorf("the submenus' session counts (-want +got):\n%s", d)
	}
}

// TestServerMenuSaysAServerDrains: a server removed from the config
// whose child still finishes calls is labelled draining beside its
// state, as `switchboard status` marks it: "ready" alone read as a
// server still configured.
func TestServerMenuSaysAServerDrains(t *testing.T) {
	s := pool.Snapshot{
		Servers:  []pool.ServerInfo{{Name: "hang", Share: pool.ShareShared, State: pool.StateReady, Draining: true}},
		Backends: []pool.BackendInfo{{Server: "hang", PID: 4300, State: pool.StateReady, InFlight: 2}},
	}
	m := serverMenu(s, s.Servers[0])
	if m.Label != "hang — ready, draining, PID 4300" || m.Children[0].Label != "State: ready, draining" {
		t.Errorf("menu %q, state %q; want the server marked draining", m.Label, m.Children[0].Label)
	}
}

func TestTrayMenuEmptyPool(t *testing.T) {
	got := trayMenu(pool.Snapshot{}, summary{})
	var labels []string
	for _, it := range got {
		if !it.Separator {
			labels = append(labels, it.Label)
		}
	}
	want := []string{"Sessions: 0", "In flight: 0", "Children: 0", "Leaked backends: 0", "Open dashboard", "Open waterfall",
		"Kill leaked backends (0)", "Open config file", "Open history", "Start at login", "About Switchboard", "Restart Switchboard", "Quit"}
	if d := cmp.Diff(want, labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	for _, it := range got {
		if it.Label == "Kill leaked backends (0)" && !it.Disabled {
			t.Error("Kill leaked backends is enabled with no leaks")
		}
	}
}

func TestFyneMenuRunsActions(t *testing.T) {
	s := fixture()
	var did []menuAction
	m := fyneMenu(trayMenu(s, summarize(s, t0, 30*time.Second, 0)), func(a menuAction) { did = append(did, a) })
	find := func(items []*fyne.MenuItem, label string) *fyne.MenuItem {
		for _, it := range items {
			if it.Label == label {
				return it
			}
		}
		t.Fatalf("no menu item %q", label)
		return nil
	}
	fake := find(m.Items, "fake — ready, PID 4242")
	find(fake.ChildMenu.Items, "Restart").Action()
	find(fake.ChildMenu.Items, "Stop").Action()
	find(m.Items, "Open dashboard").Action()
	quit := find(m.Items, "Quit")
	if !quit.IsQuit {
		t.Error("Quit is not marked IsQuit")
	}
	quit.Action()
	want := []menuAction{{Kind: actRestart, Server: "fake"}, {Kind: actStop, Server: "fake"}, {Kind: actDashboard}, {Kind: actQuit}}
	if d := cmp.Diff(want, did); d != "" {
		t.Errorf("actions (-want +got):\n%s", d)
	}
	if !find(m.Items, "Sessions: 3").Disabled {
		t.Error("a count is clickable")
	}
}

func TestIconState(t *testing.T) {
	for _, tc := range []struct {
		sum  summary
		want trayState
	}{
		{summary{}, trayIdle},
		{summary{Sessions: 4}, trayIdle},
		{summary{InFlight: 2}, trayBusy},
		{summary{InFlight: 2, Hung: 1}, trayHung},
		{summary{Failed: []string{"memory"}}, trayHung},
	} {
		if got := iconState(tc.sum); got != tc.want {
			t.Errorf("iconState(%+v) = %d, want %d", tc.sum, got, tc.want)
		}
	}
}

func TestNotifierOncePerHangAndFailure(t *testing.T) {
	n := newNotifier()
	titles := func(ns []*fyne.Notification) []string {
		var out []string
		for _, x := range ns {
			out = append(out, x.Title)
		}
		return out
	}
	s := fixture()
	hang := 30 * time.Second
	if d := cmp.Diff([]string{"Request hung on fake", "Server memory failed"}, titles(n.check(s, t0, hang))); d != "" {
		t.Errorf("first check (-want +got):\n%s", d)
	}
	if got := n.check(s, t0.Add(time.Second), hang); len(got) != 0 {
		t.Errorf("second check repeated %v", titles(got))
	}
	// Request 7 crosses the threshold while 9 is still hung: fake has
	// not recovered, nothing more is said.
	if got := n.check(s, t0.Add(29*time.Second), hang); len(got) != 0 {
		t.Errorf("a server still hung notified again: %v", titles(got))
	}
	// memory recovers, then fails again past the quiet time: a new
	// notification.
	ok := fixture()
	ok.Backends[1].State = pool.StateReady
	ok.InFlight = nil
	if got := n.check(ok, t0, hang); len(got) != 0 {
		t.Errorf("recovery notified %v", titles(got))
	}
	failed := fixture()
	failed.InFlight = nil
	if d := cmp.Diff([]string{"Server memory failed"}, titles(n.check(failed, t0.Add(failNoteEvery), hang))); d != "" {
		t.Errorf("second failure (-want +got):\n%s", d)
	}
	// Many hung at once share one notification.
	many := bigSnapshot(10, 50, 1)
	many.Backends = nil
	if d := cmp.Diff([]string{"50 requests hung on server-00"}, titles(newNotifier().check(many, t0.Add(time.Hour), hang))); d != "" {
		t.Errorf("many (-want +got):\n%s", d)
	}
}

func TestTrayMenuLeaksUnknown(t *testing.T) {
	s := fixture()
	sum := summarize(s, t0, 30*time.Second, -1)
	m := trayMenu(s, sum)
	var got []menuItem
	for _, it := range m {
		if strings.Contains(it.Label, "eaked") {
			got = append(got, it)
		}
	}
	want := []menuItem{
		{Label: "Leaked backends: unknown", Disabled: true},
		{Label: "Kill leaked backends (unknown)", Disabled: true, Action: menuAction{Kind: actKillLeaks}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("leak items (-want +got):\n%s", d)
	}
	if !strings.HasSuffix(sum.String(), "leaks unknown · failed: memory") {
		t.Errorf("summary = %q", sum.String())
	}
}

// fakeTray records what the tray hands to fyne's desktop.App.
type fakeTray struct {
	icons []string
	menus []*fyne.Menu
}

func (f *fakeTray) SetSystemTrayMenu(m *fyne.Menu)    { f.menus = append(f.menus, m) }
func (f *fakeTray) SetSystemTrayIcon(r fyne.Resource) { f.icons = append(f.icons, r.Name()) }

// fakeHost is a tray menu host that records what is done to its items;
// an item's clicks are a channel the test sends on.
type fakeHost struct {
	mu     sync.Mutex
	items  []*fakeItem
	resets int
	log    []string
	// clicks are the actions of the items clicked, for the test
	// goroutine to run (the app runs them on the UI goroutine).
	clicks chan menuAction
}

type fakeItem struct {
	h        *fakeHost
	id       int
	label    string
	disabled bool
	checked  bool
	ch       chan struct{}
}

func (h *fakeHost) record(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, fmt.Sprintf(format, args...))
}

func (h *fakeHost) reset() {
	h.mu.Lock()
	items := h.items
	h.items = nil
	h.resets++
	h.mu.Unlock()
	for _, it := range items {
		close(it.ch) // as systray does when it removes an item
	}
}

func (h *fakeHost) add(_ trayItem, label string, _, checked bool) trayItem {
	h.mu.Lock()
	defer h.mu.Unlock()
	it := &fakeItem{h: h, id: len(h.items) + 100*h.resets, label: label, checked: checked, ch: make(chan struct{})}
	h.items = append(h.items, it)
	return it
}

func (h *fakeHost) separator(trayItem) {}

// find returns the live item labelled label (prefix).
func (h *fakeHost) find(t *testing.T, prefix string) *fakeItem {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, it := range h.items {
		if strings.HasPrefix(it.label, prefix) {
			return it
		}
	}
	t.Fatalf("no menu item %q", prefix)
	return nil
}

func (i *fakeItem) SetTitle(s string)       { i.h.record("title %d %s", i.id, s); i.label = s }
func (i *fakeItem) Enable()                 { i.h.record("enable %d", i.id); i.disabled = false }
func (i *fakeItem) Disable()                { i.h.record("disable %d", i.id); i.disabled = true }
func (i *fakeItem) Check()                  { i.h.record("check %d", i.id); i.checked = true }
func (i *fakeItem) Uncheck()                { i.h.record("uncheck %d", i.id); i.checked = false }
func (i *fakeItem) clicks() <-chan struct{} { return i.ch }

// testTray is a tray over fakes, on the test goroutine.
func testTray(t *testing.T, fake *fakeCtrl) (*UI, *tray, *fakeTray, *fakeHost, *[]string) {
	t.Helper()
	u := New(test.NewTempApp(t), fake, &Options{inline: true})
	desk, host := &fakeTray{}, &fakeHost{}
	var tips []string
	tr := u.newTray(desk, host, func(s string) bool { tips = append(tips, s); return true })
	host.clicks = make(chan menuAction, 16)
	tr.menu.do = func(a menuAction) { host.clicks <- a }
	t.Cleanup(func() { tr.menu.close(); u.wg.Wait(); fake.wg.Wait() })
	return u, tr, desk, host, &tips
}

// runClick runs the action of the next item clicked, and says Restart or
// Stop to the question it asks.
func runClick(t *testing.T, u *UI, host *fakeHost) {
	t.Helper()
	select {
	case a := <-host.clicks:
		u.menuDo(a)
		verb := "Restart"
		if a.Kind == actStop {
			verb = "Stop"
		}
		test.Tap(dialogButton(t, u.dash.win, verb))
	case <-time.After(5 * time.Second):
		t.Fatal("the click did nothing")
	}
}

// TestTrayMenuUpdatesInPlace: counts change while the menu is open and a
// click lands on an item built before the change: the items were kept, so
// the click still acts. Only a change of shape (a server added) rebuilds.
func TestTrayMenuUpdatesInPlace(t *testing.T) {
	fake := newFake(fixture())
	u, tr, desk, host, tips := testTray(t, fake)
	busy := fixture()
	busy.Servers[1].State = pool.StateReady
	busy.InFlight = busy.InFlight[1:] // nothing hung
	tr.apply(u, u.frameFor(busy, t0, false))
	if len(desk.menus) != 1 || tr.menu.rebuilds != 1 {
		t.Fatalf("first menu: %d through fyne, %d built", len(desk.menus), tr.menu.rebuilds)
	}
	restart := host.find(t, "Restart") // fake's Restart, in its submenu
	sessions := host.find(t, "Sessions: 3")

	// A session leaves, a request starts: labels change in place.
	fewer := fixture()
	fewer.Servers[1].State = pool.StateReady
	fewer.Sessions = fewer.Sessions[1:]
	tr.apply(u, u.frameFor(fewer, t0.Add(100*time.Millisecond), false))
	if tr.menu.rebuilds != 1 || host.resets != 1 {
		t.Fatalf("a count change rebuilt the menu (%d builds, %d resets)", tr.menu.rebuilds, host.resets)
	}
	if sessions.label != "Sessions: 2" || host.find(t, "Sessions: 2") != sessions {
		t.Errorf("the sessions item reads %q", sessions.label)
	}
	// The click on the item built before the change still restarts.
	restart.ch <- struct{}{}
	runClick(t, u, host)
	waitCalls(t, fake, "restart fake")

	// Hung: the waterfall item leads to it, the tooltip says so.
	tr.apply(u, u.frameFor(fixture(), t0.Add(time.Second), false))
	if tr.menu.rebuilds != 1 {
		t.Error("a request hanging rebuilt the menu")
	}
	if it := host.find(t, "Show hung request: tools/call sleep on fake, 1m36s"); it.disabled {
		t.Error("the hung request's item is disabled")
	}
	if tip := (*tips)[len(*tips)-1]; !strings.Contains(tip, "1 hung") || !strings.Contains(tip, "Hung: tools/call sleep on fake, 1m36s") {
		t.Errorf("tooltip = %q", tip)
	}
	// Start at login is a checkbox, checked in place.
	fake.SetStartAtLogin(true)
	tr.apply(u, u.frameFor(fixture(), t0.Add(2*time.Second), false))
	if it := host.find(t, "Start at login"); !it.checked {
		t.Error("start at login not checked")
	}

	// A new server: a new shape, built again; the old items' click
	// goroutines ended.
	more := fixture()
	more.Servers = append(more.Servers, pool.ServerInfo{Name: "git", State: pool.StateReady})
	tr.apply(u, u.frameFor(more, t0.Add(3*time.Second), false))
	if tr.menu.rebuilds != 2 || host.resets != 2 {
		t.Errorf("a new server: %d builds, %d resets; want 2, 2", tr.menu.rebuilds, host.resets)
	}
	host.find(t, "git — ready")

	// fyne rebuilding the menu under us (its ready callback does) removes
	// our items: the next update builds ours again.
	host.reset()
	waitUntil(t, 5*time.Second, "the menu to know it was rebuilt under it", func() bool { return tr.menu.broken.Load() && len(u.redraw) == 1 })
	tr.apply(u, u.frameFor(more, t0.Add(4*time.Second), false))
	if tr.menu.rebuilds != 3 {
		t.Errorf("after an outside reset: %d builds, want 3", tr.menu.rebuilds)
	}
	host.find(t, "Quit")
}

// TestTrayMenuKeepsItsShapeWhenAServerFails: a server failing and
// recovering changes labels in place; the menu is not built again, so a
// click on a menu opened just before still lands.
func TestTrayMenuKeepsItsShapeWhenAServerFails(t *testing.T) {
	fake := newFake(fixture())
	u, tr, _, host, _ := testTray(t, fake)
	ok := fixture()
	ok.Servers[1].State, ok.Servers[1].Error = pool.StateReady, ""
	ok.Backends[1].State, ok.Backends[1].LastError, ok.Backends[1].PID = pool.StateReady, "", 4343
	tr.apply(u, u.frameFor(ok, t0, false))
	if tr.menu.rebuilds != 1 {
		t.Fatalf("first menu: %d built", tr.menu.rebuilds)
	}
	restart := host.find(t, "Restart") // fake's Restart, in its submenu

	tr.apply(u, u.frameFor(fixture(), t0.Add(time.Second), false)) // memory failed
	if tr.menu.rebuilds != 1 || host.resets != 1 {
		t.Errorf("a server failing rebuilt the menu (%d builds, %d resets)", tr.menu.rebuilds, host.resets)
	}
	host.find(t, "State: failed (error: crashed 5 times in 60s)")
	restart.ch <- struct{}{}
	runClick(t, u, host)
	waitCalls(t, fake, "restart fake")

	tr.apply(u, u.frameFor(ok, t0.Add(2*time.Second), false)) // memory recovered
	if tr.menu.rebuilds != 1 || host.resets != 1 {
		t.Errorf("a server recovering rebuilt the menu (%d builds, %d resets)", tr.menu.rebuilds, host.resets)
	}
}

func TestTrayIconAndTap(t *testing.T) {
	fake := newFake(fixture())
	u, tr, desk, _, _ := testTray(t, fake)
	dark := false
	tr.dark = func() bool { return dark }

	idle := pool.Snapshot{TakenAt: t0}
	busy := fixture()
	busy.Servers[1].State = pool.StateReady
	busy.InFlight = busy.InFlight[1:] // nothing hung
	hung := fixture()

	tr.apply(u, u.frameFor(idle, t0, false))
	tr.apply(u, u.frameFor(busy, t0.Add(100*time.Millisecond), false))
	tr.apply(u, u.frameFor(busy, t0.Add(time.Second), false))
	dark = true
	tr.apply(u, u.frameFor(hung, t0.Add(2*time.Second), false))
	if d := cmp.Diff([]string{"tray-idle.png", "tray-busy.png", "tray-hung-dark.png"}, desk.icons); d != "" {
		t.Errorf("icons (-want +got):\n%s", d)
	}

	// A tap on the icon while a request is hung opens the waterfall at it.
	u.opts.now = func() time.Time { return t0.Add(2 * time.Second) }
	u.track.start(hung)
	u.wfLive.Store(u.track.publish(t0.Add(2 * time.Second)))
	u.render(hung, t0.Add(2*time.Second))
	u.trayTapped()
	if u.dash == nil || u.dash.tabs.Selected() != u.dash.tabOf[tabWaterfall] {
		t.Fatal("the tap did not open the waterfall")
	}
	if w := u.dash.waterfall; w.sel.PoolID != 9 {
		t.Errorf("selected request %d, want the hung one (9)", w.sel.PoolID)
	}
	// Not hung: the dashboard as it was.
	u.render(busy, t0.Add(3*time.Second))
	u.dash.selectTab(tabSessions)
	u.trayTapped()
	if u.dash.tabs.Selected() != u.dash.tabOf[tabSessions] {
		t.Error("a tap with nothing hung changed the tab")
	}
}

// TestFileURL: "Open config file" hands the shell a file: URL it opens,
// on Windows too, where a path's backslashes and drive letter made
// file://C:%5CUsers%5C..., which the shell's handler does not open.
func TestFileURL(t *testing.T) {
	for _, tc := range []struct{ goos, path, want string }{
		{"linux", "/home/me/.config/switchboard/config.json", "file:///home/me/.config/switchboard/config.json"},
		{"linux", "/home/me/my configs/config.json", "file:///home/me/my%20configs/config.json"},
		{"darwin", "/Users/me/Library/Application Support/switchboard/config.json",
			"file:///Users/me/Library/Application%20Support/switchboard/config.json"},
		{"windows", `C:\Users\me\AppData\Roaming\switchboard\config.json`,
			"file:///C:/Users/me/AppData/Roaming/switchboard/config.json"},
		{"windows", `Z:\tmp\my home\config.json`, "file:///Z:/tmp/my%20home/config.json"},
	} {
		if got := fileURL(tc.goos, tc.path).String(); got != tc.want {
			t.Errorf("fileURL(%s, %s) = %s, want %s", tc.goos, tc.path, got, tc.want)
		}
	}
}

// TestNotificationCannotRunPowerShell: a hostile session names its hung
// request so as to break out of the PowerShell string that fyne puts a
// Windows notification's text in. Through the notifier and desktopNote
// for Windows, each text formatted as fyne's script formats it ($content
// = %q) must stay one PowerShell string with nothing it would expand.
func TestNotificationCannotRunPowerShell(t *testing.T) {
	attacks := []string{
		`x"; Start-Process calc; "`,
		`x” ; Start-Process calc ; “`,
		`x„; Start-Process calc; „`,
		`$(Start-Process calc)`,
		"${env:USERPROFILE} `$(calc)`",
		`x\"; calc; \"`,
		"x\n\"; calc; #",
		strings.Repeat("long ", 1000),
	}
	for _, attack := range attacks {
		s := fixture()
		s.InFlight = s.InFlight[:1]
		s.InFlight[0].Method = attack
		s.InFlight[0].Name = attack
		s.Backends[1].LastError = attack // a child's last words
		notes := newNotifier().check(s, t0.Add(time.Hour), 30*time.Second)
		notes = append(notes, fyne.NewNotification("Switchboard", "restart "+attack+": "+attack)) // an action's error
		if len(notes) < 3 {
			t.Fatalf("%q: %d notifications, want the hung request, the failed server and the error", attack, len(notes))
		}
		for _, n := range notes {
			safe := desktopNote("windows", n)
			for _, text := range []string{safe.Title, safe.Content} {
				line := fmt.Sprintf("$content = %q", text) // fyne's notificationTemplate
				if err := onePowerShellString(strings.TrimPrefix(line, "$content = ")); err != nil {
					t.Errorf("%q: %s: %v", attack, line, err)
				}
				if n := utf8.RuneCountInString(text); n > maxNoteContent+1 {
					t.Errorf("%q: %d runes", attack, n)
				}
			}
			// On macOS the text is the notifier's, cut to length.
			if other := desktopNote("darwin", n); !strings.HasPrefix(n.Content, strings.TrimSuffix(other.Content, "…")) {
				t.Errorf("%q: on macOS the content became %q", attack, other.Content)
			}
		}
	}
}

// onePowerShellString checks that src is exactly one PowerShell
// double-quoted string literal in which nothing is expanded: it ends at
// its last character, and holds no $ and no backtick escape. PowerShell
// ends such a string at " and at the typographic double quotes.
func onePowerShellString(src string) error {
	isQuote := func(r rune) bool { return r == '"' || r == '\u201C' || r == '\u201D' || r == '\u201E' }
	rs := []rune(src)
	if len(rs) < 2 || !isQuote(rs[0]) {
		return fmt.Errorf("does not start with a double quote")
	}
	for i := 1; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '$':
			return fmt.Errorf("a $ at %d would expand", i)
		case r == '`':
			return fmt.Errorf("a backtick escape at %d", i)
		case isQuote(r) && i != len(rs)-1:
			return fmt.Errorf("the string ends at %d, before the end: the rest runs as code", i)
		}
	}
	if !isQuote(rs[len(rs)-1]) {
		return fmt.Errorf("the string does not end")
	}
	return nil
}

// TestNotificationCannotCarryMarkup: on Linux a notification server may
// read the body as markup; a session's method name cannot put a link or
// an image in a notification that says it is Switchboard's.
func TestNotificationCannotCarryMarkup(t *testing.T) {
	attack := `<a href="https://evil.example/login">Switchboard: sign in again</a><img src="file:///etc/passwd"/>&amp;`
	s := fixture()
	s.InFlight = s.InFlight[:1]
	s.InFlight[0].Method = attack
	hung := 0
	for _, n := range newNotifier().check(s, t0.Add(time.Hour), 30*time.Second) {
		if !strings.HasPrefix(n.Title, "Request hung") {
			continue
		}
		hung++
		for _, goos := range []string{"linux", "freebsd"} {
			got := desktopNote(goos, n).Content
			if strings.ContainsAny(got, "<>&") {
				t.Errorf("%s: markup left in %q", goos, got)
			}
			if !strings.Contains(got, "‹a href=") {
				t.Errorf("%s: the text is not shown as text: %q", goos, got)
			}
		}
	}
	if hung != 1 {
		t.Fatalf("%d hung-request notifications, want 1", hung)
	}
}

// TestTrayMenuReloadReplacingAServer: a config reload removes one server
// and adds another, so the menu keeps its shape; a click on Restart or
// Stop in a submenu built for the removed server must never act on the
// new one. The menu is built again, and the new server's items act on it.
func TestTrayMenuReloadReplacingAServer(t *testing.T) {
	fake := newFake(fixture())
	u, tr, _, host, _ := testTray(t, fake)
	s := fixture()
	tr.apply(u, u.frameFor(s, t0, false))
	restart := host.find(t, "Restart") // in fake's submenu, the first
	stop := host.find(t, "Stop")

	// fake goes, git comes, in the same reload: two servers still.
	reloaded := fixture()
	reloaded.Servers[0] = pool.ServerInfo{Name: "git", State: pool.StateReady}
	reloaded.Backends[0].Server = "git"
	reloaded.Sessions, reloaded.InFlight = nil, nil
	tr.apply(u, u.frameFor(reloaded, t0.Add(time.Second), false))
	if tr.menu.rebuilds != 2 {
		t.Errorf("a server replaced by another: %d builds, want 2", tr.menu.rebuilds)
	}
	// An item still in the menu is clicked; one that was removed cannot be.
	for _, it := range []*fakeItem{restart, stop} {
		select {
		case _, open := <-it.ch:
			if !open {
				continue // removed: the click is lost, as it must be
			}
		default:
		}
		before := len(fake.recorded())
		it.ch <- struct{}{}
		runClick(t, u, host)
		waitUntil(t, 5*time.Second, "the click to act", func() bool { return len(fake.recorded()) > before })
	}
	for _, c := range fake.recorded() {
		if strings.HasSuffix(c, " git") {
			t.Errorf("a click on an item built for fake did %q", c)
		}
	}

	// The new server's own items act on it.
	host.find(t, "git — ready")
	host.find(t, "Restart").ch <- struct{}{}
	runClick(t, u, host)
	waitCalls(t, fake, "restart git")
}
