package home

import (
	"errors"
	"maps"
	"path/filepath"
	"testing"
)

// TestStateDir: where history, sockets and logs go, by system, and a
// Windows user's history from before %LOCALAPPDATA% stays where it is.
func TestStateDir(t *testing.T) {
	home := filepath.Join("/", "Users", "me")
	legacy := filepath.Join(home, ".local", "state", "switchboard")
	for _, tc := range []struct {
		name   string
		goos   string
		env    map[string]string
		legacy bool // an earlier run's state dir exists
		want   string
	}{
		{"linux", "linux", nil, false, legacy},
		{"linux, XDG_STATE_HOME", "linux", map[string]string{"XDG_STATE_HOME": "/xdg"}, false, filepath.Join("/xdg", "switchboard")},
		{"macOS", "darwin", map[string]string{"LOCALAPPDATA": "/ignored"}, false, legacy},
		{"windows", "windows", map[string]string{"LOCALAPPDATA": "/Local"}, false, filepath.Join("/Local", "switchboard")},
		{"windows, an earlier run's history", "windows", map[string]string{"LOCALAPPDATA": "/Local"}, true, legacy},
		{"windows, XDG_STATE_HOME", "windows", map[string]string{"LOCALAPPDATA": "/Local", "XDG_STATE_HOME": "/xdg"}, false, filepath.Join("/xdg", "switchboard")},
		{"windows without LOCALAPPDATA", "windows", nil, false, legacy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := stateDir(tc.goos, func(k string) string { return tc.env[k] },
				func() (string, error) { return home, nil },
				func(p string) bool { return tc.legacy && p == legacy })
			if err != nil || got != tc.want {
				t.Errorf("stateDir = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := stateDir("linux", func(string) string { return "" },
		func() (string, error) { return "", errors.New("no home") }, func(string) bool { return false }); err == nil {
		t.Error("no home dir and no XDG_STATE_HOME: no error")
	}
}

// TestEnv: what a process started with only HOME needs to find this
// instance: SWITCHBOARD_HOME alone when set, else the XDG directories
// that are set and that the system's directories follow, each absolute.
func TestEnv(t *testing.T) {
	cwd, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	xdg := map[string]string{"XDG_CONFIG_HOME": "/xc", "XDG_STATE_HOME": "xs", "HOME": "/home/me"}
	for _, tc := range []struct {
		name string
		goos string
		env  map[string]string
		want map[string]string
	}{
		{"nothing set", "linux", map[string]string{"HOME": "/home/me"}, map[string]string{}},
		{"linux, XDG", "linux", xdg, map[string]string{"XDG_CONFIG_HOME": "/xc", "XDG_STATE_HOME": filepath.Join(cwd, "xs")}},
		{"macOS, XDG: the config dir does not follow it", "darwin", xdg, map[string]string{"XDG_STATE_HOME": filepath.Join(cwd, "xs")}},
		{"SWITCHBOARD_HOME places everything", "linux", map[string]string{"SWITCHBOARD_HOME": "sb", "XDG_STATE_HOME": "/xs"},
			map[string]string{"SWITCHBOARD_HOME": filepath.Join(cwd, "sb")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := envFor(tc.goos, func(k string) string { return tc.env[k] })
			if err != nil || !maps.Equal(got, tc.want) {
				t.Errorf("envFor = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
