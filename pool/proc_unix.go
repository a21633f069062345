//go:build unix

package pool

import (
	"errors"
	"syscall"
	"time"
)

// signalGroup signals the child's whole process group (the child is its
// leader), so `npx` -> `npm exec` -> `node` chains die together.
func signalGroup(pid int, sig syscall.Signal) error {
	if pid <= 0 {
		return errors.New("no process")
	}
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		// The group is gone; the leader may linger as a zombie until Wait.
		err = syscall.Kill(pid, sig)
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
	}
	return err
}

func terminate(pid int) error { return signalGroup(pid, syscall.SIGTERM) }
func kill(pid int) error      { return signalGroup(pid, syscall.SIGKILL) }

// killOrphans kills what is left of the process group of a leader that
// was waited for: the group only, never the leader's PID, which may
// belong to another process by now.
func killOrphans(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// terminateGroup asks what is left of a helper's process group to end,
// the group only, as killOrphans does.
func terminateGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
	}
}

// Grace periods of the MCP stdio shutdown: after closing stdin, and after
// SIGTERM.
var (
	stdinGrace   = 2 * time.Second
	sigtermGrace = 2 * time.Second
)

// adopt and release are no-ops on Unix: the process group set up by
// sysProcAttr is the child's tree.
func adopt(int) error { return nil }
func release(int)     {}
