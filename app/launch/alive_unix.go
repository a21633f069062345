//go:build unix

package launch

import (
	"errors"
	"syscall"
)

// processAlive reports whether process pid exists (signal 0 checks
// without sending anything; EPERM means it exists as another user's).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
