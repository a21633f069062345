package pool_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// withdrawn lists the question ids that ms withdraw with
// notifications/cancelled.
func withdrawn(ms []msg) (ids []string) {
	for _, m := range ms {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if m.Method == "notifications/cancelled" && json.Unmarshal(m.Params, &p) == nil {
			ids = append(ids, string(p.RequestID))
		}
	}
	return ids
}

// askedOnce starts a call whose child (of any era) asks the client an
// elicitation, and returns the question as the client got it.
func askedOnce(t *testing.T, tp *testPool) (*client, msg) {
	t.Helper()
	c := tp.dial(t, "srv")
	c.initialize("person", `{"elicitation":{}}`)
	c.call(`"call"`, "ask", `{"kind":"elicitation"}`)
	q := c.recv()
	if q.Method != "elicitation/create" {
		t.Fatalf("want the child's question, got %s", q.raw)
	}
	return c, q
}

// restAsPoolCloses closes tp and returns what c got until its session
// ended with it.
func restAsPoolCloses(t *testing.T, tp *testPool, c *client) []msg {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- tp.Close() }()
	got := c.rest()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	return got
}

// settle returns what the client got up to the answer to a ping sent now,
// others being what it got before: with the call's end, the withdrawal
// of its question may come before it or after.
func settle(c *client, others []msg) []msg {
	c.send(`{"jsonrpc":"2.0","id":"settle","method":"ping"}`)
	_, more := c.recvID(`"settle"`)
	return append(others, more...)
}

