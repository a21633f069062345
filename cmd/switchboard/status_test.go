package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/pool"
)

// statusFixture is a pool with one ready server, one that crash-looped
// and one whose command is not on PATH (it never started).
func statusFixture(now time.Time) control.Status {
	crashReason := `server "crashy" failed: it exited 5 times in 1m0s (last: server "crashy": the child exited before answering server/discover or initialize)`
	return control.Status{
		Servers: []pool.ServerInfo{
			{Name: "memory", Share: pool.ShareShared, State: pool.StateReady},
			{Name: "crashy", Share: pool.ShareShared, State: pool.StateFailed, Error: crashReason},
			{Name: "nopath", Share: pool.ShareShared, State: pool.StateFailed},
		},
		Backends: []pool.BackendInfo{
			{Server: "memory", PID: 5001, State: pool.StateReady, StartedAt: now.Add(-90 * time.Second), Sessions: 2,
				Command: []string{"npx", "-y", "@modelcontextprotocol/server-memory"}},
			{Server: "crashy", State: pool.StateFailed, StartedAt: now.Add(-2 * time.Second), Restarts: 4,
				Command: []string{"crashy-mcp"}, LastError: "the child exited before answering",
				StderrTail: []string{"one", "two", "Traceback (most recent call last):", "  File \"srv.py\", line 3", "KeyError: 'TOKEN'", "exiting"}},
			{Server: "nopath", State: pool.StateFailed, Command: []string{"npx-not-here"},
				LastError: `start nopath: command "npx-not-here" is not on Switchboard's PATH (/usr/bin:/bin): write its absolute path in the config, ` +
					"or start Switchboard with your shell's PATH (for a pool that a client starts, `switchboard setup CLIENT` puts it in the client's entry) and restart Switchboard"},
		},
		Sessions: []pool.SessionInfo{{ID: "s1", ConnectedAt: now, LastActiveAt: now}, {ID: "s2", ConnectedAt: now, LastActiveAt: now}},
	}
}

// TestStatusText: a failed server's reason and last stderr lines follow
// the table, so that `switchboard status` says why, not only "failed".
func TestStatusText(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	if err := printStatus(&out, statusFixture(now), now); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "status", "failed.golden"), out.String())
}

// TestStatusTextSaysWhatWaitsForARestart: settings the file changed that
// the running pool applies only at its next start are named above the
// table, so that a user who edited them knows why nothing changed.
func TestStatusTextSaysWhatWaitsForARestart(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	st := statusFixture(now)
	st.Servers, st.Backends = st.Servers[:1], st.Backends[:1]
	st.RestartNeeded = []string{"http.listen", "history.retainDays"}
	var out bytes.Buffer
	if err := printStatus(&out, st, now); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "status", "restart.golden"), out.String())
}

// TestStatusTextEscapesTheConfigError: a config error quotes the file,
// whose text may hold escape sequences; the text status shows them
// escaped.
func TestStatusTextEscapesTheConfigError(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	st := statusFixture(now)
	msg := "mcpServers.x\x1b]0;PWNED\ay: want a string"
	st.ConfigError = &msg
	st.Backends[0].Server = "x\x1b[2Jy"
	var out bytes.Buffer
	if err := printStatus(&out, st, now); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\a") {
		t.Errorf("status printed raw escape sequences:\n%q", out.String())
	}
}

