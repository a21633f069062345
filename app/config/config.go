// Package config reads Switchboard's config file: the mcpServers object
// Claude Desktop, Claude Code and Cursor use, plus Switchboard's own
// optional fields. It validates with messages that point at the field,
// reports every problem at once, and keeps fields it does not know so that
// a rewrite never loses what another tool (or a newer Switchboard) put
// there.
package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/app/config/jsonedit"
	"github.com/switchboard-mcp/switchboard/app/safefile"
	"github.com/switchboard-mcp/switchboard/pool"
)

// File is a parsed config file.
type File struct {
	Servers map[string]Server `json:"mcpServers"`
	HTTP    HTTP              `json:"http"`
	History History           `json:"history"`
	// HangThreshold is when an in-flight request counts as hung. Default 30s.
	HangThreshold string `json:"hangThreshold,omitempty"`
	// EvictSlowClientsAfter is how long a client may leave its messages
	// unread before its session is evicted (its calls cancelled at the
	// child) so the child's other sessions are not held up. Default 30s.
	EvictSlowClientsAfter string `json:"evictSlowClientsAfter,omitempty"`
	// MaxInFlightPerSession bounds one client session's requests in
	// flight (default: an eighth of a child's 65,536-request queue).
	MaxInFlightPerSession int `json:"maxInFlightPerSession,omitempty"`
	// MaxInFlightMiBPerSession bounds the memory one client session's
	// requests in flight hold in the pool, in MiB (default 128).
	MaxInFlightMiBPerSession int `json:"maxInFlightMiBPerSession,omitempty"`
	// MaxSubscriptionsPerSession bounds one client session's resource
	// subscriptions and open listens (default 4096).
	MaxSubscriptionsPerSession int `json:"maxSubscriptionsPerSession,omitempty"`
	// MaxChildrenPerServer bounds the children one server runs at once:
	// one for each set of client roots (share "shared"), or one for each
	// session (share "session"). Default 32.
	MaxChildrenPerServer int `json:"maxChildrenPerServer,omitempty"`
	// Autostart says whether MCP clients may start the pool.
	Autostart Autostart `json:"autostart,omitzero"`
	// Extra holds the top-level keys Switchboard does not know, verbatim,
	// so that writing the file back keeps them.
	Extra map[string]json.RawMessage `json:"-"`
}

// Server is one entry of mcpServers.
type Server struct {
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	// Type and URL describe remote servers, which Switchboard does not
	// pool; such entries are reported and skipped.
	Type string `json:"type,omitempty"`
	URL  string `json:"url,omitempty"`

	Share            string   `json:"share,omitempty"`
	IdleTimeout      string   `json:"idleTimeout,omitempty"`
	RequestTimeout   string   `json:"requestTimeout,omitempty"`
	Disabled         bool     `json:"disabled,omitempty"`
	TrustAnnotations bool     `json:"trustAnnotations,omitempty"`
	Restart          *Restart `json:"restart,omitempty"`
	// Resolve false keeps an npx command as written; by default the pool
	// starts the package's script with node, without npx (app/npx).
	Resolve *bool `json:"resolve,omitempty"`
	// Extra holds keys of this entry Switchboard does not know (other
	// clients' fields such as envFile), verbatim.
	Extra map[string]json.RawMessage `json:"-"`
}

// Restart is a server's crash-loop policy as written in the file. Zero
// fields mean the pool's defaults (5 restarts in 60 s, backoff 100 ms to
// 10 s).
type Restart struct {
	MaxRestarts int                        `json:"maxRestarts,omitempty"`
	Window      string                     `json:"window,omitempty"`
	MinBackoff  string                     `json:"minBackoff,omitempty"`
	MaxBackoff  string                     `json:"maxBackoff,omitempty"`
	Extra       map[string]json.RawMessage `json:"-"`
}

// HTTP configures the Streamable HTTP front door.
type HTTP struct {
	Listen string `json:"listen,omitempty"`
	// AllowedOrigins are browser origins ("http://localhost:5173") allowed
	// to call the front door besides its own; the token is still needed.
	AllowedOrigins []string                   `json:"allowedOrigins,omitempty"`
	Extra          map[string]json.RawMessage `json:"-"`
}

