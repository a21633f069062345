package pool

import (
	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// A legacy child answers in its own revision; a 2026-07-28 client reading
// that answer needs what its revision requires of every result. The pool
// adds it on the way back, so a modern client of a legacy child sees a
// modern server (DESIGN.md, "era").

// cacheableMethods are the requests whose 2026-07-28 results extend
// CacheableResult: ttlMs and cacheScope are required on them.
var cacheableMethods = map[string]bool{
	"server/discover": true, "tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "resources/read": true,
}

// Error codes 2026-07-28 defines (basic/index "Error Codes").
const (
	codeHeaderMismatch     = -32020
	codeMissingCapability  = -32021
	codeUnsupportedVersion = -32022
	// codeLegacyNotFound is 2025-11-25's "resource not found", which
	// 2026-07-28 forbids emitting (replaced by -32602).
	codeLegacyNotFound = -32002
)

// modernResponse rewrites a legacy child's response for a 2026-07-28
// client: the client's id in place of the pool's, resultType "complete"
// on a result that lacks one, and for cacheable results the cache hints
// "do not cache, not shared" (ttlMs 0, cacheScope private): a legacy child
// says nothing about how long its lists stay true, and the pool must not
// let one client's answer stand for another's. An error keeps its code,
// except the legacy -32002 that 2026-07-28 replaced with -32602.
func modernResponse(msg *jsonrpc.Message, method string, clientID []byte) []byte {
	raw := msg.Raw
	edits := []edit{{msg.ID, clientID}}
	switch {
	case msg.Result.Present() && raw[msg.Result.Start] == '{':
		res := msg.Result.Of(raw)
		var add []byte
		if !jsonrpc.Member(res, "resultType").Present() {
			add = append(add, `"resultType":"complete",`...)
		}
		if cacheableMethods[method] {
			if !jsonrpc.Member(res, "ttlMs").Present() {
				add = append(add, `"ttlMs":0,`...)
			}
			if !jsonrpc.Member(res, "cacheScope").Present() {
				add = append(add, `"cacheScope":"private",`...)
			}
		}
		if len(add) > 0 {
			if emptyObject(res) {
				add = add[:len(add)-1]
			}
			at := msg.Result.Start + 1
			edits = append(edits, edit{jsonrpc.Span{Start: at, End: at}, add})
		}
	case msg.Error.Present() && raw[msg.Error.Start] == '{':
		errObj := msg.Error.Of(raw)
		code := jsonrpc.Member(errObj, "code")
		if n, ok := parseInt(code.Of(errObj)); ok && n == codeLegacyNotFound {
			at := jsonrpc.Span{Start: msg.Error.Start + code.Start, End: msg.Error.Start + code.End}
			edits = append(edits, edit{at, []byte("-32602")})
		}
	}
	return applyEdits(raw, edits)
}

// parseInt reads a JSON integer (possibly negative).
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	n, ok := jsonrpc.ParseUint(b)
	if !ok || n > 1<<62 {
		return 0, false
	}
	if neg {
		return -int64(n), true
	}
	return int64(n), true
}

// childIsLegacy reports whether the child speaks a legacy revision (or
// has not said yet): the answers to a 2026-07-28 client's requests are
// rewritten for it then.
func (b *backend) childIsLegacy() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hs == nil || b.hs.era == EraLegacy
}
