//go:build unix

package safefile

import "syscall"

const openNonBlock = syscall.O_NONBLOCK