// Autostart configures how the pool starts when a client finds none
// running. Starting at login is not here: it is a file the OS reads
// (`switchboard autostart on`), not a setting of the pool.
type Autostart struct {
	// FromClients lets `switchboard connect` start the pool when none
	// runs. Default true: a client that finds no pool otherwise fails.
	FromClients *bool `json:"fromClients,omitempty"`
	// IdleExit stops a pool that a client started once no session has
	// been seen for this long. Default 10m; "never" keeps it running.
	IdleExit string `json:"idleExit,omitempty"`
	// FollowInstall upgrades a running pool in place when its binary is
	// replaced on disk (a package upgrade): children keep running and
	// sessions resume (`switchboard upgrade`). Default true.
	FollowInstall *bool                      `json:"followInstall,omitempty"`
	Extra         map[string]json.RawMessage `json:"-"`
}

// DefaultIdleExit is how long a pool started by a client stays up after
// its last session.
const DefaultIdleExit = 10 * time.Minute

// FollowsInstall reports whether the pool upgrades itself when its binary
// is replaced.
func (a Autostart) FollowsInstall() bool { return a.FollowInstall == nil || *a.FollowInstall }

// StartFromClients reports whether clients may start the pool.
func (a Autostart) StartFromClients() bool { return a.FromClients == nil || *a.FromClients }

// IdleExitAfter is the idle time after which a pool a client started
// stops; zero means never.
func (a Autostart) IdleExitAfter() time.Duration {
	if a.IdleExit == "never" {
		return 0
	}
	if d, err := time.ParseDuration(a.IdleExit); err == nil && d > 0 {
		return d
	}
	return DefaultIdleExit
}

// History configures the SQLite request history.
type History struct {
	RetainDays      int                        `json:"retainDays,omitempty"`
	Disabled        bool                       `json:"disabled,omitempty"`
	CapturePayloads bool                       `json:"capturePayloads,omitempty"`
	CaptureBytes    int                        `json:"captureBytes,omitempty"`
	MaxRows         int                        `json:"maxRows,omitempty"`
	Extra           map[string]json.RawMessage `json:"-"`
}

// MaxFileBytes bounds a config file: a config is a few kilobytes; a
// bigger one is a mistake or an attack (a symlink to something endless).
const MaxFileBytes = 4 << 20

// ReadFile reads a config file safely: a regular file (after symlinks) of
// at most MaxFileBytes, without blocking (a FIFO in its place must not
// hang a reload or a shutdown).
func ReadFile(path string) ([]byte, error) { return safefile.Read(path, MaxFileBytes) }

// Load reads and validates the file at path. A problem with the content
// is an *Error naming the file and every field at fault.
func Load(path string) (*File, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(data)
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.File = path
		}
		return nil, err
	}
	return f, nil
}

// Parse decodes and validates a config, with ${VAR} references checked
// against the process environment. Its error is an *Error listing every
// problem found.
func Parse(data []byte) (*File, error) { return parse(data, os.LookupEnv) }

// parse is Parse with ${VAR} references looked up by lookup.
func parse(data []byte, lookup func(string) (string, bool)) (*File, error) {
	f, p := decode(data)
	if f == nil {
		return nil, p.err()
	}
	// Every problem at once: the values are checked even when some have
	// the wrong type; a field already reported is not reported again.
	var vp problems
	f.validate(lookup, &vp)
	reported := map[string]bool{}
	for _, pr := range p.list {
		reported[pr.Field] = true
	}
	for _, pr := range vp.list {
		if !reported[pr.Field] {
			p.list = append(p.list, pr)
		}
	}
	if len(p.list) > 0 {
		off, known := f.History.Disabled, true
		for _, pr := range p.list {
			off = off && pr.Field != "history" && pr.Field != "history.disabled"
			top, _, _ := strings.Cut(pr.Field, ".")
			known = known && pr.Field != "" && !strings.EqualFold(top, "history")
		}
		e := &Error{Problems: p.list, HistoryOff: off, Unknown: f.Unknown()}
		if known {
			h := f.History
			e.History = &h
		}
		return nil, e
	}
	return f, nil
}

