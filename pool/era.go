package pool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// MCP revisions. Up to LatestLegacy a connection starts with initialize;
// Modern is stateless: each request names its version in _meta and
// server/discover replaces the handshake.
const (
	Modern       = "2026-07-28"
	LatestLegacy = "2025-11-25"

	EraLegacy = "legacy"
	EraModern = "modern"
)

// legacyVersions are the revisions that use the initialize handshake
// that the pool serves, oldest first. Not 2025-03-26: it requires
// receiving JSON-RPC batches, which the pool refuses (a message per line,
// per POST). A client asking for it gets 2024-11-05, a child speaking it
// is presented as 2025-06-18 (initializeResult).
var legacyVersions = []string{"2024-11-05", "2025-06-18", LatestLegacy}

// The _meta keys every modern request carries.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
)

// handshake is what the pool learned from a child, once per process, and
// answers every client's initialize or server/discover with.
type handshake struct {
	era             string
	protocolVersion string // legacy: negotiated; modern: Modern
	capabilities    json.RawMessage
	serverInfo      json.RawMessage
	instructions    string
	supported       []string // modern: supportedVersions
	ttlMs           int64    // modern: the child's cache hint for discover
	cacheScope      string
	infoMeta        []byte // legacy: serverInfoMember, made once for every result a modern client gets (modernResponse)
}

