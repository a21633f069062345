//go:build unix && !linux

package pool

import "syscall"

// sysProcAttr puts the child in its own process group. There is no
// parent-death signal outside Linux: children notice the pool's death by
// EOF on stdin, and the startup sweep reports any that did not exit.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
