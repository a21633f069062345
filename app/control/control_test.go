package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/app/leaks"
	"github.com/switchboard-mcp/switchboard/pool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeBackend answers the control API the way an instance would, and
// remembers what it was asked.
type fakeBackend struct {
	mu       sync.Mutex
	headless bool
	busy     bool // an upgrade is under way
	asked    []string
	started  chan struct{}
	madeWay  chan struct{}
	quit     chan struct{}
}

func (f *fakeBackend) note(s string) {
	f.mu.Lock()
	f.asked = append(f.asked, s)
	f.mu.Unlock()
}

func (f *fakeBackend) Status() Status {
	return Status{Version: "1.2.3", PID: 42, Sessions: []pool.SessionInfo{{ID: "s1", Server: "memory"}}}
}

func (f *fakeBackend) Leaks(context.Context) ([]leaks.Leak, error) {
	return []leaks.Leak{{PID: 7, Server: "memory", Proven: true}}, nil
}

func (f *fakeBackend) Config() any { return map[string]any{"mcpServers": map[string]any{}} }

func (f *fakeBackend) Kill(_ context.Context, req KillRequest) ([]KillResult, error) {
	f.note(fmt.Sprintf("kill %d %v", req.PID, req.AllLeaked))
	if req.PID == 1 {
		return []KillResult{{PID: 1, Refused: true, Error: "PID 1 is not an MCP backend"}}, nil
	}
	return []KillResult{{PID: req.PID, Killed: true}}, nil
}

func (f *fakeBackend) ShowDashboard() error {
	if f.headless {
		return ErrHeadless
	}
	f.note("dashboard")
	return nil
}

func (f *fakeBackend) RotateHTTPToken(context.Context) (string, error) { return "new-token", nil }

func (f *fakeBackend) CurrentHTTPToken(context.Context) (string, error) { return "the-token", nil }

func (f *fakeBackend) RestartServer(name string) error {
	if name != "memory" {
		return fmt.Errorf("%w: %q", pool.ErrUnknownServer, name)
	}
	f.note("restart " + name)
	return nil
}

func (f *fakeBackend) StopServer(name string) error { return f.RestartServer(name) }

func (f *fakeBackend) Upgrade(_ context.Context, binary string) (UpgradeAccepted, func(), error) {
	if f.busy {
		return UpgradeAccepted{}, nil, fmt.Errorf("%w: an upgrade is under way", ErrConflict)
	}
	return UpgradeAccepted{PID: 42, Binary: binary}, func() { close(f.started) }, nil
}

func (f *fakeBackend) MakeWay(req MakeWayRequest) (MakeWayAccepted, func(), error) {
	if f.busy {
		return MakeWayAccepted{}, nil, fmt.Errorf("%w: it runs headless on purpose", ErrConflict)
	}
	return MakeWayAccepted{Env: append([]string{"TOKEN=from the pool"}, req.Desktop...)}, func() { close(f.madeWay) }, nil
}

func (f *fakeBackend) Quit() (QuitAccepted, func(), error) {
	if f.busy {
		return QuitAccepted{}, nil, fmt.Errorf("%w: an upgrade is under way", ErrConflict)
	}
	return QuitAccepted{PID: 42}, func() { close(f.quit) }, nil
}

// serve runs the control API for b on a real unix socket, as the
// instance does, and returns a client of it.
func serve(t *testing.T, b Backend) *Client {
	t.Helper()
	return serveHandler(t, Handler(b))
}