// capabilitiesJSON is what the pool declares to a child: roots only when
// its partition has roots (the pool answers roots/list itself, from the
// partition) or, for a session's own child, when its session declared
// them (answered from the session's roots, which may change), sampling and elicitation only when the session that started
// it declared them (a child must not offer sampling tools to clients that
// cannot sample). Elicitation names the modes declared, form mode alone
// as {}, which 2025-06-18 children know.
func (c clientCaps) capabilitiesJSON() string {
	var parts []string
	if c.roots {
		parts = append(parts, `"roots":{"listChanged":`+strconv.FormatBool(c.rootsChange)+`}`)
	}
	if c.sampling {
		parts = append(parts, `"sampling":{}`)
	}
	switch {
	case c.elicitationForm && c.elicitationURL:
		parts = append(parts, `"elicitation":{"form":{},"url":{}}`)
	case c.elicitationURL:
		parts = append(parts, `"elicitation":{"url":{}}`)
	case c.elicitationForm:
		parts = append(parts, `"elicitation":{}`)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// probeTimeout is how long the pool waits for an answer to server/discover
// before also trying initialize: some legacy servers never answer a
// request that comes before initialize. Only the wait for initialize
// ends then: server/discover may still answer, until the handshake
// timeout. (A variable for tests.)
var probeTimeout = 5 * time.Second

// handshake probes the child with server/discover and falls back to the
// legacy initialize, as the 2026-07-28 revision's backward-compatibility
// rules describe, then caches the era and the result. initialize is sent
// once server/discover failed, or probeTimeout passed without its answer;
// the first of the two to succeed decides the era, the other is dropped.
//
// A child that answers initialize first is legacy for its life, one of
// both eras too whose DiscoverResult comes later: it was initialized, and
// has a legacy session on its stdio; the pool bridges modern clients to it.
// Waiting on for a DiscoverResult after a successful initialize would
// delay every legacy child that never answers server/discover (the reason
// for probeTimeout) by the whole handshake timeout.
//
// A refused initialize fails nothing while server/discover may still
// answer: a modern child slow to answer the probe refuses initialize at
// once. One that refuses it naming only modern revisions after
// server/discover failed is asked server/discover once more. The
// handshake fails when both failed, saying why each did, or at
// HandshakeTimeout.
func (b *backend) handshake(c *child) (*handshake, error) {
	b.mu.Lock()
	b.handshaking = time.Now() // shown while it runs (snapshot)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.handshaking = time.Time{}
		b.mu.Unlock()
	}()
	info, _ := json.Marshal(b.p.opts.ClientInfo)
	poolCapabilities := b.caps.capabilitiesJSON()
	h := &handshakeRun{b: b, c: c,
		discoverParams: []byte(`{"_meta":{"` + metaProtocolVersion + `":"` + Modern +
			`","` + metaClientCapabilities + `":` + poolCapabilities + `,"` + metaClientInfo + `":` + string(info) + `}}`),
		initializeParams: []byte(`{"protocolVersion":"` + LatestLegacy +
			`","capabilities":` + poolCapabilities + `,"clientInfo":` + string(info) + `}`)}
	h.sendDiscover()
	deadline := time.NewTimer(b.p.opts.HandshakeTimeout)
	defer deadline.Stop()
	probe := time.NewTimer(probeTimeout)
	defer probe.Stop()
	for {
		var hs *handshake
		var err error
		select {
		case raw, ok := <-h.discoverReply:
			hs, err = h.discoverAnswered(raw, ok)
		case raw, ok := <-h.initReply:
			hs, err = h.initializeAnswered(raw, ok)
		case <-probe.C:
			h.sendInitialize()
		case <-c.exited:
			c.awaitStderr()
			err = b.handshakeFailure(c, h.exitReason())
		case <-deadline.C:
			err = b.handshakeFailure(c, h.timeoutReason(b.p.opts.HandshakeTimeout))
		case <-b.stopReq:
			err = errors.New("stopped during the handshake")
		}
		if hs != nil || err != nil {
			return hs, err
		}
	}
}

// handshakeRun is one child's handshake under way: its two requests, the
// answers still waited for (nil once taken: a nil channel blocks), and why
// each request failed, once it did.
type handshakeRun struct {
	b *backend
	c *child

	discoverParams, initializeParams []byte

	discover, initialize     *pending
	discoverReply, initReply <-chan []byte
	discoverErr, initErr     error
	reprobed                 bool // server/discover was sent again (initializeAnswered)
}

// sendDiscover sends server/discover: first, and once more to a child
// that refused initialize as a modern one does (initializeAnswered).
func (h *handshakeRun) sendDiscover() {
	h.discover = h.b.probe(Modern, "server/discover", h.discoverParams)
	h.discoverReply = h.discover.reply
}

// sendInitialize sends initialize once: when server/discover failed, or
// was not answered within probeTimeout.
func (h *handshakeRun) sendInitialize() {
	if h.initialize == nil {
		h.initialize = h.b.probe(LatestLegacy, "initialize", h.initializeParams)
		h.initReply = h.initialize.reply
	}
}

// discoverAnswered takes server/discover's answer (ok false: its request
// ended unanswered): the modern handshake, the handshake's failure when
// initialize failed too, or neither while initialize is yet to answer.
func (h *handshakeRun) discoverAnswered(raw []byte, ok bool) (*handshake, error) {
	h.discoverReply = nil
	hs, err := discoverOutcome(raw, ok)
	if err == nil {
		if h.initialize != nil {
			h.b.dropProbe(h.initialize) // (a no-op once it was answered)
		}
		return hs, nil
	}
	h.discoverErr = err
	if h.initErr != nil {
		return nil, h.b.handshakeFailure(h.c, h.bothFailed())
	}
	h.sendInitialize()
	return nil, nil
}

// initializeAnswered takes initialize's answer (ok false: its request
// ended unanswered): the legacy handshake, the handshake's failure, or
// neither while server/discover may still answer, or was asked again of a
// child that refused initialize as a modern one does.
func (h *handshakeRun) initializeAnswered(raw []byte, ok bool) (*handshake, error) {
	h.initReply = nil
	b := h.b
	if !ok {
		h.c.awaitStderr()
		return nil, b.handshakeFailure(h.c, "the child exited during initialize")
	}
	hs, err := parseInitialize(raw)
	if err == nil {
		b.dropProbe(h.discover)
		// Ahead of any client request queued while the child started.
		b.mu.Lock()
		b.queue = append([]outItem{{line: jsonrpc.AppendNotification(nil, "notifications/initialized", nil), early: true}}, b.queue...)
		b.mu.Unlock()
		b.signal()
		return hs, nil
	}
	h.initErr = err
	switch {
	case h.discoverReply != nil:
		b.log.Info("initialize refused while server/discover is unanswered: waiting for it", "err", err)
	case !h.reprobed && refusedAsModern(raw):
		b.log.Info("initialize refused by a child that speaks only modern revisions: asking server/discover again",
			"discoverErr", h.discoverErr, "err", err)
		h.reprobed, h.discoverErr = true, nil
		h.sendDiscover()
	default:
		return nil, b.handshakeFailure(h.c, h.bothFailed())
	}
	return nil, nil
}

// bothFailed says why a handshake whose server/discover and initialize
// both failed did.
func (h *handshakeRun) bothFailed() string {
	return fmt.Sprintf("server/discover failed (%v), and initialize failed (%v)", h.discoverErr, h.initErr)
}

// exitReason says why a handshake whose child exited failed.
func (h *handshakeRun) exitReason() string {
	if h.initErr != nil {
		return fmt.Sprintf("the child exited before answering server/discover (initialize failed: %v)", h.initErr)
	}
	return "the child exited before answering server/discover or initialize"
}

// timeoutReason says why a handshake that reached its timeout failed:
// after initialize failed, server/discover was not answered.
func (h *handshakeRun) timeoutReason(timeout time.Duration) string {
	if h.initErr != nil {
		return fmt.Sprintf("no answer to server/discover within %s, and initialize failed (%v)", timeout, h.initErr)
	}
	return fmt.Sprintf("no answer to server/discover or initialize within %s", timeout)
}

// discoverOutcome is the handshake server/discover's answer gives, or why
// it gives none. ok false: its request ended unanswered.
func discoverOutcome(raw []byte, ok bool) (*handshake, error) {
	if !ok {
		return nil, errors.New("ended without an answer")
	}
	return parseDiscover(raw)
}

// refusedAsModern says whether raw, an answer to initialize, is an error
// whose data.supported names 2026-07-28 and no legacy revision, as a
// 2026-07-28-only child refuses initialize: a modern child, worth asking
// server/discover again.
func refusedAsModern(raw []byte) bool {
	msg, err := jsonrpc.Parse(raw)
	if err != nil || !msg.Error.Present() {
		return false
	}
	var e struct {
		Data struct {
			Supported []string `json:"supported"`
		} `json:"data"`
	}
	if json.Unmarshal(msg.Error.Of(raw), &e) != nil || !slices.Contains(e.Data.Supported, Modern) {
		return false
	}
	return !slices.ContainsFunc(e.Data.Supported, func(v string) bool { return v < Modern }) // revisions are dates
}

// handshakeFailure is why c's handshake failed, quoting its last stderr
// lines: its own, never an earlier child's. A caller whose child exited
// waits for its stderr to be read first (awaitStderr): the exit is often
// seen before the reader has read what the child wrote last, its cause.
func (b *backend) handshakeFailure(c *child, what string) error {
	msg := fmt.Sprintf("server %q: %s", b.srv.name, what)
	bare := msg
	// A child that repeats a line has it quoted once.
	tail := slices.Compact(c.errTail.tail(3))
	switch len(tail) {
	case 0:
	case 1:
		msg += fmt.Sprintf(" (stderr: %q)", tail[0])
	default:
		msg += fmt.Sprintf(" (stderr: %q)", tail)
	}
	return &startFailure{msg: msg, bare: bare, saysStderr: len(tail) > 0}
}

// startFailure is why a child's handshake failed, with whether it quotes
// the child's stderr already (noteCrash does not quote it twice), and
// the same without the stderr, for the sessions of a shared child
// (toldCause).
type startFailure struct {
	msg, bare  string
	saysStderr bool
}

func (e *startFailure) Error() string { return e.msg }

// probe sends one of the pool's own handshake requests, ahead of any queued
// client request.
func (b *backend) probe(version, method string, params []byte) *pending {
	id := b.p.nextID.Add(1)
	p := &pending{id: id, method: method, received: time.Now(), reply: make(chan []byte, 1),
		line: jsonrpc.AppendRequest(nil, id, method, params)}
	b.mu.Lock()
	b.reqs.register(p, math.MaxInt, 0) // the handshake has its own deadline
	b.queue = append([]outItem{{p: p, line: p.line, early: true}}, b.queue...)
	b.mu.Unlock()
	b.signal()
	return p
}

// dropProbe ends a probe of the handshake that is no longer needed: the
// other one was answered. A child that answers it late (a legacy one
// that refuses server/discover only after answering the initialize sent
// once probeTimeout passed, one of both eras whose DiscoverResult comes
// after that initialize's answer, or a modern one that answers that
// initialize after server/discover) is not answering a client's call that ended:
// its answer is no orphan. Only the last probe dropped is remembered: a
// child has one handshake.
func (b *backend) dropProbe(p *pending) {
	if b.finish(p, outcome{kind: endDropped}) {
		b.lateProbe.Store(p.id)
	}
}

func resultOf(raw []byte) ([]byte, error) {
	msg, err := jsonrpc.Parse(raw)
	if err != nil {
		return nil, err
	}
	if msg.Error.Present() {
		return nil, fmt.Errorf("child answered with an error: %s", msg.Error.Of(raw))
	}
	return msg.Result.Of(raw), nil
}

func parseDiscover(raw []byte) (*handshake, error) {
	res, err := resultOf(raw)
	if err != nil {
		return nil, err
	}
	var r struct {
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      json.RawMessage            `json:"capabilities"`
		Instructions      string                     `json:"instructions"`
		Meta              map[string]json.RawMessage `json:"_meta"`
		ServerInfo        json.RawMessage            `json:"serverInfo"`
		TTLMs             int64                      `json:"ttlMs"`
		CacheScope        string                     `json:"cacheScope"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, fmt.Errorf("server/discover result: %w", err)
	}
	if !slices.Contains(r.SupportedVersions, Modern) {
		return nil, fmt.Errorf("server/discover: %s not among supported versions %v", Modern, r.SupportedVersions)
	}
	hs := &handshake{era: EraModern, protocolVersion: Modern, capabilities: r.Capabilities,
		instructions: r.Instructions, supported: r.SupportedVersions, serverInfo: r.Meta[metaServerInfo],
		ttlMs: max(r.TTLMs, 0), cacheScope: r.CacheScope}
	if hs.serverInfo == nil {
		hs.serverInfo = r.ServerInfo
	}
	return hs, nil
}

func parseInitialize(raw []byte) (*handshake, error) {
	res, err := resultOf(raw)
	if err != nil {
		return nil, err
	}
	var r struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage `json:"serverInfo"`
		Instructions    string          `json:"instructions"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, fmt.Errorf("initialize result: %w", err)
	}
	if r.ProtocolVersion == "" {
		return nil, errors.New("initialize result has no protocolVersion")
	}
	return &handshake{era: EraLegacy, protocolVersion: r.ProtocolVersion, capabilities: r.Capabilities,
		serverInfo: r.ServerInfo, instructions: r.Instructions, infoMeta: serverInfoMember(r.ServerInfo)}, nil
}

// initializeResult answers a legacy client's initialize. The version is
// the older of the client's request and the child's (legacyVersion): a
// client asking for an older revision the pool serves than the child
// speaks gets its own (clients disconnect on a version they do not know,
// and later revisions only add to the wire format), one asking for an
// older one the pool does not serve (2025-03-26) the newest served before
// it (the SDKs that send it speak that one too), one asking for a newer
// or unknown one the child's, and decides, as the spec's negotiation rule
// says. The pool adds the _meta a modern child needs to each forwarded
// request. tasks says whether the child's tasks are offered
// (session.offersTasks).
func (hs *handshake) initializeResult(requested string, tasks bool) []byte {
	version := hs.legacyVersion()
	if requested < version { // revisions are dates: they order as strings
		for _, v := range legacyVersions {
			if v <= requested {
				version = v
			}
		}
	}
	caps := rawOrEmpty(hs.capabilities)
	if hs.era == EraModern {
		caps = legacyView(caps)
	}
	if !tasks {
		caps = untaskedCaps(caps)
	}
	return initializeResultJSON(version, caps, hs.serverInfo, hs.instructions)
}

// legacyVersion is the newest legacy revision the pool presents the
// child as: a modern child as LatestLegacy; a legacy child as its own
// when the pool serves it, else as the oldest served one after it (a
// 2025-03-26 child as 2025-06-18: later revisions only add to the wire
// format), else as LatestLegacy.
func (hs *handshake) legacyVersion() string {
	if hs.era == EraModern {
		return LatestLegacy
	}
	for _, v := range legacyVersions {
		if v >= hs.protocolVersion {
			return v
		}
	}
	return LatestLegacy
}

// legacyChanges are the list changes initializeResult declares a legacy
// client gets: a legacy child's own (listChanged), none of a modern one's
// (legacyView).
func (hs *handshake) legacyChanges() filter {
	if hs.era == EraModern {
		return filter{}
	}
	return hs.honor(filter{ToolsListChanged: true, PromptsListChanged: true, ResourcesListChanged: true})
}

// modernView is the child's capabilities as a modern client of it may
// rely on them: a modern child's own; a legacy child's without logging
// (unloggedView).
func (hs *handshake) modernView() json.RawMessage {
	if hs.era == EraModern {
		return rawOrEmpty(hs.capabilities)
	}
	return unloggedView(rawOrEmpty(hs.capabilities))
}

// discoverResult answers a modern client's server/discover. The versions
// are the ones the pool serves for this child: 2026-07-28 (the child's own,
// or bridged by the pool for a legacy child: modern.go, mrtr.go) and the
// legacy revisions a client may initialize with. The cache hints 2026-07-28
// requires are the child's, or "do not cache" (ttlMs 0, private) for a
// legacy child. tasks is as initializeResult's.
func (hs *handshake) discoverResult(tasks bool) []byte {
	scope := hs.cacheScope
	if scope != "public" {
		scope = "private"
	}
	caps := hs.modernView()
	if !tasks {
		caps = untaskedCaps(caps)
	}
	return discoverResultJSON(hs.versions(), hs.ttlMs, scope, caps, hs.serverInfo, hs.instructions)
}

// versions are the revisions the pool serves for this child, newest
// first: 2026-07-28 (the one modern revision the pool speaks, to every
// child and client: a newer one a modern child also speaks would be
// refused per request, -32022), then the legacy revisions an initialize
// can get: up to the one the child is presented as (legacyVersion), all
// of them for a modern child (the pool adds the _meta it needs).
func (hs *handshake) versions() []string {
	out := []string{Modern}
	for _, v := range newestFirst(legacyVersions) {
		if v <= hs.legacyVersion() {
			out = append(out, v)
		}
	}
	return out
}

func newestFirst(vs []string) []string {
	out := slices.Clone(vs)
	slices.Reverse(out)
	return out
}

func rawOrEmpty(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage(`{}`)
	}
	return r
}

