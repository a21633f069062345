package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/mcptest"
	"github.com/switchboard-mcp/switchboard/ui"
)

// A resource's URI with a password and a token, and the same as the
// history keeps it.
const (
	secretURI   = "https://bob:hunter2@host/doc?access_token=abc123"
	redactedURI = "https://[REDACTED]@host/doc?access_token=[REDACTED]"
)

// Roots with a token and a password, and the same as the history keeps
// them (sorted, as a partition has them).
var (
	secretRoots   = []string{"file:///home/u/proj?token=abc123", "https://bob:hunter2@git.example/repo"}
	redactedRoots = []string{"file:///home/u/proj?token=[REDACTED]", "https://[REDACTED]@git.example/repo"}
)

// TestLiveViewsRedactAsHistory: a request's name (a resource's URI) and
// a child's roots carry a password and a token. The live views show them
// redacted as the history keeps them: the control API's status (what
// `status --json` prints), hangs, and the dashboard's controller (its
// snapshots and its events, which its in-flight list, waterfall, backend
// rows and notifications show). Before, only history.db had them
// redacted: every live view showed the secrets.
func TestLiveViewsRedactAsHistory(t *testing.T) {
	paths := sbHome(t)
	if err := config.WriteFile(paths.Config, fakeConfig(t, map[string][]string{"a": nil}), 0o600); err != nil {
		t.Fatal(err)
	}
	inst, ctrl, events := subscribedInstance(t)
	ctx := t.Context()

	// A client that declares no roots keeps the "no roots" child; one that
	// declares roots and does not answer the pool's roots/list yet has its
	// resources/read held, in flight.
	dialSession(t, inst.Paths.PoolSocket(), "a")
	c := dialSessionWith(t, inst.Paths.PoolSocket(), "a", `{"roots":{}}`)
	ask := awaitPoolRequest(t, c, "roots/list")
	read := c.send("resources/read", fmt.Sprintf(`{"uri":%q}`, secretURI))
	eventually(t, 5*time.Second, "the held resources/read in flight", func() bool { return len(inst.Status().InFlight) == 1 })

	st, err := FetchStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.InFlight[0].Name; got != redactedURI {
		t.Errorf("status (control API) inFlight name = %q, want %q", got, redactedURI)
	}
	hangs, _, err := Hangs(ctx, 0)
	if err != nil || len(hangs) != 1 || hangs[0].Name != redactedURI {
		t.Errorf("hangs = %+v, %v; want the held read named %q", hangs, err, redactedURI)
	}
	if in := ctrl.Snapshot().InFlight; len(in) != 1 || in[0].Name != redactedURI {
		t.Errorf("dashboard snapshot in flight = %+v, want the held read named %q", in, redactedURI)
	}
	sctx, scancel := context.WithCancel(ctx)
	if snap, _ := ctrl.Subscribe(sctx, 0); len(snap.InFlight) != 1 || snap.InFlight[0].Name != redactedURI {
		t.Errorf("dashboard subscription's snapshot in flight = %+v, want the held read named %q", snap.InFlight, redactedURI)
	}
	scancel()

	// The client answers with roots: the read goes on (the events tell of
	// it from now), to a child started for them.
	roots, _ := json.Marshal(map[string]any{"roots": []map[string]string{{"uri": secretRoots[1]}, {"uri": secretRoots[0]}}})
	fmt.Fprintf(c.conn, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", ask, roots)
	if e := awaitEvent(t, events, func(e pool.Event) bool {
		return e.Kind == pool.EventRequestReceived && e.Method == "resources/read"
	}); e.Name != redactedURI {
		t.Errorf("dashboard event request received: name %q, want %q", e.Name, redactedURI)
	}
	if e := awaitEvent(t, events, func(e pool.Event) bool {
		return e.Kind == pool.EventBackendStarted && len(e.Roots) > 0
	}); !slices.Equal(e.Roots, redactedRoots) {
		t.Errorf("dashboard event child started: roots %q, want %q", e.Roots, redactedRoots)
	}
	if e := awaitEvent(t, events, func(e pool.Event) bool {
		return e.Kind == pool.EventRequestDone && e.Method == "resources/read"
	}); e.Name != redactedURI {
		t.Errorf("dashboard event request done: name %q, want %q", e.Name, redactedURI)
	}
	awaitPoolAnswer(t, c, read)
	withRoots := func(bs []pool.BackendInfo) [][]string {
		var out [][]string
		for _, b := range bs {
			if len(b.Roots) > 0 {
				out = append(out, b.Roots)
			}
		}
		return out
	}
	if st, err = FetchStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if got := withRoots(st.Backends); len(got) != 1 || !slices.Equal(got[0], redactedRoots) {
		t.Errorf("status (control API) backends' roots = %q, want %q", got, redactedRoots)
	}
	if got := withRoots(ctrl.Snapshot().Backends); len(got) != 1 || !slices.Equal(got[0], redactedRoots) {
		t.Errorf("dashboard snapshot backends' roots = %q, want %q", got, redactedRoots)
	}
	// The pool's own roots are untouched: the child was told the real ones.
	if got := withRoots(inst.Pool.Snapshot().Backends); len(got) != 1 || !slices.Equal(got[0], secretRoots) {
		t.Errorf("the pool's backends' roots = %q, want %q", got, secretRoots)
	}
	if b, _ := json.Marshal(st); strings.Contains(string(b), "hunter2") || strings.Contains(string(b), "abc123") {
		t.Errorf("status holds a secret: %s", b)
	}
}

// awaitPoolRequest waits for the pool's request method to client c and
// returns its id.
func awaitPoolRequest(t *testing.T, c *rpc, method string) json.RawMessage {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-c.in:
			if !ok {
				t.Fatalf("session closed while waiting for the pool's %s", method)
			}
			if string(m["method"]) == fmt.Sprintf("%q", method) && m["id"] != nil {
				return m["id"]
			}
			if rid, ok := m["id"]; ok && m["method"] == nil {
				c.stash[string(rid)] = m
			}
		case <-deadline:
			t.Fatalf("no %s from the pool within 10 s", method)
		}
	}
}

