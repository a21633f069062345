package accept

import (
	"syscall"

	"golang.org/x/sys/windows"
)

// platformTemporary: Winsock's own numbers for what Temporary names (the
// syscall package's EMFILE and the like are invented on Windows).
func platformTemporary(errno syscall.Errno) bool {
	switch errno {
	case windows.WSAEMFILE, windows.WSAENOBUFS, windows.WSAECONNABORTED, windows.WSAEINTR:
		return true
	}
	return false
}
