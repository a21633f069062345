//go:build !linux

package ui

// trayHostAvailable: Windows and macOS always have a tray (the
// notification area, the menu bar).
func trayHostAvailable() (bool, string) { return true, "" }
