package pool

import "syscall"

// sysProcAttr puts the child in its own process group and asks the kernel
// to SIGKILL it if the thread that started it dies. The thread is the
// child's waiter goroutine's, locked to it for the child's whole life (see
// child.run), because Pdeathsig follows the thread, not the process.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
