package ui

import (
	"fmt"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"

	"github.com/switchboard-mcp/switchboard/pool"
)

// actionKind says what a tray menu item does.
type actionKind uint8

const (
	actNone actionKind = iota
	actDashboard
	actRestart
	actStop
	actKillLeaks
	actOpenConfig
	actHistory
	actStartAtLogin
	actAbout
	actRestartApp
	actQuit
	actWaterfall // the live waterfall, at the oldest hung request if any
)

// menuAction is what a menu item does, as data, so the model stays
// comparable and testable.
type menuAction struct {
	Kind   actionKind
	Server string
}

// menuItem is one entry of the tray menu model.
type menuItem struct {
	Label     string
	Disabled  bool
	Checkable bool // a checkbox (Checked says how it is)
	Checked   bool
	Separator bool
	Action    menuAction
	Children  []menuItem
}

// trayMenu is the tray menu for a state of the pool: live counts, the
// dashboard, one submenu per server, leaks, config, history, quit. It is a
// pure function; the tray rebuilds the real menu only when it changes.
func trayMenu(s pool.Snapshot, sum summary) []menuItem {
	info := func(label string) menuItem { return menuItem{Label: label, Disabled: true} }
	sep := menuItem{Separator: true}
	inflight := fmt.Sprintf("In flight: %d", sum.InFlight)
	if sum.Hung > 0 {
		inflight += fmt.Sprintf(" (%d hung)", sum.Hung)
	}
	m := []menuItem{
		info("Sessions: " + strconv.Itoa(sum.Sessions)),
		info(inflight),
		info("Children: " + strconv.Itoa(sum.Children)),
		info("Leaked backends: " + sum.leakCount()),
		sep,
		{Label: "Open dashboard", Action: menuAction{Kind: actDashboard}},
		{Label: waterfallLabel(sum), Action: menuAction{Kind: actWaterfall}},
	}
	if len(s.Servers) > 0 {
		m = append(m, sep)
		for _, sv := range s.Servers {
			m = append(m, serverMenu(s, sv))
		}
	}
	m = append(m, sep,
		menuItem{Label: "Kill leaked backends (" + sum.killCount() + ")", Disabled: sum.Leaks < 0 || sum.Killable <= 0,
			Action: menuAction{Kind: actKillLeaks}},
		menuItem{Label: "Open config file", Action: menuAction{Kind: actOpenConfig}},
		menuItem{Label: "Open history", Action: menuAction{Kind: actHistory}},
		sep,
		menuItem{Label: "Start at login", Checkable: true, Checked: sum.StartAtLogin, Action: menuAction{Kind: actStartAtLogin}},
		menuItem{Label: "About Switchboard", Action: menuAction{Kind: actAbout}},
		menuItem{Label: "Restart Switchboard", Action: menuAction{Kind: actRestartApp}},
		menuItem{Label: "Quit", Action: menuAction{Kind: actQuit}},
	)
	return m
}

// waterfallLabel is the waterfall's menu item: it leads to the oldest
// hung request when there is one.
func waterfallLabel(sum summary) string {
	if sum.Hung > 0 {
		return "Show hung request: " + truncate(sum.HungWhat, 48)
	}
	return "Open waterfall"
}

// serverMenu is one server's submenu: its state and children, and the
// actions on it. Its sessions are counted from the snapshot's sessions,
// as the overview and status count them: a stopped server's sessions
// stay attached with no child to count them.
func serverMenu(s pool.Snapshot, sv pool.ServerInfo) menuItem {
	var pids []string
	for _, b := range s.Backends {
		if b.Server == sv.Name && b.PID > 0 {
			pids = append(pids, strconv.Itoa(b.PID))
		}
	}
	sessions := 0
	for _, ss := range s.Sessions {
		if ss.Server == sv.Name {
			sessions++
		}
	}
	stateWord := sv.State
	if sv.Draining { // removed from the config, finishing its calls
		stateWord += ", draining"
	}
	label := sv.Name + " — " + stateWord
	if len(pids) == 1 {
		label += ", PID " + pids[0]
	}
	pidLabel := "PID: —"
	switch {
	case len(pids) == 1:
		pidLabel = "PID: " + pids[0]
	case len(pids) > 1:
		pidLabel = "PIDs: " + strings.Join(pids, ", ")
	}
	// The error is part of the state's label, not an item of its own: a
	// server failing or recovering keeps the menu's shape, so the menu is
	// updated in place and a click on it opened just before still lands.
	state := "State: " + stateWord
	if sv.Error != "" {
		state += " (error: " + truncate(sv.Error, 80) + ")"
	}
	children := []menuItem{
		{Label: state, Disabled: true},
		{Label: pidLabel, Disabled: true},
		{Label: "Sessions: " + strconv.Itoa(sessions), Disabled: true},
	}
	off := sv.Disabled || sv.Draining
	children = append(children, menuItem{Separator: true},
		menuItem{Label: "Restart", Disabled: off, Action: menuAction{Kind: actRestart, Server: sv.Name}},
		menuItem{Label: "Stop", Disabled: off || len(pids) == 0, Action: menuAction{Kind: actStop, Server: sv.Name}},
	)
	return menuItem{Label: label, Children: children}
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// fyneMenu turns the model into the menu fyne hands to the system tray;
// do runs an item's action on the UI goroutine.
func fyneMenu(items []menuItem, do func(menuAction)) *fyne.Menu {
	return fyne.NewMenu("Switchboard", fyneItems(items, do)...)
}

func fyneItems(items []menuItem, do func(menuAction)) []*fyne.MenuItem {
	out := make([]*fyne.MenuItem, 0, len(items))
	for _, it := range items {
		if it.Separator {
			out = append(out, fyne.NewMenuItemSeparator())
			continue
		}
		mi := fyne.NewMenuItem(it.Label, nil)
		mi.Disabled = it.Disabled
		mi.Checked = it.Checked
		if a := it.Action; a.Kind != actNone {
			mi.Action = func() { do(a) }
		}
		if a := it.Action; a.Kind == actQuit {
			mi.IsQuit = true
		}
		if len(it.Children) > 0 {
			mi.ChildMenu = fyne.NewMenu("", fyneItems(it.Children, do)...)
		}
		out = append(out, mi)
	}
	return out
}

// trayState is what the tray icon shows.
type trayState uint8

const (
	trayIdle trayState = iota
	trayBusy
	trayHung
	trayUnset trayState = 255 // no icon set yet
)

// iconState picks the icon: hung when a request is past the threshold or
// a server failed, busy while anything is in flight, else idle.
func iconState(sum summary) trayState {
	switch {
	case sum.Hung > 0 || len(sum.Failed) > 0:
		return trayHung
	case sum.InFlight > 0:
		return trayBusy
	}
	return trayIdle
}
