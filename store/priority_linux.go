package store

import (
	"runtime"
	"syscall"
)

// writerNice is the writer thread's nice value. History is background
// work: when the CPUs are busy routing calls, the writer's SQLite work
// waits for them rather than delaying a call by a batch's few
// milliseconds (on two cores, a commit of 100 ms of 64 x 8 traffic). Its
// weight against routing threads (about a third) keeps it far above what
// the heaviest load needs, so it does not fall behind.
const writerNice = 5

// lowerWriterPriority locks the calling goroutine (the writer's) to its
// thread and lowers that thread's priority. Linux gives each thread its
// own nice value; the thread ends with the goroutine (it is never
// unlocked), so no other goroutine runs at the lowered priority.
func lowerWriterPriority() {
	runtime.LockOSThread()
	// An error leaves the thread at normal priority: slower under load,
	// never wrong.
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), writerNice)
}
