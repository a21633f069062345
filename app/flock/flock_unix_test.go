//go:build unix

package flock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestLockIsExclusiveAndReleased(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	l, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WritePID(); err != nil {
		t.Fatal(err)
	}
	if got := ReadPID(path); got != os.Getpid() {
		t.Fatalf("ReadPID = %d, want %d", got, os.Getpid())
	}
	// flock locks belong to the open file description: a second open in
	// this process conflicts like another process would.
	if _, err := TryLock(path); !errors.Is(err, ErrHeld) {
		t.Fatalf("second TryLock: %v, want ErrHeld", err)
	}
	if _, err := Wait(path, time.Now().Add(50*time.Millisecond)); !errors.Is(err, ErrHeld) {
		t.Fatalf("Wait past deadline: %v, want ErrHeld", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := TryLock(path)
	if err != nil {
		t.Fatalf("after Unlock: %v", err)
	}
	l2.Unlock()
}

// A holder killed with SIGKILL leaves no lock behind.
func TestLockOfKilledProcessIsFree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	cmd := exec.Command("flock", path, "sleep", "60")
	// flock(1) hands the locked descriptor to sleep: kill them both.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Skipf("no flock(1): %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := TryLock(path)
		if errors.Is(err, ErrHeld) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		l.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("flock(1) never took the lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	l, err := Wait(path, time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatalf("lock of a killed holder: %v", err)
	}
	l.Unlock()
}