// TestStatusJSONBackendKeys: every backend has the keys status --json
// promises (server, pid, state, startedAt, sessions, restarts); one that
// never started has "pid": 0 and "startedAt": null, rather than no key or
// "0001-01-01T00:00:00Z".
func TestStatusJSONBackendKeys(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	if err := printJSON(&out, statusFixture(now)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "0001-01-01") {
		t.Errorf("status --json shows a zero time:\n%s", out.String())
	}
	var st struct {
		Backends []map[string]json.RawMessage `json:"backends"`
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	nulls := 0
	for _, b := range st.Backends {
		for _, k := range []string{"server", "pid", "state", "startedAt", "sessions", "restarts"} {
			if _, ok := b[k]; !ok {
				t.Errorf("backend %s has no %q", b["server"], k)
			}
		}
		if string(b["startedAt"]) == "null" {
			nulls++
			if string(b["pid"]) != "0" {
				t.Errorf("a backend that never started has pid %s", b["pid"])
			}
		}
	}
	if nulls != 1 {
		t.Errorf("%d backends with startedAt null, want 1 (the one that never started)", nulls)
	}
}

// TestStatusTextShowsServersNotStarted: a server with no child is a row
// of the table (a user-disabled one, one not started yet), and one not
// started because a ${VAR} it needs is not set says why after the table,
// as status --json and the tray do; a config the pool cannot watch is
// said above it.
func TestStatusTextShowsServersNotStarted(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	st := statusFixture(now)
	st.Servers, st.Backends = st.Servers[:1], st.Backends[:1]
	why := "mcpServers.gh.args[1]: environment variable GH_TOKEN is not set; the server is not started"
	st.Servers = append(st.Servers,
		pool.ServerInfo{Name: "gh", Share: pool.ShareShared, Disabled: true, State: "disabled", Error: why},
		pool.ServerInfo{Name: "off", Share: pool.ShareShared, Disabled: true, State: "disabled"},
		pool.ServerInfo{Name: "lazy", Share: pool.ShareShared, State: pool.StateStopped})
	watch := "watch config: too many open files"
	st.ConfigWatchError = &watch
	var out bytes.Buffer
	if err := printStatus(&out, st, now); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "status", "notstarted.golden"), out.String())
}

// TestStatusTextSaysWhyAServerIsStarting: a server that is starting says
// why after the table, as status --json does: its npx package being
// resolved before any child ran (npm may take a minute or more to
// download it, longer than a client waits for its first answer), a child
// that has not answered its handshake. The table alone said "stopped",
// then "starting", and nothing about why.
func TestStatusTextSaysWhyAServerIsStarting(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	st := statusFixture(now)
	st.Servers, st.Backends = st.Servers[:1], st.Backends[:1]
	resolving := "resolving the package to start it without its package-manager wrapper (npm may be downloading it)"
	handshake := "waiting for its handshake (server/discover, initialize): restarted if it does not answer within 1m0s"
	st.Servers = append(st.Servers,
		pool.ServerInfo{Name: "notes", Share: pool.ShareShared, State: pool.StateStarting, StateReason: resolving},
		pool.ServerInfo{Name: "slow", Share: pool.ShareShared, State: pool.StateStarting, StateReason: handshake})
	st.Backends = append(st.Backends, pool.BackendInfo{Server: "slow", PID: 5002, State: pool.StateStarting,
		StartedAt: now.Add(-20 * time.Second), Command: []string{"slow-mcp"}, StateReason: handshake})
	var out bytes.Buffer
	if err := printStatus(&out, st, now); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "status", "starting.golden"), out.String())
}

// TestStatusTextSaysAServerDrains: a server removed from the config
// whose child still finishes calls is marked draining in its rows, and
// a line after the table says what that means; its rows showed "ready"
// alone, as if it were still configured.
func TestStatusTextSaysAServerDrains(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	st := statusFixture(now)
	st.Servers = append(st.Servers[:1], pool.ServerInfo{Name: "hang", Share: pool.ShareShared, State: pool.StateReady, Draining: true})
	st.Backends = append(st.Backends[:1], pool.BackendInfo{Server: "hang", PID: 6001, State: pool.StateReady,
		StartedAt: now.Add(-10 * time.Second), InFlight: 2, Command: []string{"hang-mcp"}})
	st.InFlight = []pool.RequestInfo{{Server: "hang", Method: "tools/call"}, {Server: "hang", Method: "tools/call"}}
	var out bytes.Buffer
	if err := printStatus(&out, st, now); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "status", "draining.golden"), out.String())
}

// TestStatusTextSaysOneInTheSingular: one session, one request, one
// setting waiting for a restart read as one ("1 session", "it takes
// effect"), not "1 sessions" and "they take effect".
func TestStatusTextSaysOneInTheSingular(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	st := statusFixture(now)
	st.Servers, st.Backends, st.Sessions = st.Servers[:1], st.Backends[:1], st.Sessions[:1]
	st.InFlight = []pool.RequestInfo{{Session: "s1", Server: "memory", Method: "tools/call", ReceivedAt: now}}
	st.RestartNeeded = []string{"http.listen"}
	var out bytes.Buffer
	if err := printStatus(&out, st, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\n1 session, 1 request in flight\n", "the config file changed http.listen; it takes effect when Switchboard restarts"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status does not say %q:\n%s", want, out.String())
		}
	}
}
