package pool

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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
// pool keeps one open on it (upstream) with the union of its listeners'
// filters, reopened when that union grows or shrinks (the old one kept
// until the child acknowledges the new one, so that no change is lost in
// between) or when the child ends it, and fans the child's notifications
// out to the listeners that asked, each with its own tag. With the
// server's annotations trusted it also asks for tool changes, which
// refresh the tools' hints (safeToRepeatLocked).
//
// An acknowledgement promises the changes from then on: a listen is
// acknowledged once the child watches what it asks for, when the child
// answered the subscribes it needed (legacy) or acknowledged an upstream
// listen that covers it (modern; at once if the current one does). One
// the child refuses, or sits on past the request timeout, is acknowledged
// anyway, promising what the child still watches (a refused resource, or
// what the open upstream listen covers); one whose child died, with what
// the child's capabilities honour: the restarted child is asked again.
//
// A listen follows its session to the child made after a stop or a
// config change, as the session's resource subscriptions do
// (moveStakes): it stays open, and the new child is asked for it as it
// becomes ready. Ending it instead would make each client reopen it; a
// client that does not would silently get nothing.

// metaSubscriptionID tags a notification with the listen it belongs to.
const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// listener is one open subscriptions/listen of a modern client.
type listener struct {
	id                        []byte    // the listen request's id, which is its subscriptionId
	to                        *exchange // the HTTP POST whose response is the listen's stream; nil: the session's output
	s                         *session
	tools, prompts, resources bool
	uris                      []string
	slot                      atomic.Int32 // its ledger slot + 1 while it is open and owed there (oweListen); 0: none

	// Guarded by the session's mu. b is the child the listen watches: the
	// session's, which it follows to the child made after a stop or a
	// config change (moveListens). Until its acknowledgement is sent, what
	// the listen is sent waits in early (2026-07-28: nothing goes on a
	// subscription before its acknowledgement).
	b     *backend
	acked bool
	early []outMessage

	// sending is held while the acknowledgement and early go out, and
	// by a change for the listen that finds it not acknowledged: such a
	// change waits for them rather than join early behind a client's
	// back. Once the acknowledgement is out the client may act on it,
	// and what the child says after that (an answer to the client's next
	// call) must not overtake a change it said before. Taken before the
	// session's mu; what it guards out goes to queues that never block.
	sending sync.Mutex
}

// filter is the notifications member of subscriptions/listen params.
type filter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// listenResourcesLimit is how many resources one subscriptions/listen
// may ask for: a quarter of a session's subscriptions (sessionLimit,
// Options.MaxSessionSubscriptions; 1,024 of the default 4,096), at least
// one. A server's stateless session is shared by every stateless HTTP
// client of the server, so without it one client's one listen could
// take the whole share, and every other client's listen would be
// refused for as long as it stays open. A quarter leaves the others
// most of it, and is far more than a client watching the resources it
// shows asks for.
func listenResourcesLimit(sessionLimit int) int { return max(sessionLimit/4, 1) }

