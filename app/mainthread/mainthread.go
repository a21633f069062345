// Package mainthread runs functions on the process's main OS thread. The
// pool forks every child there (pool.StartOn) because Linux ties a
// child's Pdeathsig to the thread that forked it, and an in-place upgrade
// execs from there: the exec keeps only the calling thread, so only
// children forked on it outlive the exec, and after it that thread is the
// new program's main thread again.
package mainthread

import "runtime"

func init() {
	// main.main then runs on the main thread, for Serve (and fyne, which
	// needs it for its event loop, asks the same).
	runtime.LockOSThread()
}

var calls = make(chan func())

// Do runs f on the main thread, whose goroutine waits in Serve, and
// returns when f has.
func Do(f func()) {
	done := make(chan struct{})
	calls <- func() {
		defer close(done)
		f()
	}
	<-done
}

// Serve runs Do's functions on the calling goroutine, which must be on
// the main thread (IsMain), until until is closed.
func Serve(until <-chan struct{}) {
	for {
		select {
		case f := <-calls:
			f()
		case <-until:
			return
		}
	}
}