// awaitPoolAnswer waits for the answer to id, a result or an error.
func awaitPoolAnswer(t *testing.T, c *rpc, id string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if _, ok := c.stash[id]; ok {
			return
		}
		select {
		case m, ok := <-c.in:
			if !ok {
				t.Fatalf("session closed while waiting for the answer to %s", id)
			}
			if rid, ok := m["id"]; ok && m["method"] == nil {
				c.stash[string(rid)] = m
			}
		case <-deadline:
			t.Fatalf("no answer to %s within 10 s", id)
		}
	}
}

// subscribedInstance starts an instance of the config written, served
// until the test ends, and a dashboard controller over it subscribed to
// its events until then.
func subscribedInstance(t *testing.T) (*Instance, *trayController, <-chan pool.Event) {
	t.Helper()
	inst, _ := startIn(t, Options{})
	stopInstance(t, inst)
	ctrl := &trayController{inst: inst}
	_, events := ctrl.Subscribe(t.Context(), 0)
	return inst, ctrl, events
}

// awaitEvent reads events until one matches, for at most 10 s.
func awaitEvent(t *testing.T, events <-chan pool.Event, match func(pool.Event) bool) pool.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("the event stream closed")
			}
			if match(e) {
				return e
			}
		case <-deadline:
			t.Fatal("no such event within 10 s")
		}
	}
}

// What a child writes to stderr at start, with a bearer token and an API
// key, and the same as the history keeps it.
const (
	stderrSecret   = "Authorization: Bearer sk-live-123456 --api-key=key-789xyz"
	stderrRedacted = "Authorization: Bearer [REDACTED] --api-key=[REDACTED]"
)

// leaksSecret reports whether s holds a byte of stderrSecret's secrets.
func leaksSecret(s string) bool {
	return strings.Contains(s, "sk-live-123456") || strings.Contains(s, "key-789xyz")
}

// notingApp is a fyne app that hands the notifications it is asked to
// show to a channel.
type notingApp struct {
	fyne.App
	notes chan *fyne.Notification
}

func (a notingApp) SendNotification(n *fyne.Notification) {
	select {
	case a.notes <- n:
	default:
	}
}

