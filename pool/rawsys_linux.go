package pool

import (
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawRead is read(2) without entersyscall, for non-blocking descriptors
// only (direct_unix.go says why).
func rawRead(fd int, p []byte) (int, syscall.Errno) {
	r, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(r), 0
}

// writevLine is writev(2) of line and a newline in one system call,
// without entersyscall, for non-blocking descriptors only.
func writevLine(fd int, line []byte) (int, error) {
	nl := [1]byte{'\n'}
	var iov [2]unix.Iovec
	k := 0
	if len(line) > 0 {
		iov[k].Base = &line[0]
		iov[k].SetLen(len(line))
		k++
	}
	iov[k].Base = &nl[0]
	iov[k].SetLen(1)
	k++
	r, _, errno := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(k))
	runtime.KeepAlive(line)
	runtime.KeepAlive(&nl)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
