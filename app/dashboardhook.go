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