// TestLiveViewsRedactChildErrors: a real child writes a bearer token and
// an --api-key= to stderr and exits, until its server fails. The history
// keeps such a text, quoted in a request's error or why a child or a
// session ended, redacted (a shared child's, as here, is quoted in no
// request's error: the initialize's points to status). The live views
// show it so too: the control
// API's status (what `status --json` prints: a server's error, a
// child's lastError and stderrTail), the dashboard's controller (its
// snapshots and its events' errors) and the dashboard's notification
// that the server failed. Before, every one of them showed the secrets.
func TestLiveViewsRedactChildErrors(t *testing.T) {
	paths := sbHome(t)
	bin, err := fakeBin()
	if err != nil {
		t.Fatal(err)
	}
	// The secret is in the child's environment, which no view shows, and
	// the child prints it. Two exits make the server fail: the failure
	// quotes the second child's stderr, read to its end first, though the
	// child writes it and exits at once.
	data, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"leaky": map[string]any{
		"command": "/bin/sh", "args": []string{"-c", `exec "$0" -stderr "$LEAK" -exit-at-start 1`, bin},
		"env":     map[string]string{"LEAK": stderrSecret},
		"restart": map[string]any{"maxRestarts": 2, "minBackoff": "1ms", "maxBackoff": "1ms"},
	}}})
	if err := config.WriteFile(paths.Config, data, 0o600); err != nil {
		t.Fatal(err)
	}
	inst, ctrl, events := subscribedInstance(t)
	ctx := t.Context()

	// The dashboard, over the same controller, says when a server fails.
	app := notingApp{App: test.NewTempApp(t), notes: make(chan *fyne.Notification, 16)}
	u := ui.New(app, ctrl, &ui.Options{MinRedraw: 20 * time.Millisecond, Tick: 20 * time.Millisecond, LeakPoll: time.Hour})
	uctx, stopUI := context.WithCancel(ctx)
	u.Start(uctx)
	defer func() { stopUI(); u.Wait() }()

	conn, err := net.Dial("unix", inst.Paths.PoolSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := mcptest.Attach(conn, "leaky", "c"); err == nil || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("initialize of the crashing server: %v, want its failure", err)
	}
	conn.Close()

	failed := func(bs []pool.BackendInfo) bool {
		return len(bs) == 1 && bs[0].State == pool.StateFailed && bs[0].LastError != "" && len(bs[0].StderrTail) > 0
	}
	var st control.Status
	eventually(t, 10*time.Second, "status to show the failed child", func() bool {
		st, err = FetchStatus(ctx)
		return err == nil && failed(st.Backends)
	})
	b, _ := json.Marshal(st)
	if leaksSecret(string(b)) || !strings.Contains(string(b), stderrRedacted) {
		t.Errorf("status (control API) shows a secret, or not the child's stderr as %q:\n%s", stderrRedacted, b)
	}
	if s := st.Servers[0]; leaksSecret(s.Error) || !strings.Contains(s.Error, "[REDACTED]") {
		t.Errorf("status server error %q, want it redacted", s.Error)
	}
	if bk := st.Backends[0]; leaksSecret(bk.LastError) || !strings.Contains(bk.LastError, stderrRedacted) ||
		bk.StderrTail[len(bk.StderrTail)-1] != stderrRedacted {
		t.Errorf("status backend lastError %q, stderrTail %q, want them redacted", bk.LastError, bk.StderrTail)
	}
	if snap := ctrl.Snapshot(); !failed(snap.Backends) {
		t.Errorf("dashboard snapshot backends %+v, want the failed child", snap.Backends)
	} else if b, _ := json.Marshal(snap); leaksSecret(string(b)) {
		t.Errorf("dashboard snapshot shows a secret:\n%s", b)
	}
	sctx, scancel := context.WithCancel(ctx)
	if snap, _ := ctrl.Subscribe(sctx, 0); !failed(snap.Backends) {
		t.Errorf("dashboard subscription's snapshot backends %+v, want the failed child", snap.Backends)
	} else if b, _ := json.Marshal(snap); leaksSecret(string(b)) {
		t.Errorf("dashboard subscription's snapshot shows a secret:\n%s", b)
	}
	scancel()
	// The pool's own texts are whole.
	if bs := inst.Pool.Snapshot().Backends; len(bs) != 1 || !slices.Contains(bs[0].StderrTail, stderrSecret) {
		t.Errorf("the pool's stderr tail %+v, want the child's line whole", bs)
	}

	// Every event with an error, up to the session's end, has it redacted;
	// the server's failure quotes the stderr.
	var quoted bool
	awaitEvent(t, events, func(e pool.Event) bool {
		if leaksSecret(e.Err) {
			t.Errorf("dashboard event %v: error %q shows a secret", e.Kind, e.Err)
		}
		quoted = quoted || strings.Contains(e.Err, stderrRedacted)
		return e.Kind == pool.EventSessionClosed
	})
	if !quoted {
		t.Errorf("no event's error quoted the child's stderr, redacted")
	}

	// The history keeps the initialize's error, which points to status
	// for the stderr of the shared child rather than quote it.
	var recorded []ui.HistoryRow
	eventually(t, 10*time.Second, "the history to record the failed initialize", func() bool {
		recorded, err = ctrl.History(ctx, ui.HistoryFilter{Server: "leaky", Method: "initialize"})
		return err == nil && len(recorded) == 1 && recorded[0].Error != ""
	})
	if e := recorded[0].Error; leaksSecret(e) || !strings.Contains(e, "switchboard status") {
		t.Errorf("history error %q, want it to point to status for the stderr", e)
	}

	select {
	case n := <-app.notes:
		if !strings.Contains(n.Title, "leaky failed") || leaksSecret(n.Content) || !strings.Contains(n.Content, stderrRedacted) {
			t.Errorf("dashboard notification %q: %q, want the failure with the secrets redacted", n.Title, n.Content)
		}
	case <-time.After(10 * time.Second):
		t.Error("no notification that the server failed within 10 s")
	}
}

