//go:build unix

package flock

import (
	"errors"
	"os"
	"syscall"
)

func tryLock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrHeld
	}
	return err
}

func dupInheritable(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(u uintptr) { fd, derr = syscall.Dup(int(u)) }); err != nil {
		return -1, err
	}
	return fd, derr
}

func adoptFD(fd int, path string) (*os.File, error) {
	if fd < 3 {
		return nil, errors.New("bad inherited lock descriptor")
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), path), nil
}
