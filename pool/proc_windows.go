//go:build windows

package pool

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// jobs holds one Job Object per child, by PID. The pool holds the handles,
// so when the pool dies for any reason the kernel closes them and
// JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE kills every process in each job.
var (
	jobsMu sync.Mutex
	jobs   = map[int]windows.Handle{}
)

// sysProcAttr starts the child in its own process group, away from the
// pool's console Ctrl+C, and without a console window: MCP servers are
// console programs (node, python, cmd for npx.cmd), and a pool with no
// console of its own (the tray started from the Start menu, which lets its
// console go; a pool a client started, or a restarted one, both detached)
// would otherwise open a visible console window for each child.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.CREATE_NO_WINDOW}
}

// adopt puts a just-started child into a new kill-on-close Job Object;
// processes it starts later join the job too. A child that spawns before
// adopt runs can leave that early descendant outside the job.
func adopt(pid int) error {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return fmt.Errorf("create job object: %w", err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{}
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return fmt.Errorf("set job object limits: %w", err)
	}
	proc, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		windows.CloseHandle(job)
		return fmt.Errorf("open process %d: %w", pid, err)
	}
	defer windows.CloseHandle(proc)
	if err := windows.AssignProcessToJobObject(job, proc); err != nil {
		windows.CloseHandle(job)
		return fmt.Errorf("assign process %d to job: %w", pid, err)
	}
	jobsMu.Lock()
	jobs[pid] = job
	jobsMu.Unlock()
	return nil
}

// release closes the child's job once the child has exited; kill-on-close
// ends any descendants still in it.
func release(pid int) {
	jobsMu.Lock()
	job, ok := jobs[pid]
	delete(jobs, pid)
	jobsMu.Unlock()
	if ok {
		windows.CloseHandle(job)
	}
}

// killTree ends every process in the child's job.
func killTree(pid int) error {
	jobsMu.Lock()
	job, ok := jobs[pid]
	jobsMu.Unlock()
	if !ok {
		if pid <= 0 {
			return errors.New("no process")
		}
		return nil // already released: the tree is gone
	}
	if err := windows.TerminateJobObject(job, 1); err != nil {
		return fmt.Errorf("terminate job of %d: %w", pid, err)
	}
	return nil
}

// Windows has no SIGTERM: after the stdin grace the tree is terminated.
func terminate(pid int) error { return killTree(pid) }
func kill(pid int) error      { return killTree(pid) }

// terminateGroup ends a helper's tree: Windows has no SIGTERM.
func terminateGroup(pid int) { _ = killTree(pid) }

// killOrphans ends what is left of a child's tree: its job object.
func killOrphans(pid int) { _ = killTree(pid) }

// Grace periods of the MCP stdio shutdown: after closing stdin, and after
// terminate (which already ends the tree on Windows).
var (
	stdinGrace   = 2 * time.Second
	sigtermGrace = 2 * time.Second
)
