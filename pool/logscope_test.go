package pool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Log messages belong to the request, or the session, that asked for
// them (loglevel.go): these are the attacks on a child shared by clients
// of both eras.

// loggedData lists the data of the notifications/message among ms.
func loggedData(ms []msg) []string {
	var out []string
	for _, m := range ms {
		if m.Method != "notifications/message" {
			continue
		}
		var p struct {
			Data any `json:"data"`
		}
		_ = json.Unmarshal(m.Params, &p)
		out = append(out, fmt.Sprint(p.Data))
	}
	return out
}

// modernLogCall is a 2026-07-28 tools/call of tool with args, asking for
// log messages at level ("" asks for none).
func modernLogCall(id, level, tool, args string) string {
	meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	if level != "" {
		meta += `,"io.modelcontextprotocol/logLevel":"` + level + `"`
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args +
		`,"_meta":{` + meta + `}}}`
}

// logArgs are the log tool's arguments for a message at level.
func logArgs(level, data string) string {
	return `{"level":"` + level + `","data":"` + data + `"}`
}

// setLevel sends a legacy logging/setLevel and returns its answer.
func setLevel(c *client, id, level string) msg {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"logging/setLevel","params":{"level":"` + level + `"}}`)
	m, _ := c.recvID(id)
	return m
}

// pingLogs is what c was sent ahead of the answer to a ping: the pool
// answers it itself, behind whatever was queued for c before.
func pingLogs(c *client, id string) []string {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
	_, other := c.recvID(id)
	return loggedData(other)
}

// postLogs posts a modern request and returns the log data its response
// carried, and its answer.
func postLogs(t *testing.T, url, body string) ([]string, msg) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	events, err := postStream(ctx, t, url, body)
	if err != nil || len(events) == 0 {
		t.Fatalf("POST %s: %v, %d events", body, err, len(events))
	}
	last := events[len(events)-1]
	if last.Method != "" || last.Error != nil {
		t.Fatalf("POST %s: last event %s, want the result", body, last.raw)
	}
	return loggedData(events[:len(events)-1]), last
}

// The reproduced isolation defect: a legacy stdio client A sets its level
// on a modern child, then a modern stdio client B and a modern HTTP client
// C each call a tool that logs, asking for debug in their _meta. Each of B
// and C gets its own message (C on its POST's response), A gets neither,
// and the child, which has no logging/setLevel, is never sent one. On the
// first edition the pool sent the child setLevel, delivered every message
// to the sessions that had set a level (A got "B-secret" and "C-secret"),
// and B and C got nothing.
func TestLogMessagesGoToTheRequestThatAskedForThem(t *testing.T) {
	logPath := filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-log", logPath))
	url := newHTTPFront(t, tp) + "/mcp/srv"
	a := tp.dial(t, "srv")
	a.initialize("a", "")
	if m := setLevel(a, "1", "debug"); m.Error != nil {
		t.Fatalf("setLevel: %s", m.raw)
	}

	b := tp.dial(t, "srv")
	b.send(modernLogCall("1", "debug", "log", logArgs("info", "B-secret")))
	if _, other := b.recvID("1"); !slices.Equal(loggedData(other), []string{"B-secret"}) {
		t.Errorf("B got the log messages %q, want its own", loggedData(other))
	}
	if got, _ := postLogs(t, url, modernLogCall("1", "debug", "log", logArgs("info", "C-secret"))); !slices.Equal(got, []string{"C-secret"}) {
		t.Errorf("C's response carried the log messages %q, want its own", got)
	}
	if got := pingLogs(a, "2"); len(got) > 0 {
		t.Errorf("A got other clients' log messages: %q", got)
	}
	if n := countMethod(childLog(t, logPath), "logging/setLevel"); n > 0 {
		t.Errorf("the modern child was sent logging/setLevel %d times", n)
	}
}

// A legacy session's logging/setLevel on a modern child is the pool's to
// keep, never the child's (2026-07-28 removed the method): the session's
// requests ask the child for their messages at its level in _meta, and
// it gets them; a level that does not exist is refused by the pool, and
// so is any level when the child offers no logging. Its initialize offers
// logging only when the child does.
func TestLegacySessionsLevelRidesItsRequestsToAModernChild(t *testing.T) {
	logPath := filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-log", logPath))
	a := tp.dial(t, "srv")
	if caps := a.initialize("a", "").Result; !strings.Contains(string(caps), `"logging"`) {
		t.Errorf("logging, which the pool bridges, not offered: %s", caps)
	}
	a.call("1", "log", logArgs("info", "before"))
	if _, other := a.recvID("1"); len(loggedData(other)) > 0 {
		t.Errorf("a session that set no level got %q", loggedData(other))
	}
	if m := setLevel(a, "2", "loud"); m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("setLevel loud: %s, want -32602", m.raw)
	}
	if m := setLevel(a, "3", "warning"); m.Error != nil {
		t.Fatalf("setLevel: %s", m.raw)
	}
	var got []string
	for id, args := range map[string]string{"4": logArgs("info", "below"), "5": logArgs("error", "mine")} {
		a.call(id, "log", args)
		_, other := a.recvID(id)
		got = append(got, loggedData(other)...)
	}
	if !slices.Equal(got, []string{"mine"}) {
		t.Errorf("a at warning got %q, want its error message", got)
	}
	log := childLog(t, logPath)
	if n := countMethod(log, "logging/setLevel"); n > 0 {
		t.Errorf("the modern child was sent logging/setLevel %d times", n)
	}
	var levels []string
	for _, m := range log {
		if p, _ := m["params"].(map[string]any); m["method"] == "tools/call" {
			meta, _ := p["_meta"].(map[string]any)
			levels = append(levels, fmt.Sprint(meta["io.modelcontextprotocol/logLevel"]))
		}
	}
	if !slices.Equal(levels, []string{"<nil>", "warning", "warning"}) {
		t.Errorf("the child's calls asked for logs at %q, want none, then the session's level", levels)
	}

	// A modern child that offers no logging: nothing to set.
	tp2 := newTestPool(t, nil, fake("quiet", "-era", "modern", "-logging", "undeclared", "-log", logPath+"2"))
	q := tp2.dial(t, "quiet")
	if caps := q.initialize("q", "").Result; strings.Contains(string(caps), `"logging"`) {
		t.Errorf("logging offered for a child without it: %s", caps)
	}
	if m := setLevel(q, "1", "debug"); m.Error == nil || m.Error.Code != -32601 {
		t.Errorf("setLevel with no logging: %s, want -32601", m.raw)
	}
	if n := countMethod(childLog(t, logPath+"2"), "logging/setLevel"); n > 0 {
		t.Errorf("the modern child without logging was sent logging/setLevel %d times", n)
	}
}

// A modern child's log message goes to the one client whose requests in
// flight asked for it, at or below its level, and a request that asked
// for none does not make it someone else's: over HTTP on the asking
// request's own response. Over stdio the child's message names no
// request, so when two clients' requests that asked are in flight at once
// it is nobody's: dropped, never given to the wrong one.
func TestModernChildsLogMessageGoesToTheRequestsStream(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
	url := newHTTPFront(t, tp) + "/mcp/srv"
	idle := tp.dial(t, "srv")
	inFlight := func(n int) {
		t.Helper()
		eventually(t, fmt.Sprintf("%d calls written to the child", n), func() bool {
			k := 0
			for _, r := range tp.Snapshot().InFlight {
				if r.WrittenToChild {
					k++
				}
			}
			return k == n
		})
	}
	// Another stdio client, and another HTTP one, each wait on a call that
	// asked for no logs.
	idle.send(modernLogCall("1", "", "sleep", `{"ms":60000}`))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	otherPost := make(chan []msg, 1)
	go func() {
		events, _ := postStream(ctx, t, url, modernLogCall("1", "", "sleep", `{"ms":60000}`))
		otherPost <- events
	}()
	inFlight(2)
	got, _ := postLogs(t, url, modernLogCall("2", "warning", "log", logArgs("error", "for C")))
	if !slices.Equal(got, []string{"for C"}) {
		t.Errorf("C's response carried %q, want its own message", got)
	}
	if got, _ := postLogs(t, url, modernLogCall("3", "error", "log", logArgs("info", "below C's level"))); len(got) > 0 {
		t.Errorf("C asked for error and got %q", got)
	}
	idle.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	cancel()
	if events := <-otherPost; len(loggedData(events)) > 0 {
		t.Errorf("the other HTTP client's response carried %q", loggedData(events))
	}
	idle.send(modernLogCall("2", "", "echo", `{"text":"barrier"}`))
	if _, other := idle.recvID("2"); len(loggedData(other)) > 0 {
		t.Errorf("a stdio client that asked for no logs got %q", loggedData(other))
	}

	// Two clients' calls that asked, in flight at once: the message is
	// dropped.
	inFlight(0)
	b := tp.dial(t, "srv")
	b.send(modernLogCall("1", "debug", "sleep", `{"ms":60000}`))
	inFlight(1)
	if got, _ := postLogs(t, url, modernLogCall("4", "debug", "log", logArgs("info", "whose?"))); len(got) > 0 {
		t.Errorf("a message two clients could have asked for reached C: %q", got)
	}
	b.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	b.send(modernLogCall("2", "", "echo", `{"text":"barrier"}`))
	if _, other := b.recvID("2"); len(loggedData(other)) > 0 {
		t.Errorf("a message two clients could have asked for reached B: %q", loggedData(other))
	}
}

// A legacy child's messages name no request, and its level is the one its
// legacy sessions set: a 2026-07-28 client of it is offered no logging
// and gets none of its messages, and a legacy session gets none sent
// while the child runs only modern clients' calls (they are of those
// calls). On the first edition the legacy session that had set debug got
// the modern client's "B-secret", and server/discover offered logging.
func TestLegacyChildsLogsStayOutOfModernCalls(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	a := tp.dial(t, "srv")
	a.initialize("a", "")
	if m := setLevel(a, "1", "debug"); m.Error != nil {
		t.Fatalf("setLevel: %s", m.raw)
	}
	b := tp.dial(t, "srv")
	b.send(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + modernMeta + `}}`)
	if m, _ := b.recvID("1"); m.Error != nil || strings.Contains(string(m.Result), `"logging"`) {
		t.Errorf("server/discover of a legacy child: %s, want no logging", m.raw)
	}
	b.send(modernLogCall("2", "debug", "log", logArgs("info", "B-secret")))
	if _, other := b.recvID("2"); len(loggedData(other)) > 0 {
		t.Errorf("the modern client got %q", loggedData(other))
	}
	if got := pingLogs(a, "2"); len(got) > 0 {
		t.Errorf("A got a modern client's log messages: %q", got)
	}
	a.call("3", "log", logArgs("info", "A-own"))
	if _, other := a.recvID("3"); !slices.Equal(loggedData(other), []string{"A-own"}) {
		t.Errorf("A got %q for its own call, want its message", loggedData(other))
	}
}

// A legacy session's logging/setLevel that the child answers itself (it
// declared no logging) gives the session messages only once the child
// accepted it: one the child refuses leaves the session with none. On the
// first edition the pool took the level as it was sent, and the session
// got every message of a child that refused it.
func TestSetLevelTheChildRefusesAdmitsNoLogs(t *testing.T) {
	tp := newTestPool(t, nil, fake("refused", "-logging", "refused"), fake("undeclared", "-logging", "undeclared"))
	r := tp.dial(t, "refused")
	r.initialize("r", "")
	if m := setLevel(r, "1", "debug"); m.Error == nil {
		t.Fatalf("setLevel on a child that refuses it: %s", m.raw)
	}
	r.call("2", "log", logArgs("error", "refused"))
	if _, other := r.recvID("2"); len(loggedData(other)) > 0 {
		t.Errorf("a session whose setLevel the child refused got %q", loggedData(other))
	}

	u := tp.dial(t, "undeclared")
	u.initialize("u", "")
	if m := setLevel(u, "1", "warning"); m.Error != nil {
		t.Fatalf("setLevel: %s", m.raw)
	}
	var got []string
	for id, args := range map[string]string{"2": logArgs("info", "below"), "3": logArgs("error", "accepted")} {
		u.call(id, "log", args)
		_, other := u.recvID(id)
		got = append(got, loggedData(other)...)
	}
	if !slices.Equal(got, []string{"accepted"}) {
		t.Errorf("a session at warning, which the child accepted, got %q", got)
	}
}
