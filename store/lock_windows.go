//go:build windows

package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/windows"
)

// lockWriter takes the writer's lock: an exclusive LockFileEx on a file
// next to the database, released by the OS when the process dies. A second
// writer waits up to wait and then gets ErrLocked.
func lockWriter(path string, wait time.Duration) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		err = lockFile(f, windows.LOCKFILE_EXCLUSIVE_LOCK)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, windows.ERROR_LOCK_VIOLATION) || time.Now().After(deadline) {
			f.Close()
			if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
				return nil, ErrLocked
			}
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func lockFile(f *os.File, flags uint32) error {
	var ol windows.Overlapped
	return windows.LockFileEx(windows.Handle(f.Fd()), flags|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
}

// writerAlive reports whether some process holds the writer's lock.
func writerAlive(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := lockFile(f, 0); err != nil {
		return errors.Is(err, windows.ERROR_LOCK_VIOLATION)
	}
	var ol windows.Overlapped
	_ = windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &ol)
	return false
}
