package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/switchboard-mcp/switchboard/app/control"
)

// needDisplay tells whether a window can open here at all (without one,
// fyne would abort the process).
func needDisplay() error {
	if runtime.GOOS != "linux" && runtime.GOOS != "freebsd" && runtime.GOOS != "openbsd" && runtime.GOOS != "netbsd" {
		return nil
	}
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return errors.New("no display (neither DISPLAY nor WAYLAND_DISPLAY is set)")
	}
	return nil
}

// setDashboard gives the instance its UI's ShowDashboard, for the control
// API's POST /v1/dashboard; nil takes it away. A headless instance has
// none.
func (inst *Instance) setDashboard(show func()) {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	inst.showDashboard = show
}

// ShowDashboard shows this instance's dashboard (control.Backend): a
// second `switchboard` launch asks for it.
func (inst *Instance) ShowDashboard() error {
	inst.mu.Lock()
	show := inst.showDashboard
	inst.mu.Unlock()
	if show == nil {
		return control.ErrHeadless
	}
	show()
	return nil
}

// askForDashboard asks the running instance to show its dashboard.
func askForDashboard(ctx context.Context) error {
	c, err := Control()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.ShowDashboard(ctx); err != nil {
		return fmt.Errorf("ask for the dashboard: %w", err)
	}
	return nil
}

// MakeWay stops a headless pool that a client started, for the tray app
// the user launched, which takes its place (control.Backend): the pool
// stops as on SIGTERM, handing its sessions back to their connects, which
// resume them with the tray's pool. A pool run headless on purpose
// (`switchboard serve`, the systemd unit, a tray without a display that
// no client started) keeps running: an error that Is control.ErrConflict
// says so.
func (inst *Instance) MakeWay() (stop func(), err error) {
	inst.mu.Lock()
	switch {
	case inst.showDashboard != nil:
		err = errors.New("it shows its own dashboard")
	case !inst.exitWhenIdle:
		err = errors.New("it runs headless on purpose (`switchboard serve`, or the systemd user service)")
	case inst.upgrade != nil || inst.stopRun == nil:
		err = errors.New("it is stopping")
	}
	stop = inst.stopRun
	inst.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", control.ErrConflict, err)
	}
	inst.log.Info("making way for the tray app: stopping; the sessions resume with its pool")
	return stop, nil
}
