package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `setup claude-code` imports the client's stdio servers and points its
// entries at this binary's absolute path with what a client's reduced
// environment lacks; the URL entry stays; `setup --undo` puts the file
// back byte for byte.
func TestSetupAndUndo(t *testing.T) {
	userHome := t.TempDir()
	sbHome := filepath.Join(t.TempDir(), "sb")
	clientFile := filepath.Join(userHome, ".claude.json")
	orig := `{
  // Claude Code's own settings stay as they are
  "numStartups": 12,
  "mcpServers": {
    "fake": {"type": "stdio", "command": "` + fakeBin + `", "args": [], "env": {"K": "v"}},
    "remote": {"type": "http", "url": "https://example.invalid/mcp"}
  }
}
`
	if err := os.WriteFile(clientFile, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(sbBin, args...)
		cmd.Env = append(clientEnv(sbHome), "HOME="+userHome, "PATH=/usr/bin:/bin:/opt/tools/bin")
		cmd.Dir = userHome
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := run("setup", "claude-code")
	if !strings.Contains(out, "setup --undo claude-code") {
		t.Errorf("setup output does not say how to undo:\n%s", out)
	}
	data, err := os.ReadFile(clientFile)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		NumStartups int `json:"numStartups"`
		MCPServers  map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
			URL     string            `json:"url"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(stripComment(data), &got); err != nil {
		t.Fatalf("rewritten client file: %v\n%s", err, data)
	}
	fake := got.MCPServers["fake"]
	if fake.Command != sbBin || strings.Join(fake.Args, " ") != "connect fake" ||
		fake.Env["SWITCHBOARD_HOME"] != sbHome || fake.Env["PATH"] != "/usr/bin:/bin:/opt/tools/bin" || fake.Env["K"] != "" {
		t.Errorf("rewritten entry: %+v", fake)
	}
	if got.MCPServers["remote"].URL != "https://example.invalid/mcp" || got.NumStartups != 12 {
		t.Errorf("other entries or fields changed: %s", data)
	}
	cfg, err := os.ReadFile(filepath.Join(sbHome, "config.json"))
	if err != nil || !strings.Contains(string(cfg), `"K": "v"`) || !strings.Contains(string(cfg), fakeBin) {
		t.Fatalf("switchboard config (%v):\n%s", err, cfg)
	}
	// Again: nothing new to rewrite, and undo still reaches the original.
	run("setup", "claude-code")
	run("setup", "--undo", "claude-code")
	back, _ := os.ReadFile(clientFile)
	if string(back) != orig {
		t.Fatalf("after undo:\n%s\nwant:\n%s", back, orig)
	}
	cmd := exec.Command(sbBin, "setup", "--undo", "claude-code")
	cmd.Env = append(clientEnv(sbHome), "HOME="+userHome)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "nothing to undo") {
		t.Fatalf("second undo: %v\n%s", err, out)
	}
}

// stripComment drops whole-line // comments, enough for this fixture.
func stripComment(data []byte) []byte {
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "//") {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

// `setup --undo` after the user deleted setup's backup: the entry stays
// as it is, the output says so and what to do, the command fails (exit
// 1) saying it was partial, and a next undo has nothing to do rather than
// failing the same way forever.
func TestSetupUndoWithoutItsBackup(t *testing.T) {
	userHome := t.TempDir()
	sbHome := filepath.Join(t.TempDir(), "sb")
	clientFile := filepath.Join(userHome, ".claude.json")
	orig := `{"mcpServers": {"fake": {"type": "stdio", "command": "` + fakeBin + `", "args": []}}}` + "\n"
	if err := os.WriteFile(clientFile, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (stdout, stderr string, err error) {
		t.Helper()
		cmd := exec.Command(sbBin, args...)
		cmd.Env = append(clientEnv(sbHome), "HOME="+userHome)
		cmd.Dir = userHome
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err = cmd.Run()
		return o.String(), e.String(), err
	}
	if out, errOut, err := run("setup", "claude-code"); err != nil {
		t.Fatalf("setup: %v\n%s%s", err, out, errOut)
	}
	rewritten, err := os.ReadFile(clientFile)
	if err != nil {
		t.Fatal(err)
	}
	baks, err := filepath.Glob(clientFile + ".switchboard-*.bak")
	if err != nil || len(baks) != 1 {
		t.Fatalf("backups %v (%v)", baks, err)
	}
	if err := os.Remove(baks[0]); err != nil {
		t.Fatal(err)
	}

	out, errOut, err := run("setup", "--undo", "claude-code")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("undo: %v, want exit status 1\n%s%s", err, out, errOut)
	}
	if want := "Not put back: mcpServers.fake in " + clientFile + " still runs through Switchboard: its backup " + baks[0] + " is gone; edit it by hand\n"; out != want {
		t.Errorf("undo's output:\n%s\nwant:\n%s", out, want)
	}
	if !strings.Contains(errOut, "was partial") || !strings.Contains(errOut, filepath.Join(sbHome, "config.json")) {
		t.Errorf("undo's error does not say it was partial, or where the server is:\n%s", errOut)
	}
	if got, _ := os.ReadFile(clientFile); string(got) != string(rewritten) {
		t.Errorf("the client file changed:\n%s", got)
	}
	if _, errOut, err := run("setup", "--undo", "claude-code"); err == nil || !strings.Contains(errOut, "nothing to undo") {
		t.Errorf("undo again: %v\n%s", err, errOut)
	}
}
