package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// elsewhereConfig writes a config that names its fake server "b" to a
// directory of its own, away from home's config.json, which does not
// exist; every pool serving home is stopped when the test ends.
func elsewhereConfig(t *testing.T, home, autostart string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	cfg := fmt.Sprintf(`{"mcpServers":{"b":{"command":%q}}, "autostart": %s}`, fakeBin, autostart)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range poolsOf(home) {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
		waitFor(t, "the pools serving the home to stop", func() bool { return len(poolsOf(home)) == 0 })
		if t.Failed() {
			if log, err := os.ReadFile(filepath.Join(home, "logs", "pool.log")); err == nil {
				t.Logf("pool.log:\n%s", log)
			}
		}
	})
	return path
}

// serveConfig is `switchboard serve --config path` on home.
func serveConfig(t *testing.T, home, path string) *instance {
	t.Helper()
	return serveWith(t, exec.Command(sbBin, "serve", "--config", path), home)
}

// quitPool runs `switchboard quit` and waits for in's process to exit.
func quitPool(t *testing.T, in *instance) {
	t.Helper()
	if out, err := in.run("quit"); err != nil || !strings.Contains(out, "has quit") {
		t.Fatalf("quit: %v %s", err, out)
	}
	err := <-in.done
	in.done <- err
}

// statusConfig is the config file the pool serving home runs, and its
// PID, as `switchboard status --json` says them.
func statusConfig(t *testing.T, home string) (string, int) {
	t.Helper()
	config, pid, err := poolConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	return config, pid
}

// poolConfig is statusConfig, failing with an error.
func poolConfig(home string) (string, int, error) {
	cmd := exec.Command(sbBin, "status", "--json")
	cmd.Env = clientEnv(home)
	out, err := cmd.Output()
	if err != nil {
		return "", 0, fmt.Errorf("status: %w", err)
	}
	var st struct {
		PID    int    `json:"pid"`
		Config string `json:"config"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return "", 0, fmt.Errorf("status JSON: %w\n%s", err, out)
	}
	return st.Config, st.PID, nil
}

// A pool started with `serve --config FILE` that stops (quit, as a crash,
// an upgrade or the service manager stop it) is followed by the pool its
// client starts, and that one runs FILE too: the session goes on, its
// server answers, and the home gets no starter config of its own. Before,
// the client's pool ran the home's config.json: "no such server".
func TestClientStartRunsTheLastPoolsConfig(t *testing.T) {
	home, file, first, _ := sessionAcrossQuit(t)
	config, pid := statusConfig(t, home)
	if config != file || pid == first.cmd.Process.Pid {
		t.Errorf("the pool the client started (pid %d) runs %s, want %s", pid, config, file)
	}
	if _, err := os.Stat(filepath.Join(home, "config.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the home got a config.json of its own: %v", err)
	}
}

// sessionAcrossQuit serves a config FILE outside a new home, opens a
// session of its server b, quits that pool, and calls again: the pool
// the client starts then answers, or the test fails.
func sessionAcrossQuit(t *testing.T) (home, file string, first *instance, s *shim) {
	t.Helper()
	home = homeDir(t)
	file = elsewhereConfig(t, home, `{"idleExit": "1m"}`)
	first = serveConfig(t, home, file)
	s = startShim(t, "b", clientEnv(home))
	s.initialize("keeps-its-session")
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if r := s.recvID("1"); r.Error != nil {
		t.Fatalf("tools/list: %s", r.raw)
	}
	quitPool(t, first)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"after the quit"}}}`)
	if r := s.recvID("2"); toolText(r) != "after the quit" {
		t.Fatalf("the call after the quit: %s (stderr: %s)", r.raw, s.errb.String())
	}
	return home, file, first, s
}

// `"autostart": {"fromClients": false}` in the file a pool ran with
// `serve --config` holds once it has stopped: a client finding no pool
// starts none, and says how to start one.
func TestFromClientsOffInTheLastPoolsConfig(t *testing.T) {
	home := homeDir(t)
	file := elsewhereConfig(t, home, `{"fromClients": false}`)
	quitPool(t, serveConfig(t, home, file))
	cmd := exec.Command(sbBin, "connect", "b")
	cmd.Env = clientEnv(home)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(out), "autostart.fromClients") ||
		!strings.Contains(string(out), file) {
		t.Errorf("connect: err %v, output %q; want exit 3 naming autostart.fromClients in %s", err, out, file)
	}
	if pools := poolsOf(home); len(pools) != 0 {
		t.Fatalf("a client started a pool: %v", pools)
	}
}

// `switchboard serve` started by hand while a pool a client started runs
// (headless, stopping when idle) takes that pool's place, as the tray app
// does, instead of exiting "already running": the client's session goes
// on with it. Before, it exited 4, and the service manager or the user
// was left with the client's pool.
func TestServeTakesTheClientStartedPoolsPlace(t *testing.T) {
	home, file, _, s := sessionAcrossQuit(t)
	_, clients := statusConfig(t, home)
	second := serveConfig(t, home, file)
	waitFor(t, "the pool started by hand to serve", func() bool {
		select {
		case err := <-second.done:
			second.done <- err
			t.Fatalf("serve exited: %v", err)
		default:
		}
		_, pid, err := poolConfig(home)
		return err == nil && pid == second.cmd.Process.Pid
	})
	waitFor(t, "the client's pool to exit", func() bool { return !alive(clients) })
	s.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"same session"}}}`)
	if r := s.recvID("3"); toolText(r) != "same session" {
		t.Fatalf("the call after the takeover: %s (stderr: %s)", r.raw, s.errb.String())
	}
	if log := second.log.String(); !strings.Contains(log, "made way") {
		t.Errorf("serve's log says nothing of the pool that made way:\n%s", log)
	}
}
