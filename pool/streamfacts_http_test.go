package pool_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// TestHTTPStreamFactsAreWhatTheLineSays: what the pool hands a legacy
// HTTP session's GET stream comes with what its maker knows of it (its
// method, a request's id, the request a notifications/cancelled
// withdraws), and the stream routes by that, parsing nothing (the guard:
// TestStreamRoutesWithoutParsing). Those facts must be what the line
// itself says, as a parse of it finds them: for the pool's own request
// (roots/list, a string id), a child's question (a pool id), its
// withdrawal when the child dies (a 2026-07-28 child's, asked by the
// pool: when the user cancels the call), a list change, a log message.
// Each reaches the client on the stream.
func TestHTTPStreamFactsAreWhatTheLineSays(t *testing.T) {
	var mu sync.Mutex
	var seen []pool.StreamFacts
	restore := pool.WatchStreamFacts(func(f pool.StreamFacts) {
		mu.Lock()
		seen = append(seen, f)
		mu.Unlock()
	})
	t.Cleanup(restore) // after the pools closed: cleanups run last first
	for _, era := range []string{"legacy", "modern"} {
		// A 2026-07-28 child's question is asked of a legacy client by
		// the pool (inputbridge.go), under a pool id of its own too.
		t.Run(era+" child", func(t *testing.T) {
			tp := newTestPool(t, &pool.Options{QuestionGrace: time.Minute}, fake("srv", "-era", era))
			url := newHTTPFrontOf(t, tp.HTTPHandler()) + "/mcp/srv"
			c := &httpClient{t: t, url: url}
			c.initializeWith("c", `{"elicitation":{},"roots":{"listChanged":true}}`)
			st := answerRootsOnStream(t, c, "file:///work/facts") // the pool's roots/list
			next := func(method string) msg {                     // the stream's next event of method
				t.Helper()
				for {
					if _, m := st.event(); m.Method == method {
						return m
					}
				}
			}
			kinds := []string{"pool request", "child question", "withdrawal"}
			if era == "legacy" { // a 2026-07-28 child's changes go to listens, its logs to the request that asked
				kinds = append(kinds, "list change", "notification")
				c.call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"}}}`)
				next("notifications/tools/list_changed")
				if m := c.call(`{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"debug"}}`); m.Error != nil {
					t.Fatalf("setLevel: %s", m.raw)
				}
				c.call(logCall(4, "facts"))
				next("notifications/message")
			}
			call := goCall(t.Context(), c, legacyAskCall(5, "elicitation"))
			q := next("elicitation/create")
			withdraw := func() error { return tp.KillChild(childOfRoots(t, tp, "file:///work/facts")) } // the child's questions go with it
			if era == "modern" {
				in := tp.Snapshot().InFlight // the call, waiting for its client: the user's cancel ends its round
				if len(in) != 1 {
					t.Fatalf("in flight: %+v, want the call waiting for its client", in)
				}
				withdraw = func() error { return tp.Cancel(in[0].PoolID) }
			}
			if err := withdraw(); err != nil {
				t.Fatal(err)
			}
			if got := withdrawn([]msg{next("notifications/cancelled")}); !slices.Equal(got, []string{string(q.ID)}) {
				t.Fatalf("withdrawn %v, want the question %s", got, q.ID)
			}
			result(t, "the call", call)

			mu.Lock()
			defer mu.Unlock()
			got := map[string]bool{}
			for _, f := range seen {
				want, kind := factsOfLine(t, f.Line)
				got[kind] = true
				if told := (factsOf{f.Method, f.ID, f.Withdraws}); told != want {
					t.Errorf("%s was handed the stream as %+v, want %+v", f.Line, told, want)
				}
			}
			for _, kind := range kinds {
				if !got[kind] {
					t.Errorf("no %s reached the stream; it got %d messages: %v", kind, len(seen), got)
				}
			}
			seen = nil
		})
	}
}

// childOfRoots is the pid of the child running on roots uri: the
// session's, beside the child made before its client gave them.
func childOfRoots(t *testing.T, tp *testPool, uri string) int {
	t.Helper()
	for _, b := range tp.Snapshot().Backends {
		if slices.Contains(b.Roots, uri) {
			return b.PID
		}
	}
	t.Fatalf("no child runs on roots %s: %+v", uri, tp.Snapshot().Backends)
	return 0
}

// factsOf is a message's facts as the GET stream uses them.
type factsOf struct{ method, id, withdraws string }

// factsOfLine is what line says of itself, as a parse finds it (what the
// GET stream parsed for, before its makers told it), and its kind.
func factsOfLine(t *testing.T, line []byte) (factsOf, string) {
	t.Helper()
	m, err := jsonrpc.Parse(line)
	if err != nil {
		t.Fatalf("the stream was handed %q: %v", line, err)
	}
	f := factsOf{method: m.Method}
	kind := "notification"
	switch {
	case m.Kind == jsonrpc.KindRequest:
		f.id = string(m.IDBytes())
		kind = "child question"
		if strings.HasPrefix(f.id, `"`) {
			kind = "pool request"
		}
	case m.Kind != jsonrpc.KindNotification:
		kind = fmt.Sprintf("kind %v", m.Kind)
	case m.Method == "notifications/cancelled":
		params := m.Params.Of(m.Raw)
		f.withdraws = string(jsonrpc.Member(params, "requestId").Of(params))
		kind = "withdrawal"
	case strings.HasSuffix(m.Method, "/list_changed"):
		kind = "list change"
	}
	return f, kind
}