func rawOrDefault(r json.RawMessage, def string) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage(def)
	}
	return r
}

// toolHints reads a tools/list result and says, per tool, whether it
// declared itself read-only or idempotent.
func toolHints(result []byte) map[string]bool {
	var r struct {
		Tools []struct {
			Name        string `json:"name"`
			Annotations struct {
				ReadOnly   bool `json:"readOnlyHint"`
				Idempotent bool `json:"idempotentHint"`
			} `json:"annotations"`
		} `json:"tools"`
	}
	if json.Unmarshal(result, &r) != nil {
		return nil
	}
	out := make(map[string]bool, len(r.Tools))
	for _, t := range r.Tools {
		out[t.Name] = t.Annotations.ReadOnly || t.Annotations.Idempotent
	}
	return out
}

// errorFields reads code and message from a JSON-RPC error object.
func errorFields(obj []byte) (int, string) {
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(obj, &e)
	return e.Code, e.Message
}

// appendJSONString appends s as a JSON string, its <, > and & as they
// are: json.Marshal's escapes of them, for HTML, would change a child's
// or a client's text for no reader of JSON-RPC.
func appendJSONString(dst []byte, s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(dst, bytes.TrimSuffix(b.Bytes(), []byte{'\n'})...)
}

// headPoolID finds the top-level "id":N of an oversize message in its
// first bytes. Only a member of the message itself counts: a result
// written before the id may hold ids of its own (a child that writes
// "result" first), and one of those may be another request's pool id.
func headPoolID(head []byte) (uint64, bool) {
	depth, inString, escaped := 0, false, false
	for i := 0; i < len(head); i++ {
		c := head[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			if depth == 1 && bytes.HasPrefix(head[i:], []byte(`"id"`)) {
				j := skipBlanks(head, i+len(`"id"`))
				if j < len(head) && head[j] == ':' {
					return leadingUint(head, skipBlanks(head, j+1))
				}
			}
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		}
	}
	return 0, false
}

