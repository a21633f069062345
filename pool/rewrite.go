package pool

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// Every rewrite of a message between a client and a child, both ways, is
// a pure function of this file: it reads a parsed message and returns new
// bytes, never changing the message or reading the pool's state. What the
// pool knows (the pool id, the client's id, the token it replaced) is an
// argument. rewrite_test.go tables each one.
//
// Client to child:
//
//	request            id -> pool id, progress token -> pool token, _meta for a modern child (rewriteRequest);
//	                   made bare, fitted as a modern child writes it (fitRequest, with logLevelMember
//	                   and withMetaMember, as session.logsAsked adds the level);
//	                   its task taken out for a child whose tasks are not offered (withoutTask),
//	                   and the tasks its _meta's client capabilities declare (withoutTasksDeclared,
//	                   untaskedCaps);
//	                   retried after a legacy client answered a modern child's questions (retryParams)
//	notification       re-written from its parsed members (notificationForChild)
//	cancellation       the pool's own, for the pool id (cancelForChild)
//	answer to a child  the child's own id back (answerForChild)
//
// Child to client:
//
//	response           the client's exact id back (responseForClient); for a modern client
//	                   of a legacy child, what 2026-07-28 requires too (modernResponse), and
//	                   its -32042 as input_required (urlElicitationResponse); for a legacy
//	                   client of a modern child, resource not found as -32002 (legacyResponse)
//	progress           the client's own token back (poolTokenOf, progressForClient); every
//	                   progress token, either way, is read by progressTokenAt
//	child's request    its id -> a pool id (requestForClient)
//	modern child's     asked of a legacy client under a pool id (legacyQuestion), a URL-mode
//	  question         elicitation with an elicitationId (urlQuestionForLegacy)
//	its cancellation   requestId -> that pool id (childCancelTarget, cancelledForClient)
//	change to a listen tagged with the listen's id (tagNotification, taggedParams)
//	handshake          initialize and server/discover answered (initializeResultJSON,
//	                   discoverResultJSON) with the child's capabilities as the client's
//	                   revision sees them (legacyView, unloggedView, untaskedCaps) and its
//	                   serverInfo (serverInfoMember)
//	child's question   to a modern client, as input_required (inputRequiredResult)
//	a listen           acknowledged, ended, under the client's id (listenAcknowledged,
//	                   listenEndResult, listenCancelled)
//
// A child's or a client's JSON goes on as it was written: its key order,
// white space, escapes, its <, > and & as they are; a rewrite takes out, or
// puts in, only what it must, and never passes it through a Go map
// (TestRewritesStayInRewriteGo).
//
// The pool's ids and tokens are the decimal numbers jsonrpc.AppendUint
// writes; the client's are kept as their exact bytes (1, "1" and 1.0 are
// three ids).

// edit replaces the bytes at span with val; a span with Start == End is an
// insertion point.
type edit struct {
	at  jsonrpc.Span
	val []byte
}

// applyEdits appends raw with edits applied to dst, then extra, in one
// allocation when dst has no room. Edits must not overlap; they are
// sorted here (insertion sort: there are at most a few).
func applyEdits(dst, raw []byte, edits []edit, extra []byte) []byte {
	for i := 1; i < len(edits); i++ {
		for j := i; j > 0 && edits[j].at.Start < edits[j-1].at.Start; j-- {
			edits[j], edits[j-1] = edits[j-1], edits[j]
		}
	}
	n := len(raw) + len(extra)
	for _, e := range edits {
		n += len(e.val) - (e.at.End - e.at.Start)
	}
	if cap(dst)-len(dst) < n {
		dst = append(make([]byte, 0, len(dst)+n), dst...)
	}
	prev := 0
	for _, e := range edits {
		dst = append(dst, raw[prev:e.at.Start]...)
		dst = append(dst, e.val...)
		prev = e.at.End
	}
	dst = append(dst, raw[prev:]...)
	return append(dst, extra...)
}

// inbound is a client request rewritten for the child.
type inbound struct {
	line      []byte
	origToken []byte // the client's progress token, nil if none; its pool token is the pool id
	name      string // the tool, prompt or resource the request is about
}