// TestRedactSnapshotErrorTexts: every error text of a snapshot and of an
// event is redacted (a resolution's note too: why npm failed may quote a
// registry's URL with its token), and the pool's own stderr lines are
// left whole: the snapshot's are replaced, not written to.
func TestRedactSnapshotErrorTexts(t *testing.T) {
	const secret, redacted = stderrSecret, stderrRedacted
	tail := []string{"listening", secret}
	snap := pool.Snapshot{
		Servers: []pool.ServerInfo{{Name: "a", Error: "failed; last stderr: " + secret}},
		Backends: []pool.BackendInfo{{Server: "a", LastError: "exited (stderr: " + strconv.Quote(secret) + ")", StderrTail: tail,
			ResolveNote: "started as written: npm install x: exit status 1: GET https://bob:s3cret@registry.test/x"}},
	}
	redactSnapshot(&snap)
	want := pool.Snapshot{
		Servers: []pool.ServerInfo{{Name: "a", Error: "failed; last stderr: " + redacted}},
		Backends: []pool.BackendInfo{{Server: "a", LastError: "exited (stderr: " + strconv.Quote(redacted) + ")", StderrTail: []string{"listening", redacted},
			ResolveNote: "started as written: npm install x: exit status 1: GET https://[REDACTED]@registry.test/x"}},
	}
	if b, w := fmt.Sprintf("%+v", snap), fmt.Sprintf("%+v", want); b != w {
		t.Errorf("redacted snapshot\n got %s\nwant %s", b, w)
	}
	if tail[1] != secret {
		t.Errorf("the pool's stderr tail was written to: %q", tail)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan pool.Event, 1)
	events <- pool.Event{Kind: pool.EventRequestDone, Err: "server failed; last stderr: " + secret}
	close(events)
	if e := <-redactEvents(ctx, events); e.Err != "server failed; last stderr: "+redacted {
		t.Errorf("redacted event error %q", e.Err)
	}
}

// TestRedactSnapshotCommands: a secret written literally in a server's
// args (a flag's value, an --env object) shows redacted in a snapshot's
// command lines, configured and resolved, and in a started child's
// event, as the history keeps them (store.RedactArgs); the pool's own
// command lines are replaced, not written to.
func TestRedactSnapshotCommands(t *testing.T) {
	command := []string{"npx", "-y", "srv", "--api-key=flagsecretXYZ987", "--env", `{"API_KEY":"envSECRET456"}`}
	resolved := []string{"node", "/cache/srv/index.js", "--api-key=flagsecretXYZ987", "--env", `{"API_KEY":"envSECRET456"}`}
	wantCommand := []string{"npx", "-y", "srv", "--api-key=[REDACTED]", "--env", `{"API_KEY":"[REDACTED]"}`}
	wantResolved := []string{"node", "/cache/srv/index.js", "--api-key=[REDACTED]", "--env", `{"API_KEY":"[REDACTED]"}`}
	snap := pool.Snapshot{Backends: []pool.BackendInfo{{Server: "a", Command: command, ResolvedCommand: resolved}}}
	redactSnapshot(&snap)
	if b := snap.Backends[0]; !slices.Equal(b.Command, wantCommand) || !slices.Equal(b.ResolvedCommand, wantResolved) {
		t.Errorf("redacted snapshot's commands %q, %q; want %q, %q", b.Command, b.ResolvedCommand, wantCommand, wantResolved)
	}
	if command[3] != "--api-key=flagsecretXYZ987" || resolved[2] != "--api-key=flagsecretXYZ987" {
		t.Errorf("the pool's command lines were written to: %q, %q", command, resolved)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan pool.Event, 1)
	events <- pool.Event{Kind: pool.EventBackendStarted, Command: command, ResolvedCommand: resolved}
	close(events)
	if e := <-redactEvents(ctx, events); !slices.Equal(e.Command, wantCommand) || !slices.Equal(e.ResolvedCommand, wantResolved) {
		t.Errorf("redacted event's commands %q, %q; want %q, %q", e.Command, e.ResolvedCommand, wantCommand, wantResolved)
	}
}

