//go:build unix

package npx

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// hangingNPM is an npx server whose PATH, bin, holds a node and an npm
// that never finishes: npm writes its PID and that of a child of its own
// (a download npm started, say) to the file pids, one a line, and waits.
func hangingNPM(t *testing.T, bin, pids string) pool.ServerConfig {
	t.Helper()
	for name, script := range map[string]string{
		"node": "#!/bin/sh\nexit 0\n",
		"npm":  "#!/bin/sh\nsleep 300 &\nchild=$!\nprintf '%s\\n%s\\n' $$ $child > \"$SB_TEST_NPM_PIDS.tmp\"\nmv \"$SB_TEST_NPM_PIDS.tmp\" \"$SB_TEST_NPM_PIDS\"\nwait\n",
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return pool.ServerConfig{Name: "s", Command: "npx", Args: []string{"-y", "pkg"},
		Env: map[string]string{"PATH": bin + ":/usr/bin:/bin", "SB_TEST_NPM_PIDS": pids}}
}

// readPIDs waits for the hanging npm's PIDs; both are killed when the
// test ends.
func readPIDs(t *testing.T, file string) (npm, child int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(file); err == nil {
			f := strings.Fields(string(b))
			if len(f) == 2 {
				npm, _ = strconv.Atoi(f[0])
				child, _ = strconv.Atoi(f[1])
				t.Cleanup(func() { syscall.Kill(npm, syscall.SIGKILL); syscall.Kill(child, syscall.SIGKILL) })
				return npm, child
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("npm did not start")
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
}

// resolution is a Resolve running in the background until it returns,
// its error then on done.
type resolution struct {
	cancel context.CancelFunc
	done   chan error
}

// resolveInBackground starts Resolve on cfg; it is cancelled when the
// test ends, if not before.
func resolveInBackground(t *testing.T, cfg pool.ServerConfig) *resolution {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &resolution{cancel: cancel, done: make(chan error, 1)}
	go func() {
		_, err := Resolver{}.Resolve(ctx, cfg)
		r.done <- err
	}()
	return r
}

// cancelAndWait cancels the resolution and waits for Resolve to return,
// which it must do promptly and with the cancellation as its error.
func (r *resolution) cancelAndWait(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Resolve = %v, want it cancelled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Resolve did not return once cancelled")
	}
}

// alive reports whether pid runs (a zombie does not: it waits only for
// its parent, or init, to reap it).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return runtime.GOOS != "linux" // no /proc: kill's word
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// waitGone waits for every pid to have ended.
func waitGone(t *testing.T, what string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: process %d still runs", what, pid)
			}
			time.Sleep(5 * time.Millisecond) // poll interval
		}
	}
}

// TestResolveCancelledEndsNPMAndItsChildren: a resolution cut short (the
// pool closing, its time limit) ends npm and what npm started, as a
// stopped child's process group ends. On the first edition only npm was
// killed, and what it had started ran on.
func TestResolveCancelledEndsNPMAndItsChildren(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pids")
	res := resolveInBackground(t, hangingNPM(t, t.TempDir(), file))
	npm, child := readPIDs(t, file)
	res.cancelAndWait(t)
	waitGone(t, "after the resolution was cancelled", npm, child)
}

// TestResolvingNPMDiesWithThePool: npm resolving a package for a pool
// that is killed (SIGKILL: no cleanup runs) dies with it, as the pool's
// children do (Linux's parent-death signal). On the first edition it ran
// on, orphaned.
func TestResolvingNPMDiesWithThePool(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	if dir := os.Getenv("SB_TEST_RESOLVE_POOL"); dir != "" {
		cfg := hangingNPM(t, dir, filepath.Join(dir, "pids"))
		_, _ = Resolver{}.Resolve(context.Background(), cfg) // until killed
		return
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "pids")
	cmd := exec.Command(os.Args[0], "-test.run=^TestResolvingNPMDiesWithThePool$")
	cmd.Env = append(os.Environ(), "SB_TEST_RESOLVE_POOL="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	npm, _ := readPIDs(t, file)
	cmd.Process.Kill()
	_ = cmd.Wait()
	waitGone(t, "after the pool was killed", npm)
}
