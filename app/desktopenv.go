package app

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// desktopVars are the variables a tray app that takes the place of a
// headless pool a client started keeps its own of (its value, or its
// lack of one): what it needs to open its windows, its tray icon and its
// notifications on the desktop it was launched on, and to tell the
// launcher it started. Every other variable is the stopping pool's, the
// client's environment, so that ${VAR} in the config and the children
// see what they saw before (a token exported in a terminal, an nvm PATH).
// Besides these, every FYNE_* variable (the toolkit's scale, theme and
// font) is the app's.
var desktopVars = []string{
	"DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", // the display, and the key to it
	"XDG_RUNTIME_DIR",          // the Wayland socket, the session bus's, the portals'
	"DBUS_SESSION_BUS_ADDRESS", // the tray host, notifications, the dark theme setting
	"XDG_SESSION_TYPE", "XDG_CURRENT_DESKTOP", "XDG_SESSION_DESKTOP", "DESKTOP_SESSION",
	"XDG_ACTIVATION_TOKEN", "DESKTOP_STARTUP_ID", // the launcher's startup notice
	"XMODIFIERS", "XCURSOR_THEME", "XCURSOR_SIZE", // the input method, the cursor
}

// isDesktopVar tells whether name is one of desktopVars or FYNE_*.
func isDesktopVar(name string) bool {
	return slices.Contains(desktopVars, name) || strings.HasPrefix(name, "FYNE_")
}

// desktopOf is the desktop variables of environ (os.Environ's form).
func desktopOf(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if name, _, _ := strings.Cut(kv, "="); isDesktopVar(name) {
			out = append(out, kv)
		}
	}
	return out
}

// withDesktop is base with desktop's variables in place of its own
// desktop variables: base's of those desktop lacks are dropped.
func withDesktop(base, desktop []string) []string {
	theirs := map[string]bool{}
	for _, kv := range desktop {
		name, _, _ := strings.Cut(kv, "=")
		theirs[name] = true
	}
	out := make([]string, 0, len(base)+len(desktop))
	for _, kv := range base {
		if name, _, _ := strings.Cut(kv, "="); !isDesktopVar(name) && !theirs[name] {
			out = append(out, kv)
		}
	}
	return append(out, desktop...)
}

// lookupIn is os.LookupEnv over env instead of the process's environment.
func lookupIn(env []string) func(string) (string, bool) {
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		if name, v, ok := strings.Cut(kv, "="); ok {
			vars[name] = v
		}
	}
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// useEnviron makes env this process's environment. A tray app that took
// a headless pool's place calls it before its pool starts, once its own
// window system check is done: every reader then sees it, the config's
// ${VAR} expansion and its reloads, the children's environment, command
// lookup along PATH, and the program an upgrade execs.
func useEnviron(env []string) error {
	want := map[string]string{}
	for _, kv := range env {
		if name, v, ok := strings.Cut(kv, "="); ok && name != "" {
			want[name] = v
		}
	}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); name != "" {
			if _, keep := want[name]; !keep {
				os.Unsetenv(name)
			}
		}
	}
	for name, v := range want {
		if cur, ok := os.LookupEnv(name); !ok || cur != v {
			if err := os.Setenv(name, v); err != nil {
				return fmt.Errorf("set %s: %w", name, err)
			}
		}
	}
	return nil
}
