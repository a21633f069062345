package app

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/pool"
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
	inst, _ := startIn(t, Options{})
	stopInstance(t, inst)
	ctrl := &trayController{inst: inst}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, events := ctrl.Subscribe(ctx, 0)

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
