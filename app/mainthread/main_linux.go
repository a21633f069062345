package mainthread

import (
	"os"
	"syscall"
)

// IsMain reports whether the caller runs on the process's main thread:
// on Linux, the thread whose id is the process id.
func IsMain() bool { return syscall.Gettid() == os.Getpid() }
