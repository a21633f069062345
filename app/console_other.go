//go:build !windows

package app

// hideOwnConsole matters on Windows only (console_windows.go).
func hideOwnConsole() {}
