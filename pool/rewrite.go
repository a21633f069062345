package pool

import (
	"slices"
	"sync/atomic"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// edit replaces the bytes at span with val; a span with Start == End is an
// insertion point.
type edit struct {
	at  jsonrpc.Span
	val []byte
}

// applyEdits returns raw with edits applied, in one copy. Edits must not
// overlap.
func applyEdits(raw []byte, edits []edit) []byte {
	slices.SortFunc(edits, func(a, b edit) int { return a.at.Start - b.at.Start })
	n := len(raw)
	for _, e := range edits {
		n += len(e.val) - (e.at.End - e.at.Start)
	}
	out := make([]byte, 0, n)
	prev := 0
	for _, e := range edits {
		out = append(out, raw[prev:e.at.Start]...)
		out = append(out, e.val...)
		prev = e.at.End
	}
	return append(out, raw[prev:]...)
}

// inbound is a client request rewritten for the child.
type inbound struct {
	line      []byte
	origToken []byte // the client's progress token, nil if none
	token     uint64 // the pool token that replaced it
	name      string // the tool, prompt or resource the request is about
}

// rewriteRequest gives a client request the pool id, swaps its progress
// token for the pool token (progress tokens collide across clients like
// ids do), and adds modern _meta when a legacy client talks to a modern
// child. Everything else is forwarded byte for byte.
func rewriteRequest(msg *jsonrpc.Message, poolID uint64, tokens *atomic.Uint64, meta []byte) inbound {
	raw := msg.Raw
	var in inbound
	edits := make([]edit, 0, 3)
	edits = append(edits, edit{msg.ID, jsonrpc.AppendUint(nil, poolID)})
	if msg.Params.Present() && raw[msg.Params.Start] == '{' {
		params := msg.Params.Of(raw)
		base := msg.Params.Start
		metaSpan := jsonrpc.Member(params, "_meta")
		if metaSpan.Present() && params[metaSpan.Start] == '{' {
			m := metaSpan.Of(params)
			if tok := jsonrpc.Member(m, "progressToken"); tok.Present() {
				in.origToken = append([]byte(nil), tok.Of(m)...)
				in.token = tokens.Add(1)
				at := jsonrpc.Span{Start: base + metaSpan.Start + tok.Start, End: base + metaSpan.Start + tok.End}
				edits = append(edits, edit{at, jsonrpc.AppendUint(nil, in.token)})
			}
			if meta != nil {
				pos := base + metaSpan.Start + 1
				val := meta
				if !emptyObject(m) {
					val = append(append([]byte(nil), meta...), ',')
				}
				edits = append(edits, edit{jsonrpc.Span{Start: pos, End: pos}, val})
			}
		} else if meta != nil {
			pos := base + 1
			val := append(append([]byte(`"_meta":{`), meta...), '}')
			if !emptyObject(params) {
				val = append(val, ',')
			}
			edits = append(edits, edit{jsonrpc.Span{Start: pos, End: pos}, val})
		}
		if s, ok := jsonrpc.String(params, jsonrpc.Member(params, "name")); ok {
			in.name = s
		} else if s, ok := jsonrpc.String(params, jsonrpc.Member(params, "uri")); ok {
			in.name = s
		}
	} else if meta != nil && !msg.Params.Present() {
		// No params: add them just before the closing brace.
		end := lastBrace(raw)
		val := append(append([]byte(`,"params":{"_meta":{`), meta...), "}}"...)
		edits = append(edits, edit{jsonrpc.Span{Start: end, End: end}, val})
	}
	in.line = applyEdits(raw, edits)
	return in
}

func emptyObject(b []byte) bool {
	for _, c := range b[1 : len(b)-1] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

func lastBrace(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '}' {
			return i
		}
	}
	return len(b)
}

// cancelForChild is the notifications/cancelled the pool sends a child for
// its request poolID.
func cancelForChild(poolID uint64, reason string) []byte {
	params := make([]byte, 0, 64)
	params = append(params, `{"requestId":`...)
	params = jsonrpc.AppendUint(params, poolID)
	params = append(params, `,"reason":`...)
	params = appendJSONString(params, reason)
	params = append(params, '}')
	return jsonrpc.AppendNotification(nil, "notifications/cancelled", params)
}
