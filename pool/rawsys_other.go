//go:build unix && !linux

package pool

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// rawRead is read(2) made the usual way: only on Linux does the pool
// make raw system calls.
func rawRead(fd int, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(fd, p)
	var errno syscall.Errno
	if err != nil && !errors.As(err, &errno) {
		return 0, syscall.EIO
	}
	return max(n, 0), errno
}

// writevLine is writev(2) of line and a newline in one system call.
func writevLine(fd int, line []byte) (int, error) {
	return unix.Writev(fd, [][]byte{line, {'\n'}})
}
