package ui

import (
	"fmt"

	"github.com/godbus/dbus/v5"
)

// trayHostAvailable reports whether a StatusNotifierItem host is there to
// show the tray icon: a StatusNotifierWatcher owns its name on the session
// bus and a host has registered with it. It uses a private connection, so
// closing it leaves fyne's systray connection alone.
func trayHostAvailable() (bool, string) {
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		return false, fmt.Sprintf("no D-Bus session bus: %v", err)
	}
	defer conn.Close()
	const watcher = "org.kde.StatusNotifierWatcher"
	var owned bool
	if err := conn.BusObject().Call("org.freedesktop.DBus.NameHasOwner", 0, watcher).Store(&owned); err != nil {
		return false, fmt.Sprintf("ask the session bus for %s: %v", watcher, err)
	}
	if !owned {
		return false, "no StatusNotifierWatcher on the session bus"
	}
	v, err := conn.Object(watcher, "/StatusNotifierWatcher").GetProperty(watcher + ".IsStatusNotifierHostRegistered")
	if err != nil {
		return true, "" // an old watcher without the property: assume a host
	}
	if registered, ok := v.Value().(bool); ok && !registered {
		return false, "a StatusNotifierWatcher runs but no tray host has registered with it"
	}
	return true, ""
}
