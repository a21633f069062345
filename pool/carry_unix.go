//go:build unix

package pool

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// reopenInherited makes a file of a descriptor inherited across an exec:
// close-on-exec again, and non-blocking so that it goes through the
// runtime's poller (deadlines and Close work).
func reopenInherited(fd int, name string) *os.File {
	syscall.CloseOnExec(fd)
	_ = syscall.SetNonblock(fd, true)
	return os.NewFile(uintptr(fd), name)
}

func dupInheritable(fd int) (int, error) { return unix.Dup(fd) }
