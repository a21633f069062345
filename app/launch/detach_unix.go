//go:build unix

package launch

import "syscall"

// detached puts the pool in a session of its own: a client that kills its
// process group on exit (most do) does not take the pool with it.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// hidden is nil: nothing opens a window for a Unix program.
func hidden() *syscall.SysProcAttr { return nil }
