package pool

import (
	"context"
	"crypto/subtle"
	"errors"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"
)

// The HTTP front door's gate. The pool runs the user's MCP servers with
// the user's rights, so no local web page and no other local user may
// reach them:
//
//   - Host must be a loopback name (DNS rebinding);
//   - Origin, when a browser sends one, must be the listener's own origin
//     (http://HOST:PORT as the client addressed it) or one the user listed
//     (Options.HTTPAllowedOrigins): a page on localhost:3000 is not the
//     pool. A listed origin's CORS preflight is answered here (cors), with
//     no token, since browsers send none: it opens nothing and names no
//     server, the real request that follows still needs the token, and
//     its connection is closed, as a refusal's is;
//   - a bearer token (Options.HTTPToken) that only the user can read: a
//     local process of another user, or a page that got past the browser's
//     checks, has none (401);
//   - a POST body must be application/json: a "simple" cross-site request
//     (text/plain, no preflight) is refused (415).
//
// Nothing is said about the configured servers to a caller that has not
// passed the gate, and its body cannot hold the connection: a refusal is
// sent at once and the connection closed (net/http would otherwise first
// wait, with no deadline, for up to 256 KB of a body a stranger need never
// send). A request that passes has httpBodyTimeout to send its body, and
// its connection is told so (WithHTTPGatePassed): the server keeps room
// for the connections of the clients that have the token.

// httpBodyTimeout bounds the reading of a request body that passed the
// gate: a message is at most MaxMessageBytes (64 MiB), which loopback
// carries in well under a second, so a minute is only ever reached by a
// client that stalls. The response is not bounded by it (streams). A var
// for tests.
var httpBodyTimeout = time.Minute

// refusalDrain is how long a refused request's connection takes in what
// the client sends after the answer (up to 256 KB, net/http's limit)
// before it closes: closing on unread bytes resets the connection, and a
// client still writing its body may then lose the answer.
const refusalDrain = time.Second

// gate checks a request; it writes the refusal, or the answer to a
// preflight, and reports false. A request let in has the token it
// carried ("" when the gate asks for none) in its grant, a value: only
// a 2026-07-28 request keeps it (exchange), and a legacy one allocates
// none.
func (h *httpFront) gate(w http.ResponseWriter, r *http.Request) (grant, bool) {
	g := grant{h: h, cut: h.rotation()} // before the token is read: a rotation after that closes cut
	if notLocal(r) {
		h.refuse(w, r, errNotLocal, r.Host)
		return grant{}, false
	}
	origin := r.Header.Get("Origin")
	if origin != "" && !h.originAllowed(origin, r) {
		h.refuse(w, r, errOriginRefused, origin)
		return grant{}, false
	}
	if origin != "" && h.originListed(origin) && cors(w, r, origin) {
		// No token: the connection closes after the answer, as a
		// refusal's does, or a preflight now and then would hold it.
		w.Header().Set("Connection", "close")
		dropBody(w, r)
		w.WriteHeader(http.StatusNoContent)
		return grant{}, false
	}
	if h.p.opts.HTTPToken != nil {
		want := h.p.opts.HTTPToken()
		got, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok || want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
			h.refuse(w, r, errNoToken)
			return grant{}, false
		}
		g.token = want
	}
	if r.Method == http.MethodPost {
		if ct := r.Header.Get("Content-Type"); ct != "application/json" && !jsonMediaType(ct) {
			h.refuse(w, r, errNotJSON)
			return grant{}, false
		}
	}
	boundBody(w, r)
	gatePassed(r)
	return g, true
}

// gatePassedKey is the context key of a connection's WithHTTPGatePassed.
type gatePassedKey struct{}