// Decode reads the file's structure (JSON syntax and types) without
// checking values, for callers that only read or rewrite it. Unknown keys
// land in the Extra maps.
func Decode(data []byte) (*File, error) {
	f, p := decode(data)
	if err := p.err(); err != nil {
		return nil, err
	}
	return f, nil
}

// decode is Decode's work: the file as far as it could be read (nil when
// it is no JSON at all) and the problems found on the way.
func decode(data []byte) (*File, *problems) {
	p := &problems{}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a BOM, as Notepad writes
	if len(bytes.TrimSpace(data)) == 0 {
		p.add("", "the file is empty")
		return nil, p
	}
	root, err := jsonedit.Parse(data)
	if err != nil {
		p.add("", "%s", err)
		return nil, p
	}
	return decodeFile(data, root, p), p
}

// Hang returns the hang threshold.
func (f *File) Hang() time.Duration {
	if d, err := time.ParseDuration(f.HangThreshold); err == nil && d > 0 {
		return d
	}
	return DefaultHangThreshold
}

// DefaultHangThreshold is when an in-flight request counts as hung
// unless hangThreshold says otherwise.
const DefaultHangThreshold = 30 * time.Second

// EvictAfter returns the slow-client eviction time.
func (f *File) EvictAfter() time.Duration {
	if d, err := time.ParseDuration(f.EvictSlowClientsAfter); err == nil && d > 0 {
		return d
	}
	return 30 * time.Second
}

// RestartPolicy returns the crash-loop policy of server name, and false
// when the entry sets none (use the pool's default). Zero fields of the
// policy mean the pool's defaults for those fields.
func (f *File) RestartPolicy(name string) (pool.RestartPolicy, bool) {
	s, ok := f.Servers[name]
	if !ok || s.Restart == nil {
		return pool.RestartPolicy{}, false
	}
	r := s.Restart
	pr := pool.RestartPolicy{MaxRestarts: r.MaxRestarts}
	pr.Window, _ = time.ParseDuration(r.Window)
	pr.MinBackoff, _ = time.ParseDuration(r.MinBackoff)
	pr.MaxBackoff, _ = time.ParseDuration(r.MaxBackoff)
	return pr, true
}

// IsRemote says whether the entry names a remote (URL) server, which
// Switchboard does not pool: clients keep connecting to it directly.
func (s Server) IsRemote() bool {
	switch strings.ToLower(s.Type) {
	case "http", "sse", "streamable-http", "streamablehttp", "ws", "websocket":
		return true
	}
	return s.Command == "" && s.URL != ""
}

// Remote lists entries that name a URL instead of a command: Switchboard
// pools stdio servers only.
func (f *File) Remote() []string {
	var out []string
	for name, s := range f.Servers {
		if s.IsRemote() {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Unknown lists the fields Switchboard does not know, as paths such as
// "mcpServers.memory.envFile". They are kept on rewrite; `config check`
// shows them because a typo ("idleTimout") lands here too.
func (f *File) Unknown() []string {
	var out []string
	add := func(at string, extra map[string]json.RawMessage) {
		for k := range extra {
			out = append(out, join(at, k))
		}
	}
	add("", f.Extra)
	add("http", f.HTTP.Extra)
	add("history", f.History.Extra)
	for name, s := range f.Servers {
		add("mcpServers."+name, s.Extra)
		if s.Restart != nil {
			add("mcpServers."+name+".restart", s.Restart.Extra)
		}
	}
	sort.Strings(out)
	return out
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

// Marshal encodes the file with its unknown fields, indented. Key order
// is Switchboard's, then unknown keys sorted; to edit a user's file
// without reordering it, use package jsonedit instead.
func (f *File) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return append(b, '\n'), nil
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
