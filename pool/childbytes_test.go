package pool_test

import (
	"strings"
	"testing"
)

// Capabilities as a child's SDK writes them: keys in its own order, an
// escape, and <, >, & that a Go encoder would escape.
const childCaps = `{"tools":{"listChanged":true},"logging":{},"experimental":{"note":"<a&b> caf\u00e9"}}`

// TestHandshakeResultsKeepTheChildsBytes: the capabilities a client is
// answered with, to its initialize or its server/discover, are the
// child's as it wrote them, in their order, its escapes and its <, >, &
// as they were, with only what the client's revision must not be
// promised taken out: a modern child's list changes for a legacy client,
// a legacy child's logging for a modern one. (They went through a Go map
// and json.Marshal: keys sorted, <, > and & escaped.)
func TestHandshakeResultsKeepTheChildsBytes(t *testing.T) {
	tp := newTestPool(t, nil, fake("legacy", "-capabilities", childCaps),
		fake("modern", "-era", "modern", "-capabilities", childCaps))
	const (
		initialize = `{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
		discover   = `{"jsonrpc":"2.0","id":"a","method":"server/discover","params":{` + modernMeta + `}}`
	)
	for _, tc := range []struct{ name, server, request, want string }{
		{"a legacy child's, to a legacy client", "legacy", initialize, childCaps},
		{"a legacy child's, to a modern client: without logging", "legacy", discover,
			`{"tools":{"listChanged":true},"experimental":{"note":"<a&b> caf\u00e9"}}`},
		{"a modern child's, to a legacy client: without list changes", "modern", initialize,
			`{"tools":{},"logging":{},"experimental":{"note":"<a&b> caf\u00e9"}}`},
		{"a modern child's, to a modern client", "modern", discover, childCaps},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tp.dial(t, tc.server)
			c.send(tc.request)
			m, _ := c.recvID(`"a"`)
			if !strings.Contains(m.raw, `"capabilities":`+tc.want) {
				t.Fatalf("capabilities changed:\n got %s\nwant \"capabilities\":%s", m.raw, tc.want)
			}
		})
	}
}

// TestMRTRQuestionKeepsTheChildsBytes: a legacy child's question, asked
// of a modern client as an input request of input_required, is the
// child's params as it wrote them: their order, escapes and <, >, &.
// Over stdio and HTTP. (The InputRequiredResult went through a Go map and
// json.Marshal, which escaped <, > and &.)
func TestMRTRQuestionKeepsTheChildsBytes(t *testing.T) {
	const question = `{"requestedSchema":{"type":"object","properties":{}},"message":"<b>Name & rank</b>, caf\u00e9?"}`
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"elicitation","params":` + question + `},` + samplingMeta + `}}`
	for _, how := range []string{"http", "stdio"} {
		t.Run(how, func(t *testing.T) {
			// A pool each: the call held for its answer is the child's one call in flight.
			roundTrip, _ := roundTrips(t, newTestPool(t, nil, fake("srv")))
			m := roundTrip[how]("1", call)
			if want := `{"method":"elicitation/create","params":` + question + `}`; !strings.Contains(m.raw, want) {
				t.Fatalf("question changed:\n got %s\nwant %s", m.raw, want)
			}
		})
	}
}

// TestListenTagsKeepTheClientsID: a listen's acknowledgement, and its
// end, name the listen by the client's id as it wrote it: a string with
// <, > and & is not escaped into another spelling. (They went through a
// Go map and json.Marshal.)
func TestListenTagsKeepTheClientsID(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := tp.dial(t, "srv")
	const id = `"<L&1>"`
	c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`)
	ack := c.recv()
	if ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(ack.raw, `{"io.modelcontextprotocol/subscriptionId":`+id+`}`) {
		t.Fatalf("ack: %s", ack.raw)
	}
	c.send(`{"jsonrpc":"2.0","id":"n","method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"},` + modernMeta + `}}`)
	_, before := c.recvID(`"n"`)
	tagged := false
	for _, m := range before {
		tagged = tagged || m.Method == "notifications/tools/list_changed" && strings.Contains(m.raw, `"io.modelcontextprotocol/subscriptionId":`+id)
	}
	if !tagged {
		t.Fatalf("the change is not tagged with %s: %+v", id, before)
	}
}
