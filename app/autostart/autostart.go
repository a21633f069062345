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
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Label names the login item: the LaunchAgent label, the Run value's name
// and the .desktop file's base name.
const Label = "io.github.switchboard_mcp.switchboard"

// Status says whether Switchboard starts at login, and how.
type Status struct {
	Enabled bool `json:"enabled"`
	// Where is the file or registry value that makes it start.
	Where string `json:"where"`
	// Command is what it starts, when enabled.
	Command string `json:"command,omitempty"`
}

// Entry is the login item of one format.
type Entry interface {
	// Enable makes exe (an absolute path to the switchboard binary) start
	// at login. Enabling twice leaves one entry, pointing at exe.
	Enable(exe string) error
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
// app) at login.
func DesktopEntry(exe string) string {
	return "[Desktop Entry]\n" +
		"Type=Application\n" +
		"Name=Switchboard\n" +
		"Comment=One shared copy of each MCP server for all your AI coding sessions\n" +
		"Exec=" + desktopExec(exe) + "\n" +
		"Icon=io.switchboard.app\n" + // the icon the packages and install.sh install
		"Terminal=false\n" +
		"X-GNOME-Autostart-enabled=true\n"
}

// desktopExec quotes a path for an Exec key: inside double quotes, the
// characters ", `, $ and \ take a backslash, and then the string value's
// own escaping doubles every backslash.
func desktopExec(path string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range path {
		if strings.ContainsRune("\"`$\\", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return strings.ReplaceAll(b.String(), `\`, `\\`)
}

// Enable writes the .desktop file.
func (x XDG) Enable(exe string) error { return writeFile(x.Dir, x.path(), DesktopEntry(exe)) }

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
			st.Command = unquoteExec(strings.TrimPrefix(line, "Exec="))
		case line == "Hidden=true" || line == "X-GNOME-Autostart-enabled=false":
			return st, nil // the desktop's own "off" switch
		}
	}
	st.Enabled = true
	return st, nil
}

func unquoteExec(v string) string {
	v = strings.ReplaceAll(v, `\\`, `\`)
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return v
	}
	var b strings.Builder
	for i := 1; i < len(v)-1; i++ {
		if v[i] == '\\' && i+1 < len(v)-1 {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// LaunchAgent is a per-user launchd agent plist in Dir, usually
// ~/Library/LaunchAgents.
type LaunchAgent struct{ Dir string }

func (l LaunchAgent) path() string { return filepath.Join(l.Dir, Label+".plist") }

// LaunchAgentPlist is the agent that starts exe at login. Interactive
// because it is an app the user sees (the tray), not a daemon.
func LaunchAgentPlist(exe string) string {
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
</dict>
</plist>
`
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")

func xmlEscape(s string) string { return xmlEscaper.Replace(s) }

// Enable writes the plist (launchd reads it at the next login).
func (l LaunchAgent) Enable(exe string) error {
	return writeFile(l.Dir, l.path(), LaunchAgentPlist(exe))
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
				st.Command = strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&quot;", `"`, "&apos;", "'").Replace(v)
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

// Enable sets the value to the quoted path.
func (r RunValue) Enable(exe string) error { return r.Registry.Set(runValueName, `"`+exe+`"`) }

// Disable deletes the value.
func (r RunValue) Disable() error { return r.Registry.Delete(runValueName) }

// Status reads the value back.
func (r RunValue) Status() (Status, error) {
	st := Status{Where: RunKeyPath + `\` + runValueName}
	v, ok, err := r.Registry.Get(runValueName)
	if err != nil || !ok {
		return st, err
	}
	st.Enabled, st.Command = true, strings.Trim(v, `"`)
	return st, nil
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
