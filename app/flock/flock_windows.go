//go:build windows

package flock

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

func tryLock(f *os.File) error {
	var ol windows.Overlapped
	err := windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return ErrHeld
	}
	return err
}

func dupInheritable(*os.File) (int, error) {
	return -1, errors.New("a lock cannot be passed over an exec here")
}

func adoptFD(int, string) (*os.File, error) {
	return nil, errors.New("a lock cannot be passed over an exec here")
}
