package app

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/app/autostart"
	"github.com/switchboard-mcp/switchboard/app/home"
)

// AutostartStatus is the login item and the Switchboard home the app it
// starts serves.
type AutostartStatus struct {
	autostart.Status
	// Config is the config file of that home: under the SWITCHBOARD_HOME
	// or XDG directories the item sets (Env), else at the default place,
	// the login session being taken to set none of them. Empty when off,
	// or when this environment cannot place it (no HOME).
	Config string `json:"config,omitempty"`
	// ShellConfig is the config file this process's environment places,
	// when it is not Config: `autostart on` here would start that one.
	ShellConfig string `json:"-"`
}

// homeVars are the variables that place a Switchboard home (home.Env
// pins them), the only ones a login item sets.
var homeVars = []string{"SWITCHBOARD_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"}

// Autostart turns starting at login "on" or "off" for this binary, or
// reports its "status", in the OS's own format (package autostart). The
// login item names the binary by the path setup writes (stableBinary),
// which outlives an upgrade, and sets what places this process's
// Switchboard home (home.Env, as setup pins into client entries), so
// that the app started at login serves the pool those clients reach.
func Autostart(action string) (AutostartStatus, error) {
	e, err := autostart.ForThisOS()
	if err != nil {
		return AutostartStatus{}, err
	}
	switch action {
	case "on":
		exe, err := stableBinary(os.Args[0])
		if err != nil {
			return AutostartStatus{}, err
		}
		pin, err := home.Env()
		if err != nil {
			return AutostartStatus{}, fmt.Errorf("autostart on: %w", err)
		}
		if err := e.Enable(exe, pin); err != nil {
			return AutostartStatus{}, fmt.Errorf("autostart on: %w", err)
		}
	case "off":
		if err := e.Disable(); err != nil {
			return AutostartStatus{}, fmt.Errorf("autostart off: %w", err)
		}
	case "status", "":
	default:
		return AutostartStatus{}, fmt.Errorf("autostart %q: say on, off or status", action)
	}
	st, err := e.Status()
	if err != nil || !st.Enabled {
		return AutostartStatus{Status: st}, err
	}
	login, err := home.ResolveIn(runtime.GOOS, func(k string) string {
		if v, ok := st.Env[k]; ok || slices.Contains(homeVars, k) {
			return v
		}
		return os.Getenv(k)
	})
	if err != nil {
		return AutostartStatus{Status: st}, nil // the item is as it is; its home is not known here
	}
	out := AutostartStatus{Status: st, Config: login.Config}
	if here, err := ResolvePaths(); err == nil && !samePath(here.Config, login.Config) {
		out.ShellConfig = here.Config
	}
	return out, nil
}

// UseHomeEnv sets the KEY=VALUE variables of kvs, each one of homeVars,
// in this process's environment before anything reads it: how the
// Windows login item, a command line without an environment of its own,
// names the home it starts (`switchboard --env SWITCHBOARD_HOME=…`).
func UseHomeEnv(kvs []string) error {
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !slices.Contains(homeVars, k) {
			return fmt.Errorf("--env %q: want KEY=VALUE with KEY one of %s", kv, strings.Join(homeVars, ", "))
		}
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("--env %s: %w", k, err)
		}
	}
	return nil
}

// thisBinary is the running switchboard's absolute path, links resolved:
// the file this process runs, whatever path it was called by.
func thisBinary() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this program: %w", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return exe, nil
}
