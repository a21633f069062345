package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/mcptest"
	"github.com/switchboard-mcp/switchboard/store"
	"github.com/switchboard-mcp/switchboard/ui"
)

// TestDashboardHook: POST /v1/dashboard shows the tray instance's
// dashboard, and a headless instance says it has none.
func TestDashboardHook(t *testing.T) {
	inst := &Instance{}
	post := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		inst.controlHandler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/dashboard", nil))
		return w
	}
	if w := post(); w.Code != http.StatusConflict {
		t.Errorf("headless: status %d, want 409", w.Code)
	}
	shown := 0
	inst.setDashboard(func() { shown++ })
	defer inst.setDashboard(nil)
	if w := post(); w.Code != http.StatusOK || shown != 1 {
		t.Errorf("tray: status %d, shown %d times, want 200 and 1", w.Code, shown)
	}
}

// TestMakeWay: a headless pool that a client started makes way for the
// tray app the user launched (POST /v1/make-way stops it once answered);
// one run headless on purpose, or one with a dashboard, refuses with 409
// and the reason.
func TestMakeWay(t *testing.T) {
	stopped := make(chan struct{})
	inst := &Instance{log: slog.New(slog.DiscardHandler), stopRun: func() { close(stopped) }}
	post := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		inst.controlHandler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/make-way", strings.NewReader(`{}`)))
		return w
	}
	if w := post(); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "headless on purpose") {
		t.Errorf("serve: %d %s, want 409 saying it runs headless on purpose", w.Code, w.Body)
	}
	inst.exitWhenIdle = true
	inst.setDashboard(func() {})
	if w := post(); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "its own dashboard") {
		t.Errorf("a tray: %d %s, want 409", w.Code, w.Body)
	}
	inst.setDashboard(nil)
	if w := post(); w.Code != http.StatusOK {
		t.Errorf("a pool a client started: %d %s, want 200", w.Code, w.Body)
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the pool was not stopped")
	}
}

