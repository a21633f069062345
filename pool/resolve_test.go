package pool_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// stubResolver resolves any command to the fake server, counting calls.
// It stands in for the npx resolver (app/npx), whose npm side is tested
// against a real package there.
type stubResolver struct {
	calls   atomic.Int32
	release chan struct{} // when set, Resolve waits for it
	err     error
	res     *pool.Resolution // when set, the resolution instead of the fake
}

func (r *stubResolver) Resolve(ctx context.Context, cfg pool.ServerConfig) (pool.Resolution, error) {
	r.calls.Add(1)
	if r.release != nil {
		select {
		case <-r.release:
		case <-ctx.Done():
			return pool.Resolution{}, ctx.Err()
		}
	}
	if r.err != nil {
		return pool.Resolution{}, r.err
	}
	if r.res != nil {
		return *r.res, nil
	}
	return pool.Resolution{Command: fakeBin, Args: cfg.Args, Note: "resolved to the fake"}, nil
}

func backendInfo(tp *testPool, server string) pool.BackendInfo {
	for _, b := range tp.Snapshot().Backends {
		if b.Server == server {
			return b
		}
	}
	return pool.BackendInfo{}
}

// serverInfo is the snapshot's entry of the server named name.
func serverInfo(t *testing.T, tp *testPool, name string) pool.ServerInfo {
	t.Helper()
	for _, s := range tp.Snapshot().Servers {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no server %q in the snapshot", name)
	return pool.ServerInfo{}
}

// firstCallEchoes dials tp's server srv, and checks that the session's
// first call, an echo of text, is answered with it.
func firstCallEchoes(t *testing.T, tp *testPool, text string) {
	t.Helper()
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	c.call("1", "echo", `{"text":"`+text+`"}`)
	if m, _ := c.recvID("1"); m.text() != text {
		t.Fatalf("call: %s", m.raw)
	}
}

// A resolved server's children run the resolved command (the configured
// one does not even exist here), once per configuration: a crash restarts
// the child without resolving again; a user's Restart resolves again.
// Status shows both commands.
func TestResolvedCommandIsWhatRuns(t *testing.T) {
	r := &stubResolver{}
	cfg := pool.ServerConfig{Name: "srv", Command: "/nonexistent/npx", Resolver: r}
	tp := newTestPool(t, nil, cfg)
	firstCallEchoes(t, tp, "through the resolved command")
	b := backendInfo(tp, "srv")
	if strings.Join(b.Command, " ") != "/nonexistent/npx" || len(b.ResolvedCommand) == 0 || b.ResolvedCommand[0] != fakeBin ||
		b.ResolveNote != "resolved to the fake" {
		t.Fatalf("status: command %q resolved %q note %q", b.Command, b.ResolvedCommand, b.ResolveNote)
	}
	first := b.PID
	if err := tp.KillChild(first); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a new child", func() bool {
		b := backendInfo(tp, "srv")
		return b.PID != 0 && b.PID != first && b.State == pool.StateReady
	})
	if n := r.calls.Load(); n != 1 {
		t.Errorf("resolved %d times for one configuration and a crash, want 1", n)
	}
	if err := tp.Restart("srv"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the restart to resolve again", func() bool { return r.calls.Load() == 2 })
}

// A resolution's environment (npx's PATH) is the child's, over the
// server's own env, whose other values stay; the configuration keeps its
// own. The first edition had no way to carry it to the child.
func TestResolvedEnvReachesTheChild(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the check is a shell script")
	}
	env := map[string]string{"SB_A": "configured", "SB_B": "kept"}
	cfg := pool.ServerConfig{Name: "srv", Command: "/nonexistent/npx", Env: env, Resolver: &stubResolver{res: &pool.Resolution{
		Command: "/bin/sh", Args: []string{"-c", `[ "$SB_A" = resolved ] && [ "$SB_B" = kept ] && exec "$0"`, fakeBin},
		Env: map[string]string{"SB_A": "resolved"},
	}}}
	tp := newTestPool(t, nil, cfg)
	firstCallEchoes(t, tp, "with the resolution's env")
	if env["SB_A"] != "configured" {
		t.Errorf("the server's env became %q", env)
	}
}

// A resolver that fails leaves the command as written, and says why.
func TestUnresolvedCommandRunsAsWritten(t *testing.T) {
	cfg := fake("srv")
	cfg.Resolver = &stubResolver{err: errors.New("npx flag \"--foo\" is not one that is resolved")}
	tp := newTestPool(t, nil, cfg)
	firstCallEchoes(t, tp, "as written")
	b := backendInfo(tp, "srv")
	if len(b.ResolvedCommand) != 0 || b.ResolveNote != `started as written: npx flag "--foo" is not one that is resolved` {
		t.Fatalf("status: resolved %q note %q", b.ResolvedCommand, b.ResolveNote)
	}
}

