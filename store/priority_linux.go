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

// runAtLowerPriority runs f (the writer's loop) locked to a thread of its
// own whose priority it lowers. Linux gives each thread its own nice
// value, and the thread ends with f's goroutine (it is never unlocked), so
// no other goroutine ever runs at the lowered priority.
//
// The process's main thread is the exception: Go never ends it, and a
// goroutine that exits locked to it leaves it parked for good, at
// whatever priority it had. So f never runs there: a call that finds
// itself on the main thread keeps it while f runs in a goroutine of its
// own, which the scheduler must then place on another thread, and gives
// it back, untouched, when f returns. (In the product, fyne keeps the
// main thread for the main goroutine, so this happens only elsewhere,
// for example in tests.)
func runAtLowerPriority(f func()) {
	runtime.LockOSThread()
	if syscall.Gettid() == syscall.Getpid() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			runAtLowerPriority(f)
		}()
		<-done
		runtime.UnlockOSThread()
		return
	}
	// An error leaves the thread at normal priority: slower under load,
	// never wrong.
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), writerNice)
	f()
}