// TestMakeWayEnvironment: the pool that makes way answers the environment
// the app's pool is to run with: its own (the client's token), with the
// app's desktop variables in place of its own. A pool with a server that
// would not start in that environment (its ${XAUTHORITY}, which the app's
// desktop does not set) keeps running and says why. On the first edition
// the answer had no environment: the app's pool ran with the desktop's,
// and the servers with a ${VAR} only the client had were not started.
func TestMakeWayEnvironment(t *testing.T) {
	t.Setenv("SB_CLIENT_TOKEN", "secret")
	t.Setenv("XAUTHORITY", "/client/xauth")
	t.Setenv("DISPLAY", "localhost:10.0") // forwarded over SSH
	t.Setenv("FYNE_SCALE", "2")
	t.Setenv("WAYLAND_DISPLAY", "")
	os.Unsetenv("WAYLAND_DISPLAY")
	cfg, err := config.Parse([]byte(`{"mcpServers": {
		"tok": {"command": "tok", "env": {"T": "${SB_CLIENT_TOKEN}"}},
		"x":   {"command": "x", "env": {"X": "${XAUTHORITY}"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	inst := &Instance{log: slog.New(slog.DiscardHandler), stopRun: func() { close(stopped) }, exitWhenIdle: true, cfg: cfg}
	post := func(desktop ...string) *httptest.ResponseRecorder {
		body, _ := json.Marshal(control.MakeWayRequest{Desktop: desktop})
		w := httptest.NewRecorder()
		inst.controlHandler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/make-way", bytes.NewReader(body)))
		return w
	}
	w := post("DISPLAY=:0", "WAYLAND_DISPLAY=wayland-0")
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "mcpServers.x.env.X: environment variable XAUTHORITY is not set") {
		t.Errorf("a desktop without XAUTHORITY: %d %s, want 409 saying x would not start", w.Code, w.Body)
	}
	if strings.Contains(w.Body.String(), "secret") || strings.Contains(w.Body.String(), "SB_CLIENT_TOKEN") {
		t.Errorf("the refusal tells of the pool's environment: %s", w.Body)
	}
	w = post("DISPLAY=:0", "WAYLAND_DISPLAY=wayland-0", "XAUTHORITY=/desktop/xauth")
	if w.Code != http.StatusOK {
		t.Fatalf("a desktop with XAUTHORITY: %d %s, want 200", w.Code, w.Body)
	}
	var acc control.MakeWayAccepted
	if err := json.Unmarshal(w.Body.Bytes(), &acc); err != nil {
		t.Fatal(err)
	}
	lookup := lookupIn(acc.Env)
	for name, want := range map[string]string{"SB_CLIENT_TOKEN": "secret", "DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0",
		"XAUTHORITY": "/desktop/xauth", "PATH": os.Getenv("PATH")} {
		if got, _ := lookup(name); got != want {
			t.Errorf("the environment answered has %s=%q, want %q", name, got, want)
		}
	}
	if v, ok := lookup("FYNE_SCALE"); ok {
		t.Errorf("the environment answered has the pool's FYNE_SCALE=%q, not the app's (none)", v)
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the pool was not stopped")
	}
}

// TestTrayControllerHistory: the UI reads the same SQLite history the CLI
// does, and is told why when there is none.
func TestTrayControllerHistory(t *testing.T) {
	ctx := context.Background()
	off := &trayController{inst: &Instance{}}
	if _, err := off.History(ctx, ui.HistoryFilter{}); !errors.Is(err, ui.ErrUnavailable) {
		t.Errorf("History without a store = %v, want ErrUnavailable", err)
	}
	if off.HistoryDropped() != 0 {
		t.Error("drops without a store")
	}
	if off.HistoryOn() {
		t.Error("history on without a store")
	}

	st, err := store.Open(filepath.Join(t.TempDir(), "history.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	for _, e := range []pool.Event{
		{Kind: pool.EventRequestReceived, Time: now.Add(-time.Minute), Server: "fake", Session: "s2", PoolID: 9, Method: "tools/call", Name: "sleep", OriginalID: "1"},
		{Kind: pool.EventRequestWritten, Time: now.Add(-time.Minute), Server: "fake", Session: "s2", PoolID: 9, PID: 66},
		{Kind: pool.EventRequestReceived, Time: now.Add(-time.Second), Server: "fake", Session: "s2", PoolID: 10, Method: "tools/list", OriginalID: "2"},
		{Kind: pool.EventRequestDone, Time: now.Add(-time.Second + 2*time.Millisecond), Server: "fake", Session: "s2", PoolID: 10,
			Method: "tools/list", Status: pool.StatusError, Err: "boom"},
	} {
		st.Record(e)
	}
	c := &trayController{inst: &Instance{history: historyWith(st)}}
	if !c.HistoryOn() {
		t.Error("history off with a store recording")
	}
	switched := &trayController{inst: &Instance{history: historyWith(st)}}
	if switched.inst.history.switchOff(); switched.HistoryOn() {
		t.Error("history on once the config switched it off")
	}
	var rows []ui.HistoryRow
	waitHistory(t, "two requests", func() bool {
		rows, err = c.History(ctx, ui.HistoryFilter{Server: "fake"})
		return err == nil && len(rows) == 2
	})
	if r := rows[0]; r.PoolID != 10 || r.Status != pool.StatusError || r.Error != "boom" || r.Duration != 2*time.Millisecond {
		t.Errorf("newest row = %+v", r)
	}
	hung := rows[1]
	if hung.PoolID != 9 || hung.Status != "in-flight" || !hung.WrittenToChild || hung.PID != 66 || hung.Run != st.Run() {
		t.Errorf("hung row = %+v", hung)
	}
	detail, err := c.Timeline(ctx, hung)
	if err != nil {
		t.Fatal(err)
	}
	var whats []string
	for _, s := range detail.Steps {
		whats = append(whats, s.What)
	}
	joined := strings.Join(whats, "\n")
	for _, want := range []string{"received tools/call sleep", "written to child PID 66", "still in flight", "run "} {
		if !strings.Contains(joined, want) {
			t.Errorf("timeline lacks %q:\n%s", want, joined)
		}
	}
}

// TestTrayControllerOrphanTimeline: an orphaned answer in the History tab
// (a child's late answer to a request that timed out) opens a timeline of
// its own, which names the request it answered.
func TestTrayControllerOrphanTimeline(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(filepath.Join(t.TempDir(), "history.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	for _, e := range []pool.Event{
		{Kind: pool.EventRequestReceived, Time: now.Add(-time.Minute), Server: "fake", Session: "s2", PoolID: 9, Method: "tools/call", Name: "sleep", OriginalID: "1"},
		{Kind: pool.EventRequestDone, Time: now.Add(-30 * time.Second), Server: "fake", Session: "s2", PoolID: 9,
			Method: "tools/call", Name: "sleep", Status: pool.StatusTimeout, Err: "timed out"},
		{Kind: pool.EventOrphan, Time: now.Add(-20 * time.Second), Server: "fake", OriginalID: "9", Status: pool.StatusOrphaned},
	} {
		st.Record(e)
	}
	c := &trayController{inst: &Instance{history: historyWith(st)}}
	var rows []ui.HistoryRow
	waitHistory(t, "the request and the orphan", func() bool {
		rows, err = c.History(ctx, ui.HistoryFilter{})
		return err == nil && len(rows) == 2
	})
	o := rows[0]
	if o.Status != pool.StatusOrphaned || o.PoolID != 0 {
		t.Fatalf("newest row = %+v, want the orphan", o)
	}
	detail, err := c.Timeline(ctx, o)
	if err != nil {
		t.Fatalf("the orphan's timeline: %v", err)
	}
	var whats []string
	for _, s := range detail.Steps {
		whats = append(whats, s.What)
	}
	joined := strings.Join(whats, "\n")
	for _, want := range []string{"server fake answered id 9", "request 9 (tools/call sleep from session s2) ended timeout", "run "} {
		if !strings.Contains(joined, want) {
			t.Errorf("timeline lacks %q:\n%s", want, joined)
		}
	}
}

// TestTrayUIOverARealPoolUnderLoad: the dashboard, on a real instance,
// keeps drawing frames while 64 sessions x 8 in flight hammer one real
// child, and the frames it draws come from that pool.
func TestTrayUIOverARealPoolUnderLoad(t *testing.T) {
	const sessions, inflight = 64, 8
	bin, err := fakeBin()
	if err != nil {
		t.Fatal(err)
	}
	home, err := os.MkdirTemp("", "sbui")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(home)
	t.Setenv("SWITCHBOARD_HOME", home)
	cfg := filepath.Join(home, "config.json")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `{"mcpServers": {"fake": {"command": %q}}, "history": {"disabled": true}}`, bin), 0o600); err != nil {
		t.Fatal(err)
	}
	inst, err := Start(Options{ConfigPath: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- inst.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	u := ui.New(test.NewTempApp(t), &trayController{inst: inst, quit: cancel},
		&ui.Options{MinRedraw: 20 * time.Millisecond, Tick: 100 * time.Millisecond, LeakPoll: time.Hour})
	u.ShowWaterfall() // the busiest view: a live waterfall redrawn ten times a second
	uctx, stopUI := context.WithCancel(ctx)
	u.Start(uctx)
	defer func() { stopUI(); u.Wait() }()

	stop := make(chan struct{})
	var hammer sync.WaitGroup
	var done atomic.Int64
	for i := range sessions {
		conn := mcptest.Open(t, inst.Paths.PoolSocket(), "fake", "load")
		hammer.Go(func() {
			defer conn.Close()
			br := bufio.NewReader(conn)
			for {
				select {
				case <-stop:
					return
				default:
				}
				var batch []byte
				for id := 1; id <= inflight; id++ { // every session uses ids 1..8
					batch = fmt.Appendf(batch, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"s%d"}}}`+"\n", id, i)
				}
				if _, err := conn.Write(batch); err != nil {
					t.Errorf("session %d: %v", i, err)
					return
				}
				for range inflight {
					line, err := br.ReadBytes('\n')
					if err != nil {
						t.Errorf("session %d: %v", i, err)
						return
					}
					if !strings.Contains(string(line), fmt.Sprintf(`s%d"`, i)) {
						t.Errorf("session %d got another session's answer: %s", i, line)
						return
					}
					done.Add(1)
				}
			}
		})
	}
	waitHistory(t, "the pool to serve the load", func() bool { return done.Load() > sessions*inflight })
	start, f0, w0 := time.Now(), u.Frames(), u.WaterfallFrames()
	for round := range 5 {
		before, wbefore := u.Frames(), u.WaterfallFrames()
		waitHistory(t, fmt.Sprintf("frames to keep coming under load (round %d)", round), func() bool {
			return u.Frames() >= before+3 && u.WaterfallFrames() >= wbefore+3
		})
	}
	elapsed := time.Since(start)
	close(stop)
	hammer.Wait()
	t.Logf("%d calls answered; in %v under load the dashboard drew %d frames and the waterfall %d (%.0f/s)",
		done.Load(), elapsed.Round(time.Millisecond), u.Frames()-f0, u.WaterfallFrames()-w0,
		float64(u.WaterfallFrames()-w0)/elapsed.Seconds())
}