// TestBridgedQuestionWithdrawnWhenItsCallEnds: a legacy client's call to
// a 2026-07-28 child waits while the pool asks the client the child's
// elicitation. However the wait ends without the client's answer (the
// user's cancel, the call's timeout, the client's own cancel of its
// call, the pool closing the session), the pool withdraws its question
// at the client with notifications/cancelled naming it, once, so that
// no form stays open for an answer nobody will use; an answered question
// (a result, or a refusal) is not withdrawn. On the first edition the
// question stayed open at the client in every one of these endings.
func TestBridgedQuestionWithdrawnWhenItsCallEnds(t *testing.T) {
	t.Run("the user's cancel", func(t *testing.T) {
		t.Cleanup(pool.SetHoldKeep(time.Minute)) // restored once the pool has closed
		tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
		c, q := askedOnce(t, tp)
		in := tp.Snapshot().InFlight
		if len(in) != 1 {
			t.Fatalf("in flight: %+v, want the call waiting for its client", in)
		}
		if err := tp.Cancel(in[0].PoolID); err != nil {
			t.Fatal(err)
		}
		m, others := c.recvID(`"call"`)
		if m.Error == nil || m.Error.Code != -32007 {
			t.Fatalf("want the user's cancel, got %s", m.raw)
		}
		if ids := withdrawn(settle(c, others)); len(ids) != 1 || ids[0] != string(q.ID) {
			t.Fatalf("question %s withdrawn as %v, want once", q.ID, ids)
		}
	})

	t.Run("the call's timeout", func(t *testing.T) {
		t.Cleanup(pool.SetHoldKeep(100 * time.Millisecond)) // restored once the pool has closed
		cfg := fake("srv", "-era", "modern")
		cfg.RequestTimeout = time.Second
		tp := newTestPool(t, nil, cfg)
		c, q := askedOnce(t, tp)
		m, others := c.recvID(`"call"`)
		if m.Error == nil || m.Error.Code != -32001 {
			t.Fatalf("want the call's timeout, got %s", m.raw)
		}
		if ids := withdrawn(settle(c, others)); len(ids) != 1 || ids[0] != string(q.ID) {
			t.Fatalf("question %s withdrawn as %v, want once", q.ID, ids)
		}
	})

	t.Run("the client's cancel of its call", func(t *testing.T) {
		t.Cleanup(pool.SetHoldKeep(time.Minute)) // restored once the pool has closed
		tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
		c, q := askedOnce(t, tp)
		c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"call","reason":"user"}}`)
		var got []msg
		eventually(t, "the question's withdrawal", func() bool { got = settle(c, got); return len(withdrawn(got)) > 0 })
		if ids := withdrawn(settle(c, got)); len(ids) != 1 || ids[0] != string(q.ID) {
			t.Fatalf("question %s withdrawn as %v, want once", q.ID, ids)
		}
		for _, m := range got {
			if string(m.ID) == `"call"` {
				t.Fatalf("a call its client cancelled was answered: %s", m.raw)
			}
		}
	})

	t.Run("the pool closing the session", func(t *testing.T) {
		t.Cleanup(pool.SetHoldKeep(time.Minute)) // restored once the pool has closed
		tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
		c, q := askedOnce(t, tp)
		got := restAsPoolCloses(t, tp, c)
		if ids := withdrawn(got); len(ids) != 1 || ids[0] != string(q.ID) {
			t.Fatalf("question %s withdrawn as %v before the session closed (it got %v), want once", q.ID, ids, got)
		}
	})

	t.Run("answered", func(t *testing.T) {
		t.Cleanup(pool.SetHoldKeep(time.Minute)) // restored once the pool has closed
		tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
		c, q := askedOnce(t, tp)
		c.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"name":"Ada"}}}`, q.ID)
		m, others := c.recvID(`"call"`)
		if !strings.Contains(m.text(), "Ada") {
			t.Fatalf("want the child's result, got %s", m.raw)
		}
		if ids := withdrawn(settle(c, others)); len(ids) != 0 {
			t.Fatalf("an answered question withdrawn: %v", ids)
		}
	})

	t.Run("refused", func(t *testing.T) {
		t.Cleanup(pool.SetHoldKeep(time.Minute)) // restored once the pool has closed
		tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
		c, q := askedOnce(t, tp)
		c.sendf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-1,"message":"no"}}`, q.ID)
		m, others := c.recvID(`"call"`)
		if m.Error == nil || !strings.Contains(m.Error.Message, "refused") {
			t.Fatalf("want the refusal's error, got %s", m.raw)
		}
		if ids := withdrawn(settle(c, others)); len(ids) != 0 {
			t.Fatalf("a refused question withdrawn: %v", ids)
		}
	})
}

// TestBridgedCallCancelledInHistory: the user cancels a legacy client's
// call while the pool asks the client its 2026-07-28 child's question.
// History records the call (under the pool id the snapshot listed it by)
// once, cancelled in Switchboard, as it records a cancel of any call in
// flight; while the client was asked, the call was in flight there too.
// A call whose client answers is recorded once per round, ok. On the
// first edition history recorded the cancelled call's round as answered
// ok as the child asked, and nothing of the cancel.
func TestBridgedCallCancelledInHistory(t *testing.T) {
	t.Cleanup(pool.SetHoldKeep(time.Minute)) // restored once the pool has closed
	var rec recorder
	tp := newTestPool(t, &pool.Options{Record: rec.record}, fake("srv", "-era", "modern"))
	c, q := askedOnce(t, tp)
	in := tp.Snapshot().InFlight
	if len(in) != 1 {
		t.Fatalf("in flight: %+v, want the call waiting for its client", in)
	}
	id := in[0].PoolID
	ended := func(id uint64) []pool.Event {
		return rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.PoolID == id })
	}
	rec.waitFor(t, "the call's arrival in history", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestReceived && e.PoolID == id
	})
	if done := ended(id); len(done) != 0 {
		t.Fatalf("the call whose question waits for its client ended in history: %+v", done)
	}
	if err := tp.Cancel(id); err != nil {
		t.Fatal(err)
	}
	if m, _ := c.recvID(`"call"`); m.Error == nil || m.Error.Code != -32007 {
		t.Fatalf("want the user's cancel, got %s", m.raw)
	}
	c.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"name":"Ada"}}}`, q.ID) // too late: changes nothing
	c.call(`"answered"`, "ask", `{"kind":"elicitation"}`)
	q = c.recv()
	if q.Method != "elicitation/create" {
		t.Fatalf("want the child's question, got %s", q.raw)
	}
	c.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"name":"Ada"}}}`, q.ID)
	if m, _ := c.recvID(`"answered"`); !strings.Contains(m.text(), "Ada") {
		t.Fatalf("want the child's result, got %s", m.raw)
	}
	calls := func() []pool.Event {
		return rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.Method == "tools/call" })
	}
	eventually(t, "the calls' ends in history", func() bool { return len(calls()) == 3 })
	done := ended(id)
	if len(done) != 1 || done[0].Status != pool.StatusCancelled || done[0].ErrCode != -32007 ||
		!strings.Contains(done[0].Err, "cancelled in Switchboard") {
		t.Fatalf("the cancelled call's ends in history: %+v; want one, cancelled in Switchboard (-32007)", done)
	}
	for _, e := range calls() {
		if e.PoolID != id && e.Status != pool.StatusOK {
			t.Errorf("a round of the answered call ended in history %+v, want ok", e)
		}
	}
}
