package pool_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// errData is an error answer's data as README promises it.
type errData struct {
	Retryable       *bool  `json:"retryable"`
	MayHaveExecuted *bool  `json:"mayHaveExecuted"`
	Server          string `json:"server"`
}

// wantRefusal checks that m is an error answer whose message holds want
// and whose data says the request did not run, may not be sent again
// with success, and names server.
func wantRefusal(t *testing.T, m msg, want, server string) {
	t.Helper()
	if m.Error == nil || !strings.Contains(m.Error.Message, want) {
		t.Fatalf("got %s; want an error saying %q", m.raw, want)
	}
	var d errData
	if err := json.Unmarshal(m.Error.Data, &d); err != nil || d.Retryable == nil || d.MayHaveExecuted == nil ||
		*d.Retryable || *d.MayHaveExecuted || d.Server != server {
		t.Errorf("the error's data: %s; want retryable false, mayHaveExecuted false, server %q", m.Error.Data, server)
	}
}

// TestDisabledServerRefusesWithData: a session whose server a reload
// disables gets, for its next request, an error whose data says what
// every error of the pool's about a request says (README, *Guarantees*):
// it did not run, and sending it again cannot work while the server is
// disabled. On the first edition the error had no data at all.
func TestDisabledServerRefusesWithData(t *testing.T) {
	cfg := fake("new1")
	tp := newTestPool(t, nil, cfg)
	c := tp.dial(t, "new1")
	c.initialize("c", "")
	cfg.Disabled = true
	if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	c.call("2", "pid", `{}`)
	m, _ := c.recvID("2")
	wantRefusal(t, m, `server is disabled: "new1"`, "new1")
	if m.Error.Code != -32000 {
		t.Errorf("code %d, want -32000", m.Error.Code)
	}
}

// TestNotStartedServerSaysWhy: a server the config holds back for a
// value it lacks (ServerConfig.NotStarted), not disabled by the user,
// refuses a new session and a request of a session it had with that
// reason, not with "disabled".
func TestNotStartedServerSaysWhy(t *testing.T) {
	cfg := fake("needvar")
	tp := newTestPool(t, nil, cfg)
	c := tp.dial(t, "needvar")
	c.initialize("c", "")
	const why = "mcpServers.needvar.env.K: environment variable RVC_UNSET_VAR is not set"
	cfg.Disabled, cfg.NotStarted = true, why
	if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	want := `server "needvar" is not started: ` + why
	c.call("2", "pid", `{}`)
	m, _ := c.recvID("2")
	wantRefusal(t, m, want, "needvar")
	if _, err := tp.tryDial(t, "needvar"); err == nil || !strings.Contains(err.Error(), `"error":"`+strings.ReplaceAll(want, `"`, `\"`)) {
		t.Errorf("a new session: %v; want it refused with %q", err, want)
	}
}

// TestMissingWorkingDirectoryFailsAtOnce: a server whose cwd does not
// exist cannot start. The error says so (a failed chdir used to read as
// the command's own failure: "fork/exec FAKEMCP: no such file or
// directory", about a binary that exists), and the server is failed at
// once: no child ever ran, and no restart can make one run until the
// directory exists. A restart then starts it.
func TestMissingWorkingDirectoryFailsAtOnce(t *testing.T) {
	dir := filepath.Join(shortTempDir(t), "nonexistent-dir")
	cfg := fake("badcwd")
	cfg.Cwd = dir
	tp := newTestPool(t, &pool.Options{Restart: pool.RestartPolicy{MaxRestarts: 3, MinBackoff: 10 * time.Millisecond}}, cfg)
	c := tp.dial(t, "badcwd")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	m, _ := c.recvID("1")
	wantRefusal(t, m, `server "badcwd" cannot start: working directory `+dir+` does not exist`, "badcwd")
	if strings.Contains(m.Error.Message, "fork/exec") || strings.Contains(m.Error.Message, "exited") {
		t.Errorf("the error blames the command or counts exits: %s", m.Error.Message)
	}
	st := tp.Snapshot()
	if st.Servers[0].State != pool.StateFailed || !strings.Contains(st.Servers[0].Error, "does not exist") {
		t.Errorf("the server: %+v; want it failed, saying why", st.Servers[0])
	}
	for _, b := range st.Backends {
		if b.Restarts != 0 {
			t.Errorf("the backend was restarted %d times for a directory that does not exist", b.Restarts)
		}
	}

	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := tp.Restart("badcwd"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the restarted server to be ready", func() bool { return tp.Snapshot().Servers[0].State == pool.StateReady })
	d := tp.dial(t, "badcwd")
	d.initialize("d", "")
	d.call("2", "pid", `{}`)
	if r, _ := d.recvID("2"); r.Error != nil {
		t.Errorf("a call once the directory exists: %s", r.raw)
	}
}

// TestCommandNotOnPathSaysWhichPath: a command exec cannot find is
// reported with the PATH that was searched (a pool that a GUI client
// started has that client's short PATH for its life) and what to do;
// on the first edition the error was Go's `exec: "npx": executable file
// not found in $PATH`.
func TestCommandNotOnPathSaysWhichPath(t *testing.T) {
	dir := shortTempDir(t)
	t.Setenv("PATH", dir) // the short PATH of a pool a GUI client started
	cfg := pool.ServerConfig{Name: "nopath", Command: "sb-test-no-such-command"}
	tp := newTestPool(t, &pool.Options{Restart: pool.RestartPolicy{MaxRestarts: 1}}, cfg)
	c := tp.dial(t, "nopath")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	m, _ := c.recvID("1")
	for _, want := range []string{`command "sb-test-no-such-command" is not on Switchboard's PATH (` + dir + `)`,
		"absolute path", "switchboard setup"} {
		if m.Error == nil || !strings.Contains(m.Error.Message, want) {
			t.Errorf("got %s; want the error to say %q", m.raw, want)
		}
	}
}

// TestCommandNotOnPathIsNoRun: a command exec cannot find never ran: the
// server fails at once, saying it cannot start, with no restarts counted
// and no second try until it is restarted or its entry changes. It used
// to be tried as a crash loop: "it exited 5 times in 1m0s", 4 restarts.
func TestCommandNotOnPathIsNoRun(t *testing.T) {
	t.Setenv("PATH", shortTempDir(t))
	cfg := pool.ServerConfig{Name: "nopath", Command: "sb-test-no-such-command"}
	tp := newTestPool(t, &pool.Options{Restart: pool.RestartPolicy{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}}, cfg)
	c := tp.dial(t, "nopath")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	m, _ := c.recvID("1")
	if m.Error == nil || !strings.Contains(m.Error.Message, `server "nopath" cannot start: command "sb-test-no-such-command" is not on Switchboard's PATH`) ||
		strings.Contains(m.Error.Message, "exited") {
		t.Errorf("got %s; want it to say the server cannot start, not that it exited", m.raw)
	}
	if b := backendInfo(tp, "nopath"); b.State != pool.StateFailed || b.Restarts != 0 {
		t.Errorf("backend %+v; want failed with 0 restarts", b)
	}
}