// rewriteRequest gives a client request the pool id, swaps its progress
// token for a pool token (progress tokens collide across clients like
// ids do; the pool id, unique too, serves as the token), and adds meta,
// the _meta members a modern child needs, when a legacy client talks to
// one: they take the place of the client's own members of those keys,
// and of a _meta that is not an object, so that each key reaches the
// child once, as the pool set it. Everything else is forwarded byte for
// byte. The line and the client's token share one allocation.
func rewriteRequest(msg *jsonrpc.Message, poolID uint64, meta []byte) inbound {
	raw := msg.Raw
	var in inbound
	// Edits in a fixed array, assigned rather than appended, so that they
	// and the id they point to stay on the stack.
	var edits [3]edit
	var idBuf [20]byte
	pool := jsonrpc.AppendUint(idBuf[:0], poolID)
	edits[0] = edit{msg.ID, pool}
	n := 1
	var token []byte // the client's, copied after the line
	if msg.Params.Present() && raw[msg.Params.Start] == '{' {
		params := msg.Params.Of(raw)
		base := msg.Params.Start
		var metaSpan jsonrpc.Span // in params
		if msg.Meta.Present() {
			metaSpan = jsonrpc.Span{Start: msg.Meta.Start - base, End: msg.Meta.End - base}
		}
		if metaSpan.Present() && params[metaSpan.Start] == '{' {
			m := metaSpan.Of(params)
			tok := progressTokenAt(msg) // in raw
			if tok.Present() {
				token = tok.Of(raw)
			}
			if meta != nil && namesPoolMeta(m) {
				// The client names a member the pool sets: the _meta is
				// made anew, so that each key is in it once, the pool's.
				edits[n] = edit{msg.Meta, mergeMeta(m, meta, pool)}
				n++
			} else {
				if tok.Present() {
					edits[n] = edit{tok, pool}
					n++
				}
				if meta != nil {
					pos := base + metaSpan.Start + 1
					val := meta
					if !emptyObject(m) {
						val = append(append(make([]byte, 0, len(meta)+1), meta...), ',')
					}
					edits[n] = edit{jsonrpc.Span{Start: pos, End: pos}, val}
					n++
				}
			}
		} else if meta != nil && metaSpan.Present() {
			// A _meta that is not an object (null): the pool's takes its
			// place, rather than standing beside it as a second _meta.
			val := append(append(append(make([]byte, 0, len(meta)+2), '{'), meta...), '}')
			edits[n] = edit{msg.Meta, val}
			n++
		} else if meta != nil {
			pos := base + 1
			val := append(append([]byte(`"_meta":{`), meta...), '}')
			if !emptyObject(params) {
				val = append(val, ',')
			}
			edits[n] = edit{jsonrpc.Span{Start: pos, End: pos}, val}
			n++
		}
		in.name = aboutName(params)
	} else if meta != nil && !msg.Params.Present() {
		// No params: add them just before the closing brace.
		end := lastBrace(raw)
		edits[n] = edit{jsonrpc.Span{Start: end, End: end}, append(append([]byte(`,"params":{"_meta":{`), meta...), "}}"...)}
		n++
	}
	out := applyEdits(nil, raw, edits[:n], token)
	size := len(out) - len(token)
	in.line = out[:size:size]
	if token != nil {
		in.origToken = out[size:]
	}
	return in
}

// logLevelMember is the _meta member, comma first, that tells a modern
// child the log level (a levelName) a legacy client's request asks
// (session.setLevel, fitLine): for a run of members, rewriteRequest's
// meta, after them (withMetaMember).
func logLevelMember(level string) []byte {
	return []byte(`,"` + metaLogLevel + `":"` + level + `"`) // a level is a plain word
}

// withMetaMember is meta, the _meta members the pool adds for a legacy
// client (session.meta), with member, comma first, after them, in a new
// array: meta is the session's, shared by its requests.
func withMetaMember(meta, member []byte) []byte {
	return append(meta[:len(meta):len(meta)], member...)
}

// fitRequest is line, a legacy client's request made bare under the pool
// id poolID, as a modern child needs it (fitLine): with meta, the _meta
// members of its session (none: line as it is), and, unless the request
// names its own, the log level logs (pending.logs: 0 for none) asks.
func fitRequest(line []byte, poolID uint64, meta []byte, logs uint8) []byte {
	msg, err := jsonrpc.Parse(line)
	if meta == nil || err != nil {
		return line // (it was parsed when made)
	}
	if _, own := ownLogLevel(&msg); !own && logs > 0 {
		meta = withMetaMember(meta, logLevelMember(levelName(int(logs)-1)))
	}
	return rewriteRequest(&msg, poolID, meta).line
}

// withoutTask is a client's request without its params' task member
// (msg.Task), parsed again: 2025-11-25's task augmentation, taken out for
// a child whose tasks the pool does not offer (backend.untasked), so that
// the child runs the request as a plain one, as a server that offers no
// tasks must. The comma that joined the member to its neighbour goes
// with it. Rare: a client that asks what it was not offered.
func withoutTask(msg *jsonrpc.Message) *jsonrpc.Message {
	raw := msg.Raw
	m, err := jsonrpc.Parse(applyEdits(nil, raw, []edit{{withItsComma(raw, msg.Task), nil}}, nil))
	if err != nil {
		return msg // cannot be: a member and its comma out of a valid object
	}
	return &m
}

// withoutTasksDeclared is a client's request whose _meta declares its
// client capabilities (msg.Meta, an object that has them), declaring
// them without tasks (untaskedCaps), parsed again: for a child whose
// tasks the pool does not offer (backend.untasked), as 2026-07-28 lets a
// server answer any call of a client that declared its tasks extension
// with a task, and a request's _meta is otherwise the client's, byte for
// byte. Rare: a modern client that declares what it was not offered.
func withoutTasksDeclared(msg *jsonrpc.Message) *jsonrpc.Message {
	m := msg.Meta.Of(msg.Raw)
	sp := jsonrpc.Member(m, metaClientCapabilities)
	at := jsonrpc.Span{Start: msg.Meta.Start + sp.Start, End: msg.Meta.Start + sp.End}
	out, err := jsonrpc.Parse(applyEdits(nil, msg.Raw, []edit{{at, untaskedCaps(sp.Of(m))}}, nil))
	if err != nil {
		return msg // cannot be: a valid object in place of another
	}
	return &out
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// poolMetaKeys are the _meta members the pool may add for a legacy
// client of a modern child (session.meta, logsAsked): every key that can
// be in rewriteRequest's meta must be here.
var poolMetaKeys = [...]string{metaProtocolVersion, metaClientCapabilities, metaClientInfo, metaLogLevel}

// aboutName is the tool, prompt or resource a request's params are
// about: their name, else their uri; "" for neither.
func aboutName(params []byte) string {
	if s, ok := jsonrpc.String(params, jsonrpc.Member(params, "name")); ok {
		return s
	}
	s, _ := jsonrpc.String(params, jsonrpc.Member(params, "uri"))
	return s
}

// namesPoolMeta reports whether a client's _meta object m has a member the
// pool may add. Rare: it costs a look, not an allocation.
func namesPoolMeta(m []byte) bool {
	for _, k := range poolMetaKeys {
		if jsonrpc.Member(m, k).Present() {
			return true
		}
	}
	return false
}

// mergeMeta is the _meta object a child gets when the client's own, m,
// names a member the pool sets: the pool's members (meta), then the
// client's others in their order, progressToken as pool, the pool token.
// A member the pool does not set this time (the client's own logLevel)
// stays the client's.
func mergeMeta(m, meta, pool []byte) []byte {
	ours := map[string]bool{}
	eachMember(append(append([]byte{'{'}, meta...), '}'), func(key string, _ json.RawMessage) { ours[key] = true })
	out := append(append(make([]byte, 0, len(m)+len(meta)+2), '{'), meta...)
	eachMember(m, func(key string, v json.RawMessage) {
		if ours[key] {
			return
		}
		if key == "progressToken" {
			v = pool
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(appendJSONString(out, key), ':')
		out = append(out, v...)
	})
	return append(out, '}')
}

// eachMember calls fn with each member of the JSON object obj, its key
// unescaped and its value as it is written.
func eachMember(obj []byte, fn func(key string, v json.RawMessage)) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return
	}
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		var v json.RawMessage
		if err != nil || !ok || dec.Decode(&v) != nil {
			return
		}
		fn(key, v)
	}
}