// TestTrayControllerWindowAndPayloads: the waterfall after the fact reads
// a span of the same SQLite history, the selected request's payloads come
// with its timeline (run 0 meaning this run's), and config reloads reach
// the UI.
func TestTrayControllerWindowAndPayloads(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(filepath.Join(t.TempDir(), "history.db"), &store.Options{CapturePayloads: true, CaptureBytes: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	req := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`
	resp := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}]}}`
	for _, e := range []pool.Event{
		{Kind: pool.EventSessionOpened, Time: now.Add(-time.Minute), Server: "fake", Session: "s1", Transport: "stdio",
			ClientName: "claude-code", ClientVersion: "2.1.3"},
		{Kind: pool.EventBackendStarted, Time: now.Add(-time.Minute), Server: "fake", PID: 66, Command: []string{"fakemcp"}},
		{Kind: pool.EventRequestReceived, Time: now.Add(-30 * time.Second), Server: "fake", Session: "s1", PoolID: 9,
			Method: "tools/call", Name: "echo", OriginalID: "1", Payload: []byte(req)},
		{Kind: pool.EventRequestWritten, Time: now.Add(-30*time.Second + time.Millisecond), Server: "fake", Session: "s1", PoolID: 9, PID: 66},
		{Kind: pool.EventRequestDone, Time: now.Add(-30*time.Second + 4*time.Millisecond), Server: "fake", Session: "s1", PoolID: 9, PID: 66,
			Method: "tools/call", Name: "echo", Status: pool.StatusOK, Written: true, Payload: []byte(resp)},
	} {
		st.Record(e)
	}
	inst := &Instance{history: historyWith(st)}
	c := &trayController{inst: inst}
	var w ui.HistoryWindow
	waitHistory(t, "the request in a window", func() bool {
		w, err = c.Window(ctx, now.Add(-2*time.Minute), now)
		return err == nil && len(w.Requests) == 1
	})
	r := w.Requests[0]
	if r.PoolID != 9 || r.Run != st.Run() || r.WrittenAt.IsZero() || r.AnsweredAt.Sub(r.ReceivedAt) != 4*time.Millisecond {
		t.Errorf("request = %+v", r)
	}
	if len(w.Children) != 1 || w.Children[0].PID != 66 || len(w.Sessions) != 1 || w.Sessions[0].ClientName != "claude-code" {
		t.Errorf("children %+v, sessions %+v", w.Children, w.Sessions)
	}
	if len(w.Runs) != 1 || w.Runs[0].ID != st.Run() || w.Runs[0].Crashed {
		t.Errorf("runs = %+v", w.Runs)
	}
	d, err := c.Timeline(ctx, ui.HistoryRow{PoolID: 9}) // run 0: this run's, as the live waterfall asks
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.RequestPayload, `"text":"hello"`) || !strings.Contains(d.ResponsePayload, `"result"`) {
		t.Errorf("payloads = %q, %q", d.RequestPayload, d.ResponsePayload)
	}
	if len(d.Steps) == 0 || !strings.Contains(d.Steps[0].What, "received tools/call echo") {
		t.Errorf("steps = %+v", d.Steps)
	}

	inst.reloads.add(now, "added: c; unchanged: 2", nil)
	inst.reloads.add(now.Add(time.Second), "", errors.New("line 3: invalid character"))
	rs := c.ConfigReloads()
	if len(rs) != 2 || rs[0].Changes != "added: c; unchanged: 2" || rs[1].Err != "line 3: invalid character" || rs[1].Seq != 2 {
		t.Errorf("reloads = %+v", rs)
	}
	off := &trayController{inst: &Instance{}}
	if _, err := off.Window(ctx, now.Add(-time.Minute), now); !errors.Is(err, ui.ErrUnavailable) {
		t.Errorf("Window without a store = %v, want ErrUnavailable", err)
	}
}

// TestNoStopHook: once noStopHook ran, fyne has no stop hook to queue as
// its loop ends (the race at Quit it removes; see noStopHook). It fails
// when a fyne upgrade renames the methods, so that the upgrade looks at
// that race again.
func TestNoStopHook(t *testing.T) {
	type lifecycle interface {
		SetOnStoppedHookExecuted(func())
		OnStopped() func()
	}
	a := test.NewTempApp(t)
	l, ok := a.Lifecycle().(lifecycle)
	if !ok {
		t.Fatalf("fyne's lifecycle (%T) has no stop hook to take away: look at noStopHook again", a.Lifecycle())
	}
	l.SetOnStoppedHookExecuted(func() {}) // as fyneapp.New does, to save fyne's preferences
	if l.OnStopped() == nil {
		t.Fatal("a stop hook set is not queued: look at noStopHook again")
	}
	noStopHook(a)
	if l.OnStopped() != nil {
		t.Error("fyne would still queue a stop hook as its loop ends")
	}
}
