package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/app/config"
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
// resume them with the tray's pool. The answer is the environment that
// pool is to run with: this one's, with the app's desktop variables
// (req.Desktop, withDesktop). A pool run headless on purpose
// (`switchboard serve`, the systemd unit, a tray without a display that
// no client started) keeps running, and so does one with a server that
// would not start in that environment: an error that Is
// control.ErrConflict says why.
func (inst *Instance) MakeWay(req control.MakeWayRequest) (acc control.MakeWayAccepted, stop func(), err error) {
	env := withDesktop(os.Environ(), req.Desktop)
	inst.mu.Lock()
	switch {
	case inst.showDashboard != nil:
		err = errors.New("it shows its own dashboard")
	case !inst.exitWhenIdle:
		err = errors.New(headlessOnPurpose)
	case inst.upgrade != nil || inst.stopRun == nil:
		err = errors.New("it is stopping")
	}
	stop, cfg := inst.stopRun, inst.cfg
	inst.mu.Unlock()
	if err == nil {
		err = wouldNotStart(cfg, env)
	}
	if err != nil {
		return acc, nil, fmt.Errorf("%w: %w", control.ErrConflict, err)
	}
	inst.log.Info("making way for the tray app: stopping; the sessions resume with its pool")
	return control.MakeWayAccepted{Env: env}, stop, nil
}

// headlessOnPurpose is MakeWay's refusal from a pool run headless on
// purpose, to which the app adds how to get the tray.
const headlessOnPurpose = "it runs headless on purpose (`switchboard serve`, or the systemd user service)"

// wouldNotStart says which of cfg's servers that run in this process's
// environment would not start in env, for a ${VAR} env lacks: a desktop
// variable (DISPLAY, XDG_RUNTIME_DIR, ...) the app's desktop does not set.
func wouldNotStart(cfg *config.File, env []string) error {
	if cfg == nil {
		return nil
	}
	now := cfg.NotStartedBy(os.LookupEnv)
	var lost []string
	for name, ps := range cfg.NotStartedBy(lookupIn(env)) {
		if _, already := now[name]; already {
			continue
		}
		for _, p := range ps {
			lost = append(lost, p.String())
		}
	}
	if len(lost) == 0 {
		return nil
	}
	slices.Sort(lost)
	return fmt.Errorf("it keeps running, because with this desktop session's own variables a server it runs would not start (%s); "+
		"set the variable in the desktop session, then start Switchboard again", strings.Join(lost, "; "))
}
