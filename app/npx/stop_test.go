//go:build unix

package npx

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/npx/npxtest"
	"github.com/switchboard-mcp/switchboard/pool"
)

// A resolution stopped while npm downloads (the pool closing, the time
// limit) lets npm remove the lock it holds on its npx cache folder: the
// next npm there (the fallback that runs npx as written, the user's own
// npx) goes on at once. npm used to be SIGKILLed, which left the lock
// for the next npm to wait out (a minute, until npm deems it stale).
func TestStoppedResolutionLeavesNoNPMLock(t *testing.T) {
	npxtest.NeedNPM(t)
	reg := npxtest.NewRegistry(t)
	reg.Publish(t, "sbt-slow", "1.0.0", map[string]string{
		"package.json": `{"name":"sbt-slow","version":"1.0.0","bin":"server.js"}`,
		"server.js":    npxtest.Server,
	})
	cache := t.TempDir()
	cfg := pool.ServerConfig{Name: "slow", Command: "npx", Args: []string{"-y", "sbt-slow"}, Env: reg.Env(cache)}
	locks := filepath.Join(cache, "_npx", "*", "concurrency.lock")

	held := reg.Hold()
	res := resolveInBackground(t, cfg)
	select {
	case <-held:
	case err := <-res.done:
		t.Fatalf("Resolve ended before npm downloaded: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("npm did not download the package")
	}
	if held, _ := filepath.Glob(locks); len(held) == 0 {
		t.Skip("this npm keeps no lock on its npx cache folder")
	}
	res.cancelAndWait(t)
	if left, _ := filepath.Glob(locks); len(left) != 0 {
		t.Errorf("npm's lock is left behind: %q", left)
	}

	// The next npm goes on at once.
	reg.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := (Resolver{}).Resolve(ctx, cfg); err != nil {
		t.Fatalf("the next resolution: %v", err)
	}
}

// npm deaf to SIGTERM, and what it started, are killed once the grace
// after the second SIGTERM has passed.
func TestResolveCancelledKillsNPMDeafToSIGTERM(t *testing.T) {
	bin, file := t.TempDir(), filepath.Join(t.TempDir(), "pids")
	cfg := hangingNPM(t, bin, file)
	deaf := "#!/bin/sh\ntrap '' TERM\nsleep 300 &\nchild=$!\nprintf '%s\\n%s\\n' $$ $child > \"$SB_TEST_NPM_PIDS.tmp\"\nmv \"$SB_TEST_NPM_PIDS.tmp\" \"$SB_TEST_NPM_PIDS\"\nwait\n"
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(deaf), 0o755); err != nil {
		t.Fatal(err)
	}
	res := resolveInBackground(t, cfg)
	npm, child := readPIDs(t, file)
	res.cancelAndWait(t)
	waitGone(t, "after the grace", npm, child)
}
