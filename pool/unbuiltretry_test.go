package pool_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestUnbuildableRetryEndsAsAnyCall: a legacy client answers the question
// its 2026-07-28 child asked during a call, and the pool cannot build the
// call's retry with the answers. The call ends as any call the pool
// answers with an error: the client gets -32603 once, the error is
// counted (and nothing else is), and history records the call's one end,
// failed with that error. On the first edition that end was the retry's
// own: the client got the error, but no counter counted it, and history
// recorded the call ok, as its child's round had ended.
func TestUnbuildableRetryEndsAsAnyCall(t *testing.T) {
	t.Cleanup(pool.SpoilBridgedAnswers()) // restored once the pool has closed
	var rec recorder
	tp := newTestPool(t, &pool.Options{Record: rec.record}, fake("srv", "-era", "modern"))
	c := tp.dial(t, "srv")
	c.initialize("person", `{"elicitation":{}}`)
	asked := c.question(`"call"`, "elicitation")
	before := tp.Snapshot().Counters

	c.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"name":"Ada"}}}`, asked.ID)
	m, _ := c.recvID(`"call"`)
	const message = "cannot retry the call with the client's answers"
	if m.Error == nil || m.Error.Code != -32603 || m.Error.Message != message {
		t.Fatalf("want -32603 %q, got %s", message, m.raw)
	}
	var data map[string]any
	if err := json.Unmarshal(m.Error.Data, &data); err != nil {
		t.Fatalf("the error's data %s: %v", m.Error.Data, err)
	}
	if diff := cmp.Diff(map[string]any{"retryable": false, "mayHaveExecuted": true, "server": "srv"}, data); diff != "" {
		t.Errorf("the error's data (-want +got):\n%s", diff)
	}
	done := rec.waitFor(t, "the call's end in history", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestDone && e.Name == "ask"
	})
	// Counted before its end is recorded: now or never.
	want := before
	want.Errors++
	if diff := cmp.Diff(want, tp.Snapshot().Counters); diff != "" {
		t.Errorf("counters (-want +got):\n%s", diff)
	}
	if done.Status != pool.StatusFailed || done.ErrCode != -32603 || done.Err != message || !done.Written || done.Size == 0 {
		t.Errorf("its end in history %+v; want failed, -32603 %q, written, with the error's size", done, message)
	}
	if in := tp.Snapshot().InFlight; len(in) != 0 {
		t.Errorf("in flight after its end: %+v", in)
	}
	if n := pool.BridgedQuestions(tp.Pool); n != 0 {
		t.Errorf("%d questions still wait for the client", n)
	}

	c.call(`"after"`, "echo", `{"text":"after"}`)
	if m, extra := c.recvID(`"after"`); m.text() != "after" || len(extra) != 0 {
		t.Fatalf("the call after: %s (before it: %v)", m.raw, extra)
	}
	rec.waitFor(t, "the call after in history", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestDone && e.Name == "echo"
	})
	if all := rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.Name == "ask" }); len(all) != 1 {
		t.Errorf("the call's ends in history %+v; want one", all)
	}
}
