package app

import (
	"context"
	"errors"

	"golang.org/x/sys/windows"
)

// waitExit waits until process pid has exited, or ctx ends.
func waitExit(ctx context.Context, pid int) error {
	h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, uint32(pid))
	if errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
		return nil // no such process: it has exited
	}
	if err != nil {
		return err
	}
	defer windows.CloseHandle(h)
	for {
		ev, err := windows.WaitForSingleObject(h, 50)
		switch {
		case err != nil:
			return err
		case ev == windows.WAIT_OBJECT_0:
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
