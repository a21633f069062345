package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/control/controltest"
	homepkg "github.com/switchboard-mcp/switchboard/app/home"
)

// A pool that runs but does not answer (stopped with SIGSTOP here; stuck,
// in life) is not "no pool": setup, import and config check cannot tell
// which config it runs, so they change nothing and fail, saying it did not
// answer. Taken for no pool, setup would add the servers to this home's
// config.json, which a pool started with --config does not read, and point
// the client at it: the refusal a pool of another config gets when it
// answers would be bypassed by its being slow.
func TestCommandsRefuseAPoolThatDoesNotAnswer(t *testing.T) {
	t.Parallel() // waits out the question's bound; its pool, home and HOME are its own
	home := homeDir(t)
	user := t.TempDir()
	other := filepath.Join(home, "other.json")
	if err := os.WriteFile(other, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	clientFile := filepath.Join(user, ".cursor", "mcp.json")
	orig := `{"mcpServers": {"fake": {"command": "` + fakeBin + `", "args": ["a"]}}}`
	if err := os.MkdirAll(filepath.Dir(clientFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(clientFile, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	in := serveWith(t, exec.Command(sbBin, "serve", "--config", other), home)
	run := func(args ...string) (string, int) {
		cmd := exec.Command(sbBin, args...)
		cmd.Env = append(clientEnv(home), "HOME="+user)
		cmd.Dir = user
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Errorf("%v: %v", args, err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	// Answering, the pool of another config is refused.
	if out, code := run("setup", "cursor"); code != 1 || !strings.Contains(out, "runs the config "+other) {
		t.Fatalf("setup cursor with a pool of another config: exit %d\n%s", code, out)
	}
	defaultConfig := filepath.Join(home, "config.json")
	before, beforeErr := os.ReadFile(defaultConfig)

	if err := in.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.cmd.Process.Signal(syscall.SIGCONT) })
	// Together: each waits out the question's bound.
	cmds := [][]string{{"setup", "cursor"}, {"import", "--from", "cursor"}, {"config", "check"}}
	outs, codes := make([]string, len(cmds)), make([]int, len(cmds))
	var wg sync.WaitGroup
	for i, args := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], codes[i] = run(args...)
		}()
	}
	wg.Wait()
	for i, args := range cmds {
		if codes[i] != 1 || !strings.Contains(outs[i], "the running Switchboard did not answer") {
			t.Errorf("%s with the pool stopped: exit %d, want 1 saying it did not answer:\n%s", strings.Join(args, " "), codes[i], outs[i])
		}
	}
	if data, _ := os.ReadFile(clientFile); string(data) != orig {
		t.Errorf("the client file was rewritten:\n%s", data)
	}
	after, afterErr := os.ReadFile(defaultConfig)
	if string(after) != string(before) || (beforeErr == nil) != (afterErr == nil) {
		t.Errorf("%s was written (before: %v, after: %v):\n%s", defaultConfig, beforeErr, afterErr, after)
	}
}

// silentControlSocket listens on home's control socket as a pool that
// takes questions and never answers does (one stopped, or stuck), and
// counts the connections made to it.
func silentControlSocket(t *testing.T, home string) (asked func() int) {
	t.Helper()
	paths, err := homepkg.ResolveIn(runtime.GOOS, func(k string) string {
		if k == "SWITCHBOARD_HOME" {
			return home
		}
		return os.Getenv(k)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := paths.EnsureRunDir(); err != nil {
		t.Fatal(err)
	}
	return controltest.ListenSilent(t, paths.ControlSocket()).Conns
}

// `hangs` with a pool that does not answer asks it once, waiting the
// question's 15 s, not once for the threshold and again for the requests
// (30 s); and, the threshold then read from this home's config, which a
// pool started with --config does not run, it says so.
func TestHangsAsksAPoolThatDoesNotAnswerOnce(t *testing.T) {
	t.Parallel() // waits out the question's bound; its socket and home are its own
	home := homeDir(t)
	cfg := filepath.Join(home, "config.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {}, "hangThreshold": "45s"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	asked := silentControlSocket(t, home)
	cmd := exec.Command(sbBin, "hangs")
	cmd.Env = clientEnv(home)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hangs: %v\n%s", err, stderr.String())
	}
	if n := asked(); n != 1 {
		t.Errorf("hangs asked the pool %d times, want once", n)
	}
	if !strings.Contains(stderr.String(), "did not answer") ||
		!strings.Contains(stderr.String(), "the threshold, 45s, is the hangThreshold of "+cfg+"; the running Switchboard may run another config") {
		t.Errorf("hangs does not say the pool did not answer and where the threshold comes from:\n%s", stderr.String())
	}
	if !strings.Contains(stdout.String(), "nothing in flight for 45s or more") {
		t.Errorf("hangs output:\n%s", stdout.String())
	}
}

// An action sent to a pool that is stopped (SIGSTOP; stuck, in life)
// fails within the question's 15 s, exit 1, saying the pool did not
// answer and that nothing was done, and is not done once the pool runs
// again; a `connect` started meanwhile answers its client's requests
// with why before it exits. On the first edition `kill` and `quit`
// waited a minute, failed with Go's HTTP timeout, and were carried out
// when the pool ran again (its child killed, the pool gone), and
// `connect` exited answering nothing.
func TestStoppedPoolDoesNotActLater(t *testing.T) {
	t.Parallel() // waits out the question's bound; its pool and home are its own
	in := serve(t, fakeConfig(t))
	s := in.connect(t, "fake")
	s.initialize("first")
	var child int
	waitFor(t, "the child", func() bool {
		for _, b := range in.status().Backends {
			if b.State == "ready" {
				child = b.PID
			}
		}
		return child > 0
	})

	if err := in.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	cont := func() {
		if stopped {
			stopped = false
			_ = in.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(cont)
	late := in.connect(t, "fake")
	late.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"late","version":"1"}}}`)
	late.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
	lines := make(chan map[string]string, 1) // what connect wrote, by id
	go func() {
		answers := map[string]string{}
		for {
			line, err := late.out.ReadString('\n') // ends as connect's exit closes its stdout here
			if err != nil {
				lines <- answers
				return
			}
			var r reply
			if json.Unmarshal([]byte(line), &r) == nil {
				answers[string(r.ID)] = line
			}
		}
	}()
	// Together: each waits out the bound.
	cmds := [][]string{{"kill", strconv.Itoa(child)}, {"quit"}}
	outs, codes := make([]string, len(cmds)), make([]int, len(cmds))
	took := make([]time.Duration, len(cmds))
	var wg sync.WaitGroup
	for i, args := range cmds {
		wg.Go(func() {
			cmd := exec.Command(sbBin, args...)
			cmd.Env = append(os.Environ(), "SWITCHBOARD_HOME="+in.home)
			start := time.Now()
			out, _ := cmd.CombinedOutput()
			outs[i], codes[i], took[i] = string(out), cmd.ProcessState.ExitCode(), time.Since(start)
		})
	}
	select {
	case err := <-late.done:
		late.done <- err // for the cleanup
		if code := late.cmd.ProcessState.ExitCode(); code != 1 {
			t.Errorf("connect to the stopped pool: exit %d, want 1; stderr:\n%s", code, late.errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Errorf("connect to the stopped pool did not exit")
	}
	answers := <-lines
	for _, id := range []string{"1", "2"} {
		var r struct {
			Error struct {
				Message string `json:"message"`
				Data    struct {
					MayHaveExecuted *bool `json:"mayHaveExecuted"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(answers[id]), &r); err != nil || !strings.Contains(r.Error.Message, "the pool did not answer") ||
			r.Error.Data.MayHaveExecuted == nil || *r.Error.Data.MayHaveExecuted {
			t.Errorf("connect to the stopped pool answered request %s with %q; want an error saying the pool did not answer, mayHaveExecuted false", id, answers[id])
		}
	}
	wg.Wait()
	for i, args := range cmds {
		if codes[i] != 1 || !strings.Contains(outs[i], "the running Switchboard did not answer") ||
			!strings.Contains(outs[i], "nothing was done, and the pool will not do it later") || took[i] > 30*time.Second {
			t.Errorf("%s with the pool stopped: exit %d after %s, want 1 within the question's bound, saying it did not answer and nothing was done:\n%s",
				strings.Join(args, " "), codes[i], took[i].Round(time.Second), outs[i])
		}
	}

	cont()
	st := in.status() // the pool has read what was sent while it was stopped
	if len(st.Backends) != 1 || st.Backends[0].PID != child || !alive(child) {
		t.Errorf("the child %d was killed once the pool ran again: backends %+v", child, st.Backends)
	}
	select {
	case err := <-in.done:
		in.done <- err // for the cleanup
		t.Errorf("the pool quit once it ran again: %v", err)
	default:
	}
}

// `status --json` with a pool that does not answer prints what a script
// can read: running true, and why there is nothing more (exit 1). It
// printed nothing on stdout, so a script reading .running read no input.
func TestStatusJSONOfAPoolThatDoesNotAnswer(t *testing.T) {
	t.Parallel() // waits out the question's bound; its socket and home are its own
	home := homeDir(t)
	silentControlSocket(t, home)
	cmd := exec.Command(sbBin, "status", "--json")
	cmd.Env = clientEnv(home)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("status --json: %v, exit %d, want 1\n%s", err, code, stderr.String())
	}
	var st struct {
		Running      *bool   `json:"running"`
		Unresponsive *string `json:"unresponsive"`
		Sessions     []any   `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &st); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%q", err, stdout.String())
	}
	if st.Running == nil || !*st.Running || st.Unresponsive == nil || !strings.Contains(*st.Unresponsive, "did not answer") || st.Sessions == nil {
		t.Fatalf("status --json of a pool that does not answer:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "did not answer") {
		t.Errorf("stderr does not say the pool did not answer:\n%s", stderr.String())
	}
}
