// Package home says where a Switchboard instance keeps its files. It is
// its own small package so the `switchboard-connect` shim, which must stay
// tiny, finds the pool socket exactly as the app does.
package home

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Paths are where a Switchboard instance keeps its files. With
// SWITCHBOARD_HOME set everything lives under it; otherwise the config
// goes to the OS user config dir and the rest to the user state dir.
type Paths struct {
	Config  string // config.json
	History string // history.db
	Run     string // sockets, 0700
	Logs    string
}

// PoolSocket is the socket `switchboard connect` shims dial.
func (p Paths) PoolSocket() string { return filepath.Join(p.Run, "pool.sock") }

// ControlSocket serves the control API that the CLI uses.
func (p Paths) ControlSocket() string { return filepath.Join(p.Run, "control.sock") }

// ChildrenFile is where the pool records the children it starts, so the
// next run can find the ones that outlived it.
func (p Paths) ChildrenFile() string { return filepath.Join(p.Run, "children.jsonl") }

// StartLockFile serialises clients starting the pool (package launch).
func (p Paths) StartLockFile() string { return filepath.Join(p.Run, "start.lock") }

// EditLockFile serialises the commands that edit Switchboard's config
// and clients' files (setup, import, setup --undo): each reads a file and
// writes it back, and two at once would lose one's changes.
func (p Paths) EditLockFile() string { return filepath.Join(p.Run, "edit.lock") }

// AskIDsFile keeps the high-water mark of the ids of the pool's own
// requests to clients, so that a run never asks under an id an earlier
// one did, whatever the clock says (app/askids.go).
func (p Paths) AskIDsFile() string { return filepath.Join(p.Run, "ask-ids") }

// PoolLog is where a pool started by a client writes its log.
func (p Paths) PoolLog() string { return filepath.Join(p.Logs, "pool.log") }

// ConfigRecordFile names the config file the pool that started last
// runs (`serve --config FILE`, `tray --config FILE`), one absolute path;
// there is none while that pool runs the default file. A client that
// finds no pool starts one with that file (package launch), so that a
// pool the user started with a file of their own comes back as it ran
// after a crash, a quit or an upgrade, not with the default file.
func (p Paths) ConfigRecordFile() string { return filepath.Join(p.Run, "config-path") }

// LockFile holds the single-instance lock.
func (p Paths) LockFile() string { return filepath.Join(p.Run, "switchboard.lock") }

// PackagesDir holds the npx packages the servers run, one folder per
// package version (app/npx), beside the history.
func (p Paths) PackagesDir() string { return filepath.Join(filepath.Dir(p.History), "npx") }

// DashboardFile keeps the dashboard's size, view and waterfall zoom
// across runs, beside the history.
func (p Paths) DashboardFile() string {
	return filepath.Join(filepath.Dir(p.History), "dashboard.json")
}

// Resolve reads SWITCHBOARD_HOME and the OS conventions.
func Resolve() (Paths, error) { return ResolveIn(runtime.GOOS, os.Getenv) }

// ResolveIn is Resolve for a process on goos whose environment getenv
// reads: where it finds its instance. setup asks it which instance the
// `switchboard connect` a client entry runs would reach.
func ResolveIn(goos string, getenv func(string) string) (Paths, error) {
	if home := getenv("SWITCHBOARD_HOME"); home != "" {
		abs, err := filepath.Abs(home)
		if err != nil {
			return Paths{}, fmt.Errorf("SWITCHBOARD_HOME: %w", err)
		}
		return pathsUnder(abs, abs), nil
	}
	cfgDir, err := userConfigDir(goos, getenv)
	if err != nil {
		return Paths{}, fmt.Errorf("find the config dir: %w", err)
	}
	state, err := stateDir(goos, getenv, func() (string, error) { return userHomeDir(goos, getenv) }, exists)
	if err != nil {
		return Paths{}, err
	}
	return pathsUnder(filepath.Join(cfgDir, "switchboard"), state), nil
}

