package ui

import (
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
)

func TestTrayMenu(t *testing.T) {
	s := fixture()
	got := trayMenu(s, summarize(s, t0, 30*time.Second, 2))
	sep := menuItem{Separator: true}
	want := []menuItem{
		{Label: "Sessions: 3", Disabled: true},
		{Label: "In flight: 3 (1 hung)", Disabled: true},
		{Label: "Children: 1", Disabled: true},
		{Label: "Leaked backends: 2", Disabled: true},
		sep,
		{Label: "Open dashboard", Action: menuAction{Kind: actDashboard}},
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
			{Label: "State: failed", Disabled: true},
			{Label: "PID: —", Disabled: true},
			{Label: "Sessions: 0", Disabled: true},
			{Label: "Error: crashed 5 times in 60s", Disabled: true},
			sep,
			{Label: "Restart", Action: menuAction{Kind: actRestart, Server: "memory"}},
			{Label: "Stop", Disabled: true, Action: menuAction{Kind: actStop, Server: "memory"}},
		}},
		sep,
		{Label: "Kill leaked backends (2)", Action: menuAction{Kind: actKillLeaks}},
		{Label: "Open config file", Action: menuAction{Kind: actOpenConfig}},
		{Label: "Open history", Action: menuAction{Kind: actHistory}},
		sep,
		{Label: "Start at login", Action: menuAction{Kind: actStartAtLogin}},
		{Label: "About Switchboard", Action: menuAction{Kind: actAbout}},
		{Label: "Restart Switchboard", Action: menuAction{Kind: actRestartApp}},
		{Label: "Quit", Action: menuAction{Kind: actQuit}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("trayMenu (-want +got):\n%s", d)
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
	want := []string{"Sessions: 0", "In flight: 0", "Children: 0", "Leaked backends: 0", "Open dashboard",
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

func TestNotifierOncePerRequestAndFailure(t *testing.T) {
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
	// Request 7 crosses the threshold; 9 is still hung and stays quiet.
	if d := cmp.Diff([]string{"Request hung on fake"}, titles(n.check(s, t0.Add(29*time.Second), hang))); d != "" {
		t.Errorf("later check (-want +got):\n%s", d)
	}
	// memory recovers, then fails again: a new notification.
	ok := fixture()
	ok.Backends[1].State = pool.StateReady
	ok.InFlight = nil
	if got := n.check(ok, t0, hang); len(got) != 0 {
		t.Errorf("recovery notified %v", titles(got))
	}
	failed := fixture()
	failed.InFlight = nil
	if d := cmp.Diff([]string{"Server memory failed"}, titles(n.check(failed, t0, hang))); d != "" {
		t.Errorf("second failure (-want +got):\n%s", d)
	}
	// Many hung at once share one notification.
	many := bigSnapshot(10, 50, 1)
	many.Backends = nil
	if d := cmp.Diff([]string{"50 requests hung"}, titles(newNotifier().check(many, t0.Add(time.Hour), hang))); d != "" {
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

func TestTrayIconAndMenuUpdates(t *testing.T) {
	u := New(nil, newFake(fixture()), nil)
	desk := &fakeTray{}
	dark := false
	var tips []string
	tr := &tray{desk: desk, icon: trayUnset, dark: func() bool { return dark }, setTooltip: func(s string) bool { tips = append(tips, s); return true }}

	idle := pool.Snapshot{TakenAt: t0}
	busy := fixture()
	busy.Servers[1].State = pool.StateReady
	busy.InFlight = busy.InFlight[1:] // nothing hung
	hung := fixture()

	tr.apply(u, u.frameFor(idle, t0, false))
	tr.apply(u, u.frameFor(busy, t0.Add(100*time.Millisecond), false)) // the menu waits a second
	tr.apply(u, u.frameFor(busy, t0.Add(1100*time.Millisecond), false))
	tr.apply(u, u.frameFor(busy, t0.Add(2200*time.Millisecond), false)) // unchanged: no rebuild
	dark = true
	tr.apply(u, u.frameFor(hung, t0.Add(3300*time.Millisecond), false))

	if d := cmp.Diff([]string{"tray-idle.png", "tray-busy.png", "tray-hung-dark.png"}, desk.icons); d != "" {
		t.Errorf("icons (-want +got):\n%s", d)
	}
	if len(desk.menus) != 3 {
		t.Fatalf("menu rebuilt %d times, want 3 (first, a second later, on hang)", len(desk.menus))
	}
	if got := desk.menus[1].Items[0].Label; got != "Sessions: 3" {
		t.Errorf("second menu starts with %q", got)
	}
	if want := "Switchboard: 3 sessions · 3 in flight (1 hung) · 1 child · 0 leaks · failed: memory"; tips[len(tips)-1] != want {
		t.Errorf("tooltip = %q, want %q", tips[len(tips)-1], want)
	}
}