// notificationForChild re-writes a client's notification from its parsed
// members, never passing its bytes on: no member the pool did not
// classify reaches the child.
func notificationForChild(msg *jsonrpc.Message) []byte {
	var params []byte
	if msg.Params.Present() {
		params = msg.Params.Of(msg.Raw)
	}
	return jsonrpc.AppendNotification(nil, msg.Method, params)
}

// cancelForChild is the notifications/cancelled the pool sends a child for
// its request poolID: the pool's id, whatever the client called it.
func cancelForChild(poolID uint64, reason string) []byte {
	params := make([]byte, 0, 64)
	params = append(params, `{"requestId":`...)
	params = jsonrpc.AppendUint(params, poolID)
	params = append(params, `,"reason":`...)
	params = appendJSONString(params, reason)
	params = append(params, '}')
	return jsonrpc.AppendNotification(nil, "notifications/cancelled", params)
}

// answerForChild is a client's answer to one of the child's requests,
// with the child's own id back in place of the pool id.
func answerForChild(msg *jsonrpc.Message, childID []byte) []byte {
	return jsonrpc.Splice(nil, msg.Raw, msg.ID, childID)
}

// responseForClient appends to dst the child's answer with the client's
// exact id in place of the pool id.
func responseForClient(dst []byte, msg *jsonrpc.Message, clientID []byte) []byte {
	return jsonrpc.Splice(dst, msg.Raw, msg.ID, clientID)
}

// modernResponse rewrites a legacy child's response for a 2026-07-28
// client: the client's id in place of the pool's, resultType "complete"
// on a result that lacks one, for cacheable results the cache hints
// "do not cache, not shared" (ttlMs 0, cacheScope private): a legacy child
// says nothing about how long its lists stay true, and the pool must not
// let one client's answer stand for another's; and in the result's _meta
// the serverInfo member (infoMeta: serverInfoMember, made once per child)
// that 2026-07-28 asks on every result, unless it names one. An error
// keeps its code, except the legacy -32002 that 2026-07-28 replaced with
// -32602. The answer is its one allocation.
func modernResponse(msg *jsonrpc.Message, method string, clientID, infoMeta []byte) []byte {
	raw := msg.Raw
	var edits [7]edit // the id, and at most six insertions
	edits[0] = edit{msg.ID, clientID}
	n := 1
	switch {
	case msg.Result.Present() && raw[msg.Result.Start] == '{':
		res := msg.Result.Of(raw)
		at := jsonrpc.Span{Start: msg.Result.Start + 1, End: msg.Result.Start + 1}
		first := n
		insert := func(val []byte) { edits[n] = edit{at, val}; n++ }
		if !jsonrpc.Member(res, "resultType").Present() {
			insert(addComplete)
		}
		if cacheableMethods[method] {
			if !jsonrpc.Member(res, "ttlMs").Present() {
				insert(addNoTTL)
			}
			if !jsonrpc.Member(res, "cacheScope").Present() {
				insert(addPrivate)
			}
		}
		switch meta := jsonrpc.Member(res, "_meta"); {
		case len(infoMeta) == 0:
		case !meta.Present():
			insert(metaOpen)
			insert(infoMeta)
			insert(metaClose)
		case res[meta.Start] == '{' && !jsonrpc.Member(meta.Of(res), metaServerInfo).Present():
			at = jsonrpc.Span{Start: msg.Result.Start + meta.Start + 1, End: msg.Result.Start + meta.Start + 1}
			insert(infoMeta)
			if !emptyObject(meta.Of(res)) {
				insert(comma)
			}
		}
		if n > first && emptyObject(res) { // all at the result's start: the last one takes no comma
			last := edits[n-1].val
			edits[n-1].val = last[:len(last)-1]
		}
	case msg.Error.Present() && raw[msg.Error.Start] == '{':
		errObj := msg.Error.Of(raw)
		code := jsonrpc.Member(errObj, "code")
		if v, ok := parseInt(code.Of(errObj)); ok && v == codeLegacyNotFound {
			at := jsonrpc.Span{Start: msg.Error.Start + code.Start, End: msg.Error.Start + code.End}
			edits[n] = edit{at, []byte("-32602")}
			n++
		}
	}
	return applyEdits(nil, raw, edits[:n], nil)
}

