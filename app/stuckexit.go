//go:build !headless

package app

import "time"

// fyneStopWait is how long the window toolkit gets to stop once the pool
// has: fyne 2.8's shutdown can deadlock on itself (a lifecycle event
// queued for the main loop just as the loop drains and closes its queue
// waits for ever, and so does the driver's Run, waiting for that event).
// The pool is already closed then, children and history included, so the
// process ends instead of hanging.
const fyneStopWait = 5 * time.Second

// exitUnlessStopped calls exit unless stopped is closed within wait. It
// returns once one of the two has happened.
func exitUnlessStopped(stopped <-chan struct{}, wait time.Duration, exit func()) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		exit()
	}
}
