package pool

import (
	"crypto/subtle"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// The HTTP front door's gate. The pool runs the user's MCP servers with
// the user's rights, so no local web page and no other local user may
// reach them:
//
//   - Host must be a loopback name (DNS rebinding);
//   - Origin, when a browser sends one, must be the listener's own origin
//     (http://HOST:PORT as the client addressed it) or one the user listed
//     (Options.HTTPAllowedOrigins): a page on localhost:3000 is not the
//     pool;
//   - a bearer token (Options.HTTPToken) that only the user can read: a
//     local process of another user, or a page that got past the browser's
//     checks, has none (401);
//   - a POST body must be application/json: a "simple" cross-site request
//     (text/plain, no preflight) is refused (415).
//
// Nothing is said about the configured servers to a caller that has not
// passed the gate.

// gate checks a request; it writes the refusal and reports false.
func (h *httpFront) gate(w http.ResponseWriter, r *http.Request) bool {
	if why := notLocal(r); why != "" {
		httpError(w, http.StatusForbidden, nil, jsonrpc.CodeInvalidRequest, why)
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && !h.originAllowed(o, r) {
		httpError(w, http.StatusForbidden, nil, jsonrpc.CodeInvalidRequest,
			"forbidden: Origin "+o+" is not this server's (list it in http.allowedOrigins to allow it)")
		return false
	}
	if h.p.opts.HTTPToken != nil {
		want := h.p.opts.HTTPToken()
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || want == "" || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(want)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
			httpError(w, http.StatusUnauthorized, nil, jsonrpc.CodeInvalidRequest,
				"unauthorized: send Authorization: Bearer <token> (`switchboard http-token` prints it)")
			return false
		}
	}
	if r.Method == http.MethodPost {
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			httpError(w, http.StatusUnsupportedMediaType, nil, jsonrpc.CodeInvalidRequest,
				"unsupported media type: a POST body must be application/json")
			return false
		}
	}
	return true
}

// originAllowed: the listener's own origin, or one the user listed.
func (h *httpFront) originAllowed(origin string, r *http.Request) bool {
	if strings.EqualFold(origin, "http://"+r.Host) {
		return true
	}
	return slices.ContainsFunc(h.p.opts.HTTPAllowedOrigins, func(o string) bool {
		return strings.EqualFold(strings.TrimRight(o, "/"), origin)
	})
}