// legacyResponse rewrites a 2026-07-28 child's response for a legacy
// client: the client's id in place of the pool's, and a resources/read
// refused because the resource does not exist back to 2025-11-25's
// -32002. The child says so with -32602 and the uri in its data
// (SEP-2164), or, leaving the data out, with "Resource not found" as its
// message; any other -32602 stays a -32602. Message and data stay the
// child's.
func legacyResponse(msg *jsonrpc.Message, method string, clientID []byte) []byte {
	edits := [2]edit{{msg.ID, clientID}}
	n := 1
	if method == "resources/read" && msg.Error.Present() && msg.Raw[msg.Error.Start] == '{' {
		errObj := msg.Error.Of(msg.Raw)
		code := jsonrpc.Member(errObj, "code")
		if v, ok := parseInt(code.Of(errObj)); ok && v == jsonrpc.CodeInvalidParams && namesMissingResource(errObj) {
			at := jsonrpc.Span{Start: msg.Error.Start + code.Start, End: msg.Error.Start + code.End}
			edits[n] = edit{at, []byte("-32002")}
			n++
		}
	}
	return applyEdits(nil, msg.Raw, edits[:n], nil)
}

// namesMissingResource reports whether a -32602 error object is
// 2026-07-28's "resource not found": data naming the uri, or that
// message.
func namesMissingResource(errObj []byte) bool {
	if d := jsonrpc.Member(errObj, "data"); d.Present() && errObj[d.Start] == '{' &&
		jsonrpc.Member(d.Of(errObj), "uri").Present() {
		return true
	}
	m, _ := jsonrpc.String(errObj, jsonrpc.Member(errObj, "message"))
	return len(m) >= len(resourceNotFound) && strings.EqualFold(m[:len(resourceNotFound)], resourceNotFound)
}

// resourceNotFound is how SEP-2164's example words the error.
const resourceNotFound = "resource not found"

// What modernResponse inserts, each ending in the comma that the next
// member needs.
var (
	addComplete = []byte(`"resultType":"complete",`)
	addNoTTL    = []byte(`"ttlMs":0,`)
	addPrivate  = []byte(`"cacheScope":"private",`)
	metaOpen    = []byte(`"_meta":{`)
	metaClose   = []byte(`},`)
	comma       = []byte(`,`)
)

// urlElicitationResponse rewrites a legacy child's URLElicitationRequiredError
// (-32042, 2025-11-25: the call is refused until the user has been to
// the URLs of data.elicitations) for a 2026-07-28 client, which has no
// such error: there a server asks for a URL interaction as an
// elicitation/create in URL mode among the inputRequests of an
// InputRequiredResult, and the client retries the call. Each elicitation
// becomes one, in their order, keyed by its elicitationId, with only
// what 2026-07-28 gives it (mode, message, url: the elicitationId went
// with the notification that used it), each as the child wrote it. No requestState: the retry is a new call
// to the child, as a 2025-11-25 client's would be. ok is false for any
// other answer, and for one 2025-11-25 does not allow (an elicitation
// that is not URL mode, or lacks its url or its own elicitationId).
// infoMeta, if any, is the result's _meta (as modernResponse adds it).
func urlElicitationResponse(msg *jsonrpc.Message, clientID, infoMeta []byte) (line []byte, ok bool) {
	if !msg.Error.Present() {
		return nil, false
	}
	errObj := msg.Error.Of(msg.Raw)
	if v, ok := parseInt(jsonrpc.Member(errObj, "code").Of(errObj)); !ok || v != codeURLElicitationRequired {
		return nil, false
	}
	var data struct {
		Elicitations []json.RawMessage `json:"elicitations"`
	}
	d := jsonrpc.Member(errObj, "data")
	if json.Unmarshal(d.Of(errObj), &data) != nil || len(data.Elicitations) == 0 {
		return nil, false
	}
	result := []byte(`{"resultType":"input_required","inputRequests":{`)
	seen := make(map[string]bool, len(data.Elicitations))
	for i, e := range data.Elicitations {
		mode, _, okMode := stringMember(e, "mode")
		id, idRaw, okID := stringMember(e, "elicitationId")
		url, urlRaw, okURL := stringMember(e, "url")
		_, message, okMessage := stringMember(e, "message")
		if !okMode || !okID || !okURL || !okMessage || mode != "url" || url == "" || id == "" || seen[id] {
			return nil, false
		}
		seen[id] = true
		if message == nil {
			message = []byte(`""`)
		}
		if i > 0 {
			result = append(result, ',')
		}
		result = append(append(result, idRaw...), `:{"method":"elicitation/create","params":{"mode":"url","message":`...)
		result = append(append(append(append(result, message...), `,"url":`...), urlRaw...), "}}"...)
	}
	result = append(result, '}')
	if len(infoMeta) > 0 {
		result = append(append(append(result, `,"_meta":{`...), infoMeta...), '}')
	}
	return jsonrpc.AppendResponse(nil, clientID, append(result, '}')), true
}

// stringMember reads the member name of the JSON object obj as a string:
// s decoded, raw as it is written; both zero for none, or null. ok is
// false for any other value, which a Go string would not take.
func stringMember(obj []byte, name string) (s string, raw []byte, ok bool) {
	sp := jsonrpc.Member(obj, name)
	if !sp.Present() || string(sp.Of(obj)) == "null" {
		return "", nil, true
	}
	if s, ok = jsonrpc.String(obj, sp); !ok {
		return "", nil, false
	}
	return s, sp.Of(obj), true
}

