// Package autostart turns "start Switchboard at login" on and off in the
// way each desktop expects: an XDG autostart .desktop file on Linux and
// the BSDs, a LaunchAgent plist on macOS, the Run registry value on
// Windows. Every format is plain data written by this package, so the
// tray checkbox and `switchboard autostart on|off|status` agree, and each
// is tested on every OS against a temporary home (Windows through a fake
// registry).
package autostart

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/app/version"
)

// Label names the LaunchAgent (its label and file name): the app's ID.
const Label = version.AppID

// Status says whether Switchboard starts at login, and how.
type Status struct {
	Enabled bool `json:"enabled"`
	// Where is the file or registry value that makes it start.
	Where string `json:"where"`
	// Command is what the login item starts ("" when there is none):
	// always in the JSON, as the README lists it.
	Command string `json:"command"`
	// Env is the environment it starts Command with, what places the
	// Switchboard home it serves (SWITCHBOARD_HOME, XDG_CONFIG_HOME,
	// XDG_STATE_HOME); none for the default home.
	Env map[string]string `json:"env,omitempty"`
}

// Entry is the login item of one format.
type Entry interface {
	// Enable makes exe (an absolute path to the switchboard binary) start
	// at login with the variables of env set (none: the login session's
	// environment as it is). Enabling twice leaves one entry, pointing at
	// exe with env.
	Enable(exe string, env map[string]string) error
	// Disable removes the entry; disabling when off is not an error.
	Disable() error
	Status() (Status, error)
}

// ForThisOS is the entry of the running OS, for the current user.
func ForThisOS() (Entry, error) {
	switch runtime.GOOS {
	case "windows":
		return RunValue{Registry: userRunKey{}}, nil
	case "darwin":
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("find the home dir: %w", err)
		}
		return LaunchAgent{Dir: filepath.Join(h, "Library", "LaunchAgents")}, nil
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("find the home dir: %w", err)
		}
		dir = filepath.Join(h, ".config")
	}
	return XDG{Dir: filepath.Join(dir, "autostart")}, nil
}

// XDG is an autostart .desktop file (XDG Autostart Specification) in Dir,
// usually ~/.config/autostart.
type XDG struct{ Dir string }

func (x XDG) path() string { return filepath.Join(x.Dir, "switchboard.desktop") }

// DesktopEntry is the autostart .desktop file that starts exe (the tray
// app) at login, through env(1) when env has variables to set. TryExec
// names exe too: once it is gone (uninstalled), desktops skip the item
// instead of failing to start it at every login.
func DesktopEntry(exe string, env map[string]string) string {
	exec := desktopExec(exe)
	if len(env) > 0 {
		exec = "env"
		for _, k := range slices.Sorted(maps.Keys(env)) {
			exec += " " + desktopExec(k+"="+env[k])
		}
		exec += " " + desktopExec(exe)
	}
	return "[Desktop Entry]\n" +
		"Type=Application\n" +
		"Name=Switchboard\n" +
		"Comment=One shared copy of each MCP server for all your AI coding sessions\n" +
		"Exec=" + exec + "\n" +
		"TryExec=" + desktopString(exe) + "\n" +
		"Icon=" + version.AppID + "\n" + // the icon the packages and install.sh install
		"Terminal=false\n" +
		"X-GNOME-Autostart-enabled=true\n"
}

