package home

import (
	"errors"
	"maps"
	"os"
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

// TestResolveIn: where a process of another environment (a client's entry
// with its env) finds its instance, by system; and Resolve, which is
// ResolveIn for this process, finds the directories the os package names.
func TestResolveIn(t *testing.T) {
	for _, tc := range []struct {
		name       string
		goos       string
		env        map[string]string
		cfg, state string
	}{
		{"linux", "linux", map[string]string{"HOME": "/home/me"}, "/home/me/.config/switchboard", "/home/me/.local/state/switchboard"},
		{"linux, XDG", "linux", map[string]string{"HOME": "/home/me", "XDG_CONFIG_HOME": "/xc", "XDG_STATE_HOME": "/xs"},
			"/xc/switchboard", "/xs/switchboard"},
		{"linux, SWITCHBOARD_HOME", "linux", map[string]string{"HOME": "/home/me", "SWITCHBOARD_HOME": "/sb", "XDG_CONFIG_HOME": "/xc"},
			"/sb", "/sb"},
		{"macOS: the config dir does not follow XDG_CONFIG_HOME", "darwin", map[string]string{"HOME": "/Users/me", "XDG_CONFIG_HOME": "/xc"},
			"/Users/me/Library/Application Support/switchboard", "/Users/me/.local/state/switchboard"},
		{"windows", "windows", map[string]string{"USERPROFILE": `C:\Users\me`, "AppData": `C:\Users\me\AppData\Roaming`, "LOCALAPPDATA": `C:\Users\me\AppData\Local`},
			filepath.Join(`C:\Users\me\AppData\Roaming`, "switchboard"), filepath.Join(`C:\Users\me\AppData\Local`, "switchboard")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ResolveIn(tc.goos, func(k string) string { return tc.env[k] })
			if err != nil || p.Config != filepath.Join(tc.cfg, "config.json") || p.History != filepath.Join(tc.state, "history.db") {
				t.Errorf("ResolveIn = %+v, %v; want the config under %s, the state under %s", p, err, tc.cfg, tc.state)
			}
		})
	}
	if _, err := ResolveIn("linux", func(k string) string { return map[string]string{"XDG_CONFIG_HOME": "rel", "HOME": "/h"}[k] }); err == nil {
		t.Error("a relative XDG_CONFIG_HOME: no error, as os.UserConfigDir has")
	}

	for _, env := range []map[string]string{
		{"HOME": "/home/me", "XDG_CONFIG_HOME": "", "XDG_STATE_HOME": ""},
		{"HOME": "/home/me", "XDG_CONFIG_HOME": "/xc", "XDG_STATE_HOME": "/xs"},
	} {
		t.Setenv("SWITCHBOARD_HOME", "")
		for k, v := range env {
			t.Setenv(k, v)
		}
		cfg, err := os.UserConfigDir()
		if err != nil {
			t.Fatal(err)
		}
		if p, err := Resolve(); err != nil || p.Config != filepath.Join(cfg, "switchboard", "config.json") {
			t.Errorf("with %v: Resolve = %+v, %v; want the config under os.UserConfigDir %s", env, p, err, cfg)
		}
	}
}
