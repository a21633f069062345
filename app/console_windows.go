//go:build windows

package app

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

var (
	kernel32                  = windows.NewLazySystemDLL("kernel32.dll")
	procGetConsoleProcessList = kernel32.NewProc("GetConsoleProcessList")
	procFreeConsole           = kernel32.NewProc("FreeConsole")
)

// hideOwnConsole lets go of a console window Windows opened only for this
// process: switchboard.exe is a console program (the CLI prints to its
// terminal), so starting the tray from the Start menu opens one. When a
// terminal started it, the console is shared and stays.
func hideOwnConsole() {
	var pids [2]uint32
	n, _, _ := procGetConsoleProcessList.Call(uintptr(unsafe.Pointer(&pids[0])), 2)
	if n == 1 {
		_, _, _ = procFreeConsole.Call()
	}
}
