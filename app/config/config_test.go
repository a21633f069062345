package config

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchboard-mcp/switchboard/pool"
)

var update = flag.Bool("update", false, "rewrite golden files")

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func problemsOf(err error) []string {
	var e *Error
	if !errors.As(err, &e) {
		return []string{"not a *config.Error: " + err.Error()}
	}
	var out []string
	for _, p := range e.Problems {
		out = append(out, p.String())
	}
	return out
}

func TestValidationProblems(t *testing.T) {
	lookup := env(map[string]string{"HOME": "/home/u"})
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "  \n", []string{"the file is empty"}},
		{"syntax", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n    \"b\": {}\n  }\n}",
			[]string{`line 4, column 5: expected ',' or '}' after the value of "a" (a missing comma?)`}},
		{"comment", "{\n // no\n}", []string{`line 2, column 2: expected a quoted key, found '/'`}},
		{"not an object", `[1]`, []string{"the file must hold a JSON object ({...}), found a array"}},
		{"duration words", `{"mcpServers": {"memory": {"command": "npx", "idleTimeout": "10 minutes"}}}`,
			[]string{`mcpServers.memory.idleTimeout: "10 minutes" is not a duration (try "10m")`}},
		{"a type problem and the others", `{"hangThreshold": 30, "history": {"retainDays": -1},
			"mcpServers": {"a": {"command": "x", "idleTimeout": 60}, "b": {"command": "x", "share": "all"}}}`, []string{
			`hangThreshold: expected a string, found a number (write "30s")`,
			`mcpServers.a.idleTimeout: expected a string, found a number (write "60s")`,
			`mcpServers.b.share: "all" is not "shared", "session" or "global"`,
			`history.retainDays: -1 is negative`,
		}},
		{"duplicate servers", "{\"mcpServers\": {\n  \"a\": {\"command\": \"x\"},\n  \"a\": {\"command\": \"y\"}}}", []string{
			`mcpServers.a: defined twice (lines 2 and 3); only the last would count: keep one`,
		}},
		{"duplicate fields", `{"hangThreshold": "1s", "hangThreshold": "2s", "mcpServers": {"a": {"command": "x", "command": "y"}}}`, []string{
			`hangThreshold: defined twice (lines 1 and 1); only the last would count: keep one`,
			`mcpServers.a.command: defined twice (lines 1 and 1); only the last would count: keep one`,
		}},
		{"every problem at once", `{
			"mcpServers": {
				"a": {"command": "x", "args": ["ok", 3], "env": {"PORT": 8080}, "share": "all"},
				"b": {"args": []},
				"c d": {"command": "x"},
				"e": {"command": "x", "requestTimeout": "0s", "idleTimeout": "-1m", "restart": {"maxRestarts": -1, "window": "1 hour 30 mins", "minBackoff": "5s", "maxBackoff": "1s"}},
				"f": {"command": "${NOPE}", "env": {"T": "${input:token}", "U": "${env:HOME}", "W": "${workspaceFolder}x"}},
				"g": {"type": "http"},
				"h": {"command": "x", "type": "pipe", "disabled": "yes"}
			},
			"hangThreshold": "30",
			"http": {"listen": "0.0.0.0:7777"},
			"history": {"retainDays": -1, "maxRows": 1.5}
		}`, []string{
			`mcpServers.a.args[1]: expected a string, found a number (write "3")`,
			`mcpServers.a.env.PORT: expected a string, found a number (write it as a string, in quotes)`,
			`mcpServers.h.disabled: expected true or false, found a string`,
			`history.maxRows: expected a whole number, found a number`,
			`mcpServers.a.share: "all" is not "shared", "session" or "global"`,
			`mcpServers.b.command: missing (a stdio server needs a command; a remote one needs url)`,
			`mcpServers.e.idleTimeout: "-1m" must be more than zero (use "never" to keep the child running)`,
			`mcpServers.e.requestTimeout: "0s" must be more than zero`,
			`mcpServers.e.restart.maxRestarts: -1 is negative`,
			`mcpServers.e.restart.window: "1 hour 30 mins" is not a duration (try "1h30m")`,
			`mcpServers.e.restart: minBackoff 5s is more than maxBackoff 1s`,
			`mcpServers.f.env.T: ${input:token} is a VS Code input; write its value or a ${VAR} reference here`,
			`mcpServers.f.env.U: write ${HOME} instead of ${env:HOME}`,
			`mcpServers.f.env.W: environment variable workspaceFolder is not set`,
			`mcpServers.g.url: missing (type "http" is a remote server)`,
			`mcpServers.h.type: "pipe" is not "stdio", "http" or "sse"`,
			`hangThreshold: "30" is not a duration (try "30s")`,
			`http.listen: "0.0.0.0:7777" is not a loopback address; the front door serves this machine's clients over plain HTTP: its token would cross the network unencrypted (use 127.0.0.1 or [::1])`,
			`history.retainDays: -1 is negative`,
		}},
		// The same file with the types fixed.
		{"every value problem at once", `{
			"mcpServers": {
				"a": {"command": "x", "args": ["ok"], "share": "all"},
				"b": {"args": []},
				"c d": {"command": "x"},
				"e": {"command": "x", "requestTimeout": "0s", "idleTimeout": "-1m", "restart": {"maxRestarts": -1, "window": "1 hour 30 mins", "minBackoff": "5s", "maxBackoff": "1s"}},
				"f": {"command": "${NOPE}", "env": {"T": "${input:token}", "U": "${env:HOME}", "W": "${workspaceFolder}x"}},
				"g": {"type": "http"},
				"h": {"command": "x", "type": "pipe"}
			},
			"hangThreshold": "30",
			"evictSlowClientsAfter": "0s",
			"http": {"listen": "0.0.0.0:7777"},
			"history": {"retainDays": -1},
			"maxSubscriptionsPerSession": -1,
			"maxChildrenPerServer": -2
		}`, []string{
			`mcpServers.a.share: "all" is not "shared", "session" or "global"`,
			`mcpServers.b.command: missing (a stdio server needs a command; a remote one needs url)`,
			`mcpServers.e.idleTimeout: "-1m" must be more than zero (use "never" to keep the child running)`,
			`mcpServers.e.requestTimeout: "0s" must be more than zero`,
			`mcpServers.e.restart.maxRestarts: -1 is negative`,
			`mcpServers.e.restart.window: "1 hour 30 mins" is not a duration (try "1h30m")`,
			`mcpServers.e.restart: minBackoff 5s is more than maxBackoff 1s`,
			`mcpServers.f.env.T: ${input:token} is a VS Code input; write its value or a ${VAR} reference here`,
			`mcpServers.f.env.U: write ${HOME} instead of ${env:HOME}`,
			`mcpServers.f.env.W: environment variable workspaceFolder is not set`,
			`mcpServers.g.url: missing (type "http" is a remote server)`,
			`mcpServers.h.type: "pipe" is not "stdio", "http" or "sse"`,
			`hangThreshold: "30" is not a duration (try "30s")`,
			`evictSlowClientsAfter: "0s" must be more than zero`,
			`http.listen: "0.0.0.0:7777" is not a loopback address; the front door serves this machine's clients over plain HTTP: its token would cross the network unencrypted (use 127.0.0.1 or [::1])`,
			`history.retainDays: -1 is negative`,
			`maxSubscriptionsPerSession: -1 is negative`,
			`maxChildrenPerServer: -2 is negative`,
		}},
		{"letter case", `{"McpServers": {}, "MaxChildrenPerServer": 4, "mcpServers": {"a": {"Command": "x", "command": "y"}}}`, []string{
			`McpServers: unknown field; did you mean "mcpServers"?`,
			`MaxChildrenPerServer: unknown field; did you mean "maxChildrenPerServer"?`,
			`mcpServers.a.Command: unknown field; did you mean "command"?`,
		}},
		{"VS Code's servers key", `{"servers": {"memory": {"type": "stdio", "command": "npx"}}}`, []string{
			`servers: VS Code's key: Switchboard's servers go under "mcpServers" (switchboard import --from vscode --file FILE converts a VS Code file)`,
		}},
		{"another tool's servers value is kept", `{"servers": ["a"], "mcpServers": {}}`, nil},
		// A misspelt servers key (a search and replace gone wrong) once
		// loaded as a file with no servers: a reload ended them all, and
		// nothing said why.
		{"servers under a misspelt key", `{"mcpServerv1": {"memory": {"command": "npx"}}, "notes": "kept", "http": {}}`, []string{
			`mcpServerv1: unknown field, and the file has no "mcpServers": are the servers meant to be here? (a file with no servers says "mcpServers": {})`,
		}},
		{"another tool's object beside mcpServers is kept", `{"other": {"a": 1}, "mcpServers": {}}`, nil},
		{"an explicit null is no servers", `{"other": {"a": 1}, "mcpServers": null}`, nil},
		{"disabled entries may wait for values", `{"mcpServers": {"a": {"command": "x", "disabled": true, "env": {"T": "${input:t}", "U": "${UNSET}"}}}}`, nil},
		{"remote entries are fine", `{"mcpServers": {"r": {"url": "https://example.com/mcp"}, "s": {"type": "sse", "url": "https://example.com/sse"}}}`, nil},
		{"listen localhost", `{"http": {"listen": "localhost:7777"}, "mcpServers": {}}`, nil},
		{"listen v6", `{"http": {"listen": "[::1]:7777"}}`, nil},
		{"idle never", `{"mcpServers": {"a": {"command": "x", "idleTimeout": "never"}}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse([]byte(tt.in), lookup)
			var got []string
			if err != nil {
				got = problemsOf(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProblemsNeverQuoteEnvValues: a config's problems reach the log,
// `status`, `config check` and the history whole or nearly so, and an
// env value is a secret more often than not (a token written as a
// number), so a problem at an env field names the field, never its value.
func TestProblemsNeverQuoteEnvValues(t *testing.T) {
	const secret = "987654321123"
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"a number", `{"mcpServers": {"b": {"command": "x", "env": {"TOKEN": 987654321123}}}}`,
			[]string{`mcpServers.b.env.TOKEN: expected a string, found a number (write it as a string, in quotes)`}},
		{"a boolean", `{"mcpServers": {"b": {"command": "x", "env": {"DEBUG": true}}}}`,
			[]string{`mcpServers.b.env.DEBUG: expected a string, found a boolean (write it as a string, in quotes)`}},
		{"a duration's name", `{"mcpServers": {"b": {"command": "x", "env": {"window": 987654321123}}}}`,
			[]string{`mcpServers.b.env.window: expected a string, found a number (write it as a string, in quotes)`}},
		{"a reference that is none", `{"mcpServers": {"b": {"command": "x", "env": {"TOKEN": "${987654321123 }"}}}}`,
			[]string{`mcpServers.b.env.TOKEN: a ${...} that is not a ${VAR} or ${VAR:-default} reference`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse([]byte(tt.in), env(nil))
			got := problemsOf(err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("the error quotes the env value: %v", err)
			}
		})
	}
}

func TestErrorText(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	os.WriteFile(path, []byte(`{"mcpServers": {"m": {"command": "x", "idleTimeout": "10 minutes", "share": "x"}}}`), 0o600)
	_, err := Load(path)
	want := path + `: 2 problems: mcpServers.m.share: "x" is not "shared", "session" or "global"; mcpServers.m.idleTimeout: "10 minutes" is not a duration (try "10m")`
	if err == nil || err.Error() != want {
		t.Fatalf("Load error:\n got %v\nwant %s", err, want)
	}
	os.WriteFile(path, []byte(`{"mcpServers": {"m": {"command": "x", "idleTimeout": "10 minutes"}}}`), 0o600)
	_, err = Load(path)
	want = path + `: mcpServers.m.idleTimeout: "10 minutes" is not a duration (try "10m")`
	if err == nil || err.Error() != want {
		t.Fatalf("Load error:\n got %v\nwant %s", err, want)
	}
}

// TestBrokenFileSwitchingHistoryOff: of a file that does not load, only
// a clean history.disabled: true is read (Error.HistoryOff); a history
// section at fault, or a file that is no JSON, switches nothing. Its
// history settings are known (Error.History) when its JSON reads and no
// problem is in its history section: the problems are elsewhere.
func TestBrokenFileSwitchingHistoryOff(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		off       bool
		history   *History
	}{
		{"off, a problem elsewhere", `{"hangThreshold": "soon", "history": {"disabled": true}}`, true, &History{Disabled: true}},
		{"off, another history field at fault", `{"history": {"disabled": true, "maxRows": "many"}}`, true, nil},
		{"on, a problem elsewhere", `{"hangThreshold": "soon", "history": {"disabled": false, "retainDays": 3}}`, false, &History{RetainDays: 3}},
		{"not said", `{"hangThreshold": "soon"}`, false, &History{}},
		{"a server at fault", `{"mcpServers": {"a": {"args": []}}, "history": {"capturePayloads": true}}`, false, &History{CapturePayloads: true}},
		{"disabled at fault", `{"hangThreshold": "soon", "history": {"disabled": "yes"}}`, false, nil},
		{"disabled said twice", `{"hangThreshold": "soon", "history": {"disabled": true, "disabled": false}}`, false, nil},
		{"history at fault", `{"hangThreshold": "soon", "history": true}`, false, nil},
		{"history said twice", `{"history": {}, "history": {"disabled": true}}`, false, nil},
		{"history misspelt", `{"History": {"disabled": true}}`, false, nil},
		{"history field misspelt", `{"history": {"Disabled": true}}`, false, nil},
		{"no object", `[{"history": {}}]`, false, nil},
		{"no JSON", `{"history": {"disabled": true}`, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse error %v, want an *Error", err)
			}
			if ce.HistoryOff != tc.off {
				t.Errorf("HistoryOff = %v, want %v (problems %q)", ce.HistoryOff, tc.off, ce.Problems)
			}
			if diff := cmp.Diff(tc.history, ce.History); diff != "" {
				t.Errorf("History (-want +got), problems %q:\n%s", ce.Problems, diff)
			}
		})
	}
}

func TestDurationHint(t *testing.T) {
	for in, want := range map[string]string{
		"10 minutes": "10m", "10 min": "10m", "90": "90s", "1 hour 30 mins": "1h30m", "2 days": "48h",
		"500 ms": "500ms", "1.5 hours": "1.5h", "ten minutes": "10m", "5 fortnights": "10m", "1h and 5m": "1h5m",
	} {
		if got := durationHint(in); got != want {
			t.Errorf("durationHint(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPoolServers(t *testing.T) {
	home := t.TempDir() // where a server without cwd starts, and a relative cwd is from
	t.Setenv("HOME", home)
	f, err := Decode([]byte(`{"mcpServers": {
		"m": {"command": "${BIN:-npx}", "args": ["-y", "${PKG}"], "env": {"K": "${KEY}", "L": "lit"}, "cwd": "${HOME}/w",
		      "share": "session", "idleTimeout": "never", "requestTimeout": "5s", "trustAnnotations": true},
		"r": {"url": "https://x/mcp"},
		"d": {"command": "x", "disabled": true},
		"t": {"command": "x", "cwd": "src/tools"}
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.PoolServers(env(map[string]string{"PKG": "pkg", "KEY": "secret", "HOME": "/h"}))
	if err != nil {
		t.Fatal(err)
	}
	want := []pool.ServerConfig{
		{Name: "d", Command: "x", Shown: []string{"x"}, Cwd: home, Share: pool.ShareShared, Disabled: true},
		{Name: "m", Command: "npx", Args: []string{"-y", "pkg"}, Shown: []string{"${BIN:-npx}", "-y", "${PKG}"},
			Env: map[string]string{"K": "secret", "L": "lit"}, Cwd: "/h/w",
			Share: pool.ShareSession, IdleTimeout: -1, RequestTimeout: 5 * time.Second, TrustAnnotations: true},
		{Name: "t", Command: "x", Shown: []string{"x"}, Cwd: filepath.Join(home, "src", "tools"), Share: pool.ShareShared},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PoolServers (-want +got):\n%s", diff)
	}
	if r := f.Remote(); !cmp.Equal(r, []string{"r"}) {
		t.Errorf("Remote = %v", r)
	}
	// A server with an unset variable is not started, and the reason
	// never shows an env value.
	got, err = f.PoolServers(env(map[string]string{"KEY": "secret"}))
	if err != nil || len(got) != 3 || !got[1].Disabled {
		t.Errorf("PoolServers = %+v, %v; want m disabled", got, err)
	}
	ns := f.NotStarted(env(map[string]string{"KEY": "secret"}))
	if len(ns) != 2 || strings.Contains(fmt.Sprint(ns), "secret") || !strings.Contains(ns[0].String(), "PKG is not set") {
		t.Errorf("NotStarted = %v", ns)
	}
}

// TestServerDir: without a home directory to start in (HOME names none,
// as for some service accounts) a server starts in the pool's directory,
// as before, rather than not at all.
func TestServerDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for cwd, want := range map[string]string{"": home, "w": filepath.Join(home, "w"), "/srv/w": "/srv/w"} {
		if got := ServerDir(cwd); got != want {
			t.Errorf("ServerDir(%q) = %q, want %q", cwd, got, want)
		}
	}
	t.Setenv("HOME", filepath.Join(home, "missing"))
	for cwd, want := range map[string]string{"": "", "w": "w", "/srv/w": "/srv/w"} {
		if got := ServerDir(cwd); got != want {
			t.Errorf("HOME missing: ServerDir(%q) = %q, want %q", cwd, got, want)
		}
	}
}

func TestRestartPolicyAndHang(t *testing.T) {
	f, err := Parse([]byte(`{"hangThreshold": "45s", "evictSlowClientsAfter": "5s", "mcpServers": {
		"a": {"command": "x", "restart": {"maxRestarts": 3, "window": "2m", "minBackoff": "50ms", "maxBackoff": "5s"}},
		"b": {"command": "x", "restart": {"maxRestarts": 9}},
		"c": {"command": "x"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if f.Hang() != 45*time.Second || f.EvictAfter() != 5*time.Second {
		t.Errorf("Hang = %v, EvictAfter = %v", f.Hang(), f.EvictAfter())
	}
	for _, tt := range []struct {
		name string
		want pool.RestartPolicy
		ok   bool
	}{
		{"a", pool.RestartPolicy{MaxRestarts: 3, Window: 2 * time.Minute, MinBackoff: 50 * time.Millisecond, MaxBackoff: 5 * time.Second}, true},
		{"b", pool.RestartPolicy{MaxRestarts: 9}, true},
		{"c", pool.RestartPolicy{}, false},
		{"missing", pool.RestartPolicy{}, false},
	} {
		got, ok := f.RestartPolicy(tt.name)
		if got != tt.want || ok != tt.ok {
			t.Errorf("RestartPolicy(%s) = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
	if (&File{}).Hang() != 30*time.Second || (&File{}).EvictAfter() != 30*time.Second {
		t.Error("default hang threshold or eviction time is not 30s")
	}
}

// TestUnknownFieldsRoundTrip decodes a file full of fields Switchboard
// does not know and encodes it again: every one of them survives.
func TestUnknownFieldsRoundTrip(t *testing.T) {
	in, err := os.ReadFile("testdata/unknown.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	wantUnknown := []string{"$schema", "globalShortcut", "history.vacuum", "http.tls",
		"mcpServers.memory.envFile", "mcpServers.memory.restart.jitter", "mcpServers.memory.x-note", "mcpServers.remote.headers"}
	if diff := cmp.Diff(wantUnknown, f.Unknown()); diff != "" {
		t.Errorf("Unknown (-want +got):\n%s", diff)
	}
	out, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/unknown.golden", out)
	// Semantically the same document: nothing lost, nothing added.
	var a, b any
	json.Unmarshal(in, &a)
	json.Unmarshal(out, &b)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("round trip changed the document (-in +out):\n%s", diff)
	}
	// And json.Unmarshal into a File keeps them too.
	var g File
	if err := json.Unmarshal(in, &g); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f, &g); diff != "" {
		t.Errorf("json.Unmarshal differs from Parse:\n%s", diff)
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func TestDiff(t *testing.T) {
	parse := func(s string) *File {
		t.Helper()
		f, err := Decode([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	old := parse(`{"mcpServers": {
		"same": {"command": "x", "args": ["1"]},
		"args": {"command": "x", "args": ["1"]},
		"env": {"command": "x", "env": {"A": "1", "B": "2"}},
		"idle": {"command": "x", "idleTimeout": "1m"},
		"off": {"command": "x"},
		"gone": {"command": "x"},
		"remote": {"url": "https://x"},
		"extra": {"command": "x", "note": 1},
		"npx": {"command": "npx", "args": ["-y", "p"]}
	}, "http": {"listen": "127.0.0.1:1"}, "hangThreshold": "30s"}`)
	new := parse(`{"mcpServers": {
		"same": {"command": "x", "args": ["1"]},
		"args": {"command": "x", "args": ["2"]},
		"env": {"command": "x", "env": {"A": "1", "C": "2"}},
		"idle": {"command": "x", "idleTimeout": "2m", "restart": {"window": "2m"}},
		"off": {"command": "x", "disabled": true},
		"new": {"command": "y"},
		"remote2": {"url": "https://y"},
		"extra": {"command": "x", "note": 2},
		"npx": {"command": "npx", "args": ["-y", "p"], "resolve": false}
	}, "http": {"listen": "127.0.0.1:2"}, "history": {"retainDays": 3}, "hangThreshold": "30s"}`)
	got := Diff(old, new, env(nil))
	want := DiffResult{
		Added:   []string{"new"},
		Removed: []string{"gone"},
		Changed: []Change{
			{Name: "args", Fields: []string{"args"}, Restarts: true},
			{Name: "env", Fields: []string{"env.B", "env.C"}, Restarts: true},
			{Name: "idle", Fields: []string{"idleTimeout", "restart.window"}},
			{Name: "npx", Fields: []string{"resolve"}, Restarts: true}, // how the child is started: the pool starts a new one
			{Name: "off", Fields: []string{"disabled"}, Stops: true},   // its requests are refused, not sent to a new child
		},
		Unchanged: []string{"extra", "same"},
		Settings:  []string{"http.listen", "history.retainDays"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Diff (-want +got):\n%s", diff)
	}
	if s := got.String(); s != "added: new; removed: gone; changed: args (args; new child), env (env.B, env.C; new child), idle (idleTimeout, restart.window), npx (resolve; new child), off (disabled; requests refused, in-flight ones finish); settings: http.listen, history.retainDays; unchanged: 2" {
		t.Errorf("String = %s", s)
	}
	if !Diff(old, old, env(nil)).Empty() || Diff(nil, old, env(nil)).Empty() {
		t.Error("Empty is wrong")
	}
	if got := Diff(nil, old, env(nil)).Added; len(got) != 8 {
		t.Errorf("Diff(nil, old).Added = %v", got)
	}
}

// TestDiffAsThePoolRuns: the diff compares what the pool compares on a
// reload, ${VAR}s expanded by the config's expander: a value rewritten to
// what it expands to gives no new child, and env or cwd rewritten so is
// no change at all (the pool keeps the server as it is). A server that
// stops running is said to stop, not to get a new child; and under an
// --http override http.listen is the override's on both sides. On the
// first edition the diff compared the text: "env.T changed; new child"
// while the pool kept the child, "http.listen" on every reload of a pool
// started with --http, "(disabled; new child)" for a server whose
// requests are refused.
func TestDiffAsThePoolRuns(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory:", err)
	}
	lookup := env(map[string]string{"TOKEN": "t0k", "DIR": "/srv/x", "BIN": "/usr/bin/srv", "EMPTY": ""})
	tests := []struct {
		name     string
		old, new string // the entry of server "s", or the whole file when it starts with "{\"mcpServers\""
		http     string // the --http override, applied to both sides
		want     DiffResult
		str      string
	}{
		{name: "env rewritten to its value", old: `{"command": "x", "env": {"T": "${TOKEN}"}}`, new: `{"command": "x", "env": {"T": "t0k"}}`,
			want: DiffResult{Unchanged: []string{"s"}}, str: "unchanged: 1"},
		{name: "env default rewritten to its value", old: `{"command": "x", "env": {"T": "${EMPTY:-d}"}}`, new: `{"command": "x", "env": {"T": "d"}}`,
			want: DiffResult{Unchanged: []string{"s"}}},
		{name: "cwd rewritten to its value", old: `{"command": "x", "cwd": "${DIR}"}`, new: `{"command": "x", "cwd": "/srv/x"}`,
			want: DiffResult{Unchanged: []string{"s"}}},
		{name: "no cwd and the home directory", old: `{"command": "x"}`, new: `{"command": "x", "cwd": ` + strconv.Quote(home) + `}`,
			want: DiffResult{Unchanged: []string{"s"}}},
		{name: "share spelled out", old: `{"command": "x"}`, new: `{"command": "x", "share": "shared"}`,
			want: DiffResult{Unchanged: []string{"s"}}},
		{name: "resolve spelled out", old: `{"command": "npx", "args": ["-y", "p"]}`, new: `{"command": "npx", "args": ["-y", "p"], "resolve": true}`,
			want: DiffResult{Unchanged: []string{"s"}}},
		// The pool shows the command line as written: that changes, the
		// child does not.
		{name: "command and args rewritten to their values", old: `{"command": "${BIN}", "args": ["--t", "${TOKEN}"]}`, new: `{"command": "/usr/bin/srv", "args": ["--t", "t0k"]}`,
			want: DiffResult{Changed: []Change{{Name: "s", Fields: []string{"command", "args"}}}}, str: "changed: s (command, args); unchanged: 0"},
		{name: "env value changed", old: `{"command": "x", "env": {"T": "${TOKEN}"}}`, new: `{"command": "x", "env": {"T": "other"}}`,
			want: DiffResult{Changed: []Change{{Name: "s", Fields: []string{"env.T"}, Restarts: true}}}, str: "changed: s (env.T; new child); unchanged: 0"},
		{name: "disabled", old: `{"command": "x"}`, new: `{"command": "x", "disabled": true}`,
			want: DiffResult{Changed: []Change{{Name: "s", Fields: []string{"disabled"}, Stops: true}}},
			str:  "changed: s (disabled; requests refused, in-flight ones finish); unchanged: 0"},
		{name: "a variable now unset", old: `{"command": "x", "env": {"T": "${TOKEN}"}}`, new: `{"command": "x", "env": {"T": "${NOT_SET}"}}`,
			want: DiffResult{Changed: []Change{{Name: "s", Fields: []string{"env.T"}, Stops: true}}}},
		{name: "a disabled server's command", old: `{"command": "x", "disabled": true}`, new: `{"command": "y", "disabled": true}`,
			want: DiffResult{Changed: []Change{{Name: "s", Fields: []string{"command"}}}}},
		{name: "timeouts spelled another way", old: `{"command": "x", "idleTimeout": "1m", "requestTimeout": "90s", "restart": {"window": "60s"}}`,
			new:  `{"command": "x", "idleTimeout": "60s", "requestTimeout": "1m30s", "restart": {"window": "1m0s"}}`,
			want: DiffResult{Unchanged: []string{"s"}}},
		{name: "a timeout changed", old: `{"command": "x", "idleTimeout": "1m"}`, new: `{"command": "x", "idleTimeout": "never"}`,
			want: DiffResult{Changed: []Change{{Name: "s", Fields: []string{"idleTimeout"}}}}},
		{name: "hangThreshold spelled another way", old: `{"mcpServers": {}, "hangThreshold": "30s"}`, new: `{"mcpServers": {}, "hangThreshold": "0.5m"}`,
			want: DiffResult{}},
		{name: "http.listen under --http", http: "127.0.0.1:7777",
			old: `{"mcpServers": {}, "http": {"listen": "127.0.0.1:1"}}`, new: `{"mcpServers": {}}`,
			want: DiffResult{}, str: "unchanged: 0"},
		{name: "http.listen without --http", old: `{"mcpServers": {}, "http": {"listen": "127.0.0.1:1"}}`, new: `{"mcpServers": {}}`,
			want: DiffResult{Settings: []string{"http.listen"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := func(s string) *File {
				t.Helper()
				if !strings.HasPrefix(s, `{"mcpServers"`) {
					s = `{"mcpServers": {"s": ` + s + `}}`
				}
				f, err := Decode([]byte(s))
				if err != nil {
					t.Fatal(err)
				}
				return f.WithHTTPListen(tt.http)
			}
			got := Diff(file(tt.old), file(tt.new), lookup)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Diff (-want +got):\n%s", diff)
			}
			if tt.str != "" && got.String() != tt.str {
				t.Errorf("String = %q, want %q", got.String(), tt.str)
			}
		})
	}
}

// TestDiffEmptyIsAbsent: an empty list or object is no value, as the pool
// reads it: "args": [] and no args are one entry. `config check` compares
// the file with the running config as GET /v1/config sends it, which
// leaves empty lists out, and said "args changed" of every entry written
// with "args": [] (as clients write them).
func TestDiffEmptyIsAbsent(t *testing.T) {
	tests := []struct {
		name, old, new string
		want           DiffResult
	}{
		{name: "empty args", old: `{"mcpServers": {"s": {"command": "x", "args": []}}}`, new: `{"mcpServers": {"s": {"command": "x"}}}`,
			want: DiffResult{Unchanged: []string{"s"}}},
		{name: "empty env", old: `{"mcpServers": {"s": {"command": "x", "env": {}}}}`, new: `{"mcpServers": {"s": {"command": "x"}}}`,
			want: DiffResult{Unchanged: []string{"s"}}},
		{name: "empty allowedOrigins", old: `{"mcpServers": {}, "http": {"allowedOrigins": []}}`, new: `{"mcpServers": {}}`},
		{name: "empty restart", old: `{"mcpServers": {"s": {"command": "x", "restart": {}}}}`, new: `{"mcpServers": {"s": {"command": "x"}}}`,
			want: DiffResult{Unchanged: []string{"s"}}},
		{name: "args emptied", old: `{"mcpServers": {"s": {"command": "x", "args": ["1"]}}}`, new: `{"mcpServers": {"s": {"command": "x", "args": []}}}`,
			want: DiffResult{Changed: []Change{{Name: "s", Fields: []string{"args"}, Restarts: true}}}},
		{name: "origins emptied", old: `{"mcpServers": {}, "http": {"allowedOrigins": ["http://a"]}}`, new: `{"mcpServers": {}, "http": {"allowedOrigins": []}}`,
			want: DiffResult{Settings: []string{"http.allowedOrigins"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, err := Decode([]byte(tt.old))
			if err != nil {
				t.Fatal(err)
			}
			new, err := Decode([]byte(tt.new))
			if err != nil {
				t.Fatal(err)
			}
			opt := cmpopts.EquateEmpty()
			if diff := cmp.Diff(tt.want, Diff(old, new, env(nil)), opt); diff != "" {
				t.Errorf("Diff (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, Diff(new, old, env(nil)), opt, cmpopts.IgnoreFields(DiffResult{}, "Changed")); diff != "" {
				t.Errorf("Diff the other way (-want +got):\n%s", diff)
			}
			// Through GET /v1/config, as `config check` sees the running
			// config: no change.
			data, err := json.Marshal(old)
			if err != nil {
				t.Fatal(err)
			}
			var sent File
			if err := json.Unmarshal(data, &sent); err != nil {
				t.Fatal(err)
			}
			if d := Diff(&sent, old, env(nil)); len(d.Changed)+len(d.Settings) > 0 {
				t.Errorf("the running config as sent differs from the file it came from: %s", d)
			}
		})
	}
}

// WritePrivateFile leaves the file readable by its owner alone: a new
// one 0600, an existing one without its group and other bits, through a
// link too (the target's).
func TestWritePrivateFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	dir := t.TempDir()
	path, link := filepath.Join(dir, "c.json"), filepath.Join(dir, "link.json")
	if err := WritePrivateFile(path, []byte("one")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path       string
		before, is os.FileMode
	}{{path, 0o600, 0o600}, {path, 0o644, 0o600}, {path, 0o400, 0o400}, {link, 0o666, 0o600}} {
		if err := os.Chmod(path, tt.before); err != nil {
			t.Fatal(err)
		}
		if tt.path == link {
			if err := os.Symlink(path, link); err != nil {
				t.Skip("no symlinks:", err)
			}
		}
		if err := WritePrivateFile(tt.path, []byte("two")); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != tt.is {
			t.Errorf("%s was %v: now %v %v, want %v", filepath.Base(tt.path), tt.before, fi.Mode().Perm(), err, tt.is)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Errorf("content = %q", b)
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.json")
	if err := WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		if err := os.Chmod(path, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteFile(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Errorf("content = %q", b)
	}
	if fi, _ := os.Stat(path); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, want 0640", fi.Mode().Perm())
	}
	// Through a symlink: the target changes, the link stays a link.
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(path, link); err != nil {
		t.Skip("no symlinks:", err)
	}
	if err := WriteFile(link, []byte("three"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("the symlink was replaced by a file")
	}
	if b, _ := os.ReadFile(path); string(b) != "three" {
		t.Errorf("target content = %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("temp files left behind: %v", entries)
	}
}

func TestAutostartSettings(t *testing.T) {
	for _, tc := range []struct {
		name, doc   string
		fromClients bool
		idle        time.Duration
		problem     string
	}{
		{"defaults", `{"mcpServers": {}}`, true, DefaultIdleExit, ""},
		{"off", `{"autostart": {"fromClients": false}}`, false, DefaultIdleExit, ""},
		{"on, short idle", `{"autostart": {"fromClients": true, "idleExit": "90s"}}`, true, 90 * time.Second, ""},
		{"never", `{"autostart": {"idleExit": "never"}}`, true, 0, ""},
		{"bad idle", `{"autostart": {"idleExit": "soon"}}`, true, 0, "autostart.idleExit"},
		{"not a bool", `{"autostart": {"fromClients": "no"}}`, true, 0, "autostart.fromClients"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.doc))
			if tc.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("err = %v, want a problem at %s", err, tc.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Autostart.StartFromClients(); got != tc.fromClients {
				t.Errorf("StartFromClients = %v, want %v", got, tc.fromClients)
			}
			if got := f.Autostart.IdleExitAfter(); got != tc.idle {
				t.Errorf("IdleExitAfter = %v, want %v", got, tc.idle)
			}
		})
	}
}

func TestAutostartDiffAndMarshal(t *testing.T) {
	a, _ := Parse([]byte(`{"mcpServers": {}}`))
	b, _ := Parse([]byte(`{"mcpServers": {}, "autostart": {"fromClients": false}}`))
	if d := Diff(a, b, env(nil)); !slices.Contains(d.Settings, "autostart.fromClients") {
		t.Errorf("Diff settings = %v, want autostart.fromClients", d.Settings)
	}
	out, err := a.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "autostart") {
		t.Errorf("an unset autostart is written out:\n%s", out)
	}
	out, _ = b.Marshal()
	if !strings.Contains(string(out), `"fromClients": false`) {
		t.Errorf("fromClients lost on marshal:\n%s", out)
	}
}

// The lenient expander leak detection uses is the config's: the same
// references expand the same way, an unset variable to "". A default is
// used when the variable is unset or empty, as the shell's ${VAR:-d}
// does; the first edition gave a set but empty variable's "".
func TestExpandVarsMatchesTheConfig(t *testing.T) {
	env := map[string]string{"HOME_DIR": "/home/me", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for in, want := range map[string]string{
		"plain":                         "plain",
		"${HOME_DIR}/bin/server":        "/home/me/bin/server",
		"${UNSET:-fallback}":            "fallback",
		"x${UNSET}y":                    "xy",
		"${EMPTY:-used when empty too}": "used when empty too",
		"${EMPTY:-}":                    "",
		"x${EMPTY}y":                    "xy",
	} {
		if got := ExpandVars(in, lookup); got != want {
			t.Errorf("ExpandVars(%q) = %q, want %q", in, got, want)
		}
		p := &problems{}
		if got := expand(p, p, "f", in, lookup, false); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestUnsetVariableStopsOnlyItsServer: a server whose ${VAR} is not set in
// the pool's environment (a tray started at login, without the shell's
// exports) is not started, and says why; the file still loads and every
// other server runs.
func TestUnsetVariableStopsOnlyItsServer(t *testing.T) {
	doc := []byte(`{"mcpServers": {
		"github": {"command": "npx", "args": ["-y", "server-github"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}},
		"memory": {"command": "npx", "args": ["-y", "server-memory"], "env": {"K": "${KEY}"}}
	}}`)
	lookup := env(map[string]string{"KEY": "secret"})
	f, err := parse(doc, lookup)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	servers, err := f.PoolServers(lookup)
	if err != nil {
		t.Fatalf("PoolServers: %v", err)
	}
	disabled := map[string]bool{}
	for _, s := range servers {
		disabled[s.Name] = s.Disabled
	}
	if want := map[string]bool{"github": true, "memory": false}; !cmp.Equal(disabled, want) {
		t.Errorf("disabled = %v, want %v", disabled, want)
	}
	want := []Problem{{Field: "mcpServers.github.env.GITHUB_PERSONAL_ACCESS_TOKEN",
		Msg: "environment variable GITHUB_TOKEN is not set; the server is not started"}}
	if diff := cmp.Diff(want, f.NotStarted(lookup)); diff != "" {
		t.Errorf("NotStarted (-want +got):\n%s", diff)
	}
	// A disabled entry is not "not started": it is off by choice.
	g, _ := parse([]byte(`{"mcpServers": {"a": {"command": "x", "disabled": true, "env": {"U": "${UNSET}"}}}}`), lookup)
	if ns := g.NotStarted(lookup); len(ns) != 0 {
		t.Errorf("NotStarted of a disabled entry = %v", ns)
	}
}

// TestNotStartedByDottedName: a server's unset ${VAR} is filed under its
// own name, which may hold '.'; not under the name's first part, which
// may be another server.
func TestNotStartedByDottedName(t *testing.T) {
	f, err := parse([]byte(`{"mcpServers": {
		"my": {"command": "x", "disabled": true},
		"my.db": {"command": "x", "args": ["--token", "${UNSET_TOKEN}"]}}}`), env(nil))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	want := map[string][]Problem{"my.db": {{Field: "mcpServers.my.db.args[1]",
		Msg: "environment variable UNSET_TOKEN is not set; the server is not started"}}}
	if diff := cmp.Diff(want, f.NotStartedBy(env(nil))); diff != "" {
		t.Errorf("NotStartedBy (-want +got):\n%s", diff)
	}
}

// TestBadNameHoldsBackOnlyItsEntry: an entry whose name clients cannot
// use (copied from a client that takes any key, "My Server") is held back
// as a server with an unset ${VAR} is: disabled, saying why and the name
// import would give it (one no other entry has); the file still loads and
// every other server runs. A disabled entry is off by choice, and quiet;
// one with no name at all is not given to the pool, which has no server
// without one. On the first edition the name made the whole file invalid.
func TestBadNameHoldsBackOnlyItsEntry(t *testing.T) {
	doc := []byte(`{"mcpServers": {
		"fake": {"command": "x"},
		"My Server": {"command": "y", "share": "session"},
		"Desktop Thing": {"command": "z"},
		"Desktop-Thing": {"command": "z"},
		"off one": {"command": "x", "disabled": true},
		"": {"command": "x"}
	}}`)
	f, err := parse(doc, env(nil))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	servers, err := f.PoolServers(env(nil))
	if err != nil {
		t.Fatalf("PoolServers: %v", err)
	}
	type held struct {
		Disabled   bool
		NotStarted string
	}
	got := map[string]held{}
	for _, s := range servers {
		got[s.Name] = held{s.Disabled, s.NotStarted}
	}
	rule := "the name may use letters, digits, '.', '_' and '-' only: rename the entry to "
	want := map[string]held{
		"fake":          {},
		"Desktop-Thing": {},
		"My Server":     {true, "mcpServers.My Server: " + rule + `"My-Server"`},
		"Desktop Thing": {true, "mcpServers.Desktop Thing: " + rule + `"Desktop-Thing-2"`},
		"off one":       {Disabled: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("servers (-want +got):\n%s", diff)
	}
	wantNS := map[string][]Problem{
		"":              {{Field: "mcpServers.", Msg: rule + `"server"; the server is not started`}},
		"Desktop Thing": {{Field: "mcpServers.Desktop Thing", Msg: rule + `"Desktop-Thing-2"; the server is not started`}},
		"My Server":     {{Field: "mcpServers.My Server", Msg: rule + `"My-Server"; the server is not started`}},
	}
	if diff := cmp.Diff(wantNS, f.NotStartedBy(env(nil))); diff != "" {
		t.Errorf("NotStartedBy (-want +got):\n%s", diff)
	}
	// Its changes start no child: it runs none.
	g, err := parse([]byte(`{"mcpServers": {"fake": {"command": "x"}, "My Server": {"command": "y2"}}}`), env(nil))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	want2 := []Change{{Name: "My Server", Fields: []string{"command", "share"}}}
	if diff := cmp.Diff(want2, Diff(f, g, env(nil)).Changed); diff != "" {
		t.Errorf("Diff (-want +got):\n%s", diff)
	}
}

// TestDiffDefaultSpelledOut: a setting written out at its default value
// is the setting left out, as the pool runs it: no change, and no new
// child. Before, `config check` printed "~ memory: idleTimeout changed"
// for "idleTimeout": "10m" added to a running config, and "settings
// changed: history.retainDays" for a removed "retainDays": 14.
func TestDiffDefaultSpelledOut(t *testing.T) {
	bare := `{"mcpServers": {"s": {"command": "x"}}}`
	tests := []struct{ name, spelled string }{
		{"idleTimeout", `{"mcpServers": {"s": {"command": "x", "idleTimeout": "10m"}}}`},
		{"idleTimeout in seconds", `{"mcpServers": {"s": {"command": "x", "idleTimeout": "600s"}}}`},
		{"requestTimeout", `{"mcpServers": {"s": {"command": "x", "requestTimeout": "120s"}}}`},
		{"restart", `{"mcpServers": {"s": {"command": "x", "restart": {"maxRestarts": 5, "window": "1m", "minBackoff": "100ms", "maxBackoff": "10s"}}}}`},
		{"share", `{"mcpServers": {"s": {"command": "x", "share": "shared"}}}`},
		{"resolve", `{"mcpServers": {"s": {"command": "x", "resolve": true}}}`},
		{"type", `{"mcpServers": {"s": {"command": "x", "type": "stdio"}}}`},
		{"type in capitals", `{"mcpServers": {"s": {"command": "x", "type": "STDIO"}}}`},
		{"hangThreshold", `{"mcpServers": {"s": {"command": "x"}}, "hangThreshold": "30s"}`},
		{"evictSlowClientsAfter", `{"mcpServers": {"s": {"command": "x"}}, "evictSlowClientsAfter": "30s"}`},
		{"limits", `{"mcpServers": {"s": {"command": "x"}}, "maxInFlightPerSession": 8192, "maxInFlightMiBPerSession": 128,
			"maxSubscriptionsPerSession": 4096, "maxChildrenPerServer": 32}`},
		{"history", `{"mcpServers": {"s": {"command": "x"}}, "history": {"retainDays": 14, "maxRows": 1000000, "captureBytes": 4096}}`},
		{"autostart", `{"mcpServers": {"s": {"command": "x"}}, "autostart": {"fromClients": true, "idleExit": "10m", "followInstall": true}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, err := Decode([]byte(bare))
			if err != nil {
				t.Fatal(err)
			}
			spelled, err := Decode([]byte(tt.spelled))
			if err != nil {
				t.Fatal(err)
			}
			want := DiffResult{Unchanged: []string{"s"}}
			if diff := cmp.Diff(want, Diff(old, spelled, env(nil))); diff != "" {
				t.Errorf("Diff(bare, spelled out) (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, Diff(spelled, old, env(nil))); diff != "" {
				t.Errorf("Diff(spelled out, bare) (-want +got):\n%s", diff)
			}
		})
	}
	// A value other than the default is still a change.
	old, _ := Decode([]byte(bare))
	other, _ := Decode([]byte(`{"mcpServers": {"s": {"command": "x", "idleTimeout": "11m"}}, "history": {"retainDays": 15}}`))
	want := DiffResult{Changed: []Change{{Name: "s", Fields: []string{"idleTimeout"}}}, Settings: []string{"history.retainDays"}}
	if diff := cmp.Diff(want, Diff(old, other, env(nil))); diff != "" {
		t.Errorf("Diff(bare, other) (-want +got):\n%s", diff)
	}
}

// TestWriteFileThroughDanglingLink: a config that is a symlink to a file
// not made yet (a dotfiles checkout without it), through a second link
// too, gets the file made where the links lead, and the links stay; a
// link whose target's directory is missing is left as it is, the write
// failing and saying so, no directory made. On the first edition the
// file was renamed over the link.
func TestWriteFileThroughDanglingLink(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	at := func(p string) string { return filepath.Join(root, p) }
	if err := os.Mkdir(at("dot"), 0o700); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"config.json": at("middle.json"),
		"middle.json": "dot/config.json", // relative, to a file not there
		"gone.json":   at("nodir/config.json"),
		"loop1":       "loop2",
		"loop2":       "loop1",
	} {
		if err := os.Symlink(target, at(link)); err != nil {
			t.Skip("no symlinks:", err)
		}
	}
	isLink := func(name string) {
		t.Helper()
		if fi, err := os.Lstat(at(name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a symlink (%v)", name, err)
		}
	}
	if err := WritePrivateFile(at("config.json"), []byte("one")); err != nil {
		t.Fatal(err)
	}
	isLink("config.json")
	isLink("middle.json")
	if b, err := os.ReadFile(at("dot/config.json")); err != nil || string(b) != "one" {
		t.Errorf("the link's target holds %q, %v; want %q", b, err, "one")
	}

	err = WriteFile(at("gone.json"), []byte("two"), 0o600)
	if err == nil || !strings.Contains(err.Error(), at("gone.json")+" is a symlink to "+at("nodir/config.json")+", and "+at("nodir")+" does not exist") {
		t.Errorf("write through a link to a missing directory: %v", err)
	}
	isLink("gone.json")
	if _, err := os.Lstat(at("nodir")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the missing directory was made: %v", err)
	}

	if err := WriteFile(at("loop1"), []byte("three"), 0o600); err == nil {
		t.Error("a write through a loop of links succeeded")
	}
	isLink("loop1")
	isLink("loop2")
}

// TestSymlinkChain: the links on the way from the config path to the
// file, a linked directory and a relative target with ".." too, as the
// kernel follows them; a loop stops after MaxLinks.
func TestSymlinkChain(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	at := func(p string) string { return filepath.Join(root, p) }
	for _, d := range []string{"real/sub", "chain"} {
		if err := os.MkdirAll(at(d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(at("real/sub/c.json"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"chain/dir":  at("real"),              // a linked directory
		"chain/file": "dir/sub/../sub/c.json", // relative, through it
		"config":     at("chain/file"),        // the config path
		"loop1":      "loop2",                 // a loop
		"loop2":      "loop1",
	} {
		if err := os.Symlink(target, at(link)); err != nil {
			t.Skip("no symlinks:", err)
		}
	}
	if got := SymlinkChain(at("real/sub/c.json")); got != nil {
		t.Errorf("a file that is no link: %q", got)
	}
	want := []string{at("config"), at("chain/file"), at("chain/dir"), at("real/sub/c.json")}
	if got := SymlinkChain(at("config")); !slices.Equal(got, want) {
		t.Errorf("chain %q, want %q", got, want)
	}
	if got := SymlinkChain(at("loop1")); len(got) != MaxLinks {
		t.Errorf("a loop: %d links, want %d", len(got), MaxLinks)
	}
}
