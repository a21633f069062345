package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/pool"
)

// dialAsking is dialSession with a client that declares elicitation, so
// that the child's questions reach it.
func dialAsking(t *testing.T, sock, server string) *rpc {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "{\"server\":%q}\n", server)
	br := bufio.NewReader(conn)
	line, err := br.ReadBytes('\n')
	if err != nil {
		t.Fatalf("hello %s: %v", server, err)
	}
	var w pool.Welcome
	if err := json.Unmarshal(line, &w); err != nil || w.Error != "" || w.Session == "" {
		t.Fatalf("hello %s: %s", server, line)
	}
	c := &rpc{t: t, conn: conn, in: make(chan map[string]json.RawMessage, 64), stash: map[string]map[string]json.RawMessage{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer close(c.in)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			var m map[string]json.RawMessage
			if json.Unmarshal(line, &m) == nil {
				c.in <- m
			}
		}
	}()
	t.Cleanup(c.close)
	c.result(c.send("initialize", `{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"asking","version":"1"}}`), 10*time.Second)
	fmt.Fprintln(conn, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

// TestNoPayloadRecordedAfterHistoryOff: history on with capturePayloads;
// a call is in flight (the child waits for the user's answer) when the
// user switches history off. The call's end is recorded, so that no row
// stays in flight, but not what it carries: the answer the user gave
// after switching history off never reaches the database.
func TestNoPayloadRecordedAfterHistoryOff(t *testing.T) {
	paths := sbHome(t)
	servers := map[string][]string{"a": nil}
	on := configWith(t, servers, map[string]any{"history": map[string]any{"capturePayloads": true}})
	if err := config.WriteFile(paths.Config, on, 0o600); err != nil {
		t.Fatal(err)
	}
	inst, _ := startIn(t, Options{})
	stop := stopInstance(t, inst)
	c := dialAsking(t, inst.Paths.PoolSocket(), "a")
	call := c.send("tools/call", `{"name":"ask","arguments":{"kind":"elicitation"}}`)
	// The child's question, relayed to this client.
	var qid json.RawMessage
	deadline := time.After(10 * time.Second)
	for qid == nil {
		select {
		case m := <-c.in:
			if m["method"] != nil && m["id"] != nil {
				qid = m["id"]
			} else if rid, ok := m["id"]; ok {
				c.stash[string(rid)] = m
			}
		case <-deadline:
			t.Fatal("no question from the child")
		}
	}
	off := configWith(t, servers, map[string]any{"history": map[string]any{"disabled": true, "capturePayloads": true}})
	if err := config.WriteFile(paths.Config, off, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "history switched off", func() bool { return !inst.Status().History.Enabled })
	// The user answers only now, after switching history off.
	fmt.Fprintf(c.conn, `{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"note":"TYPED-AFTER-HISTORY-OFF"}}}`+"\n", qid)
	if res := c.result(call, 10*time.Second); !strings.Contains(string(res), "TYPED-AFTER-HISTORY-OFF") {
		t.Fatalf("the call's result %s does not carry the answer", res)
	}
	c.close()
	stop()
	entries, err := History(context.Background(), HistoryQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Logf("entry %s %s %s req=%q resp=%q", e.OriginalID, e.Method, e.Status, e.RequestPayload, e.ResponsePayload)
		if strings.Contains(e.ResponsePayload, "TYPED-AFTER-HISTORY-OFF") {
			t.Errorf("request %s (%s): the response payload produced after history was switched off is on disk: %q",
				e.OriginalID, e.Status, e.ResponsePayload)
		}
	}
}