// TestLiveViewsRedactConfigErrors: the config file is edited into one
// that does not load, and its problems quote a URL with a password and
// a ${...} holding a token. The live views show the error redacted as
// the history keeps it: the control API's status (what `status --json`
// prints: configError, and configWatchError), the refusal to restart a
// server of the file, and the dashboard's controller (the banner's
// error, the waterfall's reloads). The log keeps it whole. Before, every
// live view showed the secrets.
func TestLiveViewsRedactConfigErrors(t *testing.T) {
	const password, token = "hunter2pw", "sk-live-4f9a8b7c6d5e4f3a2b1c"
	leaks := func(s string) bool { return strings.Contains(s, password) || strings.Contains(s, token) }
	paths := sbHome(t)
	if err := config.WriteFile(paths.Config, fakeConfig(t, map[string][]string{"a": nil}), 0o600); err != nil {
		t.Fatal(err)
	}
	inst, logs := startIn(t, Options{})
	stopInstance(t, inst)
	ctrl := &trayController{inst: inst}
	ctx := context.Background()

	bin, err := fakeBin()
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := json.Marshal(map[string]any{
		"mcpServers": map[string]any{
			"a":   map[string]any{"command": bin},
			"api": map[string]any{"command": bin, "args": []string{"${API_TOKEN=" + token + "}"}}, // the shell's form
		},
		"http": map[string]any{"listen": "http://me:" + password + "@127.0.0.1:7777"}, // a URL where host:port belongs
	})
	if err := config.WriteFile(paths.Config, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	var st control.Status
	eventually(t, 10*time.Second, "status to show the config error", func() bool {
		st, err = FetchStatus(ctx)
		return err == nil && st.ConfigError != nil
	})
	if e := *st.ConfigError; leaks(e) || !strings.Contains(e, "${API_TOKEN=[REDACTED]}") ||
		!strings.Contains(e, "http://[REDACTED]@127.0.0.1:7777") {
		t.Errorf("status (control API) configError %q, want both problems with their secrets redacted", e)
	}
	cl, err := Control()
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.RestartServer(ctx, "api"); err == nil || leaks(err.Error()) || !strings.Contains(err.Error(), "[REDACTED]") {
		t.Errorf("restart (control API) of a server of the broken file: %v, want the config error redacted", err)
	}
	if err := ctrl.ConfigError(); err == nil || err.Error() != *st.ConfigError {
		t.Errorf("dashboard config error %v, want %q", err, *st.ConfigError)
	}
	rs := ctrl.ConfigReloads()
	if len(rs) == 0 || rs[len(rs)-1].Err != *st.ConfigError {
		t.Errorf("dashboard reloads %+v, want the last one's error %q", rs, *st.ConfigError)
	}
	// As the history keeps it, for the waterfall after the fact.
	waitHistory(t, "the failed reload in the history", func() bool {
		w, err := ctrl.Window(ctx, time.Now().Add(-time.Minute), time.Now().Add(time.Minute))
		return err == nil && len(w.Reloads) > 0 && w.Reloads[len(w.Reloads)-1].Err == *st.ConfigError
	})
	// The log keeps the error whole.
	if l := logs.String(); !strings.Contains(l, password) || !strings.Contains(l, token) {
		t.Errorf("the log lost the config error's text:\n%s", l)
	}

	// Why the file is not watched names its path, which may hold a token.
	inst.mu.Lock()
	inst.watchErr = fmt.Errorf("watch /home/u/sync/token=%s/config.json: no space left on device", token)
	inst.mu.Unlock()
	if st, err = FetchStatus(ctx); err != nil {
		t.Fatal(err)
	} else if st.ConfigWatchError == nil || leaks(*st.ConfigWatchError) {
		t.Errorf("status (control API) configWatchError %v, want it redacted", st.ConfigWatchError)
	}
	if b, _ := json.Marshal(st); leaks(string(b)) {
		t.Errorf("status holds a secret: %s", b)
	}
}