// listen answers a modern client's subscriptions/listen itself; the
// request stays open until the client cancels it or goes away, or the
// pool closes its session (closeListens). x, when not nil, is the
// exchange whose response is the listen's stream. While the child has
// not finished its handshake, the listen waits in flight on it as w
// (initwait.go): the wait ends as the listen is opened, or refused.
func (s *session) listen(w *handshakeWait, params []byte) {
	id, x := w.id, w.x
	b, hs, err := s.handshaken(w)
	if err != nil {
		w.refuse(s, err)
		return
	}
	var p struct {
		Notifications filter `json:"notifications"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		w.refuse(s, newError(errBadParams, false, "", "subscriptions/listen", err))
		return
	}
	if n, most := len(p.Notifications.ResourceSubscriptions), listenResourcesLimit(s.p.opts.MaxSessionSubscriptions); n > most {
		w.refuse(s, newError(errListenTooLarge, false, "", n, most, s.p.opts.MaxSessionSubscriptions))
		return
	}
	honored := hs.honor(p.Notifications)
	l := &listener{id: id, to: x, s: s, b: b, tools: honored.ToolsListChanged, prompts: honored.PromptsListChanged,
		resources: honored.ResourcesListChanged, uris: honored.ResourceSubscriptions}
	key := keyOf(id, x)
	s.mu.Lock()
	if s.listens == nil {
		s.listens = map[string]*listener{}
	}
	_, dup := s.listens[key]
	refusal := s.overSubscribedLocked(!dup, 1+len(l.uris))
	closed := isClosed(s.closed)
	if !dup && refusal == nil && !closed {
		s.listens[key] = l
	}
	s.mu.Unlock()
	switch {
	case closed && w.p != nil:
		w.refuse(s, errSessionEnded) // its wait ends with the session: nothing answered
		return
	case closed:
		return // nobody would end the listen: it holds nothing
	case refusal != nil:
		w.refuse(s, refusal)
		return
	case dup:
		w.refuse(s, newError(errDuplicateID, false, "", id))
		return
	case !w.goOn():
		s.endListen(key) // a stop or a user's cancel ended its wait first, and answered it
		return
	}
	s.oweListen(l, w.at)
	var subs []*subWait // a legacy child's subscribes the acknowledgement waits for: its own, or another holder's on its way
	if hs.era == EraModern {
		b.syncUpstream()
	} else {
		for _, uri := range l.uris {
			sub := b.newSubscriptionChange(l, uri, true)
			if err := b.send(sub); (err == nil || errors.Is(err, errNotForChild)) && sub.sub.wait != nil {
				subs = append(subs, sub.sub.wait)
			}
		}
	}
	if !s.boundTo(l, b) {
		l.releaseAt(b) // it ended, or moved to another child, before it was counted here
	}
	if testHookListening != nil {
		testHookListening(id)
	}
	switch {
	case hs.era == EraModern:
		if promised, wait := b.awaitUpstream(l); !wait {
			s.acknowledge(l, promised)
		}
	case len(subs) > 0:
		// Exits once the child answered each subscribe, or it ended
		// otherwise (its child died, its timeout, the pool stops).
		s.p.wg.Go(func() { s.acknowledge(l, subscribed(l, subs, honored)) })
	default:
		s.acknowledge(l, honored)
	}
}

// oweListen keeps an open listen owed in the session's ledger (an
// attached session's: ledger.listen), in the slot its wait held (goOn),
// else a new one: a pool killed while it is open leaves it for the next
// pool, which tells the client its stream ended (session.resume), so
// that the client listens again rather than wait for changes that never
// come. The listen's end releases the slot: its cancel, or its session's
// close, at once; its closing result once written (closeListens). One
// that ended before it was counted is released here.
func (s *session) oweListen(l *listener, a *arrival) {
	slot := a.takeSlot()
	if slot == 0 {
		slot = s.ledger.take(l.id)
	}
	if !s.ledger.listen(slot) {
		s.ledger.release(slot) // past the listens' share of the ledger (or none): not owed there
		return
	}
	s.mu.Lock()
	open := s.listens[keyOf(l.id, l.to)] == l
	if open {
		l.slot.Store(slot)
	}
	s.mu.Unlock()
	if !open {
		s.ledger.release(slot)
	}
}

// acknowledge sends a listen its acknowledgement, promising promised,
// then what came for it meanwhile (early), in order; nothing if the
// listen ended first.
func (s *session) acknowledge(l *listener, promised filter) {
	l.sending.Lock()
	defer l.sending.Unlock()
	if !s.listening(l) {
		return
	}
	notifications, _ := json.Marshal(promised) // the pool's own filter
	const acknowledged = "notifications/subscriptions/acknowledged"
	s.relate(l.to, jsonrpc.AppendNotification(nil, acknowledged, listenAcknowledged(l.id, notifications)), acknowledged)
	for { // then what came meanwhile, in order, until nothing waits
		s.mu.Lock()
		early := l.early
		l.early = nil
		l.acked = len(early) == 0
		s.mu.Unlock()
		if len(early) == 0 {
			return
		}
		for _, m := range early {
			s.relate(l.to, m.line, m.facts.method)
		}
	}
}

// listening reports whether l is still one of the session's listens.
func (s *session) listening(l *listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listens[keyOf(l.id, l.to)] == l
}

// subscribed waits for a legacy child's answers to the subscribes listen
// l relies on (its own, or another holder's of the same resource still
// on its way, or one sent again in its place), and is what its
// acknowledgement promises: honored, less the resources the child
// refused, and those of its own subscribes the pool gave up on
// (subscribeEnded took back the listen's stake in those).
func subscribed(l *listener, subs []*subWait, honored filter) filter {
	uris := make([]string, 0, len(honored.ResourceSubscriptions))
	refused := map[string]bool{}
	for _, w := range subs {
		// One ended unanswered as its child died: the restarted child is
		// subscribed again.
		if w.last().refused || w.gaveUp && w.p.sub.holder == any(l) {
			refused[w.p.sub.uri] = true
		}
	}
	for _, uri := range honored.ResourceSubscriptions {
		if !refused[uri] {
			uris = append(uris, uri)
		}
	}
	honored.ResourceSubscriptions = uris
	return honored
}

// testHookListening, when set, runs in every listen between its
// registration and its acknowledgement, with the listen's id.
var testHookListening func(id []byte)

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

// endListen closes one listen, by its key (keyOf: the client cancelled
// it, or the caller of its exchange went away); a cancelled request gets
// no answer. It reports whether key was a listen.
func (s *session) endListen(key string) bool {
	s.mu.Lock()
	l := s.listens[key]
	delete(s.listens, key)
	s.mu.Unlock()
	if l == nil {
		return false
	}
	if l.to != nil {
		l.to.unanswered() // its stream was the POST's response: it ends
	}
	s.ledger.release(l.slot.Swap(0)) // cancelled: owed nothing
	l.release()
	return true
}

// closeListens ends the listens of a session that the pool closes while
// its client is still there (its server removed, the pool stopping or
// handing it back, its input closed), for why. Each is answered as a
// server that tears a subscription down answers it (subscriptions:
// Graceful Closure): a complete result whose _meta names it, so that the
// client can tell this end from a lost connection; on stdio it is then
// named in notifications/cancelled, which is what ends a listen there
// (basic/patterns/cancellation). An HTTP listen's stream ends with its
// result. Called before the session closes: its output takes nothing
// after that. A legacy client has no listen (its resources/subscribe
// subscriptions end with its session, as that revision has it). It
// reports whether it sent anything to the session's own output, which
// close then writes out before it closes the transport.
func (s *session) closeListens(why error) (told bool) {
	s.mu.Lock()
	ls := s.listens
	s.listens = nil
	s.mu.Unlock()
	for _, l := range ls {
		l.sending.Lock() // after its acknowledgement, if that is going out
		s.respond(l.to, jsonrpc.AppendResponse(nil, l.id, listenEndResult(l.id)), 0)
		if l.to == nil {
			s.deliver(jsonrpc.AppendNotification(nil, "notifications/cancelled", listenCancelled(l.id, why.Error())),
				outFacts{method: "notifications/cancelled", withdraws: wireID{text: string(l.id)}})
			told = true
		}
		l.sending.Unlock()
		s.releaseWhenWritten(l.slot.Swap(0)) // owed until its closing lines are written
		l.release()
	}
	return told
}

// endListens closes every listen of a closing session.
func (s *session) endListens() {
	s.mu.Lock()
	ls := s.listens
	s.listens = nil
	s.mu.Unlock()
	for _, l := range ls {
		s.ledger.release(l.slot.Swap(0)) // its session ended: owed nothing
		l.release()
	}
}

// release gives back the listen's stake in its child, once it ended.
func (l *listener) release() {
	l.s.mu.Lock()
	b := l.b
	l.s.mu.Unlock()
	l.releaseAt(b)
}

// releaseAt gives back what the listen holds at b: its stake in b's
// resource subscriptions (a legacy child's, or one counted before the
// child said its era: a holder that holds nothing counts nothing) and in
// b's one upstream listen (modern: recomputed without it).
func (l *listener) releaseAt(b *backend) {
	for _, uri := range l.uris {
		b.changeSubscription(l, uri, false)
	}
	b.syncUpstream()
}

// boundTo reports whether l is still one of the session's listens, and
// watches b.
func (s *session) boundTo(l *listener, b *backend) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listens[keyOf(l.id, l.to)] == l && l.b == b
}

// moveListens takes the session's listens that watch other children to
// to, the child it routes to now (moveStakes): each old child is let go
// of them, to is subscribed to their resources (legacy: at once if
// ready, else as it becomes ready) or opens its upstream listen for them
// (modern: now, or as it becomes ready). A listen that ended, or moved
// on, meanwhile is released at to again: it holds nothing there.
func (s *session) moveListens(to *backend) {
	type move struct {
		l    *listener
		from *backend
	}
	var moved []move
	s.mu.Lock()
	for _, l := range s.listens {
		if l.b != to {
			moved = append(moved, move{l, l.b})
			l.b = to
		}
	}
	s.mu.Unlock()
	if len(moved) == 0 {
		return
	}
	modern := to.isModern()
	for _, m := range moved {
		m.l.releaseAt(m.from)
		if !modern {
			for _, uri := range m.l.uris {
				to.changeSubscription(m.l, uri, true)
			}
		}
	}
	to.syncUpstream()
	for _, m := range moved {
		if !s.boundTo(m.l, to) {
			m.l.releaseAt(to)
		}
	}
}

// filter is what the listen asked for, of what the child can deliver.
func (l *listener) filter() filter {
	return filter{ToolsListChanged: l.tools, PromptsListChanged: l.prompts, ResourcesListChanged: l.resources,
		ResourceSubscriptions: l.uris}
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

// deliverChange hands a child's change notification to a session: a
// legacy session a legacy child's as they came (resource updates only if
// it subscribed, list changes only if its initialize offered them:
// toldNone), and of those that came on a modern child's upstream listen
// (tagged) the list changes its initialize declared (promised),
// untagged; and once per listen that asked for it, tagged with the
// listen's id (a legacy session's listen is a 2026-07-28 request of its
// client's, served as one). What a legacy client was told at its
// initialize holds for the session's life: a config change or a restart
// may give it a child of the other era.
func (s *session) deliverChange(b *backend, msg *jsonrpc.Message, uri string, tagged bool) {
	s.mu.Lock()
	modern := s.era == EraModern
	promised, toldNone := s.promised, s.toldNone
	var to, unacked []*listener
	for _, l := range s.listens {
		switch {
		case l.b != b || !l.wants(msg.Method, uri):
		case !l.acked:
			unacked = append(unacked, l)
		default:
			to = append(to, l)
		}
	}
	_, subscribed := s.subs[uri]
	s.mu.Unlock()
	if !modern {
		switch {
		case msg.Method == "notifications/resources/updated":
			if !tagged && subscribed {
				s.deliver(append([]byte(nil), msg.Raw...), notice(msg.Method))
			}
		case tagged:
			if promised.listsChange(msg.Method) {
				s.deliver(jsonrpc.AppendNotification(nil, msg.Method, nil), notice(msg.Method)) // a list change has no params but the tag
			}
		case !toldNone:
			s.deliver(append([]byte(nil), msg.Raw...), notice(msg.Method))
		}
	}
	for _, l := range to {
		s.relate(l.to, tagNotification(msg, l.id), msg.Method)
	}
	for _, l := range unacked {
		s.deliverEarly(l, outMessage{tagNotification(msg, l.id), notice(msg.Method)})
	}
}

// deliverEarly hands a change to a listen that was not acknowledged when
// the change came: it waits for an acknowledgement going out, then goes
// after it, or, not acknowledged yet, is sent after the acknowledgement
// (acknowledge), said once however often it came while the child takes
// its time.
func (s *session) deliverEarly(l *listener, m outMessage) {
	l.sending.Lock()
	defer l.sending.Unlock()
	s.mu.Lock()
	acked := l.acked
	if !acked && !slices.ContainsFunc(l.early, func(e outMessage) bool { return bytes.Equal(e.line, m.line) }) {
		l.early = append(l.early, m)
	}
	s.mu.Unlock()
	if acked {
		s.relate(l.to, m.line, m.facts.method)
	}
}

// upstream is the one subscriptions/listen the pool keeps open on a
// modern child for all of the child's listeners. A listen that replaces
// it waits in next until the child acknowledges it (2026-07-28: nothing
// is sent on a subscription before its acknowledgement, so until then the
// child's changes come on the old one): only then does it become p, and
// the old one is cancelled. A listener that p does not cover waits for
// next too (awaitUpstream): its acknowledgement goes when the child
// acknowledges next, or when next ends without that. mu serializes its
// reopening; it is taken before backend.mu and session.mu, never after,
// and never held while a listen is sent or ended.
type upstream struct {
	mu       sync.Mutex
	p        *pending    // the listen whose notifications are delivered, or nil
	f        filter      // what p asked for
	next     *pending    // the listen sent to replace p, not yet acknowledged; or nil
	nf       filter      // what next asks for
	waiting  []*listener // the listeners whose acknowledgement waits for next's; none without next
	ackTimer *time.Timer // gives up on next (unacknowledged); stopped once next is settled, so it holds nothing
	refused  []string    // sorted: the resources left out of the union since a listen that added only them was refused (nextEnded)
	trying   []string    // sorted: the resources a refused listen added together, asked for one at a time (nextEnded)
	quick    int         // the current listens the child ended within quickEnd, in a row (upstreamEnded)
}

// dropNextLocked forgets next, settled (acknowledged, ended, replaced or
// given up on), and stops its timer.
func (up *upstream) dropNextLocked() {
	up.next = nil
	if up.ackTimer != nil {
		up.ackTimer.Stop()
		up.ackTimer = nil
	}
}

// newChild forgets what the child the backend had refused: a restarted
// child (perhaps restarted to fix the resource) is asked for it again.
func (b *backend) newChild() {
	b.up.mu.Lock()
	b.up.refused, b.up.trying = nil, nil
	b.up.mu.Unlock()
}

// A child that ends the pool's listen at once, every time, would have it
// reopened as fast as the pipe goes: the pool reopens it at most
// maxQuickReopens times in a row after it ended within quickEnd of being
// sent, and then not until a listener comes or goes (or the child
// restarts). A bound without a timer: nothing waits, nothing has to be
// stopped, and a listener change tries again at once. A listen that
// lived longer starts the count again, so a child whose streams end now
// and then always gets it back.
const (
	maxQuickReopens = 3
	quickEnd        = time.Second
)

func (b *backend) isModern() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hs != nil && b.hs.era == EraModern
}

// union is what the child's listeners ask for together, with the list
// changes its open legacy sessions were promised (deliverChange) that the
// child declares.
func (b *backend) union() filter {
	var u, promised filter
	for _, s := range b.sessions() {
		s.mu.Lock()
		if s.era == EraLegacy && !isClosed(s.closed) {
			promised.ToolsListChanged = promised.ToolsListChanged || s.promised.ToolsListChanged
			promised.PromptsListChanged = promised.PromptsListChanged || s.promised.PromptsListChanged
			promised.ResourcesListChanged = promised.ResourcesListChanged || s.promised.ResourcesListChanged
		}
		for _, l := range s.listens {
			if l.b == b {
				u.ToolsListChanged = u.ToolsListChanged || l.tools
				u.PromptsListChanged = u.PromptsListChanged || l.prompts
				u.ResourcesListChanged = u.ResourcesListChanged || l.resources
				u.ResourceSubscriptions = append(u.ResourceSubscriptions, l.uris...)
			}
		}
		s.mu.Unlock()
	}
	slices.Sort(u.ResourceSubscriptions)
	u.ResourceSubscriptions = slices.Compact(u.ResourceSubscriptions)
	if !promised.empty() {
		b.mu.Lock()
		hs := b.hs
		b.mu.Unlock()
		if hs != nil {
			promised = hs.honor(promised)
		}
		u.ToolsListChanged = u.ToolsListChanged || promised.ToolsListChanged
		u.PromptsListChanged = u.PromptsListChanged || promised.PromptsListChanged
		u.ResourcesListChanged = u.ResourcesListChanged || promised.ResourcesListChanged
	}
	return u
}

// promisesChanges reports whether the session is a legacy client promised
// list changes, which its modern child's upstream listen asks for (union).
func (s *session) promisesChanges() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.era == EraLegacy && !s.promised.empty()
}

// listsChange reports whether f asks for the list change method.
func (f filter) listsChange(method string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return f.ToolsListChanged
	case "notifications/prompts/list_changed":
		return f.PromptsListChanged
	case "notifications/resources/list_changed":
		return f.ResourcesListChanged
	}
	return false
}

func (f filter) empty() bool {
	return !f.ToolsListChanged && !f.PromptsListChanged && !f.ResourcesListChanged && len(f.ResourceSubscriptions) == 0
}

func (f filter) equal(g filter) bool {
	return f.ToolsListChanged == g.ToolsListChanged && f.PromptsListChanged == g.PromptsListChanged &&
		f.ResourcesListChanged == g.ResourcesListChanged && slices.Equal(f.ResourceSubscriptions, g.ResourceSubscriptions)
}

// within is the part of f that g asks for too; g's resources are sorted
// (union).
func (f filter) within(g filter) filter {
	out := filter{ToolsListChanged: f.ToolsListChanged && g.ToolsListChanged,
		PromptsListChanged:   f.PromptsListChanged && g.PromptsListChanged,
		ResourcesListChanged: f.ResourcesListChanged && g.ResourcesListChanged}
	for _, uri := range f.ResourceSubscriptions {
		if _, ok := slices.BinarySearch(g.ResourceSubscriptions, uri); ok {
			out.ResourceSubscriptions = append(out.ResourceSubscriptions, uri)
		}
	}
	return out
}

// coveredLocked is what the child watches for the pool now: what the
// current upstream listen, acknowledged, asks for.
func (b *backend) coveredLocked() filter {
	if b.up.p != nil && b.reqs.alive(b.up.p) {
		return b.up.f
	}
	return filter{}
}

// awaitUpstream tells a modern child's new listener when its
// acknowledgement goes: at once, promising promised, when the current
// upstream listen covers it; else once the child acknowledges the one
// that replaces it (wait: it waits among up.waiting). With none sent (it
// could not be), at once, promising what the current one covers.
func (b *backend) awaitUpstream(l *listener) (promised filter, wait bool) {
	want := l.filter()
	b.up.mu.Lock()
	defer b.up.mu.Unlock()
	promised = want.within(b.coveredLocked())
	if b.up.next != nil && !promised.equal(want) {
		b.up.waiting = append(b.up.waiting, l)
		return filter{}, true
	}
	return promised, false
}

// acknowledgeWaiting acknowledges the listeners that waited for an
// upstream listen, each promised what of its filter covered asks for
// (nil: all of it).
func acknowledgeWaiting(ls []*listener, covered *filter) {
	for _, l := range ls {
		promised := l.filter()
		if covered != nil {
			promised = promised.within(*covered)
		}
		l.s.acknowledge(l, promised)
	}
}

// syncUpstream makes the modern child's one upstream listen ask for what
// its listeners ask for: opened for the first, reopened when the union
// changes, closed (with one still waiting for its acknowledgement) after
// the last. A reopened listen replaces the current one only once the
// child acknowledges it (routeTagged); one the child refuses leaves the
// current one as it is, to be tried again at the next change (without the
// resource a refused one added alone, while it is asked for, and with the
// ones it added together one at a time: nextEnded). A change
// while one waits replaces the waiting one. A restarted child gets it
// again: its dead child's listens ended with it. One the child ends is
// opened again (upstreamEnded).
func (b *backend) syncUpstream() {
	if !b.isModern() {
		return
	}
	var end []*pending // the listens replaced, ended once up.mu is let go
	why := "the pool's listen was replaced"
	b.up.mu.Lock()
	want := b.union() // under up.mu: a stale union must not reopen what a later one closed
	// A refused resource is asked for again once nobody asks for it.
	b.up.refused = slices.DeleteFunc(b.up.refused, func(uri string) bool {
		_, asked := slices.BinarySearch(want.ResourceSubscriptions, uri)
		return !asked
	})
	want.ResourceSubscriptions = slices.DeleteFunc(want.ResourceSubscriptions, func(uri string) bool {
		_, refused := slices.BinarySearch(b.up.refused, uri)
		return refused
	})
	// Of the resources a refused listen added together, one at a time
	// (the first one not covered yet, with the rest of the union): the
	// child's refusal of that one names it (nextEnded).
	covered := b.coveredLocked()
	b.up.trying = slices.DeleteFunc(b.up.trying, func(uri string) bool {
		_, asked := slices.BinarySearch(want.ResourceSubscriptions, uri)
		_, has := slices.BinarySearch(covered.ResourceSubscriptions, uri)
		return !asked || has
	})
	if len(b.up.trying) > 1 {
		want.ResourceSubscriptions = slices.DeleteFunc(want.ResourceSubscriptions, func(uri string) bool {
			_, later := slices.BinarySearch(b.up.trying[1:], uri)
			return later
		})
	}
	if !want.empty() && b.watchesTools() {
		want.ToolsListChanged = true // for the hints; delivered only to the listeners that asked (deliverChange)
	}
	if b.up.p != nil && !b.reqs.alive(b.up.p) {
		b.up.p = nil // its child died, or ended it
	}
	if b.up.next != nil && !b.reqs.alive(b.up.next) {
		b.up.dropNextLocked() // refused, or its child died
	}
	var p *pending
	switch {
	case want.empty():
		why = "the pool's last listener left"
		end = append(end, b.up.p, b.up.next)
		b.up.p = nil
		b.up.dropNextLocked()
	case b.up.next != nil && b.up.nf.equal(want):
	case b.up.p != nil && b.up.f.equal(want):
		end = append(end, b.up.next) // the change went back before the child acknowledged it
		b.up.dropNextLocked()
	default:
		params, _ := json.Marshal(map[string]any{"notifications": want, "_meta": b.p.ownMeta()})
		id := b.p.nextID.Add(1)
		p = &pending{id: id, method: "subscriptions/listen", received: time.Now(), reply: make(chan []byte, 1),
			line: jsonrpc.AppendRequest(nil, id, "subscriptions/listen", params), open: true}
		end = append(end, b.up.next)
		b.up.dropNextLocked()
		b.up.next, b.up.nf = p, want
	}
	// The listeners gone wait no more; one that moved to another child
	// (moveListens) neither: it is promised all it asked, which that child
	// is asked for (as when its child dies). With no listen to wait for,
	// every one left is covered by the current one.
	var moved []*listener
	b.up.waiting = slices.DeleteFunc(b.up.waiting, func(l *listener) bool {
		if l.s.boundTo(l, b) {
			return false
		}
		if l.s.listening(l) {
			moved = append(moved, l)
		}
		return true
	})
	waiting, covered := b.stopWaitingLocked()
	b.up.mu.Unlock()
	acknowledgeWaiting(moved, nil)
	acknowledgeWaiting(waiting, &covered)
	for _, old := range end {
		if old != nil {
			b.finish(old, outcome{kind: endByClient, reason: why})
		}
	}
	if p == nil {
		return
	}
	// A later call that replaced p meanwhile ended it: send refuses it
	// (errAlreadyEnded), or the child is told to cancel it.
	if err := b.send(p); err != nil {
		b.up.mu.Lock()
		if b.up.next == p {
			b.up.dropNextLocked()
		}
		waiting, covered := b.stopWaitingLocked()
		b.up.mu.Unlock()
		acknowledgeWaiting(waiting, &covered)
		if !errors.Is(err, errAlreadyEnded) {
			b.log.Debug("the pool's listen was not sent; the one open stays", "err", err)
		}
		return
	}
	// Its listeners wait no longer than a request may (unacknowledged);
	// none if it was settled meanwhile.
	timeout := b.requestTimeout()
	b.up.mu.Lock()
	if b.up.next == p {
		b.up.ackTimer = b.p.afterFunc(timeout, func() { b.unacknowledged(p, timeout) })
	}
	b.up.mu.Unlock()
}

// unacknowledged gives up on p, an upstream listen sent to replace the
// current one, if the child has not acknowledged it within timeout (the
// server's request timeout) nor answered it: the listeners that waited
// for it are acknowledged with what the current one covers, as when the
// child refuses it, and p is cancelled at the child; the next listener
// change tries again. Without this, a child that takes a listen and
// never says so would leave them unacknowledged for ever. Once p was
// acknowledged, replaced or ended, it does nothing.
func (b *backend) unacknowledged(p *pending, timeout time.Duration) {
	b.up.mu.Lock()
	if b.up.next != p {
		b.up.mu.Unlock()
		return
	}
	b.up.dropNextLocked()
	waiting, covered := b.stopWaitingLocked()
	b.up.mu.Unlock()
	b.log.Warn("the child did not acknowledge the pool's listen in time; its listeners are promised what the open one covers",
		"after", timeout, "listeners", len(waiting))
	acknowledgeWaiting(waiting, &covered)
	b.finish(p, outcome{kind: endByClient, reason: "the child did not acknowledge the pool's listen in time"})
}

// stopWaitingLocked takes the listeners that wait for an upstream listen
// when none is on its way, with what the current one covers.
func (b *backend) stopWaitingLocked() ([]*listener, filter) {
	if b.up.next != nil || len(b.up.waiting) == 0 {
		return nil, filter{}
	}
	waiting := b.up.waiting
	b.up.waiting = nil
	return waiting, b.coveredLocked()
}

// watchesTools reports whether the pool itself needs the child's tool
// changes: it trusts the child's annotations, whose hints a change makes
// stale (forgetHintsIf), and the child declares that it sends them.
func (b *backend) watchesTools() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cfg.TrustAnnotations && b.hs != nil && b.hs.honor(filter{ToolsListChanged: true}).ToolsListChanged
}

// listenCancelled ends the pool's upstream listen that a child's
// notifications/cancelled names: on stdio, how a 2026-07-28 server tears
// a subscriptions/listen down (basic/patterns/cancellation). It ends as
// one the child answered does (upstreamEnded). It reports whether id
// named one: only a modern child has one open, and a modern server
// cancels nothing else; a legacy child's notifications/cancelled
// withdraws a question of its own.
func (b *backend) listenCancelled(id []byte) bool {
	poolID, ok := jsonrpc.ParseUint(id)
	if !ok {
		return false
	}
	p := b.reqs.lookup(poolID)
	if p == nil || !p.open {
		return false
	}
	b.finish(p, outcome{kind: endByChild, reason: "the child ended the pool's listen"})
	return true
}

// upstreamEnded is told how a listen of the pool's ended (finish). When
// the child ended the current one itself (it answered it, or cancelled
// it) the pool opens it again, if listeners remain: else they would get
// nothing until the next listener change. After maxQuickReopens quick
// ends in a row it stops, with a warning. A child's death starts the
// count again: the restarted child gets the listen when it is ready
// (becomeReady).
func (b *backend) upstreamEnded(p *pending, kind endKind) {
	b.nextEnded(p, kind)
	switch kind {
	case endAnswered, endUnusable, endByChild: // the child ended it
	case endChildGone:
		b.up.mu.Lock()
		b.up.quick = 0
		b.up.mu.Unlock()
		return
	default:
		return // the pool ended it (replaced, its last listener left, the pool stops)
	}
	b.up.mu.Lock()
	current := b.up.p == p
	if current {
		b.up.p = nil
		if time.Since(p.received) < quickEnd {
			b.up.quick++
		} else {
			b.up.quick = 0
		}
	}
	quick := b.up.quick
	b.up.mu.Unlock()
	switch {
	case !current: // a replaced one, or a reopen the child refused: the current one stays
	case quick > maxQuickReopens:
		b.log.Warn("the child keeps ending the pool's listen at once; it is opened again when a listener comes or goes",
			"times", quick)
	default:
		b.syncUpstream()
	}
}

// nextEnded acknowledges the listeners that waited for p when p, an
// upstream listen the child had not acknowledged, ended: each is promised
// what the current one covers if the child refused p (answered or
// cancelled it), else (its child died) all it asked for: the restarted
// child is asked for it.
// A refused p that asked for resources the current one does not is
// likely refused for one of those (one a session asked for, which the
// child does not have), so that the listeners waiting get the rest it is
// asked again at once. One it alone added is the cause: left out until
// nobody asks for it (syncUpstream). Of several it added (nothing was
// covered yet: the first listen, or after the child ended the current
// one) none can be blamed: they are tried one at a time (trying), each
// blamed only if its own try is refused. Bounded: each try settles one
// of them, and one with nothing new is not sent.
func (b *backend) nextEnded(p *pending, kind endKind) {
	refused := kind == endAnswered || kind == endUnusable || kind == endByChild
	b.up.mu.Lock()
	if b.up.next != p {
		b.up.mu.Unlock()
		return
	}
	b.up.dropNextLocked()
	var added []string
	if refused {
		covered := b.coveredLocked()
		for _, uri := range b.up.nf.ResourceSubscriptions {
			if _, ok := slices.BinarySearch(covered.ResourceSubscriptions, uri); !ok {
				added = append(added, uri)
			}
		}
		switch len(added) {
		case 0:
		case 1:
			b.up.refused = append(b.up.refused, added[0])
			slices.Sort(b.up.refused)
			b.up.trying = slices.DeleteFunc(b.up.trying, func(uri string) bool { return uri == added[0] })
		default:
			b.up.trying = append(b.up.trying, added...)
			slices.Sort(b.up.trying)
			b.up.trying = slices.Compact(b.up.trying)
		}
		if len(added) > 0 {
			b.up.mu.Unlock()
			b.log.Debug("the child refused the pool's listen; asked again without what it added, or with one of them at a time", "resources", added)
			b.syncUpstream() // the waiting listeners wait for that one
			return
		}
	}
	waiting, covered := b.stopWaitingLocked()
	b.up.mu.Unlock()
	if refused {
		acknowledgeWaiting(waiting, &covered)
	} else {
		acknowledgeWaiting(waiting, nil)
	}
}

// routeTagged fans a modern child's notification for the pool's upstream
// listen out to the listeners that asked for it, each tagged with its own
// id (the child's acknowledgement stays here: the pool acknowledges each
// listen itself). The first message tagged with a replacing listen, its
// acknowledgement, makes it the one delivered, acknowledges the listeners
// that waited for it, and ends the one it replaces: read in the child's
// order, each change comes once, on the old listen before it and on the
// new one after. It reports whether the notification was tagged at all.
func (b *backend) routeTagged(msg *jsonrpc.Message) bool {
	tag := subscriptionOf(msg.Raw, *msg)
	if tag == nil {
		return false
	}
	// The child's tools changed, whichever of the pool's listens says so:
	// their hints may be stale (forgetting them costs only a retry).
	b.forgetHintsIf(msg.Method)
	poolID, ok := jsonrpc.ParseUint(tag)
	var replaced *pending
	var waited []*listener
	var covered filter
	b.up.mu.Lock()
	var more bool // resources still to try one at a time (nextEnded)
	if ok && b.up.next != nil && b.up.next.id == poolID {
		replaced = b.up.p
		b.up.p, b.up.f = b.up.next, b.up.nf
		b.up.dropNextLocked()
		waited, b.up.waiting = b.up.waiting, nil
		covered = b.up.f // their union, less the resources the child refused
		more = len(b.up.trying) > 0
	}
	current := ok && b.up.p != nil && b.up.p.id == poolID
	b.up.mu.Unlock()
	acknowledgeWaiting(waited, &covered) // before what the child sends on it from now on
	if replaced != nil {
		b.finish(replaced, outcome{kind: endByClient, reason: "the pool's listen was replaced"})
	}
	if more {
		b.syncUpstream() // the next of them
	}
	if !current || msg.Method == "notifications/subscriptions/acknowledged" {
		return true // an upstream listen that was replaced, or its acknowledgement
	}
	params := msg.Params.Of(msg.Raw)
	uri, _ := jsonrpc.String(params, jsonrpc.Member(params, "uri"))
	for _, s := range b.sessions() {
		s.deliverChange(b, msg, uri, true)
	}
	return true
}

// subscriptionOf is a notification's subscriptionId tag, or nil.
func subscriptionOf(line []byte, m jsonrpc.Message) []byte {
	if m.Kind != jsonrpc.KindNotification || !m.Params.Present() {
		return nil
	}
	if !m.Meta.Present() || line[m.Meta.Start] != '{' {
		return nil
	}
	meta := m.Meta.Of(line)
	tag := jsonrpc.Member(meta, metaSubscriptionID)
	if !tag.Present() {
		return nil
	}
	return tag.Of(meta)
}
