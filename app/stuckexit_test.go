//go:build !headless

package app

import (
	"testing"
	"time"
)

// The process ends when the window toolkit does not stop after the pool
// has, and only then.
func TestExitUnlessStopped(t *testing.T) {
	stopped := make(chan struct{})
	close(stopped)
	exitUnlessStopped(stopped, time.Hour, func() { t.Error("exit called although the toolkit stopped") })

	exited := make(chan struct{})
	go exitUnlessStopped(make(chan struct{}), time.Millisecond, func() { close(exited) })
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("exit not called for a toolkit that never stopped")
	}
}
