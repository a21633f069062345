package ui

import (
	"reflect"
	"sync/atomic"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/systray"

	"github.com/switchboard-mcp/switchboard/assets"
)

// menuEvery bounds how often the tray menu is rebuilt: fyne rebuilds the
// whole menu over D-Bus each time, and the counts in it change with every
// request.
const menuEvery = time.Second

// tray is the system tray icon and menu, driven through fyne's
// desktop.App (fyne runs fyne.io/systray; only the tooltip, which fyne
// lacks, goes to systray directly). Its fields belong to the UI goroutine.
type tray struct {
	desk       trayDriver
	dark       func() bool
	setTooltip func(string) bool // false: not yet, try again later

	items   []menuItem
	icon    trayState
	isDark  bool
	started bool
	menuAt  time.Time
	tooltip string
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
// keeps running without one. UI goroutine only, before or after the app
// runs.
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
	u.tray = &tray{desk: desk, icon: trayUnset,
		dark: func() bool { return u.app.Settings().ThemeVariant() == theme.VariantDark },
		setTooltip: func(tip string) bool {
			if !running.Load() {
				return false
			}
			systray.SetTooltip(tip)
			return true
		}}
	u.app.Settings().AddListener(func(fyne.Settings) { u.requestRedraw() })
	if u.last != nil {
		u.tray.apply(u, u.last)
	} else {
		u.tray.apply(u, u.frameFor(u.ctrl.Snapshot(), time.Now(), false))
	}
	return host
}

// apply shows f's icon and menu, rebuilding the menu only when it changed
// and at most every menuEvery (a later frame carries the change).
func (t *tray) apply(u *UI, f *frame) {
	// The first menu starts fyne's systray; the icon follows.
	if !t.started || (f.now.Sub(t.menuAt) >= menuEvery && !reflect.DeepEqual(f.menu, t.items)) {
		t.items, t.menuAt, t.started = f.menu, f.now, true
		t.desk.SetSystemTrayMenu(fyneMenu(f.menu, u.menuDo))
	}
	dark := t.dark()
	if f.icon != t.icon || dark != t.isDark {
		t.icon, t.isDark = f.icon, dark
		t.desk.SetSystemTrayIcon(trayIcons[dark][f.icon])
	}
	if tip := "Switchboard: " + f.sum.String(); tip != t.tooltip && t.setTooltip(tip) {
		t.tooltip = tip
	}
}
