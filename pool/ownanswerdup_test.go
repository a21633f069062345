package pool_test

import (
	"strings"
	"testing"
)

// A request the pool answers itself, under an id already in flight in
// its session, is refused with the -32600 a forwarded one gets: answered,
// the client would have two answers for one id. Before, a ping, an
// initialize from the cached handshake, a server/discover, a
// logging/setLevel and a subscribe or unsubscribe that changed nothing
// at the child were answered at once, and a subscriptions/listen opened,
// whatever was in flight.
func TestPoolAnswersRefuseAnIDInFlight(t *testing.T) {
	tp := newTestPool(t, nil, fake("fs"))
	c := tp.dial(t, "fs")
	c.initialize("dup", "")
	c.send(`{"jsonrpc":"2.0","id":"sub","method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
	if m, _ := c.recvID(`"sub"`); m.Error != nil {
		t.Fatalf("subscribe: %s", m.raw)
	}
	c.call(`7`, "sleep", `{"ms":60000}`) // at the child until the pool closes
	// The call is at the child once the child answered one sent after it.
	c.call(`"after"`, "echo", `{"text":"after"}`)
	if m, _ := c.recvID(`"after"`); m.text() != "after" {
		t.Fatalf("the call after the sleep: %s", m.raw)
	}
	asks := []string{
		`{"jsonrpc":"2.0","id":7,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"dup","version":"1.0"}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{` + modernMeta + `}}`,
		`{"jsonrpc":"2.0","id":7,"method":"logging/setLevel","params":{"level":"info"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`, // held already: no change
		`{"jsonrpc":"2.0","id":7,"method":"resources/unsubscribe","params":{"uri":"fake://other"}}`, // not held: no change
		`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`,
	}
	for _, ask := range asks {
		c.send(ask)
		c.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
		_, before := c.recvID(`"p"`)
		m, ok := answerAmong(before, `7`)
		if !ok || m.Error == nil || m.Error.Code != -32600 || !strings.Contains(m.Error.Message, "already in flight") {
			t.Errorf("%s with id 7 in flight: %s (answered before a ping behind it: %t); want -32600 already in flight", ask, m.raw, ok)
		}
	}
}

// An open subscriptions/listen is a request in flight: a request under
// its id, one the pool answers or one it sends on, is refused.
func TestRequestUnderAnOpenListensIDIsRefused(t *testing.T) {
	tp := newTestPool(t, nil, fake("fs"))
	c := tp.dial(t, "fs")
	c.send(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`)
	c.send(`{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{` + modernMeta + `}}`)
	if m, _ := c.recvID(`"d"`); m.Error != nil {
		t.Fatalf("server/discover after the listen: %s", m.raw)
	}
	for _, ask := range []string{
		`{"jsonrpc":"2.0","id":"L","method":"ping"}`,
		`{"jsonrpc":"2.0","id":"L","method":"tools/call","params":{"name":"echo","arguments":{"text":"L"},` + modernMeta + `}}`,
	} {
		c.send(ask)
		c.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
		_, before := c.recvID(`"p"`)
		m, ok := answerAmong(before, `"L"`)
		if !ok || m.Error == nil || m.Error.Code != -32600 || !strings.Contains(m.Error.Message, "already in flight") {
			t.Errorf("%s with a listen open under its id: %s (answered before a ping behind it: %t); want -32600 already in flight", ask, m.raw, ok)
		}
	}
}

// answerAmong finds the answer to the request id among msgs, the messages
// that came before a later request's answer.
func answerAmong(msgs []msg, id string) (msg, bool) {
	for _, m := range msgs {
		if string(m.ID) == id && m.Method == "" {
			return m, true
		}
	}
	return msg{}, false
}
