package ui

import (
	"sync/atomic"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/systray"

	"github.com/switchboard-mcp/switchboard/assets"
)

// tray is the system tray icon and menu, driven through fyne's
// desktop.App (fyne runs fyne.io/systray). fyne starts the tray with a
// first menu and sets the icon; the menu's items are then kept in place
// by a liveMenu, and the tooltip set (fyne has no API for either). All of
// it happens on the UI goroutine, where fyne builds its own menus:
// systray does not survive a menu built by two goroutines at once. Its
// fields belong to the UI goroutine.
type tray struct {
	desk       trayDriver
	dark       func() bool
	icon       trayState
	isDark     bool
	started    bool
	menu       *liveMenu
	setTooltip func(string) bool // false: not yet, try again later
	tooltip    string
}

var trayIcons = map[bool]map[trayState]fyne.Resource{
	false: {
		trayIdle: fyne.NewStaticResource("tray-idle.png", assets.TrayIdle),
		trayBusy: fyne.NewStaticResource("tray-busy.png", assets.TrayBusy),
		trayHung: fyne.NewStaticResource("tray-hung.png", assets.TrayHung),
	},
	true: {
		trayIdle: fyne.NewStaticResource("tray-idle-dark.png", assets.TrayIdleDark),
		trayBusy: fyne.NewStaticResource("tray-busy-dark.png", assets.TrayBusyDark),
		trayHung: fyne.NewStaticResource("tray-hung-dark.png", assets.TrayHungDark),
	},
}

// trayDriver is the part of fyne's desktop.App the tray uses.
type trayDriver interface {
	SetSystemTrayMenu(*fyne.Menu)
	SetSystemTrayIcon(fyne.Resource)
}

// AppIcon is Switchboard's application icon, for the fyne app and its
// windows.
var AppIcon = fyne.NewStaticResource("icon.png", assets.Icon)

// StartTray puts the icon and menu in the system tray. It reports false,
// and logs once, when the platform has no tray or no tray host is running
// (a bare X server, GNOME without an AppIndicator extension): the app then
// keeps running without one. A click on the icon opens the dashboard, or
// the waterfall at the oldest hung request; the menu is on the other
// button. UI goroutine only, after Start, before or after the app runs.
func (u *UI) StartTray() bool {
	desk, ok := u.app.(desktop.App)
	if !ok {
		u.log.Warn("this platform has no system tray; the dashboard is the only window")
		return false
	}
	host, why := trayHostAvailable()
	if !host {
		u.log.Warn("no system tray host found; Switchboard keeps running without a tray icon, "+
			"with its dashboard open (run `switchboard` again to bring it back after closing it)", "why", why)
	}
	// The tooltip goes to systray directly, which must be running by then:
	// fyne starts it as the app starts.
	var running atomic.Bool
	u.app.Lifecycle().SetOnStarted(func() {
		running.Store(true)
		u.requestRedraw()
	})
	// Before fyne starts systray: an item with a tap handler is not a
	// menu, so a click activates it (the menu stays on the other button).
	systray.SetOnTapped(func() { fyne.Do(u.trayTapped) })
	t := u.newTray(desk, systrayHost{}, func(tip string) bool {
		if !running.Load() {
			return false
		}
		systray.SetTooltip(tip)
		return true
	})
	u.app.Settings().AddListener(func(fyne.Settings) { u.requestRedraw() })
	if u.last != nil {
		t.apply(u, u.last)
	} else {
		t.apply(u, u.frameFor(u.ctrl.Snapshot(), time.Now(), false))
	}
	return host
}

// newTray makes the tray over a desktop driver and a menu host.
func (u *UI) newTray(desk trayDriver, host trayHost, setTooltip func(string) bool) *tray {
	t := &tray{desk: desk, icon: trayUnset, setTooltip: setTooltip,
		dark: func() bool { return u.app.Settings().ThemeVariant() == theme.VariantDark }}
	t.menu = &liveMenu{host: host, wg: &u.wg, done: u.ctx.Done(),
		do:   func(a menuAction) { fyne.Do(func() { u.menuDo(a) }) },
		wake: u.requestRedraw}
	u.tray = t
	return t
}

// trayTapped is a click on the icon: the waterfall at the oldest hung
// request, else the dashboard. UI goroutine.
func (u *UI) trayTapped() {
	if f := u.last; f != nil && f.sum.Hung > 0 {
		u.showWaterfallAt(f.sum.HungServer, f.sum.HungKey)
		return
	}
	u.showDashboard("")
}

// apply shows f's icon, menu and tooltip. The first menu goes through
// fyne, which starts the tray with it; the liveMenu then takes the items
// over. UI goroutine.
func (t *tray) apply(u *UI, f *frame) {
	if !t.started {
		t.started = true
		t.desk.SetSystemTrayMenu(fyneMenu(f.menu, u.menuDo))
	}
	dark := t.dark()
	if f.icon != t.icon || dark != t.isDark {
		t.icon, t.isDark = f.icon, dark
		t.desk.SetSystemTrayIcon(trayIcons[dark][f.icon])
	}
	t.menu.apply(f.menu)
	if tip := trayTooltip(f.sum); tip != t.tooltip && t.setTooltip(tip) {
		t.tooltip = tip
	}
}

// trayTooltip sums the state up: the counts, and what is hung and why.
func trayTooltip(sum summary) string {
	tip := "Switchboard: " + sum.String()
	if sum.Hung > 0 {
		tip += "\nHung: " + sum.HungWhat + "." + whySentence(sum.HungWhy) + " Click to see it in the waterfall."
	}
	return tip
}
