package pool

import (
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// The 2026-07-28 Streamable HTTP transport checks each request on its
// own, before it reaches a child: the _meta every request must carry, the
// version it names, the methods the revision removed, and the headers that
// mirror the body for intermediaries (basic/transports/streamable-http,
// "Server Validation"; basic/index, "_meta"). A request that fails is
// refused with the status and JSON-RPC error the spec names, and nothing
// reaches the child.

// removedInModern are methods 2026-07-28 removed: in a modern request they
// are unknown methods (404, -32601).
var removedInModern = map[string]bool{
	"initialize": true, "ping": true, "logging/setLevel": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
}

// namedMethods mirror params.name or params.uri in the Mcp-Name header.
var namedMethods = map[string]string{"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

// httpRefusal is a request the front door refuses: a row of the error
// table, its HTTP status and its error.
type httpRefusal struct {
	status int
	err    *jsonrpc.Error
}

// write sends the refusal with the request's id.
func (r *httpRefusal) write(w http.ResponseWriter, id []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(r.status)
	_, _ = w.Write(jsonrpc.AppendErrorResponse(nil, id, r.err))
}

// refuse is the refusal of row kind of the error table, args filling its
// message: the row's HTTP status and its error.
func refuse(kind poolError, args ...any) *httpRefusal {
	return &httpRefusal{status: errorTable[kind].status, err: newError(kind, false, "", args...)}
}

// modernHTTP reports whether a request speaks 2026-07-28:
// server/discover, _meta naming a version (with a session id, a modern
// one: modernIn), or the version header naming a modern revision. Such a
// request is served statelessly, the session id sid it carries, if any,
// ignored (2026-07-28 streamable-http, Backward Compatibility). With a
// session id, the header alone makes it modern only when it names
// 2026-07-28: a legacy session's request naming a revision the pool does
// not serve is refused as the session's (sessionVersionRefused).
func modernHTTP(r *http.Request, body []byte, msg jsonrpc.Message, sid string) bool {
	if modernIn(body, msg, sid != "") {
		return true
	}
	v := r.Header.Get(protocolVersionHeader)
	if sid != "" {
		return v == Modern
	}
	return v != "" && v >= Modern // revisions are dates: they order as strings
}

// modernRequest reports whether a request's body speaks 2026-07-28:
// server/discover (the revision's own method), or _meta naming a
// version. Both front doors check such a request with checkModern.
func modernRequest(body []byte, msg jsonrpc.Message) bool {
	return msg.Method == "server/discover" || modernMeta(body, msg)
}

// modernIn is modernRequest for a request of a session that an
// initialize made legacy (legacy true) or not: in a legacy session, _meta
// naming a legacy revision (the session's own or another) leaves the
// request the session's, since only 2026-07-28 and later carry the
// version in _meta (basic/versioning, Terminology) and a legacy revision
// gives the key no meaning; the revision the session's initialize
// negotiated governs it, as it governs a request whose
// MCP-Protocol-Version header names another served legacy revision.
func modernIn(body []byte, msg jsonrpc.Message, legacy bool) bool {
	if msg.Method == "server/discover" {
		return true
	}
	return modernMeta(body, msg) && !(legacy && metaNamesLegacy(body, msg))
}

// metaNamesLegacy reports whether a request's _meta names a legacy
// revision: a version string before 2026-07-28 (revisions are dates).
func metaNamesLegacy(body []byte, msg jsonrpc.Message) bool {
	v, ok := metaVersion(body, msg)
	return ok && v < Modern
}

// metaVersion is the version a request's _meta names, if it names one as
// a non-empty string.
func metaVersion(body []byte, msg jsonrpc.Message) (string, bool) {
	if !msg.Meta.Present() || body[msg.Meta.Start] != '{' {
		return "", false
	}
	meta := msg.Meta.Of(body)
	v, ok := jsonrpc.String(meta, jsonrpc.Member(meta, metaProtocolVersion))
	return v, ok && v != ""
}

// requestVersion is the revision a request names: its _meta's, else
// (withHeaders) its MCP-Protocol-Version header's; "" when neither names
// one.
func requestVersion(h http.Header, body []byte, msg jsonrpc.Message, withHeaders bool) string {
	if v, ok := metaVersion(body, msg); ok {
		return v
	}
	if withHeaders {
		return h.Get(protocolVersionHeader)
	}
	return ""
}

// validateModern checks a modern request as the spec's server validation
// says, in this order: first an MCP-Protocol-Version header that names
// another version than _meta does (400, -32020); then the version it
// names (from _meta, else the header), since a request in a revision the pool does not serve per
// request is not 2026-07-28's to judge by its other rules (400, -32022;
// basic/versioning); then the required _meta fields (400, -32602), the
// headers against the body (400, -32020), methods the revision removed
// (404, -32601), a log level that names no level (400, -32602), and last,
// for a tools/call of a tool that annotates its properties, the Mcp-Param
// headers against its arguments (400, -32020; httpparams.go). nil means
// serve it.
func validateModern(h http.Header, body []byte, msg jsonrpc.Message, tools toolParams) *httpRefusal {
	if bad := checkModern(h, body, msg, true); bad != nil {
		return bad
	}
	if len(tools) > 0 && msg.Method == "tools/call" {
		return checkToolParams(h, msg.Params.Of(body), tools)
	}
	return nil
}

// checkModern is validateModern; the stdio front door has no headers to
// check (withHeaders false).
func checkModern(h http.Header, body []byte, msg jsonrpc.Message, withHeaders bool) *httpRefusal {
	if withHeaders {
		// A header that names another version than the body's is a
		// mismatch before either version is judged: the conformance
		// suite's server-stateless (v999.0.0 in _meta, 2026-07-28 in
		// the header: -32020).
		if mv, ok := metaVersion(body, msg); ok {
			if hv := h.Values(protocolVersionHeader); len(hv) > 0 && (len(hv) != 1 || hv[0] != mv) {
				return headerMismatch("MCP-Protocol-Version", hv, mv)
			}
		}
	}
	if v := requestVersion(h, body, msg, withHeaders); v != "" && v != Modern {
		return unsupportedVersion(v)
	}
	var params []byte
	if msg.Params.Present() {
		params = msg.Params.Of(body)
	}
	if len(params) == 0 || params[0] != '{' {
		return refuse(errNoParamsMeta)
	}
	if !msg.Meta.Present() || body[msg.Meta.Start] != '{' {
		return refuse(errNoMeta)
	}
	meta := msg.Meta.Of(body)
	version, ok := jsonrpc.String(meta, jsonrpc.Member(meta, metaProtocolVersion))
	if !ok || version == "" {
		return refuse(errMetaLacks, metaProtocolVersion)
	}
	if caps := jsonrpc.Member(meta, metaClientCapabilities); !caps.Present() || meta[caps.Start] != '{' {
		return refuse(errMetaLacks, metaClientCapabilities)
	}
	if withHeaders {
		if bad := checkHeaders(h, params, msg.Method, version); bad != nil {
			return bad
		}
	}
	if removedInModern[msg.Method] {
		return refuse(errRemovedMethod, msg.Method, Modern)
	}
	if sp := jsonrpc.Member(meta, metaLogLevel); sp.Present() {
		// Checked here, not by the child: a legacy child never sees it
		// (the pool asks for the call's messages itself).
		if level, ok := jsonrpc.String(meta, sp); !ok || logsAt(level) == 0 {
			names := make([]string, len(logSeverity))
			for name, sev := range logSeverity {
				names[sev] = name
			}
			return refuse(errBadLogLevel, metaLogLevel, sp.Of(meta), strings.Join(names, ", "))
		}
	}
	return nil
}

// unsupportedVersion refuses a request in a revision the pool does not
// serve per request. supported is what a retry of the request can use
// (the client retries with one, rather than falling back:
// basic/versioning): 2026-07-28 alone. Not the legacy revisions
// server/discover also lists: a request naming one is refused here too
// (only an initialize reaches them, and which of them a child allows is
// known only once it ran); nor a modern child's other revisions, which
// the pool refuses; never the refused one.
func unsupportedVersion(version string) *httpRefusal {
	r := refuse(errUnsupportedVersion, version, Modern)
	r.err.Data = map[string]any{"supported": []string{Modern}, "requested": version}
	return r
}

// checkHeaders compares the mirrored headers with the body.
func checkHeaders(h http.Header, params []byte, method, version string) *httpRefusal {
	if hv := h.Values(protocolVersionHeader); len(hv) != 1 || hv[0] != version {
		return headerMismatch("MCP-Protocol-Version", hv, version)
	}
	if hv := h.Values("Mcp-Method"); len(hv) != 1 || hv[0] != method {
		return headerMismatch("Mcp-Method", hv, method)
	}
	if key, ok := namedMethods[method]; ok {
		want, _ := jsonrpc.String(params, jsonrpc.Member(params, key))
		hv := h.Values("Mcp-Name")
		got, valid := "", len(hv) == 1
		if valid {
			got, valid = decodeHeaderValue(hv[0])
		}
		if !valid || got != want {
			return headerMismatch("Mcp-Name", hv, want)
		}
	}
	return nil
}

func headerMismatch(name string, got []string, want string) *httpRefusal {
	if len(got) == 0 {
		return refuse(errHeaderMissing, name, want)
	}
	return refuse(errHeaderMismatch, name, strings.Join(got, ", "), want)
}

// decodeHeaderValue undoes the spec's Base64 sentinel (=?base64?…?=) and
// refuses characters a header value may not carry.
func decodeHeaderValue(v string) (string, bool) {
	if s, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if s, ok = strings.CutSuffix(s, "?="); ok {
			b, err := base64.StdEncoding.DecodeString(s)
			return string(b), err == nil
		}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return "", false
		}
	}
	return v, true
}

// modernStatus is the HTTP status of a modern request's JSON answer, from
// its JSON-RPC error code (0 for a result): the spec gives 404 to an
// unknown method and 400 to its own protocol errors; everything else,
// tool errors included, is 200.
func modernStatus(code int) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case codeHeaderMismatch, codeMissingCapability, codeUnsupportedVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}
