package pool

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// A 2026-07-28 client receives change notifications only on the stream of
// a subscriptions/listen request, and only the kinds it asked for, each
// tagged with the subscription's id (basic/patterns/subscriptions). A
// legacy child broadcasts its list changes and sends resource updates for
// what was subscribed with resources/subscribe; the pool turns those into
// each listener's stream: it acknowledges the listen itself, subscribes
// the child to the listeners' resources (reference-counted with the legacy
// sessions' own subscriptions, so the child sees one subscribe), and tags
// what it forwards. A modern child has its own subscriptions/listen: the
// listen is forwarded, and the child's tagged notifications are routed
// back to the listener with its own id.

// metaSubscriptionID tags a notification with the listen it belongs to.
const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// listener is one open subscriptions/listen of a modern client on a
// legacy child.
type listener struct {
	id                        []byte // the listen request's id, which is its subscriptionId
	b                         *backend
	tools, prompts, resources bool
	uris                      []string
}

// filter is the notifications member of subscriptions/listen params.
type filter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// listen answers a modern client's subscriptions/listen. It reports
// whether the pool took the request itself (a legacy child); false means
// forward it to the child, whose own listen serves it.
func (s *session) listen(id, params []byte) bool {
	b, err := s.srv.backendFor(s)
	if err != nil {
		s.replyError(id, err)
		return true
	}
	hs, err := b.handshakeResult(s.closed)
	if err != nil {
		s.replyError(id, err)
		return true
	}
	if hs.era == EraModern {
		return false
	}
	var p struct {
		Notifications filter `json:"notifications"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		s.replyError(id, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "subscriptions/listen: " + err.Error()})
		return true
	}
	honored := hs.honor(p.Notifications)
	l := &listener{id: id, b: b, tools: honored.ToolsListChanged, prompts: honored.PromptsListChanged,
		resources: honored.ResourcesListChanged, uris: honored.ResourceSubscriptions}
	s.mu.Lock()
	if s.listens == nil {
		s.listens = map[string]*listener{}
	}
	_, dup := s.listens[string(id)]
	if !dup && !isClosed(s.closed) {
		s.listens[string(id)] = l
	}
	s.mu.Unlock()
	if dup {
		s.replyError(id, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("request id %s is already in flight in this session", id)})
		return true
	}
	for _, uri := range l.uris {
		if b.subscribe(uri) {
			b.internalRequest("resources/subscribe", subscribeParams(uri))
		}
	}
	ack, _ := json.Marshal(map[string]any{"_meta": map[string]any{metaSubscriptionID: json.RawMessage(id)},
		"notifications": honored})
	s.deliver(jsonrpc.AppendNotification(nil, "notifications/subscriptions/acknowledged", ack))
	return true
}

// honor is the part of a filter the child can deliver, from the
// capabilities it declared: what the acknowledgement promises.
func (hs *handshake) honor(f filter) filter {
	var caps struct {
		Tools     *struct{ ListChanged bool } `json:"tools"`
		Prompts   *struct{ ListChanged bool } `json:"prompts"`
		Resources *struct {
			ListChanged bool
			Subscribe   bool
		} `json:"resources"`
	}
	_ = json.Unmarshal(hs.capabilities, &caps)
	out := filter{
		ToolsListChanged:     f.ToolsListChanged && caps.Tools != nil && caps.Tools.ListChanged,
		PromptsListChanged:   f.PromptsListChanged && caps.Prompts != nil && caps.Prompts.ListChanged,
		ResourcesListChanged: f.ResourcesListChanged && caps.Resources != nil && caps.Resources.ListChanged,
	}
	if caps.Resources != nil && caps.Resources.Subscribe {
		slices.Sort(f.ResourceSubscriptions)
		out.ResourceSubscriptions = slices.Compact(f.ResourceSubscriptions)
	}
	return out
}

// endListen closes one listen (the client cancelled it); a cancelled
// request gets no answer. It reports whether id was a listen.
func (s *session) endListen(id []byte) bool {
	s.mu.Lock()
	l := s.listens[string(id)]
	delete(s.listens, string(id))
	s.mu.Unlock()
	if l == nil {
		return false
	}
	l.release()
	return true
}

// endListens closes every listen of a closing session.
func (s *session) endListens() {
	s.mu.Lock()
	ls := s.listens
	s.listens = nil
	s.mu.Unlock()
	for _, l := range ls {
		l.release()
	}
}

// release gives back the listen's stake in the child's resource
// subscriptions.
func (l *listener) release() {
	for _, uri := range l.uris {
		if l.b.unsubscribe(uri) {
			l.b.internalRequest("resources/unsubscribe", subscribeParams(uri))
		}
	}
}

// wants reports whether the listen asked for a change notification.
func (l *listener) wants(method, uri string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return l.tools
	case "notifications/prompts/list_changed":
		return l.prompts
	case "notifications/resources/list_changed":
		return l.resources
	case "notifications/resources/updated":
		return slices.Contains(l.uris, uri)
	}
	return false
}

// deliverChange hands a legacy child's change notification to a session:
// a legacy session as it came (resource updates only if it subscribed), a
// modern one once per listen that asked for it, tagged with the listen's
// id.
func (s *session) deliverChange(b *backend, msg *jsonrpc.Message, uri string) {
	s.mu.Lock()
	modern := s.era == EraModern
	var to []*listener
	for _, l := range s.listens {
		if l.b == b && l.wants(msg.Method, uri) {
			to = append(to, l)
		}
	}
	_, subscribed := s.subs[uri]
	s.mu.Unlock()
	if !modern {
		if msg.Method != "notifications/resources/updated" || subscribed {
			s.deliver(append([]byte(nil), msg.Raw...))
		}
		return
	}
	for _, l := range to {
		s.deliver(tagNotification(msg, l.id))
	}
}

// tagNotification is msg with params._meta's subscriptionId set to id.
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

// routeTagged delivers a modern child's notification that belongs to a
// forwarded subscriptions/listen (tagged with the pool's id for it) to
// that listen's client, re-tagged with the client's id. It reports whether
// the notification was such.
func (b *backend) routeTagged(msg *jsonrpc.Message) bool {
	params := msg.Params.Of(msg.Raw)
	meta := jsonrpc.Member(params, "_meta")
	if !meta.Present() || params[meta.Start] != '{' {
		return false
	}
	m := meta.Of(params)
	tag := jsonrpc.Member(m, metaSubscriptionID)
	if !tag.Present() {
		return false
	}
	poolID, ok := jsonrpc.ParseUint(tag.Of(m))
	if !ok {
		return false
	}
	b.mu.Lock()
	p := b.pending[poolID]
	var to *session
	var origID []byte
	if p != nil && p.method == "subscriptions/listen" && p.held == nil {
		to, origID = p.sess, p.origID
	}
	b.mu.Unlock()
	if to == nil {
		return true // a listen that ended: nobody to tell
	}
	at := jsonrpc.Span{Start: msg.Params.Start + meta.Start + tag.Start, End: msg.Params.Start + meta.Start + tag.End}
	to.deliver(jsonrpc.Splice(nil, msg.Raw, at, origID))
	return true
}

// subscriptionOf is a notification's subscriptionId tag, or nil.
func subscriptionOf(line []byte, m jsonrpc.Message) []byte {
	if m.Kind != jsonrpc.KindNotification || !m.Params.Present() {
		return nil
	}
	params := m.Params.Of(line)
	meta := jsonrpc.Member(params, "_meta")
	if !meta.Present() || params[meta.Start] != '{' {
		return nil
	}
	tag := jsonrpc.Member(meta.Of(params), metaSubscriptionID)
	if !tag.Present() {
		return nil
	}
	return tag.Of(meta.Of(params))
}