// serveHandler serves h on a control socket of its own, for the test's
// length, and returns a client of it.
func serveHandler(t *testing.T, h http.Handler) *Client {
	t.Helper()
	dir, err := os.MkdirTemp("", "ctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "control.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	c := NewClient(sock)
	t.Cleanup(c.hc.CloseIdleConnections)
	return c
}

func TestClientAndServer(t *testing.T) {
	ctx := context.Background()
	b := &fakeBackend{started: make(chan struct{}), madeWay: make(chan struct{}), quit: make(chan struct{})}
	c := serve(t, b)

	st, err := c.Status(ctx)
	if err != nil || st.PID != 42 || st.Version != "1.2.3" || len(st.Sessions) != 1 {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	ls, err := c.Leaks(ctx)
	if err != nil || len(ls) != 1 || ls[0].PID != 7 || !ls[0].Proven {
		t.Fatalf("Leaks = %+v, %v", ls, err)
	}
	var cfg map[string]any
	if err := c.Config(ctx, &cfg); err != nil || cfg["mcpServers"] == nil {
		t.Fatalf("Config = %v, %v", cfg, err)
	}
	res, err := c.Kill(ctx, KillRequest{PID: 1})
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err(), leaks.ErrRefused) {
		t.Fatalf("Kill(1) = %+v, %v: want a refusal that Is leaks.ErrRefused", res, err)
	}
	if res, err := c.Kill(ctx, KillRequest{PID: 99}); err != nil || res[0].Err() != nil {
		t.Fatalf("Kill(99) = %+v, %v", res, err)
	}
	if err := c.ShowDashboard(ctx); err != nil {
		t.Fatalf("ShowDashboard: %v", err)
	}
	if tok, err := c.RotateHTTPToken(ctx); err != nil || tok != "new-token" {
		t.Fatalf("RotateHTTPToken = %q, %v", tok, err)
	}
	if tok, err := c.HTTPToken(ctx); err != nil || tok != "the-token" {
		t.Fatalf("HTTPToken = %q, %v", tok, err)
	}
	if err := c.RestartServer(ctx, "memory"); err != nil {
		t.Fatalf("RestartServer: %v", err)
	}
	if err := c.StopServer(ctx, "nope"); !errors.Is(err, pool.ErrUnknownServer) {
		t.Fatalf("StopServer(nope) = %v, want ErrUnknownServer", err)
	}
	acc, err := c.Upgrade(ctx, "/opt/switchboard")
	if err != nil || acc.Binary != "/opt/switchboard" {
		t.Fatalf("Upgrade = %+v, %v", acc, err)
	}
	<-b.started // begun once the answer was out
	if acc, err := c.MakeWay(ctx, MakeWayRequest{Desktop: []string{"DISPLAY=:1"}}); err != nil ||
		!slices.Equal(acc.Env, []string{"TOKEN=from the pool", "DISPLAY=:1"}) {
		t.Fatalf("MakeWay = %q, %v", acc.Env, err)
	}
	<-b.madeWay // stopping once the answer was out
	if acc, err := c.Quit(ctx); err != nil || acc.PID != 42 {
		t.Fatalf("Quit = %+v, %v", acc, err)
	}
	<-b.quit // stopping once the answer was out
	var stacks strings.Builder
	if err := c.Stacks(ctx, &stacks); err != nil || !strings.Contains(stacks.String(), "control.TestClientAndServer") {
		t.Errorf("Stacks = %v and %d bytes without this test's own goroutine:\n%.2000s", err, stacks.Len(), stacks.String())
	}

	want := []string{"kill 1 false", "kill 99 false", "dashboard", "restart memory"}
	if d := cmp.Diff(want, b.asked); d != "" {
		t.Errorf("the backend was asked (-want +got):\n%s", d)
	}
}

// The API's refusals reach the CLI as the errors it branches on.
func TestClientErrors(t *testing.T) {
	ctx := context.Background()
	c := serve(t, &fakeBackend{headless: true, busy: true})
	if err := c.ShowDashboard(ctx); !errors.Is(err, ErrHeadless) {
		t.Errorf("ShowDashboard on a headless pool = %v, want ErrHeadless", err)
	}
	if _, err := c.Upgrade(ctx, "/opt/switchboard"); !errors.Is(err, ErrConflict) {
		t.Errorf("Upgrade while one is under way = %v, want ErrConflict", err)
	}
	if _, err := c.Quit(ctx); !errors.Is(err, ErrConflict) {
		t.Errorf("Quit while an upgrade is under way = %v, want ErrConflict", err)
	}
	if _, err := c.MakeWay(ctx, MakeWayRequest{}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "headless on purpose") {
		t.Errorf("MakeWay from a pool that does not = %v, want ErrConflict with the reason", err)
	}
	for _, bad := range []KillRequest{{}, {PID: 3, AllLeaked: true}} {
		if _, err := c.Kill(ctx, bad); err == nil {
			t.Errorf("Kill(%+v) was accepted", bad)
		}
	}

	dir, err := os.MkdirTemp("", "ctl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	none := NewClient(filepath.Join(dir, "control.sock"))
	if _, err := none.Status(ctx); !errors.Is(err, ErrNoPool) {
		t.Errorf("Status with no pool = %v, want ErrNoPool", err)
	}
	if err := none.Stacks(ctx, io.Discard); !errors.Is(err, ErrNoPool) {
		t.Errorf("Stacks with no pool = %v, want ErrNoPool", err)
	}
}

// A pool that takes a question and never answers it (stuck) makes the
// question fail within QuestionTimeout with ErrUnresponsive, which says
// so, rather than hold the user for the client's minute and print a Go
// HTTP error.
func TestQuestionToAStuckPool(t *testing.T) {
	old := QuestionTimeout
	QuestionTimeout = 200 * time.Millisecond
	t.Cleanup(func() { QuestionTimeout = old })
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // last, after the server closed: its blocked handlers return
	c := serveHandler(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))

	ctx := context.Background()
	if _, err := c.Status(ctx); !errors.Is(err, ErrUnresponsive) || !strings.Contains(err.Error(), "/v1/status") {
		t.Errorf("Status of a stuck pool = %v, want ErrUnresponsive naming /v1/status", err)
	}
	if err := c.Stacks(ctx, io.Discard); !errors.Is(err, ErrUnresponsive) {
		t.Errorf("Stacks of a stuck pool = %v, want ErrUnresponsive", err)
	}
}
