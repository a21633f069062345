package pool

import (
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// A 2025-11-25 server may tell its client that the out-of-band part of a
// URL-mode elicitation is done (notifications/elicitation/complete, naming
// the elicitationId of the elicitation/create), and must tell only the
// client it asked. The pool asks one session of many, so it remembers, by
// elicitationId, which session it relayed each URL-mode elicitation to,
// and sends the child's completion there alone, once. 2026-07-28 removed
// the notification: a modern client, carried the question as
// input_required (mrtr.go), learns the outcome from its retry, and gets
// none.

// What a child's URL-mode elicitations may make the pool remember: at
// most maxElicitations per child, each for elicitationTTL (a person
// signing in somewhere), an elicitationId of at most maxElicitationID
// bytes (a UUID is 36). Past them a completion is dropped, as one for an
// elicitation no session was asked is: a child that asks without end, or
// with huge ids, grows nothing.
const (
	maxElicitations  = 256
	elicitationTTL   = 30 * time.Minute
	maxElicitationID = 256
)

// urlElicitationID is the elicitationId of a child's URL-mode
// elicitation/create, "" for any other request or an id too long to
// remember.
func urlElicitationID(msg *jsonrpc.Message) string {
	if msg.Method != "elicitation/create" || !msg.Params.Present() {
		return ""
	}
	params := msg.Params.Of(msg.Raw)
	if m, _ := jsonrpc.String(params, jsonrpc.Member(params, "mode")); m != "url" {
		return ""
	}
	id, _ := jsonrpc.String(params, jsonrpc.Member(params, "elicitationId"))
	if len(id) > maxElicitationID {
		return ""
	}
	return id
}

// elicitationCompleted routes the child's notifications/elicitation/complete
// to the session it asked that elicitation, if the pool still remembers
// it; anything else is dropped.
func (b *backend) elicitationCompleted(msg *jsonrpc.Message) {
	var id string
	if msg.Params.Present() {
		params := msg.Params.Of(msg.Raw)
		id, _ = jsonrpc.String(params, jsonrpc.Member(params, "elicitationId"))
	}
	if s := b.reqs.elicitationAsker(id); s != nil {
		s.deliver(append([]byte(nil), msg.Raw...), notice(msg.Method))
		return
	}
	b.log.Debug("dropping an elicitation's completion no session was asked", "elicitationId", truncate(id, 80))
}