// WithHTTPGatePassed is ctx, the context of a connection of the HTTP front
// door (http.Server.ConnContext), with passed, which the gate calls each
// time a request on that connection passes it (Host, Origin and token
// good), before its body is read. Any local process can open the front
// door's connections and hold them with headers it never ends; the server
// tells by this the connections of the clients that have the token, and
// closes the others first when it needs room.
func WithHTTPGatePassed(ctx context.Context, passed func()) context.Context {
	return context.WithValue(ctx, gatePassedKey{}, passed)
}

// gatePassed calls the WithHTTPGatePassed of r's connection, if any.
func gatePassed(r *http.Request) {
	if passed, ok := r.Context().Value(gatePassedKey{}).(func()); ok {
		passed()
	}
}

// jsonMediaType reports whether a Content-Type header names
// application/json, with any parameters. A client's plain
// "application/json", the usual case, is taken without parsing (which
// makes a map for the parameters, on every request).
func jsonMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// bearerToken is the credentials of an Authorization header of the Bearer
// scheme, whose name is case-insensitive (RFC 9110 §11.1): "bearer TOKEN"
// is as good as "Bearer TOKEN".
func bearerToken(h string) (string, bool) {
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(cred), true
}

// refuse answers a request the gate turns away, and closes its
// connection: a client without the token, or from a page it is not for,
// does not keep a connection of the front door open for its idle timeout
// (the front door's connections are counted, and any local process can
// open them).
func (h *httpFront) refuse(w http.ResponseWriter, r *http.Request, kind poolError, args ...any) {
	w.Header().Set("Connection", "close")
	dropBody(w, r)
	httpError(w, nil, kind, args...)
}

// dropBody keeps a refused request's body from holding its connection:
// the connection closes after the answer, so net/http sends the answer
// at once instead of first reading the body to reuse the connection; what
// it still reads as it closes the body is bounded by refusalDrain.
func dropBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return // the connection may serve the client's next request
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(refusalDrain))
}

// boundBody gives a request that passed the gate httpBodyTimeout to send
// its body. net/http lifts the deadline when the body ends, as it starts
// reading the connection to see the client go: the answer, a stream
// included, is not bounded by it. A request without a body gets none:
// net/http reads its connection from the start, and a deadline there
// would end the request, a GET stream say.
func boundBody(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(httpBodyTimeout))
	}
}

// originAllowed: the listener's own origin, or one the user listed.
func (h *httpFront) originAllowed(origin string, r *http.Request) bool {
	return strings.EqualFold(origin, "http://"+r.Host) || h.originListed(origin)
}

// originListed: an origin the user listed in http.allowedOrigins.
func (h *httpFront) originListed(origin string) bool {
	return slices.ContainsFunc(h.p.opts.HTTPAllowedOrigins, func(o string) bool {
		return strings.EqualFold(strings.TrimRight(o, "/"), origin)
	})
}

// What a listed origin's page may send and read (Streamable HTTP,
// 2025-06-18 to 2026-07-28). Authorization must be named: a wildcard
// would not cover it. 2026-07-28's Mcp-Param-{Name} headers, named by the
// tools, are allowed as the preflight asks for them (corsHeaders).
const (
	corsMethods    = "GET, POST, DELETE"
	corsHeaderList = "Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID, Mcp-Method, Mcp-Name"
	corsExpose     = "Mcp-Session-Id, WWW-Authenticate"
	corsMaxAge     = "600" // seconds a browser may keep a preflight's answer
)

// cors writes the CORS headers for origin, which the user listed, and
// reports whether the request is a preflight, which the caller answers
// (204) without the token. Every other request goes on through the gate,
// and its answer is readable by the page.
func cors(w http.ResponseWriter, r *http.Request, origin string) bool {
	hd := w.Header()
	hd.Set("Access-Control-Allow-Origin", origin)
	hd.Add("Vary", "Origin")
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		hd.Set("Access-Control-Expose-Headers", corsExpose)
		return false
	}
	hd.Set("Access-Control-Allow-Methods", corsMethods)
	hd.Set("Access-Control-Allow-Headers", corsHeaders(r.Header.Values("Access-Control-Request-Headers")))
	hd.Set("Access-Control-Max-Age", corsMaxAge)
	if r.Header.Get("Access-Control-Request-Private-Network") == "true" {
		hd.Set("Access-Control-Allow-Private-Network", "true") // a page served elsewhere, calling loopback
	}
	return true
}