// While the package is being resolved (a cold download), the server shows
// starting with the reason, and calls wait for it rather than fail.
func TestResolvingShowsAsStarting(t *testing.T) {
	r := &stubResolver{release: make(chan struct{})}
	cfg := fake("srv")
	cfg.Resolver = r
	tp := newTestPool(t, nil, cfg)
	c := tp.dial(t, "srv")
	// Before any child ran, initialize is answered by the first one.
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1.0"}}}`)
	eventually(t, "the starting state with a reason", func() bool {
		b := backendInfo(tp, "srv")
		return b.State == pool.StateStarting && strings.Contains(b.StateReason, "resolving")
	})
	close(r.release)
	if m, _ := c.recvID(`"init"`); m.Error != nil {
		t.Fatalf("initialize: %s", m.raw)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c.call("1", "echo", `{"text":"after the download"}`)
	if m, _ := c.recvID("1"); m.text() != "after the download" {
		t.Fatalf("call: %s", m.raw)
	}
	if b := backendInfo(tp, "srv"); b.StateReason != "" || b.State != pool.StateReady {
		t.Fatalf("after resolving: state %s reason %q", b.State, b.StateReason)
	}
}

// gatedResolver resolves at once the first time, and waits for gate
// after that.
type gatedResolver struct {
	calls atomic.Int32
	gate  chan struct{}
}

func (r *gatedResolver) Resolve(ctx context.Context, cfg pool.ServerConfig) (pool.Resolution, error) {
	if r.calls.Add(1) > 1 {
		select {
		case <-r.gate:
		case <-ctx.Done():
			return pool.Resolution{}, ctx.Err()
		}
	}
	return pool.Resolution{Command: fakeBin, Args: cfg.Args, Note: fmt.Sprintf("resolution %d", r.calls.Load())}, nil
}

// From a user's restart until its new child starts, status shows that
// the package is being looked up again, beside the command resolved
// before: a download of a new version can take a while. It used to show
// the old child ready, then restarting, with no reason.
func TestRestartShowsItResolvesAgain(t *testing.T) {
	r := &gatedResolver{gate: make(chan struct{})}
	cfg := fake("srv")
	cfg.Resolver = r
	tp := newTestPool(t, nil, cfg)
	firstCallEchoes(t, tp, "first")
	if err := tp.Restart("srv"); err != nil {
		t.Fatal(err)
	}
	again := func() bool { return strings.Contains(backendInfo(tp, "srv").StateReason, "again") }
	if b := backendInfo(tp, "srv"); !again() {
		t.Fatalf("right after the restart: state %s, reason %q", b.State, b.StateReason)
	}
	eventually(t, "the old child to be gone", func() bool { return backendInfo(tp, "srv").State == pool.StateStarting })
	if b := backendInfo(tp, "srv"); !again() || b.ResolveNote != "resolution 1" {
		t.Fatalf("waiting for the resolution: reason %q, note %q", b.StateReason, b.ResolveNote)
	}
	close(r.gate)
	eventually(t, "the new child", func() bool {
		b := backendInfo(tp, "srv")
		return b.State == pool.StateReady && b.StateReason == "" && b.ResolveNote == "resolution 2"
	})
}

// The resolution that runs at config load, before any client asks, shows
// as the server starting with the reason, though it has no child yet;
// once it is done the server has none running, and shows stopped. It used
// to show stopped throughout, with no reason: a client that timed out on
// its first call while npm downloaded the package was not told why.
func TestResolvingAtLoadShowsTheServerStarting(t *testing.T) {
	r := &stubResolver{release: make(chan struct{})}
	cfg := fake("srv")
	cfg.Resolver = r
	tp := newTestPool(t, nil, cfg)
	eventually(t, "the resolution to begin", func() bool { return r.calls.Load() == 1 })
	s := serverInfo(t, tp, "srv")
	if s.State != pool.StateStarting || !strings.Contains(s.StateReason, "resolving the package") {
		t.Fatalf("while resolving, no child yet: state %q, reason %q", s.State, s.StateReason)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, events := tp.Subscribe(ctx, 16)
	close(r.release)
	// A dashboard takes a snapshot when told something changed: it is
	// told, or it would show starting until the next event.
	deadline := time.After(10 * time.Second)
	for told := false; !told; {
		select {
		case e := <-events:
			told = e.Kind == pool.EventBackendState && e.Server == "srv" && e.State == pool.StateStopped
		case <-deadline:
			t.Fatalf("no event told the resolution's end: the server shows %+v", serverInfo(t, tp, "srv"))
		}
	}
	if s := serverInfo(t, tp, "srv"); s.State != pool.StateStopped || s.StateReason != "" {
		t.Fatalf("resolved, no child yet: state %q, reason %q", s.State, s.StateReason)
	}
	firstCallEchoes(t, tp, "after the resolution at load")
	if s := serverInfo(t, tp, "srv"); s.State != pool.StateReady || s.StateReason != "" {
		t.Fatalf("after the first call: state %q, reason %q", s.State, s.StateReason)
	}
}

// TestResolutionCutByTheStopSaysSo: a resolution still under way when the
// pool stops (npm downloading a cold package) ends saying so. On the
// first edition the log said the server was "started as written" with
// npm's "context canceled", though nothing would start.
func TestResolutionCutByTheStopSaysSo(t *testing.T) {
	r := &stubResolver{release: make(chan struct{})}
	cfg := fake("srv")
	cfg.Resolver = r
	logs := &logBuffer{}
	tp := newTestPool(t, &pool.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}, cfg)
	eventually(t, "the resolution to begin", func() bool { return r.calls.Load() == 1 })
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	if logs.count("started as written") != 0 || logs.count("server command not resolved: the pool is stopping") != 1 {
		t.Fatal("the pool's log did not say that its stop cut the resolution short")
	}
}
