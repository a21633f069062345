package pool_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// notificationsIn lists the methods and subscription tags of the
// notifications among msgs.
func notificationsIn(msgs []msg) []string {
	var out []string
	for _, m := range msgs {
		if m.Method == "" {
			continue
		}
		var p struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		_ = json.Unmarshal(m.Params, &p)
		out = append(out, m.Method+" "+string(p.Meta["io.modelcontextprotocol/subscriptionId"]))
	}
	return out
}

// TestListenOnLegacyChild: modern clients' subscriptions/listen on a
// legacy child. Each listen is acknowledged with the filter the child can
// honour; each gets exactly the change notifications it asked for, tagged
// with its id; a legacy session of the same child still gets its own,
// untagged; the child sees one resources/subscribe for a listened
// resource, and the unsubscribe when the listen is cancelled.
func TestListenOnLegacyChild(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	m1, m2, old := tp.dial(t, "srv"), tp.dial(t, "srv"), tp.dial(t, "srv")
	old.initialize("old", "")
	m1.send(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fake://counter"]},` + modernMeta + `}}`)
	ack := m1.recv()
	if ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(string(ack.Params), `"io.modelcontextprotocol/subscriptionId":"L"`) ||
		!strings.Contains(string(ack.Params), `"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fake://counter"]}`) {
		t.Fatalf("ack: %s", ack.raw)
	}
	m2.send(`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"promptsListChanged":true},` + modernMeta + `}}`)
	if ack := m2.recv(); ack.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("ack: %s", ack.raw)
	}
	// after collects what a session received before the answer to a
	// sentinel call sent now.
	after := func(c *client, id string) []string {
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"s"},` + modernMeta + `}}`)
		_, before := c.recvID(id)
		return notificationsIn(before)
	}
	for _, kind := range []string{"tools", "prompts", "updated"} {
		old.call(`"n-`+kind+`"`, "notify", `{"kind":"`+kind+`"}`)
		_, oldGot := old.recvID(`"n-` + kind + `"`)
		got1, got2 := after(m1, `"s1-`+kind+`"`), after(m2, `"s2-`+kind+`"`)
		want1, want2, wantOld := map[string][]string{
			"tools":   {"notifications/tools/list_changed \"L\""},
			"updated": {"notifications/resources/updated \"L\""},
		}[kind], map[string][]string{
			"prompts": {"notifications/prompts/list_changed 7"},
		}[kind], map[string][]string{
			"tools": {"notifications/tools/list_changed "}, "prompts": {"notifications/prompts/list_changed "},
		}[kind]
		if strings.Join(got1, ";") != strings.Join(want1, ";") || strings.Join(got2, ";") != strings.Join(want2, ";") ||
			strings.Join(notificationsIn(oldGot), ";") != strings.Join(wantOld, ";") {
			t.Fatalf("notify %s: listen L got %q (want %q), listen 7 got %q (want %q), legacy got %q (want %q)",
				kind, got1, want1, got2, want2, notificationsIn(oldGot), wantOld)
		}
	}
	if n := countInLog(t, logPath, "resources/subscribe"); n != 1 {
		t.Fatalf("child saw %d resources/subscribe, want 1", n)
	}
	m1.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L"}}`)
	eventually(t, "the child's resources/unsubscribe", func() bool {
		return countInLog(t, logPath, "resources/unsubscribe") == 1
	})
	old.call(`"n-again"`, "notify", `{"kind":"tools"}`)
	old.recvID(`"n-again"`)
	if got := after(m1, `"s1-again"`); len(got) != 0 {
		t.Fatalf("a cancelled listen still got %q", got)
	}
}

// TestListenOverHTTP: a stateless HTTP client's listen is an SSE stream
// that starts with the acknowledgement and carries the tagged
// notifications it asked for.
func TestListenOverHTTP(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	resp := c.post(`{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("listen: %s %q", resp.Status, ct)
	}
	sc := bufio.NewScanner(resp.Body)
	next := func() msg {
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m msg
				if err := json.Unmarshal([]byte(data), &m); err != nil {
					t.Fatalf("event %q: %v", data, err)
				}
				m.raw = data
				return m
			}
		}
		t.Fatalf("stream ended: %v", sc.Err())
		return msg{}
	}
	if ack := next(); ack.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first event: %s", ack.raw)
	}
	c.call(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"},` + modernMeta + `}}`)
	if n := next(); n.Method != "notifications/tools/list_changed" || !strings.Contains(n.raw, `"io.modelcontextprotocol/subscriptionId":3`) {
		t.Fatalf("second event: %s", n.raw)
	}
}

// countInLog counts the complete lines of a child's -log file that carry
// method, while the child may still be writing it.
func countInLog(t *testing.T, path, method string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	lines := strings.Split(string(b), "\n")
	for _, l := range lines[:len(lines)-1] { // the last is unfinished or empty
		if strings.Contains(l, `"method":"`+method+`"`) {
			n++
		}
	}
	return n
}

// TestListenOnModernChild: a modern child's own subscriptions/listen
// serves the listen; its notifications, tagged with the pool's id for the
// request, reach the listening client tagged with the client's id, and no
// other session.
func TestListenOnModernChild(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
	l, other := tp.dial(t, "srv"), tp.dial(t, "srv")
	l.send(`{"jsonrpc":"2.0","id":"mine","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`)
	if ack := l.recv(); ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(ack.raw, `"io.modelcontextprotocol/subscriptionId":"mine"`) {
		t.Fatalf("ack: %s", ack.raw)
	}
	other.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"},` + modernMeta + `}}`)
	if _, before := other.recvID("1"); len(before) != 0 {
		t.Fatalf("a session without a listen got %s", before[0].raw)
	}
	if n := l.recv(); n.Method != "notifications/tools/list_changed" || !strings.Contains(n.raw, `"io.modelcontextprotocol/subscriptionId":"mine"`) {
		t.Fatalf("notification: %s", n.raw)
	}
}
