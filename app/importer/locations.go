package importer

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Client is an MCP client whose config Switchboard can import.
type Client string

// The clients import knows.
const (
	ClaudeDesktop Client = "claude-desktop"
	ClaudeCode    Client = "claude-code"
	Cursor        Client = "cursor"
	VSCode        Client = "vscode"
)

// Clients lists them in the order help texts show them.
var Clients = []Client{ClaudeDesktop, ClaudeCode, Cursor, VSCode}

// ParseClient checks a --from value.
func ParseClient(s string) (Client, error) {
	for _, c := range Clients {
		if string(c) == s {
			return c, nil
		}
	}
	names := make([]string, len(Clients))
	for i, c := range Clients {
		names[i] = string(c)
	}
	return "", fmt.Errorf("unknown client %q (known: %s)", s, strings.Join(names, ", "))
}

// Env is where the importer looks and what it resolves references with.
// Tests give it a made-up home and OS; the CLI uses OSEnv.
type Env struct {
	Home   string
	Cwd    string
	GOOS   string
	Lookup func(string) (string, bool) // environment variables
}

// OSEnv is the Env of this process.
func OSEnv() (Env, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return Env{}, fmt.Errorf("find the home dir: %w", err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return Env{}, fmt.Errorf("find the working dir: %w", err)
	}
	return Env{Home: home, Cwd: cwd, GOOS: runtime.GOOS, Lookup: os.LookupEnv}, nil
}

func (e Env) get(k string) string {
	if e.Lookup == nil {
		return ""
	}
	v, _ := e.Lookup(k)
	return v
}

// join joins path elements with the separator of e's OS, so that the
// Windows locations read right even when computed elsewhere (tests).
func (e Env) join(elem ...string) string {
	if e.GOOS == "windows" && runtime.GOOS != "windows" {
		return strings.Join(elem, `\`)
	}
	return filepath.Join(elem...)
}

// Location is one config file a client reads.
type Location struct {
	Path string
	// Project is the directory the file belongs to, or "" for the user's
	// own file: ${workspaceFolder} and the servers' working directory
	// resolve against it.
	Project string
}

// Locations lists the files client reads on e's OS, existing or not, in
// the order they are imported.
func Locations(c Client, e Env) []Location {
	user := func(p string) Location { return Location{Path: p} }
	project := func(rel ...string) Location {
		return Location{Path: e.join(append([]string{e.Cwd}, rel...)...), Project: e.Cwd}
	}
	switch c {
	case ClaudeDesktop:
		return []Location{user(e.join(e.appConfigDir(), "Claude", "claude_desktop_config.json"))}
	case ClaudeCode:
		var out []Location
		if d := e.get("CLAUDE_CONFIG_DIR"); d != "" {
			out = append(out, user(e.join(d, ".claude.json")))
		}
		return append(out, user(e.join(e.Home, ".claude.json")), project(".mcp.json"))
	case Cursor:
		return []Location{user(e.join(e.Home, ".cursor", "mcp.json")), project(".cursor", "mcp.json")}
	case VSCode:
		dir := e.join(e.appConfigDir(), "Code", "User")
		return []Location{user(e.join(dir, "mcp.json")), user(e.join(dir, "settings.json")), project(".vscode", "mcp.json")}
	}
	return nil
}

// shared says l is a project's own file, which the project's repository
// may share with others: not one of the user's home directory itself
// (~/.cursor/mcp.json is Cursor's user config, whatever its shape).
func (e Env) shared(l Location) bool {
	return l.Project != "" && filepath.Clean(l.Project) != filepath.Clean(e.Home)
}

// appConfigDir is where desktop apps keep their settings: XDG config on
// Linux, Application Support on macOS, %APPDATA% on Windows.
func (e Env) appConfigDir() string {
	switch e.GOOS {
	case "darwin":
		return e.join(e.Home, "Library", "Application Support")
	case "windows":
		if d := e.get("APPDATA"); d != "" {
			return d
		}
		return e.join(e.Home, "AppData", "Roaming")
	}
	if d := e.get("XDG_CONFIG_HOME"); d != "" {
		return d
	}
	return e.join(e.Home, ".config")
}

// locationOf guesses the project of a file given with --file from its
// place: .vscode/mcp.json, .cursor/mcp.json and .mcp.json belong to the
// directory above.
func locationOf(path string) Location {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	dir := filepath.Dir(abs)
	switch {
	case filepath.Base(dir) == ".vscode" || filepath.Base(dir) == ".cursor":
		return Location{Path: abs, Project: filepath.Dir(dir)}
	case filepath.Base(abs) == ".mcp.json":
		return Location{Path: abs, Project: dir}
	}
	return Location{Path: abs}
}