// userConfigDir is os.UserConfigDir for goos and getenv.
func userConfigDir(goos string, getenv func(string) string) (string, error) {
	switch goos {
	case "windows":
		if dir := getenv("AppData"); dir != "" {
			return dir, nil
		}
		return "", errors.New("%AppData% is not defined")
	case "darwin", "ios":
		if dir := getenv("HOME"); dir != "" {
			return dir + "/Library/Application Support", nil
		}
		return "", errors.New("$HOME is not defined")
	case "plan9":
		if dir := getenv("home"); dir != "" {
			return dir + "/lib", nil
		}
		return "", errors.New("$home is not defined")
	}
	if dir := getenv("XDG_CONFIG_HOME"); dir != "" {
		if !filepath.IsAbs(dir) {
			return "", errors.New("path in $XDG_CONFIG_HOME is relative")
		}
		return dir, nil
	}
	if dir := getenv("HOME"); dir != "" {
		return dir + "/.config", nil
	}
	return "", errors.New("neither $XDG_CONFIG_HOME nor $HOME are defined")
}

// userHomeDir is os.UserHomeDir for goos and getenv.
func userHomeDir(goos string, getenv func(string) string) (string, error) {
	env, enverr := "HOME", "$HOME"
	switch goos {
	case "windows":
		env, enverr = "USERPROFILE", "%userprofile%"
	case "plan9":
		env, enverr = "home", "$home"
	}
	if v := getenv(env); v != "" {
		return v, nil
	}
	switch goos {
	case "android":
		return "/sdcard", nil
	case "ios":
		return "/", nil
	}
	return "", errors.New(enverr + " is not defined")
}

// Env is what of this process's environment Resolve depends on besides
// the home directory, so that a process started with only HOME and
// these (a desktop client starting the entry `setup` wrote) finds this
// same instance: SWITCHBOARD_HOME when set, made absolute; else
// XDG_STATE_HOME, made absolute, and XDG_CONFIG_HOME on the systems
// whose config directory follows it, when they are set.
func Env() (map[string]string, error) {
	return envFor(runtime.GOOS, os.Getenv)
}

func envFor(goos string, getenv func(string) string) (map[string]string, error) {
	keys := []string{"XDG_STATE_HOME"}
	switch goos {
	case "darwin", "ios", "windows", "plan9": // os.UserConfigDir does not read it
	default:
		keys = append(keys, "XDG_CONFIG_HOME")
	}
	if getenv("SWITCHBOARD_HOME") != "" {
		keys = []string{"SWITCHBOARD_HOME"}
	}
	out := map[string]string{}
	for _, k := range keys {
		v := getenv(k)
		if v == "" {
			continue
		}
		abs, err := filepath.Abs(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = abs
	}
	return out, nil
}

// stateDir is where history, sockets and logs go: $XDG_STATE_HOME/switchboard
// when that is set, else ~/.local/state/switchboard, except on Windows,
// where it is %LOCALAPPDATA%\switchboard (machine-local, not roamed). A
// Windows user whose earlier runs kept their history under
// ~\.local\state\switchboard keeps it there.
func stateDir(goos string, getenv func(string) string, userHome func() (string, error), exists func(string) bool) (string, error) {
	if x := getenv("XDG_STATE_HOME"); x != "" {
		return filepath.Join(x, "switchboard"), nil
	}
	h, err := userHome()
	if err != nil {
		return "", fmt.Errorf("find the home dir: %w", err)
	}
	unix := filepath.Join(h, ".local", "state", "switchboard")
	if local := getenv("LOCALAPPDATA"); goos == "windows" && local != "" && !exists(unix) {
		return filepath.Join(local, "switchboard"), nil
	}
	return unix, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func pathsUnder(cfg, state string) Paths {
	return Paths{
		Config:  filepath.Join(cfg, "config.json"),
		History: filepath.Join(state, "history.db"),
		Run:     filepath.Join(state, "run"),
		Logs:    filepath.Join(state, "logs"),
	}
}

// maxSocketPath is the room a Unix socket path has (sun_path) on Linux and
// macOS, less the terminating NUL.
const maxSocketPath = 103

// EnsureRunDir creates the socket directory, private to the user, and
// checks the socket paths fit in a Unix socket address.
func (p Paths) EnsureRunDir() error {
	if err := os.MkdirAll(p.Run, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", p.Run, err)
	}
	if err := os.Chmod(p.Run, 0o700); err != nil {
		return fmt.Errorf("chmod %s: %w", p.Run, err)
	}
	if len(p.ControlSocket()) > maxSocketPath {
		return errors.New("socket path " + p.ControlSocket() + " is too long for a Unix socket; set SWITCHBOARD_HOME to a shorter directory")
	}
	return nil
}