// questionOf is a legacy child's request (a question during a modern
// client's call: carryAsMRTR) as an entry of inputRequests, its method
// and its params as the child wrote them.
func questionOf(msg *jsonrpc.Message) json.RawMessage {
	out := appendJSONString(append(make([]byte, 0, len(msg.Method)+len(msg.Raw)), `{"method":`...), msg.Method)
	if msg.Params.Present() {
		out = append(append(out, `,"params":`...), msg.Params.Of(msg.Raw)...)
	}
	return append(out, '}')
}

// legacyQuestion is one of a modern child's input requests (method and
// params, from its input_required answer) as the request that asks a
// legacy client it, under the pool's id for it: an elicitation in URL
// mode given that id as its elicitationId (urlQuestionForLegacy).
func legacyQuestion(id uint64, method string, params json.RawMessage) []byte {
	if method == "elicitation/create" {
		var idBuf [20]byte
		params = urlQuestionForLegacy(params, string(jsonrpc.AppendUint(idBuf[:0], id)))
	}
	return jsonrpc.AppendRequest(nil, id, method, params)
}

// urlQuestionForLegacy is a modern child's elicitation/create params as
// a legacy client is asked them: in URL mode with an elicitationId,
// which 2025-11-25 requires of URL mode and 2026-07-28 removed (id, one
// the pool made: nothing refers to it later), first, the child's members
// after it as the child wrote them. Other params are returned as they
// are.
func urlQuestionForLegacy(params json.RawMessage, id string) json.RawMessage {
	if m, _ := jsonrpc.String(params, jsonrpc.Member(params, "mode")); m != "url" ||
		jsonrpc.Member(params, "elicitationId").Present() {
		return params
	}
	at := skipBlanks(params, 0) + 1 // just inside the object, which has its mode
	val := append(appendJSONString([]byte(`"elicitationId":`), id), ',')
	return applyEdits(nil, params, []edit{{jsonrpc.Span{Start: at, End: at}, val}}, nil)
}

// retryParams is the params of a call retried for its child after an
// input round (inputRound.retry): the call's own, msg's, with the
// client's answers as inputResponses and the child's requestState (state;
// none: the call's own requestState goes). Members the call already has
// change where they are, those it lacks come last; every other member
// stays as the call wrote it, in its order, byte for byte. Params that
// are not an object give way to the two. ok is false for a call without
// params, and for answers or a state that are not JSON.
func retryParams(msg *jsonrpc.Message, answers map[string]json.RawMessage, state json.RawMessage) (params []byte, ok bool) {
	if !msg.Params.Present() {
		return nil, false
	}
	ans, err := json.Marshal(answers)
	if err != nil {
		return nil, false
	}
	var st []byte
	if len(state) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, state) != nil { // the child's, on one line as the request must be
			return nil, false
		}
		st = b.Bytes()
	}
	old := msg.Params.Of(msg.Raw)
	if old[0] != '{' {
		old = []byte(`{}`)
	}
	var edits [2]edit
	n := 0
	ir, rs := jsonrpc.Member(old, "inputResponses"), jsonrpc.Member(old, "requestState")
	if ir.Present() {
		edits[n] = edit{ir, ans}
		n++
	}
	switch {
	case rs.Present() && st != nil:
		edits[n] = edit{rs, st}
		n++
	case rs.Present():
		edits[n] = edit{memberCut(old, rs), nil}
		n++
	}
	out := applyEdits(nil, old, edits[:n], nil)
	var add []byte
	if !ir.Present() {
		add = append(append(add, `,"inputResponses":`...), ans...)
	}
	if !rs.Present() && st != nil {
		add = append(append(add, `,"requestState":`...), st...)
	}
	if add == nil {
		return out, true
	}
	if emptyObject(out) {
		add = add[1:]
	}
	end := lastBrace(out)
	return applyEdits(nil, out, []edit{{jsonrpc.Span{Start: end, End: end}, add}}, nil), true
}

// memberCut is the span of the member of the JSON object obj whose value
// is at val, from its key to its value, with the comma that joins it to
// a neighbour: what to cut to take the member out.
func memberCut(obj []byte, val jsonrpc.Span) jsonrpc.Span {
	i := val.Start - 1
	for isBlank(obj[i]) || obj[i] == ':' {
		i--
	}
	// obj[i] closes the key: its opening quote is the first one before
	// it that no backslash escapes.
	for i--; ; i-- {
		if obj[i] != '"' {
			continue
		}
		slashes := 0
		for obj[i-1-slashes] == '\\' {
			slashes++
		}
		if slashes%2 == 0 {
			break
		}
	}
	return withItsComma(obj, jsonrpc.Span{Start: i, End: val.End})
}

// withItsComma is cut, a member of a JSON object in obj from its key to
// its value, widened by the comma that joins it to a neighbour, if any:
// what to cut to take the member out and leave a valid object.
func withItsComma(obj []byte, cut jsonrpc.Span) jsonrpc.Span {
	before := skipBlanksBack(obj, cut.Start-1)
	after := skipBlanks(obj, cut.End)
	switch {
	case obj[before] == ',':
		cut.Start = before
	case after < len(obj) && obj[after] == ',':
		cut.End = after + 1
	}
	return cut
}

// skipBlanksBack is the index of the last byte of b at or before i that
// is not white space.
func skipBlanksBack(b []byte, i int) int {
	for i > 0 && isBlank(b[i]) {
		i--
	}
	return i
}

