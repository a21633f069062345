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
	slowKill time.Duration
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
	time.Sleep(f.slowKill) // the work of a kill that takes time (a process given 2 s to exit)
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

func (f *fakeBackend) RotateHTTPToken(context.Context) (string, error) {
	f.note("rotate")
	return "new-token", nil
}

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
	f.note("upgrade")
	return UpgradeAccepted{PID: 42, Binary: binary}, func() { close(f.started) }, nil
}

func (f *fakeBackend) MakeWay(req MakeWayRequest) (MakeWayAccepted, func(), error) {
	if f.busy {
		return MakeWayAccepted{}, nil, fmt.Errorf("%w: it runs headless on purpose", ErrConflict)
	}
	f.note("make-way")
	return MakeWayAccepted{Env: append([]string{"TOKEN=from the pool"}, req.Desktop...)}, func() { close(f.madeWay) }, nil
}

func (f *fakeBackend) Quit() (QuitAccepted, func(), error) {
	if f.busy {
		return QuitAccepted{}, nil, fmt.Errorf("%w: an upgrade is under way", ErrConflict)
	}
	f.note("quit")
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
	return serveOn(t, h, func(ln net.Listener) net.Listener { return ln })
}

// serveOn is serveHandler with the control socket's listener wrapped.
func serveOn(t *testing.T, h http.Handler, wrap func(net.Listener) net.Listener) *Client {
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
	go func() { defer close(done); _ = srv.Serve(wrap(ln)) }()
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

	want := []string{"kill 1 false", "kill 99 false", "dashboard", "rotate", "restart memory", "upgrade", "make-way", "quit"}
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

// cutQuestionTimeout sets QuestionTimeout to 200 ms until the test ends.
func cutQuestionTimeout(t *testing.T) {
	old := QuestionTimeout
	QuestionTimeout = 200 * time.Millisecond
	t.Cleanup(func() { QuestionTimeout = old })
}

// stuckPool serves, until the test ends, a control API that takes each
// request and never answers it (a stuck pool), with QuestionTimeout cut
// to 200 ms, and returns its client.
func stuckPool(t *testing.T) *Client {
	t.Helper()
	cutQuestionTimeout(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // last, after the server closed: its blocked handlers return
	return serveHandler(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
}

// A pool that takes a question and never answers it (stuck) makes the
// question fail within QuestionTimeout with ErrUnresponsive, which says
// so, rather than hold the user for the client's minute and print a Go
// HTTP error.
func TestQuestionToAStuckPool(t *testing.T) {
	c := stuckPool(t)

	ctx := context.Background()
	if _, err := c.Status(ctx); !errors.Is(err, ErrUnresponsive) || !strings.Contains(err.Error(), "/v1/status") {
		t.Errorf("Status of a stuck pool = %v, want ErrUnresponsive naming /v1/status", err)
	}
	if err := c.Stacks(ctx, io.Discard); !errors.Is(err, ErrUnresponsive) {
		t.Errorf("Stacks of a stuck pool = %v, want ErrUnresponsive", err)
	}
}

// actions calls each action of the control API with c, each within
// wait, for the tests of a pool that does not answer: the name of each,
// and its error.
func actions(c *Client, wait time.Duration) map[string]error {
	errs := map[string]error{}
	do := func(name string, act func(context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		errs[name] = act(ctx)
	}
	do("kill", func(ctx context.Context) error { _, err := c.Kill(ctx, KillRequest{PID: 99}); return err })
	do("dashboard", c.ShowDashboard)
	do("rotate", func(ctx context.Context) error { _, err := c.RotateHTTPToken(ctx); return err })
	do("restart", func(ctx context.Context) error { return c.RestartServer(ctx, "memory") })
	do("stop", func(ctx context.Context) error { return c.StopServer(ctx, "memory") })
	do("upgrade", func(ctx context.Context) error { _, err := c.Upgrade(ctx, "/opt/switchboard"); return err })
	do("make-way", func(ctx context.Context) error { _, err := c.MakeWay(ctx, MakeWayRequest{}); return err })
	do("quit", func(ctx context.Context) error { _, err := c.Quit(ctx); return err })
	return errs
}

// An action sent to a pool that takes it and does not begin it (stuck)
// fails within QuestionTimeout with ErrUnresponsive, saying it was not
// done, as a question does. On the first edition each waited for the
// client's minute and failed with Go's HTTP timeout, telling nothing of
// whether it would still be done (it was, once the pool ran again).
func TestActionToAStuckPool(t *testing.T) {
	c := stuckPool(t)

	for name, err := range actions(c, 2*time.Second) { // the old minute, cut short
		if !errors.Is(err, ErrUnresponsive) || !strings.Contains(err.Error(), "nothing was done") {
			t.Errorf("%s on a stuck pool = %v, want ErrUnresponsive saying nothing was done", name, err)
		}
	}
}

// An action the pool has taken is waited for past QuestionTimeout: the
// pool said it had it (102) as it read it.
func TestTakenActionIsWaitedFor(t *testing.T) {
	cutQuestionTimeout(t)
	c := serve(t, &fakeBackend{slowKill: 3 * QuestionTimeout})
	if res, err := c.Kill(context.Background(), KillRequest{PID: 99}); err != nil || len(res) != 1 || !res[0].Killed {
		t.Errorf("a kill that takes longer than the wait for the pool to take it = %+v, %v", res, err)
	}
}

// heldListener accepts no connection until release is closed: a pool
// stopped with SIGSTOP, whose socket takes connections (and the requests
// written to them) that it reads once it runs again.
type heldListener struct {
	net.Listener
	release <-chan struct{}
	closed  chan struct{}
	once    sync.Once
}

func (l *heldListener) Accept() (net.Conn, error) {
	select {
	case <-l.release:
		return l.Listener.Accept()
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *heldListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// An action its client gave up on, as the pool did not take it in time,
// is not done when the pool reads it later: here a pool stopped until
// the client has given up on every action. On the first edition each was
// done then, after the client had said it failed.
func TestGivenUpActionIsNotDoneLater(t *testing.T) {
	cutQuestionTimeout(t)
	b := &fakeBackend{started: make(chan struct{}), madeWay: make(chan struct{}), quit: make(chan struct{})}
	release := make(chan struct{})
	const n = 8 // the actions asked
	handled := make(chan struct{}, n)
	h := Handler(b)
	c := serveOn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { handled <- struct{}{} }()
		h.ServeHTTP(w, r)
	}), func(ln net.Listener) net.Listener {
		return &heldListener{Listener: ln, release: release, closed: make(chan struct{})}
	})

	errs := actions(c, 2*time.Second)
	if len(errs) != n {
		t.Fatalf("%d actions asked, want %d", len(errs), n)
	}
	for name, err := range errs {
		if err == nil {
			t.Errorf("%s succeeded on a stopped pool", name)
		}
	}
	close(release) // the pool runs again, and reads what it was sent
	for i := range n {
		select {
		case <-handled:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of the %d requests reached the pool", i, n)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.asked) > 0 {
		t.Errorf("the pool did what its clients had given up on: %q", b.asked)
	}
}

// A request for an action read after the deadline it carries, or with
// one further ahead than a client sets (the clock was set back as it was
// sent, or a stale request), is refused and not done; one without a
// deadline (a client from before deadlines) is done.
func TestActionDeadline(t *testing.T) {
	b := &fakeBackend{}
	c := serve(t, b)
	post := func(deadline string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://switchboard/v1/restart", strings.NewReader(`{"server": "memory"}`))
		if deadline != "" {
			req.Header.Set(deadlineHeader, deadline)
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	now := time.Now()
	for _, d := range []time.Time{now.Add(-time.Second), now.Add(-time.Hour), now.Add(time.Hour)} {
		if code, body := post(d.Format(time.RFC3339Nano)); code != http.StatusRequestTimeout || !strings.Contains(body, "not done") {
			t.Errorf("restart with deadline %s (now %s): %d %s; want 408 saying it was not done", d, now, code, body)
		}
	}
	if code, body := post("soon"); code != http.StatusBadRequest {
		t.Errorf("restart with a deadline that is no time: %d %s, want 400", code, body)
	}
	b.mu.Lock()
	if len(b.asked) > 0 {
		t.Errorf("the pool did what it refused: %q", b.asked)
	}
	b.mu.Unlock()
	if code, body := post(now.Add(10 * time.Second).Format(time.RFC3339Nano)); code != http.StatusOK {
		t.Errorf("restart within its deadline: %d %s", code, body)
	}
	if code, body := post(""); code != http.StatusOK {
		t.Errorf("restart without a deadline: %d %s", code, body)
	}
	if d := cmp.Diff([]string{"restart memory", "restart memory"}, b.asked); d != "" {
		t.Errorf("the backend was asked (-want +got):\n%s", d)
	}
}

// A pool that answers the ping and then does not read the action in time
// (stopped or stuck just then): the client gives up, and what it says of
// the action depends on whether the pool showed it honours its deadline.
// One that does (this package's server) refuses the action when it reads
// it. One from before deadlines (an older pool the newer CLI talks to
// until it upgrades: it answers the ping 404 and ignores the deadline)
// does it then, so the client must not say it will not; on the first
// edition it said so of both.
func TestGivenUpActionAfterPing(t *testing.T) {
	for _, old := range []bool{false, true} {
		t.Run(map[bool]string{false: "honours deadlines", true: "from before deadlines"}[old], func(t *testing.T) {
			cutQuestionTimeout(t)
			b := &fakeBackend{}
			release := make(chan struct{})
			handled := make(chan struct{}, 1)
			h := Handler(b)
			c := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					if old {
						http.NotFound(w, r) // no /v1/ping, no honoursHeader
						return
					}
					h.ServeHTTP(w, r)
					return
				}
				defer func() { handled <- struct{}{} }()
				<-release // the pool runs again, and reads the action
				if old {
					r.Header.Del(deadlineHeader) // an old pool does not look at it
				}
				h.ServeHTTP(w, r)
			}))

			err := c.RestartServer(context.Background(), "memory")
			if !errors.Is(err, ErrUnresponsive) {
				t.Fatalf("restart on a pool that does not take it = %v, want ErrUnresponsive", err)
			}
			switch {
			case !old && !strings.Contains(err.Error(), "nothing was done, and the pool will not do it later"):
				t.Errorf("restart given up on a pool that honours deadlines = %v, want it to say the pool will not do it later", err)
			case old && (strings.Contains(err.Error(), "will not do it") || !strings.Contains(err.Error(), "may still do it")):
				t.Errorf("restart given up on a pool from before deadlines = %v, want it to say the pool may still do it", err)
			}
			close(release)
			select {
			case <-handled:
			case <-time.After(10 * time.Second):
				t.Fatal("the action did not reach the pool")
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			if done := len(b.asked) > 0; done != old {
				t.Errorf("the pool did the restart given up on: %v, want %v (%q)", done, old, b.asked)
			}
		})
	}
}

// Every answer of the control API, the ping's included, says it honours
// action deadlines.
func TestPingSaysDeadlinesAreHonoured(t *testing.T) {
	c := serve(t, &fakeBackend{})
	honours, err := c.ping(context.Background())
	if err != nil || !honours {
		t.Errorf("ping = %v, %v; want true", honours, err)
	}
	old := serveHandler(t, http.NotFoundHandler())
	if honours, err := old.ping(context.Background()); err != nil || honours {
		t.Errorf("ping of a pool without it = %v, %v; want false", honours, err)
	}
}
