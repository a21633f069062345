//go:build unix

package leaks

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// pgid is pid's process group, or 0 if it cannot be read.
func pgid(pid int) int {
	g, err := syscall.Getpgid(pid)
	if err != nil {
		return 0
	}
	return g
}

// sid is pid's session, or 0 if it cannot be read.
func sid(pid int) int {
	s, err := unix.Getsid(pid)
	if err != nil {
		return 0
	}
	return s
}

// signalGroup sends SIGTERM (term) or SIGKILL to process group pgid. A
// group that is already empty is not an error.
func signalGroup(pgid int, term bool) error {
	err := syscall.Kill(-pgid, sig(term))
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// signalOne sends SIGTERM (term) or SIGKILL to one process. A process that
// is already gone is not an error.
func signalOne(pid int, term bool) error {
	err := syscall.Kill(pid, sig(term))
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

func sig(term bool) syscall.Signal {
	if term {
		return syscall.SIGTERM
	}
	return syscall.SIGKILL
}
