package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/config"
)

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
	c := dialSessionWith(t, inst.Paths.PoolSocket(), "a", `{"elicitation":{}}`) // the child's question reaches it
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
	entries, _, err := History(context.Background(), HistoryQuery{Limit: 100})
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