// progressTokenAt is where a message names its progress token in
// msg.Raw, the one place the pool reads one: a notifications/progress in
// params.progressToken, a request in params._meta.progressToken. The
// zero Span for none.
func progressTokenAt(msg *jsonrpc.Message) jsonrpc.Span {
	in := msg.Meta
	if msg.Kind == jsonrpc.KindNotification && msg.Method == "notifications/progress" {
		in = msg.Params
	}
	if !in.Present() || msg.Raw[in.Start] != '{' {
		return jsonrpc.Span{}
	}
	tok := jsonrpc.Member(in.Of(msg.Raw), "progressToken")
	if !tok.Present() {
		return tok
	}
	return jsonrpc.Span{Start: in.Start + tok.Start, End: in.Start + tok.End}
}

// progressTokenOf is a copy of the progress token a request's _meta
// names, or nil.
func progressTokenOf(msg *jsonrpc.Message) []byte {
	return bytes.Clone(progressTokenIn(msg))
}

// progressTokenIn is the progress token msg names (progressTokenAt), in
// msg.Raw; nil if it has none.
func progressTokenIn(msg *jsonrpc.Message) []byte {
	at := progressTokenAt(msg)
	if !at.Present() {
		return nil
	}
	return at.Of(msg.Raw)
}

// poolTokenOf reads a progress notification's token as the pool's, and
// where it is in the line; ok is false for a token the pool never gave.
func poolTokenOf(msg *jsonrpc.Message) (token uint64, at jsonrpc.Span, ok bool) {
	at = progressTokenAt(msg)
	token, ok = jsonrpc.ParseUint(at.Of(msg.Raw))
	return token, at, ok
}

// progressForClient is a progress notification with the client's own
// token in place of the pool's, at at (from poolTokenOf).
func progressForClient(msg *jsonrpc.Message, at jsonrpc.Span, origToken []byte) []byte {
	return jsonrpc.Splice(nil, msg.Raw, at, origToken)
}

// requestForClient is the child's own request (sampling, elicitation) with
// a pool id in place of the child's: children number their requests like
// clients do, and several children may ask one client.
func requestForClient(msg *jsonrpc.Message, poolID uint64) []byte {
	var idBuf [20]byte
	return jsonrpc.Splice(nil, msg.Raw, msg.ID, jsonrpc.AppendUint(idBuf[:0], poolID))
}

// childCancelTarget is the child's id of the request a child's
// notifications/cancelled gives up, and where it is in the line.
func childCancelTarget(msg *jsonrpc.Message) (childID []byte, at jsonrpc.Span) {
	if !msg.Params.Present() {
		return nil, at
	}
	params := msg.Params.Of(msg.Raw)
	rid := jsonrpc.Member(params, "requestId")
	if !rid.Present() {
		return nil, at
	}
	return rid.Of(params), jsonrpc.Span{Start: msg.Params.Start + rid.Start, End: msg.Params.Start + rid.End}
}

// cancelledForClient is the child's notifications/cancelled with the pool
// id the client knows its request by, at at (from childCancelTarget).
func cancelledForClient(msg *jsonrpc.Message, at jsonrpc.Span, poolID uint64) []byte {
	var idBuf [20]byte
	return jsonrpc.Splice(nil, msg.Raw, at, jsonrpc.AppendUint(idBuf[:0], poolID))
}

// tagNotification is a change notification with params._meta's
// subscriptionId set to a listen's id (2026-07-28 subscriptions/listen):
// the child's params as it wrote them, the id first in their _meta (in
// place of one it named), or in a _meta of its own first in the params.
func tagNotification(msg *jsonrpc.Message, id []byte) []byte {
	var params []byte
	if msg.Params.Present() {
		params = msg.Params.Of(msg.Raw)
	}
	return jsonrpc.AppendNotification(nil, msg.Method, taggedParams(params, id))
}

