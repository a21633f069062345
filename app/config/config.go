// Package config reads Switchboard's config file: the mcpServers object
// Claude Desktop, Claude Code and Cursor use, plus Switchboard's own
// optional fields. It validates with messages that point at the field.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// File is a parsed config file.
type File struct {
	Servers map[string]Server `json:"mcpServers"`
	HTTP    HTTP              `json:"http"`
	History History           `json:"history"`
	// HangThreshold is when an in-flight request counts as hung. Default 30s.
	HangThreshold string `json:"hangThreshold,omitempty"`
}

// Server is one entry of mcpServers.
type Server struct {
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	// Type and URL describe remote servers, which Switchboard does not
	// pool; such entries are reported and skipped.
	Type string `json:"type,omitempty"`
	URL  string `json:"url,omitempty"`

	Share            string `json:"share,omitempty"`
	IdleTimeout      string `json:"idleTimeout,omitempty"`
	RequestTimeout   string `json:"requestTimeout,omitempty"`
	Disabled         bool   `json:"disabled,omitempty"`
	TrustAnnotations bool   `json:"trustAnnotations,omitempty"`
}

// HTTP configures the Streamable HTTP front door.
type HTTP struct {
	Listen string `json:"listen,omitempty"`
}

// History configures the SQLite request history.
type History struct {
	RetainDays      int  `json:"retainDays,omitempty"`
	Disabled        bool `json:"disabled,omitempty"`
	CapturePayloads bool `json:"capturePayloads,omitempty"`
	CaptureBytes    int  `json:"captureBytes,omitempty"`
	MaxRows         int  `json:"maxRows,omitempty"`
}

// Load reads and validates the file at path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Parse decodes and validates a config. JSON syntax errors name the line
// and column.
func Parse(data []byte) (*File, error) {
	var f File
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("the file is empty")
	}
	if err := json.Unmarshal(data, &f); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := position(data, se.Offset)
			return nil, fmt.Errorf("line %d, column %d: %v", line, col, se)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%s: expected %s, found a JSON %s", te.Field, te.Type, te.Value)
		}
		return nil, err
	}
	if _, err := f.PoolServers(os.LookupEnv); err != nil {
		return nil, err
	}
	if f.HangThreshold != "" {
		if _, err := parseDuration("hangThreshold", f.HangThreshold); err != nil {
			return nil, err
		}
	}
	if f.History.RetainDays < 0 {
		return nil, fmt.Errorf("history.retainDays: %d is negative", f.History.RetainDays)
	}
	return &f, nil
}

func position(data []byte, off int64) (line, col int) {
	line, col = 1, 1
	for i := 0; i < int(off) && i < len(data); i++ {
		if data[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

// Hang returns the hang threshold.
func (f *File) Hang() time.Duration {
	if d, err := time.ParseDuration(f.HangThreshold); err == nil && d > 0 {
		return d
	}
	return 30 * time.Second
}

// Remote lists entries that name a URL instead of a command: Switchboard
// pools stdio servers only.
func (f *File) Remote() []string {
	var out []string
	for name, s := range f.Servers {
		if s.Command == "" && s.URL != "" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// PoolServers validates the servers and turns them into the pool's
// configs, with ${VAR} expanded from lookup. Remote entries are skipped.
func (f *File) PoolServers(lookup func(string) (string, bool)) ([]pool.ServerConfig, error) {
	names := make([]string, 0, len(f.Servers))
	for n := range f.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []pool.ServerConfig
	var errs []error
	for _, name := range names {
		s := f.Servers[name]
		at := "mcpServers." + name
		if s.Command == "" && s.URL != "" {
			continue
		}
		if !validName.MatchString(name) {
			errs = append(errs, fmt.Errorf("%s: the name may use letters, digits, '.', '_' and '-' only", at))
			continue
		}
		if s.Command == "" {
			errs = append(errs, fmt.Errorf("%s.command: missing", at))
			continue
		}
		c := pool.ServerConfig{Name: name, Disabled: s.Disabled, TrustAnnotations: s.TrustAnnotations, Cwd: s.Cwd}
		var err error
		if c.Command, err = expand(at+".command", s.Command, lookup); err != nil {
			errs = append(errs, err)
		}
		for i, a := range s.Args {
			v, err := expand(fmt.Sprintf("%s.args[%d]", at, i), a, lookup)
			if err != nil {
				errs = append(errs, err)
			}
			c.Args = append(c.Args, v)
		}
		if len(s.Env) > 0 {
			c.Env = map[string]string{}
			for k, v := range s.Env {
				ev, err := expand(at+".env."+k, v, lookup)
				if err != nil {
					errs = append(errs, err)
				}
				c.Env[k] = ev
			}
		}
		switch s.Share {
		case "", "shared":
			c.Share = pool.ShareShared
		case "session":
			c.Share = pool.ShareSession
		default:
			errs = append(errs, fmt.Errorf("%s.share: %q is not \"shared\" or \"session\"", at, s.Share))
		}
		if s.IdleTimeout != "" {
			if s.IdleTimeout == "never" {
				c.IdleTimeout = -1
			} else if c.IdleTimeout, err = parseDuration(at+".idleTimeout", s.IdleTimeout); err != nil {
				errs = append(errs, err)
			}
		}
		if s.RequestTimeout != "" {
			if c.RequestTimeout, err = parseDuration(at+".requestTimeout", s.RequestTimeout); err != nil {
				errs = append(errs, err)
			}
		}
		out = append(out, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

var validName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

func parseDuration(at, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: %q is not a duration (try \"10m\" or \"90s\")", at, s)
	}
	return d, nil
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expand replaces ${VAR} (and ${VAR:-default}) from the environment. An
// unset variable without a default is an error naming the field, never
// the value.
func expand(at, s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var missing []string
	out := varRef.ReplaceAllStringFunc(s, func(m string) string {
		sub := varRef.FindStringSubmatch(m)
		if v, ok := lookup(sub[1]); ok {
			return v
		}
		if sub[2] != "" {
			return sub[3]
		}
		missing = append(missing, sub[1])
		return ""
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%s: environment variable %s is not set", at, strings.Join(missing, ", "))
	}
	return out, nil
}

// Starter is the config written on first run: two real servers from npm,
// so a new user sees pooling work at once.
const Starter = `{
  "mcpServers": {
    "memory": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-memory"]
    },
    "everything": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-everything"]
    }
  },
  "history": {"retainDays": 14}
}
`
