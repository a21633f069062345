//go:build !windows

package app

import (
	"context"
	"errors"
	"syscall"
	"time"
)

// waitExit waits until process pid has exited, or ctx ends.
func waitExit(ctx context.Context, pid int) error {
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
