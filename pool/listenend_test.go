package pool_test

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// rest is everything c is sent until the pool closes its session.
func (c *client) rest() []msg {
	c.t.Helper()
	var got []msg
	deadline := time.After(15 * time.Second)
	for {
		select {
		case m, ok := <-c.in:
			if !ok {
				return got
			}
			got = append(got, m)
		case <-deadline:
			c.t.Fatalf("the pool did not close the session within 15s; it sent %d messages", len(got))
		}
	}
}

// closedListen checks that m is the answer that ends the listen id
// gracefully: a complete result whose _meta names the subscription.
func closedListen(t *testing.T, m msg, id string) {
	t.Helper()
	var r struct {
		ResultType string                     `json:"resultType"`
		Meta       map[string]json.RawMessage `json:"_meta"`
	}
	if string(m.ID) != id || m.Result == nil || json.Unmarshal(m.Result, &r) != nil || r.ResultType != "complete" ||
		string(r.Meta["io.modelcontextprotocol/subscriptionId"]) != id {
		t.Errorf("got %s, want listen %s's closing result, tagged with its id", m.raw, id)
	}
}

// TestListenEndedByThePoolIsClosed: the server is removed from the
// configuration while clients listen. A stdio client's listen is
// answered with the closing result, tagged with its id, then named in
// notifications/cancelled (how a 2026-07-28 server tears a listen down on
// stdio), before its session ends; an HTTP client's listen stream ends
// with the closing result; a legacy client, subscribed with
// resources/subscribe, has no listen to close and is sent nothing. (Before,
// both listens just ended: a client could not tell a graceful end from a
// dropped connection.)
func TestListenEndedByThePoolIsClosed(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	m, old := tp.dial(t, "srv"), tp.dial(t, "srv")
	openListen(t, m, `"a"`, `{"toolsListChanged":true}`)
	old.initialize("old", "")
	old.send(`{"jsonrpc":"2.0","id":"s","method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
	if r, _ := old.recvID(`"s"`); r.Error != nil {
		t.Fatalf("subscribe: %s", r.raw)
	}
	h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	resp := h.post(`{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("listen: %s %q", resp.Status, ct)
	}
	events := make(chan msg, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				e := msg{raw: data}
				_ = json.Unmarshal([]byte(data), &e)
				events <- e
			}
		}
	}()
	if ack := <-events; ack.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first event: %s", ack.raw)
	}

	if err := tp.Apply(nil); err != nil {
		t.Fatal(err)
	}

	if got := m.rest(); len(got) != 2 {
		t.Errorf("the stdio listener got %d messages before its session ended, want 2: %v", len(got), got)
	} else {
		closedListen(t, got[0], `"a"`)
		if got[1].Method != "notifications/cancelled" || !strings.Contains(string(got[1].Params), `"requestId":"a"`) {
			t.Errorf("then %s, want notifications/cancelled naming the listen", got[1].raw)
		}
	}
	var streamed []msg
	for e := range events {
		streamed = append(streamed, e)
	}
	if len(streamed) != 1 {
		t.Errorf("the HTTP listen's stream got %d more events before it ended, want 1: %v", len(streamed), streamed)
	} else {
		closedListen(t, streamed[0], "3")
	}
	if got := old.rest(); len(got) != 0 {
		t.Errorf("the legacy client got %v, want nothing: it has no listen", got)
	}
}