// taggedParams is params with id as its _meta's subscriptionId
// (tagNotification). A _meta written twice keeps its last, as a reader
// that keeps a key's last value reads it; a _meta that is not an object
// gives way to the tag's, params that are not an object (none) to
// params of the tag alone.
func taggedParams(params, id []byte) []byte {
	tag := append([]byte(`"`+metaSubscriptionID+`":`), id...)
	if !isObject(params) {
		return append(append([]byte(`{"_meta":{`), tag...), "}}"...)
	}
	params = params[skipBlanks(params, 0) : skipBlanksBack(params, len(params)-1)+1]
	metas := jsonrpc.Members(params, "_meta")
	for len(metas) > 1 {
		params = applyEdits(nil, params, []edit{{memberCut(params, metas[0]), nil}}, nil)
		metas = jsonrpc.Members(params, "_meta")
	}
	if len(metas) == 0 {
		val := append(append([]byte(`"_meta":{`), tag...), '}')
		if !emptyObject(params) {
			val = append(val, ',')
		}
		return applyEdits(nil, params, []edit{{jsonrpc.Span{Start: 1, End: 1}, val}}, nil)
	}
	meta := metas[0].Of(params)
	val := append([]byte{'{'}, tag...)
	if meta[0] != '{' {
		val = append(val, '}')
	} else if rest, _ := withoutMembers(meta, metaSubscriptionID); emptyObject(rest) {
		val = append(val, '}')
	} else {
		val = append(append(val, ','), rest[1:]...)
	}
	return applyEdits(nil, params, []edit{{metas[0], val}}, nil)
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

// levelSlot is the room a carried level takes in a session's
// logging/setLevel for its child (sendLevel): the longest level's,
// quoted, so that the line's length, counted as it was made
// (session.trackLocked), holds whichever level it carries.
const levelSlot = len(`"emergency"`)

// carrierLine is line, a session's logging/setLevel for its child, with
// room for any level where it names its own, for carryLevel; a line
// that names no level (which setLogLevel refused) is left as it is.
func carrierLine(line []byte) []byte {
	sp := levelSpan(line)
	if !sp.Present() {
		return line
	}
	room := make([]byte, levelSlot)
	fillLevel(room, quietest)
	return jsonrpc.Splice(nil, line, sp, room)
}

// carryLevel writes level where line, a carrierLine, has room for it,
// in place.
func carryLevel(line []byte, level string) {
	if sp := levelSpan(line); sp.End-sp.Start == levelSlot {
		fillLevel(line[sp.Start:sp.End], level)
	}
}

// levelSpan is where line, a logging/setLevel, names its level.
func levelSpan(line []byte) jsonrpc.Span {
	msg, err := jsonrpc.Parse(line)
	if err != nil || !msg.Params.Present() {
		return jsonrpc.Span{}
	}
	sp := jsonrpc.Member(msg.Params.Of(line), "level")
	if !sp.Present() {
		return sp
	}
	return jsonrpc.Span{Start: sp.Start + msg.Params.Start, End: sp.End + msg.Params.Start}
}

// fillLevel writes level, quoted, in slot, padded with spaces.
func fillLevel(slot []byte, level string) {
	n := copy(slot, `"`+level+`"`)
	for i := n; i < len(slot); i++ {
		slot[i] = ' '
	}
}

// The results and views the pool builds around a child's JSON, or a
// client's: the pool's own envelope appended around the child's bytes,
// which go on as it wrote them (their key order, white space, escapes,
// and <, > and & unescaped), only what must go taken out. None goes
// through a Go map: json.Marshal would sort the keys, escape <, > and &,
// and write nothing at all for a piece that is not JSON.

// defaultServerInfo names the pool for a child that named itself not.
const defaultServerInfo = `{"name":"switchboard","version":"dev"}`

// isObject reports whether b is one valid JSON object, white space
// around it allowed: what the views below edit; anything else they
// leave as it is.
func isObject(b []byte) bool {
	i := skipBlanks(b, 0)
	return i < len(b) && b[i] == '{' && jsonrpc.Valid(b)
}

// validOr is b, if it is one JSON value, else def: what a result the pool
// assembles holds in place of a piece that is not JSON, so that the
// result is JSON whatever it was given.
func validOr(b []byte, def string) []byte {
	if len(b) == 0 || !jsonrpc.Valid(b) {
		return []byte(def)
	}
	return b
}

// withoutMembers is obj, a valid JSON object, without its members named
// one of names, each with the comma that joined it to a neighbour: every
// one of them, however its key is written (twice, with escapes), the
// other members as they were, byte for byte. found: one was there;
// none: obj itself.
func withoutMembers(obj []byte, names ...string) (out []byte, found bool) {
	out = obj
	for _, name := range names {
		for v := jsonrpc.Member(out, name); v.Present(); v = jsonrpc.Member(out, name) {
			out = applyEdits(nil, out, []edit{{memberCut(out, v), nil}}, nil)
			found = true
		}
	}
	return out, found
}

// inEachObject is obj, a valid JSON object, with the value of each of
// its members named name that is an object edited by fn (ok: fn changed
// it), the rest as it was. changed: fn changed one; none: obj itself.
func inEachObject(obj []byte, name string, fn func(val []byte) (edited []byte, ok bool)) (out []byte, changed bool) {
	var edits []edit
	for _, v := range jsonrpc.Members(obj, name) {
		if obj[v.Start] != '{' {
			continue
		}
		if e, ok := fn(v.Of(obj)); ok {
			edits = append(edits, edit{v, e})
		}
	}
	if len(edits) == 0 {
		return obj, false
	}
	return applyEdits(nil, obj, edits, nil), true
}

// legacyView is a 2026-07-28 child's capabilities as a legacy client of
// it may rely on them: without what the legacy revisions promise through
// methods and notifications the child no longer has and the pool does not
// bridge for a legacy session: resources/subscribe and list-change
// notifications. The client then re-lists and reads as it would with a
// server that offers none of them, rather than wait for what never
// comes. Logging stays: the pool keeps the session's logging/setLevel and
// asks the child for its requests' messages at that level (loglevel.go).
// Capabilities that are not an object are left as they are.
func legacyView(caps json.RawMessage) json.RawMessage {
	if !isObject(caps) {
		return caps
	}
	out := []byte(caps)
	for _, k := range [...]string{"tools", "prompts", "resources"} {
		out, _ = inEachObject(out, k, func(c []byte) ([]byte, bool) { return withoutMembers(c, "listChanged", "subscribe") })
	}
	return out
}

// unloggedView is a legacy child's capabilities as a 2026-07-28 client of
// it may rely on them: without logging, whose messages such a child never
// ties to a request, so the pool gives that client none (the first edition
// offered it, and the client waited for messages that never came).
// Capabilities that are not an object are left as they are.
func unloggedView(caps json.RawMessage) json.RawMessage {
	if !isObject(caps) {
		return caps
	}
	out, _ := withoutMembers(caps, "logging")
	return out
}

// untaskedCaps is capabilities caps without tasks: 2025-11-25's tasks
// member and 2026-07-28's tasks extension (in every extensions member
// that is an object), each however its key is written. Both ways: a
// child's, as a client to whom its tasks are not offered sees them
// (initializeResult, discoverResult); a client's, as a child whose tasks
// are not offered is told them (withoutTasksDeclared). Capabilities with
// neither, or that are not an object, are left as they are.
func untaskedCaps(caps []byte) []byte {
	if !isObject(caps) {
		return caps
	}
	out, _ := withoutMembers(caps, "tasks")
	out, _ = inEachObject(out, "extensions", func(ext []byte) ([]byte, bool) { return withoutMembers(ext, tasksExtension) })
	return out
}

// serverInfoMember is the _meta member naming the server that
// 2026-07-28 asks on every result, as discoverResult names it:
// "io.modelcontextprotocol/serverInfo":{...}, the child's serverInfo as
// it wrote it (none: the pool's). Not JSON: no member.
func serverInfoMember(info json.RawMessage) []byte {
	info = rawOrDefault(info, defaultServerInfo)
	if !jsonrpc.Valid(info) {
		return nil
	}
	return append([]byte(`"`+metaServerInfo+`":`), info...)
}

// initializeResultJSON is the InitializeResult a legacy client's
// initialize is answered with: version, the revision the pool agreed;
// caps and info, the child's capabilities (as the client's revision
// sees them) and serverInfo as it wrote them; instructions, the child's,
// if any. Capabilities that are not JSON are none ({}), a serverInfo
// that is not JSON the pool's own.
func initializeResultJSON(version string, caps, info []byte, instructions string) []byte {
	caps, info = validOr(caps, `{}`), validOr(info, defaultServerInfo)
	out := make([]byte, 0, 96+len(caps)+len(info)+len(instructions))
	out = appendJSONString(append(out, `{"protocolVersion":`...), version)
	out = append(append(out, `,"capabilities":`...), caps...)
	out = append(append(out, `,"serverInfo":`...), info...)
	if instructions != "" {
		out = appendJSONString(append(out, `,"instructions":`...), instructions)
	}
	return append(out, '}')
}

// discoverResultJSON is the DiscoverResult a modern client's
// server/discover is answered with: the revisions the pool serves for the
// child, its cache hints (ttlMs, scope), caps and info, the child's
// capabilities (as a modern client sees them) and serverInfo as it wrote
// them (in _meta, as 2026-07-28 names a server), and its instructions,
// if any. Capabilities that are not JSON are none ({}), a serverInfo that
// is not JSON the pool's own.
func discoverResultJSON(versions []string, ttlMs int64, scope string, caps, info []byte, instructions string) []byte {
	caps = validOr(caps, `{}`)
	member := serverInfoMember(info)
	if member == nil {
		member = serverInfoMember(nil)
	}
	out := make([]byte, 0, 160+len(caps)+len(member)+len(instructions))
	out = append(out, `{"resultType":"complete","supportedVersions":[`...)
	for i, v := range versions {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendJSONString(out, v)
	}
	out = strconv.AppendInt(append(out, `],"ttlMs":`...), ttlMs, 10)
	out = appendJSONString(append(out, `,"cacheScope":`...), scope)
	out = append(append(out, `,"capabilities":`...), caps...)
	if instructions != "" {
		out = appendJSONString(append(out, `,"instructions":`...), instructions)
	}
	out = append(append(append(out, `,"_meta":{`...), member...), "}}"...)
	return out
}

// inputRequiredResult is the InputRequiredResult that carries a child's
// question to a 2026-07-28 client: request (questionOf: its method and
// params as the child wrote them) under key, the pool's requestState
// state for the retry, and infoMeta (serverInfoMember), if any, as its
// _meta, naming the child as its other results do (modernResponse). A
// request that is not JSON, which questionOf never makes, is asked as
// an empty one ({}), so that the result is JSON all the same.
func inputRequiredResult(key string, request []byte, state string, infoMeta []byte) []byte {
	request = validOr(request, `{}`)
	out := make([]byte, 0, 96+len(key)+len(request)+len(state)+len(infoMeta))
	out = append(out, `{"resultType":"input_required","inputRequests":{`...)
	out = append(append(appendJSONString(out, key), ':'), request...)
	out = appendJSONString(append(out, `},"requestState":`...), state)
	if len(infoMeta) > 0 {
		out = append(append(append(out, `,"_meta":{`...), infoMeta...), '}')
	}
	return append(out, '}')
}

// subscriptionMeta is the _meta object naming a listen by its id, the
// client's request id as the client wrote it.
func subscriptionMeta(id []byte) []byte {
	return append(append([]byte(`{"`+metaSubscriptionID+`":`), id...), '}')
}

// listenAcknowledged is the params of the
// notifications/subscriptions/acknowledged that tells a listen (id, the
// client's) what it is promised: notifications, the filter the pool
// honours, as JSON.
func listenAcknowledged(id, notifications []byte) []byte {
	out := append([]byte(`{"_meta":`), subscriptionMeta(id)...)
	return append(append(append(out, `,"notifications":`...), notifications...), '}')
}

// listenEndResult is the result a listen (id, the client's) ends with: a
// complete one whose _meta names it.
func listenEndResult(id []byte) []byte {
	return append(append([]byte(`{"resultType":"complete","_meta":`), subscriptionMeta(id)...), '}')
}

// listenCancelled is the params of the notifications/cancelled that ends
// a listen (id, the client's) on stdio, saying why.
func listenCancelled(id []byte, reason string) []byte {
	out := append(append([]byte(`{"requestId":`), id...), `,"reason":`...)
	return append(appendJSONString(out, reason), '}')
}
