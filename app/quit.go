package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/switchboard-mcp/switchboard/app/control"
)

// Quit stops the pool as the tray's Quit does (control.Backend): a
// planned stop, its sessions handed back to their connects. `switchboard
// quit` asks for it, the Windows uninstaller among others: the program's
// files can go once its process has exited. A pool already stopping
// accepts too; one upgrading refuses, as its successor would keep
// running.
func (inst *Instance) Quit() (control.QuitAccepted, func(), error) {
	inst.mu.Lock()
	stop, upgrading := inst.stopRun, inst.upgrade != nil
	inst.mu.Unlock()
	if upgrading {
		return control.QuitAccepted{}, nil, fmt.Errorf("%w: it is upgrading; ask again once it has", control.ErrConflict)
	}
	if stop == nil {
		stop = func() {} // stopping already
	}
	inst.log.Info("asked to quit: stopping")
	return control.QuitAccepted{PID: os.Getpid()}, stop, nil
}

// quitWait bounds how long `switchboard quit` waits for the pool's
// process to exit, as the other actions wait for the pool.
const quitWait = time.Minute

// Quit is `switchboard quit`: the running pool stops as on the tray's
// Quit, and Quit returns its PID once that process has exited. With no
// pool running it returns ErrNoPool.
func Quit(ctx context.Context) (int, error) {
	c, err := Control()
	if err != nil {
		return 0, err
	}
	acc, err := c.Quit(ctx)
	if err != nil {
		if errors.Is(err, ErrNoPool) {
			return 0, err
		}
		return 0, fmt.Errorf("quit: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, quitWait)
	defer cancel()
	if err := waitExit(ctx, acc.PID); err != nil {
		return acc.PID, fmt.Errorf("quit: Switchboard (pid %d) is still running: %w", acc.PID, err)
	}
	return acc.PID, nil
}
