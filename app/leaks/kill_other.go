//go:build !unix

package leaks

import (
	"errors"
	"os"
)

// pgid is 0: there are no process groups to signal here.
func pgid(int) int { return 0 }

// sid is 0: there are no sessions here.
func sid(int) int { return 0 }

// signalGroup is never called: pgid is never the PID.
func signalGroup(int, bool) error { return errors.New("process groups are not supported on this OS") }

// signalOne can only terminate outright: there is no SIGTERM.
func signalOne(pid int, _ bool) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