// tailPoolID finds "id":N in the last bytes of an oversize message when it
// is the message's last member: the digits end just before the message's
// closing brace, and a comma (or the opening brace) comes before the key.
// An "id" that closes a nested object is followed by another brace, and
// one inside a string by a quote, so neither is taken.
func tailPoolID(tail []byte) (uint64, bool) {
	t := bytes.TrimRight(tail, " \t\r\n")
	if len(t) == 0 || t[len(t)-1] != '}' {
		return 0, false
	}
	t = bytes.TrimRight(t[:len(t)-1], " \t\r\n")
	end := len(t)
	for end > 0 && t[end-1] >= '0' && t[end-1] <= '9' {
		end--
	}
	digits := t[end:]
	t = bytes.TrimRight(t[:end], " \t\r\n")
	if len(digits) == 0 || !bytes.HasSuffix(t, []byte(":")) {
		return 0, false
	}
	t = bytes.TrimRight(t[:len(t)-1], " \t\r\n")
	if !bytes.HasSuffix(t, []byte(`"id"`)) {
		return 0, false
	}
	t = bytes.TrimRight(t[:len(t)-len(`"id"`)], " \t\r\n")
	if len(t) == 0 || (t[len(t)-1] != ',' && t[len(t)-1] != '{') {
		return 0, false
	}
	return jsonrpc.ParseUint(digits)
}

// skipBlanks returns the index of the first non-blank byte of b from i.
func skipBlanks(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// leadingUint reads the number at b[i:], which must end within b (digits
// cut off by the fragment's end are no id).
func leadingUint(b []byte, i int) (uint64, bool) {
	k := i
	for k < len(b) && b[k] >= '0' && b[k] <= '9' {
		k++
	}
	if k == len(b) {
		return 0, false
	}
	return jsonrpc.ParseUint(b[i:k])
}

// findClientID finds the id at the start of an oversize client message so
// the error can name it; anything unclear gives null.
func findClientID(head []byte) ([]byte, bool) {
	const key = `"id":`
	for i := 0; i+len(key) < len(head); i++ {
		if string(head[i:i+len(key)]) != key {
			continue
		}
		j := i + len(key)
		k := j
		for k < len(head) && head[k] != ',' && head[k] != '}' {
			k++
		}
		if k < len(head) && jsonrpc.Valid(head[j:k]) {
			v := head[j:k]
			if v[0] == '"' || v[0] == '-' || (v[0] >= '0' && v[0] <= '9') {
				return append([]byte(nil), v...), true
			}
		}
		return nil, false
	}
	return nil, false
}
