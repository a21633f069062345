package pool

import (
	"bytes"
	"encoding/json"
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
//	                   and the tasks its _meta's client capabilities declare (withoutTasksDeclared);
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
//	change to a listen tagged with the listen's id (tagNotification)
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
// becomes one, keyed by its elicitationId, with only what 2026-07-28
// gives it (mode, message, url: the elicitationId went with the
// notification that used it). No requestState: the retry is a new call
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
		Elicitations []struct {
			Mode          string `json:"mode"`
			Message       string `json:"message"`
			URL           string `json:"url"`
			ElicitationID string `json:"elicitationId"`
		} `json:"elicitations"`
	}
	d := jsonrpc.Member(errObj, "data")
	if json.Unmarshal(d.Of(errObj), &data) != nil || len(data.Elicitations) == 0 {
		return nil, false
	}
	requests := make(map[string]any, len(data.Elicitations))
	for _, e := range data.Elicitations {
		if _, dup := requests[e.ElicitationID]; e.Mode != "url" || e.URL == "" || e.ElicitationID == "" || dup {
			return nil, false
		}
		requests[e.ElicitationID] = map[string]any{"method": "elicitation/create",
			"params": map[string]string{"mode": "url", "message": e.Message, "url": e.URL}}
	}
	r := map[string]any{"resultType": "input_required", "inputRequests": requests}
	if len(infoMeta) > 0 {
		r["_meta"] = json.RawMessage("{" + string(infoMeta) + "}")
	}
	result, err := json.Marshal(r)
	if err != nil {
		return nil, false
	}
	return jsonrpc.AppendResponse(nil, clientID, result), true
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
// subscriptionId set to a listen's id (2026-07-28 subscriptions/listen).
func tagNotification(msg *jsonrpc.Message, id []byte) []byte {
	params := map[string]json.RawMessage{}
	if msg.Params.Present() {
		_ = json.Unmarshal(msg.Params.Of(msg.Raw), &params)
	}
	meta := map[string]json.RawMessage{}
	if m, ok := params["_meta"]; ok {
		_ = json.Unmarshal(m, &meta)
	}
	meta[metaSubscriptionID] = json.RawMessage(id)
	params["_meta"], _ = json.Marshal(meta)
	out, _ := json.Marshal(params)
	return jsonrpc.AppendNotification(nil, msg.Method, out)
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
