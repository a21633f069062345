//go:build !windows

package accept

import "syscall"

func platformTemporary(syscall.Errno) bool { return false }
