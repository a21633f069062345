//go:build unix

package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// lockWriter takes the writer's lock: an exclusive flock on a file next to
// the database. The OS releases it when the process dies, even by
// SIGKILL, so a run that holds no lock is certainly over. A second writer
// waits up to wait (a CLI may be probing) and then gets ErrLocked.
func lockWriter(path string, wait time.Duration) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, ErrLocked
			}
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writerAlive reports whether some process holds the writer's lock. The
// probe takes a shared lock for an instant and releases it.
func writerAlive(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
