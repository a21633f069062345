//go:build windows

package launch

import (
	"errors"

	"golang.org/x/sys/windows"
)

// processAlive reports whether process pid is still running.
func processAlive(pid int) bool {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return errors.Is(err, windows.ERROR_ACCESS_DENIED) // it exists, as someone else's
	}
	defer windows.CloseHandle(h)
	var code uint32
	return windows.GetExitCodeProcess(h, &code) == nil && code == stillActive
}

// stillActive is GetExitCodeProcess's code for a process that has not
// exited (STILL_ACTIVE).
const stillActive = 259