// desktopExec quotes an argument for an Exec key: inside double quotes,
// the characters ", `, $ and \ take a backslash, a literal % is written
// %% (% starts a field code), and then the string value's own escaping
// doubles every backslash.
func desktopExec(arg string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range arg {
		switch {
		case strings.ContainsRune("\"`$\\", r):
			b.WriteByte('\\')
		case r == '%':
			b.WriteByte('%')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return strings.ReplaceAll(b.String(), `\`, `\\`)
}

// desktopString escapes a string value (TryExec's): a backslash and the
// control characters that would end or bend the line.
func desktopString(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\t", `\t`, "\r", `\r`).Replace(s)
}

// splitExec is the arguments of an Exec value, its escaping and quoting
// undone as desktopExec does them (and an unquoted word taken as it is).
func splitExec(v string) []string {
	v = strings.NewReplacer(`\\`, `\`, `\s`, " ", `\n`, "\n", `\t`, "\t", `\r`, "\r").Replace(v)
	var args []string
	var arg strings.Builder
	inArg, quoted := false, false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"':
			quoted, inArg = !quoted, true
			continue
		case quoted && c == '\\' && i+1 < len(v):
			i++
			c = v[i]
		case c == '%' && i+1 < len(v) && v[i+1] == '%':
			i++
		case !quoted && c == ' ':
			if inArg {
				args = append(args, arg.String())
				arg.Reset()
			}
			inArg = false
			continue
		}
		arg.WriteByte(c)
		inArg = true
	}
	if inArg {
		args = append(args, arg.String())
	}
	return args
}

// Enable writes the .desktop file.
func (x XDG) Enable(exe string, env map[string]string) error {
	if len(env) > 0 && strings.Contains(exe, "=") {
		// env(1) would take the path for a variable to set.
		return fmt.Errorf("cannot start %s through env(1) with %s: its path has a '='", exe, envText(env))
	}
	return writeFile(x.Dir, x.path(), DesktopEntry(exe, env))
}

// Disable removes the .desktop file.
func (x XDG) Disable() error { return removeFile(x.path()) }

// Status reads the .desktop file back.
func (x XDG) Status() (Status, error) {
	st := Status{Where: x.path()}
	data, err := os.ReadFile(x.path())
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "Exec="):
			st.Command, st.Env = commandOf(splitExec(strings.TrimPrefix(line, "Exec=")))
		case line == "Hidden=true" || line == "X-GNOME-Autostart-enabled=false":
			return st, nil // the desktop's own "off" switch
		}
	}
	st.Enabled = true
	return st, nil
}

// commandOf is the program of an Exec line's arguments and the variables
// it is started with: `env K=V… PROGRAM` or `PROGRAM`.
func commandOf(args []string) (string, map[string]string) {
	if len(args) == 0 {
		return "", nil
	}
	if args[0] != "env" {
		return args[0], nil
	}
	env := map[string]string{}
	for _, a := range args[1:] {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return a, env
		}
		env[k] = v
	}
	return "", env
}

// envText is env as K=V words, sorted, for messages.
func envText(env map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		kv = append(kv, k+"="+env[k])
	}
	return strings.Join(kv, " ")
}

// LaunchAgent is a per-user launchd agent plist in Dir, usually
// ~/Library/LaunchAgents.
type LaunchAgent struct{ Dir string }

func (l LaunchAgent) path() string { return filepath.Join(l.Dir, Label+".plist") }

// LaunchAgentPlist is the agent that starts exe at login, with the
// variables of env set. Interactive because it is an app the user sees
// (the tray), not a daemon.
func LaunchAgentPlist(exe string, env map[string]string) string {
	vars := ""
	if len(env) > 0 {
		vars = "\t<key>EnvironmentVariables</key>\n\t<dict>\n"
		for _, k := range slices.Sorted(maps.Keys(env)) {
			vars += "\t\t<key>" + xmlEscape(k) + "</key>\n\t\t<string>" + xmlEscape(env[k]) + "</string>\n"
		}
		vars += "\t</dict>\n"
	}
	return `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>` + Label + `</string>
	<key>ProgramArguments</key>
	<array>
		<string>` + xmlEscape(exe) + `</string>
	</array>
	<key>RunAtLoad</key>
	<true/>
	<key>ProcessType</key>
	<string>Interactive</string>
` + vars + `</dict>
</plist>
`
}

var (
	xmlEscaper   = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")
	xmlUnescaper = strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&quot;", `"`, "&apos;", "'")
)

func xmlEscape(s string) string { return xmlEscaper.Replace(s) }

// Enable writes the plist (launchd reads it at the next login).
func (l LaunchAgent) Enable(exe string, env map[string]string) error {
	return writeFile(l.Dir, l.path(), LaunchAgentPlist(exe, env))
}

// Disable removes the plist.
func (l LaunchAgent) Disable() error { return removeFile(l.path()) }

// Status reads the plist back.
func (l LaunchAgent) Status() (Status, error) {
	st := Status{Where: l.path()}
	data, err := os.ReadFile(l.path())
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	s := string(data)
	if _, after, ok := strings.Cut(s, "<key>ProgramArguments</key>"); ok {
		if _, after, ok = strings.Cut(after, "<string>"); ok {
			if v, _, ok := strings.Cut(after, "</string>"); ok {
				st.Command = xmlUnescaper.Replace(v)
			}
		}
	}
	if _, after, ok := strings.Cut(s, "<key>EnvironmentVariables</key>"); ok {
		if _, after, ok = strings.Cut(after, "<dict>"); ok {
			dict, _, _ := strings.Cut(after, "</dict>")
			st.Env = map[string]string{}
			for {
				var k, v string
				if _, dict, ok = strings.Cut(dict, "<key>"); !ok {
					break
				}
				k, dict, _ = strings.Cut(dict, "</key>")
				_, dict, _ = strings.Cut(dict, "<string>")
				v, dict, _ = strings.Cut(dict, "</string>")
				st.Env[xmlUnescaper.Replace(k)] = xmlUnescaper.Replace(v)
			}
		}
	}
	st.Enabled = true
	return st, nil
}

// Registry is the current user's Run key: value name to command line.
type Registry interface {
	Get(name string) (string, bool, error)
	Set(name, value string) error
	Delete(name string) error
}

// RunKeyPath is where Windows looks for per-user login items.
const RunKeyPath = `HKCU\Software\Microsoft\Windows\CurrentVersion\Run`

// RunValue is the Run registry value named "Switchboard".
type RunValue struct{ Registry Registry }

const runValueName = "Switchboard"

// Enable sets the value to the quoted path. A command line has no
// environment of its own: the variables of env go to the app as its
// --env KEY=VALUE flags.
func (r RunValue) Enable(exe string, env map[string]string) error {
	line := windowsArg(exe)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		line += " --env " + windowsArg(k+"="+env[k])
	}
	return r.Registry.Set(runValueName, line)
}

// Disable deletes the value.
func (r RunValue) Disable() error { return r.Registry.Delete(runValueName) }

// Status reads the value back.
func (r RunValue) Status() (Status, error) {
	st := Status{Where: RunKeyPath + `\` + runValueName}
	v, ok, err := r.Registry.Get(runValueName)
	if err != nil || !ok {
		return st, err
	}
	args := splitWindows(v)
	st.Enabled = true
	if len(args) > 0 {
		st.Command = args[0]
	}
	for i := 1; i+1 < len(args); i++ {
		if args[i] == "--env" {
			if k, v, ok := strings.Cut(args[i+1], "="); ok {
				if st.Env == nil {
					st.Env = map[string]string{}
				}
				st.Env[k] = v
			}
			i++
		}
	}
	return st, nil
}

// windowsArg quotes s for a Windows command line, as CommandLineToArgvW
// splits one: backslashes are literal except before a quote, where they
// and the quote take a backslash each.
func windowsArg(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	slashes := 0
	for _, c := range []byte(s) {
		switch c {
		case '\\':
			slashes++
		case '"':
			b.WriteString(strings.Repeat(`\`, slashes+1))
			slashes = 0
		default:
			slashes = 0
		}
		b.WriteByte(c)
	}
	b.WriteString(strings.Repeat(`\`, slashes))
	b.WriteByte('"')
	return b.String()
}

// splitWindows splits a command line as CommandLineToArgvW does (2n
// backslashes before a quote are n and the quote opens or closes; 2n+1
// are n and a literal quote; other backslashes are literal).
func splitWindows(line string) []string {
	var args []string
	var arg strings.Builder
	inArg, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\':
			n := 0
			for i < len(line) && line[i] == '\\' {
				n++
				i++
			}
			if i < len(line) && line[i] == '"' {
				arg.WriteString(strings.Repeat(`\`, n/2))
				if n%2 == 1 {
					arg.WriteByte('"')
				} else {
					quoted = !quoted
				}
			} else {
				arg.WriteString(strings.Repeat(`\`, n))
				i--
			}
			inArg = true
		case c == '"':
			quoted, inArg = !quoted, true
		case !quoted && (c == ' ' || c == '\t'):
			if inArg {
				args = append(args, arg.String())
				arg.Reset()
			}
			inArg = false
		default:
			arg.WriteByte(c)
			inArg = true
		}
	}
	if inArg {
		args = append(args, arg.String())
	}
	return args
}

func writeFile(dir, path, content string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}
