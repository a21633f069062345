//go:build windows

package launch

import (
	"syscall"

	"golang.org/x/sys/windows"
)

// detached gives the pool no console and a process group of its own, so
// that closing the client's console does not end it.
func detached() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.DETACHED_PROCESS, HideWindow: true}
}

// hidden runs a console program without a console window (see HiddenAttr).
func hidden() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: windows.CREATE_NO_WINDOW}
}
