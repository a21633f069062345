// Package flock takes advisory whole-file locks that the operating system
// releases when their holder dies, however it dies. Switchboard uses them
// for "one pool per home" and "one client starts it": a lock left by a
// process killed with SIGKILL is gone with it, so no one ever waits on a
// stale one.
package flock

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// ErrHeld means another live process holds the lock.
var ErrHeld = errors.New("lock held by another process")

// Lock is a held lock; Unlock (or the process's death) releases it.
type Lock struct{ f *os.File }

// TryLock takes the exclusive lock on path (created 0600 if missing)
// without waiting: ErrHeld when another process has it.
func TryLock(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := tryLock(f); err != nil {
		f.Close()
		if errors.Is(err, ErrHeld) {
			return nil, err
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Wait takes the lock, polling until deadline; past it, ErrHeld.
func Wait(path string, deadline time.Time) (*Lock, error) {
	for {
		l, err := TryLock(path)
		if !errors.Is(err, ErrHeld) || time.Now().After(deadline) {
			return l, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WritePID records the holder's PID in the lock file, for messages such
// as "already running (pid N)". Readers use ReadPID.
func (l *Lock) WritePID() error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt([]byte(fmt.Sprintf("%d\n", os.Getpid())), 0)
	return err
}

// Unlock releases the lock.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// ReadPID returns the PID the holder of path wrote, or 0.
func ReadPID(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	var pid int
	if _, err := fmt.Sscanf(string(data), "%d", &pid); err != nil {
		return 0
	}
	return pid
}

// Inheritable returns a new descriptor of the held lock that an exec
// passes on (it has no close-on-exec flag): the upgraded program adopts
// the lock with Adopt, and the home is never without its pool's lock.
func (l *Lock) Inheritable() (int, error) {
	if l == nil || l.f == nil {
		return -1, errors.New("the lock is not held")
	}
	return dupInheritable(l.f)
}

// Adopt takes over a lock whose descriptor fd was inherited across an
// exec (Inheritable), making it close-on-exec again.
func Adopt(fd int, path string) (*Lock, error) {
	f, err := adoptFD(fd, path)
	if err != nil {
		return nil, err
	}
	if err := tryLock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("adopt lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}
