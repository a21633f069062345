package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// setupEntry is a client entry as setup writes it.
type setupEntry struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	Timeout int               `json:"timeout"`
}

// claudeEntries reads the user's servers of a Claude Code file.
func claudeEntries(t *testing.T, path string) map[string]setupEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		MCPServers map[string]setupEntry `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
	return f.MCPServers
}

// userEnv is this environment without what places Switchboard's files,
// with HOME set to home and the pairs in extra.
func userEnv(home string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "DISPLAY", "WAYLAND_DISPLAY", "SWITCHBOARD_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME",
			"SWITCHBOARD_INPROCESS_CONNECT", "SWITCHBOARD_NO_ATTACH":
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "HOME="+home), extra...)
}

// stopPoolsOfUser stops, when the test ends, the pools started with
// HOME=home.
func stopPoolsOfUser(t *testing.T, home string) {
	t.Cleanup(func() {
		pools := func() []int {
			var out []int
			dirs, _ := filepath.Glob("/proc/[0-9]*")
			for _, d := range dirs {
				pid, _ := strconv.Atoi(filepath.Base(d))
				cmdline, _ := os.ReadFile(d + "/cmdline")
				environ, _ := os.ReadFile(d + "/environ")
				if exe, err := os.Readlink(d + "/exe"); err == nil && exe == sbBin &&
					bytes.Contains(cmdline, []byte("\x00serve")) &&
					bytes.Contains(append([]byte{0}, environ...), []byte("\x00HOME="+home+"\x00")) && alive(pid) {
					out = append(out, pid)
				}
			}
			return out
		}
		for _, pid := range pools() {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
		waitFor(t, "the pools the test's clients started to stop", func() bool { return len(pools()) == 0 })
	})
}

// A user whose shell sets XDG_CONFIG_HOME and XDG_STATE_HOME runs setup;
// the client, started from the desktop with only HOME and the entry's
// env, reaches the pool of the config setup wrote to. On the first
// edition setup passed only PATH: the client found no socket, started a
// second pool on a starter config elsewhere, and its initialize failed
// (no such server).
func TestSetupPinsTheHome(t *testing.T) {
	userHome := homeDir(t) // short: the socket paths are under it
	stopPoolsOfUser(t, userHome)
	xdgConfig, xdgState := filepath.Join(userHome, "xc"), filepath.Join(userHome, "xs")
	clientFile := filepath.Join(userHome, ".claude.json")
	if err := os.WriteFile(clientFile, []byte(`{"mcpServers": {"fake": {"command": "`+fakeBin+`", "args": []}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	setup := exec.Command(sbBin, "setup", "claude-code")
	setup.Env = userEnv(userHome, "XDG_CONFIG_HOME="+xdgConfig, "XDG_STATE_HOME="+xdgState)
	setup.Dir = userHome
	if out, err := setup.CombinedOutput(); err != nil {
		t.Fatalf("setup: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(xdgConfig, "switchboard", "config.json")); err != nil {
		t.Fatalf("setup did not write the config under XDG_CONFIG_HOME: %v", err)
	}

	e := claudeEntries(t, clientFile)["fake"]
	env := []string{"HOME=" + userHome}
	for k, v := range e.Env {
		env = append(env, k+"="+v)
	}
	if e.Command != sbBin || len(e.Args) != 2 || e.Args[0] != "connect" {
		t.Fatalf("entry %+v", e)
	}
	s := startShimIn(t, e.Args[1], env, "/")
	s.initialize("desktop-client")
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	if got := toolText(s.recvID("1")); got != "hi" {
		t.Fatalf("echo: %q", got)
	}
	if _, err := os.Stat(filepath.Join(xdgState, "switchboard", "run", "pool.sock")); err != nil {
		t.Errorf("no pool under XDG_STATE_HOME: %v", err)
	}
	if _, err := os.Stat(filepath.Join(userHome, ".config", "switchboard")); err == nil {
		t.Error("a second home was made under ~/.config")
	}
}

// A package manager installs each version in a directory of its own and
// links it from a directory on PATH (Homebrew's bin/switchboard ->
// Cellar/switchboard/1.0/bin/switchboard). setup writes the link, which
// outlives the version; an entry an earlier setup tied to a version's
// path, gone with that version, is brought up to date by running setup
// again, keeping what the user added to it, and undo still puts back the
// entry as it was before the first setup. On the first edition setup
// wrote the version's path and, run again, left such an entry as it was
// (it already ran `switchboard connect`).
func TestSetupAgainFollowsTheInstalledBinary(t *testing.T) {
	root := t.TempDir()
	userHome, sbHome := filepath.Join(root, "home"), filepath.Join(root, "sb")
	bin := filepath.Join(root, "bin")
	for _, d := range []string{userHome, bin} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	version := func(v string) string { return filepath.Join(root, "Cellar", "switchboard", v, "bin", "switchboard") }
	install := func(v string) { // as an upgrade does: the new version, the link moved to it
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(version(v)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(sbBin, version(v)); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(bin, "switchboard")
		_ = os.Remove(link)
		if err := os.Symlink(version(v), link); err != nil {
			t.Fatal(err)
		}
	}
	clientFile := filepath.Join(userHome, ".claude.json")
	orig := `{"mcpServers": {"fake": {"type": "stdio", "command": "` + fakeBin + `", "args": []}}}` + "\n"
	if err := os.WriteFile(clientFile, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	// run runs exe as called by name: "switchboard" is found on PATH.
	run := func(exe string, args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, exe), args...)
		if filepath.IsAbs(exe) {
			cmd = exec.Command(exe, args...)
		}
		cmd.Args[0] = exe
		cmd.Env = userEnv(userHome, "SWITCHBOARD_HOME="+sbHome, "PATH="+bin+":/usr/bin:/bin")
		cmd.Dir = userHome
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", exe, args, err, out)
		}
		return string(out)
	}
	backups := func() []string {
		b, _ := filepath.Glob(clientFile + ".switchboard-*.bak")
		return b
	}

	install("1.0")
	run("switchboard", "setup", "claude-code") // found on PATH: the link
	if e := claudeEntries(t, clientFile)["fake"]; e.Command != filepath.Join(bin, "switchboard") {
		t.Fatalf("setup wrote %q, want the link on PATH %s", e.Command, filepath.Join(bin, "switchboard"))
	}
	run("switchboard", "setup", "--undo", "claude-code")

	// Set up as an earlier setup did, with the version's own path; an
	// upgrade removes that version since.
	run(version("1.0"), "setup", "claude-code")
	if e := claudeEntries(t, clientFile)["fake"]; e.Command != version("1.0") {
		t.Fatalf("setup run by its path wrote %q", e.Command)
	}
	install("1.1")
	if err := os.RemoveAll(filepath.Dir(filepath.Dir(version("1.0")))); err != nil {
		t.Fatal(err)
	}
	run("switchboard", "setup", "claude-code")
	want := setupEntry{Type: "stdio", Command: filepath.Join(bin, "switchboard"), Args: []string{"connect", "fake"},
		Env: map[string]string{"PATH": bin + ":/usr/bin:/bin", "SWITCHBOARD_HOME": sbHome}}
	if got := claudeEntries(t, clientFile)["fake"]; !reflectEqual(got, want) {
		t.Fatalf("after setup again: %+v, want %+v", got, want)
	}
	n := len(backups())
	run("switchboard", "setup", "claude-code")
	if len(backups()) != n {
		t.Errorf("a third setup rewrote the file again: backups %v", backups())
	}
	run("switchboard", "setup", "--undo", "claude-code")
	if back, _ := os.ReadFile(clientFile); string(back) != orig {
		t.Fatalf("after undo:\n%s\nwant:\n%s", back, orig)
	}

	// Again, and the user adds to the entry before the next upgrade: setup
	// keeps what they added, and undo, which would lose it by putting back
	// the entry as it was before the first setup, leaves the entry as it
	// is and says so. On the first edition undo put back the original and
	// the user's additions were only in undo's copy of the file.
	run(version("1.1"), "setup", "claude-code")
	stale := `{"mcpServers": {"fake": {"type": "stdio", "command": "` + version("1.1") + `", "args": ["connect", "fake"],` +
		` "env": {"MY_FLAG": "1", "PATH": "` + bin + `:/usr/bin:/bin", "SWITCHBOARD_HOME": "` + sbHome + `"}, "timeout": 30}}}` + "\n"
	if err := os.WriteFile(clientFile, []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}
	install("1.2")
	if err := os.RemoveAll(filepath.Dir(filepath.Dir(version("1.1")))); err != nil {
		t.Fatal(err)
	}
	run("switchboard", "setup", "claude-code")
	want.Env["MY_FLAG"], want.Timeout = "1", 30
	if got := claudeEntries(t, clientFile)["fake"]; !reflectEqual(got, want) {
		t.Fatalf("after setup again: %+v, want %+v", got, want)
	}
	out := run("switchboard", "setup", "--undo", "claude-code")
	if got := claudeEntries(t, clientFile)["fake"]; !reflectEqual(got, want) {
		t.Fatalf("after undo: %+v, want it left as %+v", got, want)
	}
	if !strings.Contains(out, "Left mcpServers.fake in "+clientFile+" as it is: changed since setup") {
		t.Errorf("undo does not say it left the entry:\n%s", out)
	}
}

func reflectEqual(a, b setupEntry) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// setupAs runs `switchboard setup ARGS` for the user of userHome, in
// their home directory, with the pairs in extra; it returns the output
// and the error.
func setupAs(userHome string, extra []string, args ...string) (string, error) {
	cmd := exec.Command(sbBin, append([]string{"setup"}, args...)...)
	cmd.Env = userEnv(userHome, extra...)
	cmd.Dir = userHome
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The user's default Switchboard is set up for Claude Code; then setup
// runs for a second home (SWITCHBOARD_HOME=work) whose config has a
// server of the same name. The user-scope entry reaches the default home:
// it is another home's, and stays as it is, so every project keeps the
// default pool and the default home's undo still puts it back. On the
// first edition the second setup "brought it up to date" with
// SWITCHBOARD_HOME=work, and the default home's undo left it as changed.
func TestSetupLeavesAnotherHomesEntries(t *testing.T) {
	userHome := homeDir(t)
	clientFile := filepath.Join(userHome, ".claude.json")
	orig := `{"mcpServers": {"fs": {"command": "` + fakeBin + `", "args": []}}}` + "\n"
	if err := os.WriteFile(clientFile, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := setupAs(userHome, nil, "claude-code"); err != nil {
		t.Fatalf("setup: %v\n%s", err, out)
	}
	ours, err := os.ReadFile(clientFile)
	if err != nil {
		t.Fatal(err)
	}
	if e := claudeEntries(t, clientFile)["fs"]; e.Command != sbBin || e.Env["SWITCHBOARD_HOME"] != "" {
		t.Fatalf("the default home's setup wrote %+v", e)
	}

	work := filepath.Join(userHome, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "config.json"), []byte(`{"mcpServers": {"fs": {"command": "`+fakeBin+`", "args": ["--work"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := setupAs(userHome, []string{"SWITCHBOARD_HOME=" + work}, "claude-code")
	if err != nil {
		t.Fatalf("setup for the work home: %v\n%s", err, out)
	}
	if now, _ := os.ReadFile(clientFile); string(now) != string(ours) {
		t.Fatalf("the work home's setup rewrote the default home's entry:\n%s", now)
	}
	if !strings.Contains(out, "another Switchboard") {
		t.Errorf("the output does not say the entry is another home's:\n%s", out)
	}

	if out, err := setupAs(userHome, nil, "--undo", "claude-code"); err != nil {
		t.Fatalf("undo: %v\n%s", err, out)
	}
	if back, _ := os.ReadFile(clientFile); string(back) != orig {
		t.Fatalf("after the default home's undo:\n%s\nwant:\n%s", back, orig)
	}
}

// A pool runs with the default directories; the user's shell sets
// XDG_CONFIG_HOME. setup would add the servers to the running pool's
// config but pin the shell's XDG_CONFIG_HOME into the entries: once that
// pool is gone, the client would start a pool of another config, without
// them (no such server). setup refuses instead, saying which config each
// one means, and writes nothing. On the first edition it went ahead.
func TestSetupRefusesAHomeOtherThanThePools(t *testing.T) {
	userHome := homeDir(t)
	stopPoolsOfUser(t, userHome)
	defaultConfig := filepath.Join(userHome, ".config", "switchboard", "config.json")
	if err := os.MkdirAll(filepath.Dir(defaultConfig), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(defaultConfig, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := exec.Command(sbBin, "serve")
	pool.Env = userEnv(userHome)
	pool.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	exited, err := startPinned(pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pool.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	waitFor(t, "the pool's control socket", func() bool {
		status := exec.Command(sbBin, "status", "--json")
		status.Env = userEnv(userHome)
		return status.Run() == nil
	})

	clientFile := filepath.Join(userHome, ".claude.json")
	orig := `{"mcpServers": {"fake": {"command": "` + fakeBin + `", "args": []}}}` + "\n"
	if err := os.WriteFile(clientFile, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	xc := filepath.Join(userHome, "xc")
	out, err := setupAs(userHome, []string{"XDG_CONFIG_HOME=" + xc}, "claude-code")
	if err == nil {
		t.Fatalf("setup went ahead:\n%s", out)
	}
	for _, want := range []string{defaultConfig, filepath.Join(xc, "switchboard", "config.json")} {
		if !strings.Contains(out, want) {
			t.Errorf("the error does not name %s:\n%s", want, out)
		}
	}
	if now, _ := os.ReadFile(clientFile); string(now) != orig {
		t.Errorf("the client file was rewritten:\n%s", now)
	}
	if cfg, _ := os.ReadFile(defaultConfig); string(cfg) != `{"mcpServers": {}}` {
		t.Errorf("the pool's config was written:\n%s", cfg)
	}
}