// corsHeaders is corsHeaderList and the Mcp-Param-{Name} headers the
// preflight asks for (names that are HTTP tokens; nothing else is echoed).
func corsHeaders(requested []string) string {
	list := corsHeaderList
	for _, v := range requested {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			if len(name) > len("Mcp-Param-") && strings.EqualFold(name[:len("Mcp-Param-")], "Mcp-Param-") && httpToken(name) {
				list += ", " + http.CanonicalHeaderKey(name)
			}
		}
	}
	return list
}

// httpToken reports whether s is an RFC 9110 token, as a header name is.
func httpToken(s string) bool {
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// HTTPTokenRotated ends what the HTTP front door let in under an earlier
// token: each legacy session opened with one (its GET stream and POSTs
// end, and its share of the child and its turn to answer the child's
// questions go with it; its id is unknown from then on), and each
// 2026-07-28 request carried with one, cancelled at the child as a
// closed response would be, its call held for the client's retry (MRTR)
// included: a retry with its requestState is answered as one with a
// requestState the pool never gave out. A client holding the old token
// gets 401 from then on. Call it once Options.HTTPToken returns the new
// token; calls must not overlap.
func (p *Pool) HTTPTokenRotated() {
	if h := p.front.Load(); h != nil {
		h.rotated()
	}
}

// errTokenRotated ends what a rotated token had let in.
var errTokenRotated = errors.New("the HTTP token was rotated: the token this client was let in with opens nothing any more")

// grant is what a request passed the gate with: the token it carried,
// and cut, closed at the next rotation after the gate checked it.
type grant struct {
	h     *httpFront
	token string
	cut   <-chan struct{}
}

// revoked reports, once g.cut is closed, whether g's token was rotated
// away; if not (the rotation came between the gate's look at the cut and
// its look at the token, which was already the new one), g.cut becomes
// the next rotation's.
func (g *grant) revoked() bool {
	cut := g.h.rotation()
	if g.h.token() != g.token {
		return true
	}
	g.cut = cut
	return false
}

// rotatedAway reports whether g's token is no longer the one the gate
// takes; never for nil, a request that came by no HTTP gate.
func (g *grant) rotatedAway() bool {
	return g != nil && g.h.token() != g.token
}

// rotation is closed at the next rotation of the token.
func (h *httpFront) rotation() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cut
}

// token is the token the gate takes now, "" when it asks for none.
func (h *httpFront) token() string {
	if h.p.opts.HTTPToken == nil {
		return ""
	}
	return h.p.opts.HTTPToken()
}

// rotated ends the legacy sessions opened with another token than the
// current one and the calls held for the retries of requests that
// carried another (cancelled at the child), and wakes the requests in
// flight to check theirs (grant). A session opened as this runs is
// checked by open itself, a call held as this runs by mrtrHolds.put.
func (h *httpFront) rotated() {
	now := h.token()
	h.mu.Lock()
	close(h.cut)
	h.cut = make(chan struct{})
	var old []*session
	for sid, hs := range h.sessions {
		if hs.token != now {
			delete(h.sessions, sid)
			old = append(old, hs.s)
		}
	}
	h.mu.Unlock()
	closeAll(old, func(*session) error { return errTokenRotated })
	for _, x := range h.p.holds.revoke(now) {
		x.b.cancel(x.p, errTokenRotated.Error())
	}
}

// tokenRotated answers a request whose token was rotated away while it
// was served, as the gate answers a wrong token.
func tokenRotated(w http.ResponseWriter, id []byte) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
	httpError(w, id, errTokenRevoked, errTokenRotated)
}
