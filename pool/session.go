package pool

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// session is one client connection. Its reader (the front door's goroutine)
// alone calls handle (over HTTP, each POST's goroutine calls it for its
// message). What the client is sent is offered without ever
// blocking: written at once by the offering goroutine when nothing is
// queued and the client takes it (sessionOut.tryWrite), else queued in out,
// a bounded queue its writer drains. A client that stops reading is
// evicted instead of stalling the child's reader. Over HTTP, what answers
// a request goes to the POST that carried it (exchange.go) and the rest
// to the session's sink.
type session struct {
	// Set by newSession, with what the front door's sessionSetup says,
	// before the session is registered; never changed after: read by any
	// goroutine without a lock.
	p           *Pool
	id          string
	srv         *server
	transport   string
	ownChild    bool // share "session": this session has its own child
	connectedAt time.Time
	peerPID     int
	closeConn   func(*session) // ends the transport; call closeTransport
	attached    bool           // the transport is the client's own pipes, handed over by its shim
	hb          *handBack      // how the session goes back to its shim when the pool stops; nil: it does not
	ledger      *ledger        // its requests in flight, in memory its shim shares; nil: none
	keepState   stateKeeper    // tells the shim what to keep for a resume; nil: nothing
	receiver    func() bool    // can the client be sent a request now (HTTP: an open stream); nil: always
	resumed     string         // "run R session S" a reattached client came from
	began       time.Time      // when a reattached client's session began, if its shim said
	sink        outSink        // takes each message for the client itself, with its facts (HTTP); nil: out and its writer do
	stateless   bool           // a server's stateless HTTP session: its requests' own _meta, never the session's, speak for their clients
	out         chan outLine   // to the client; never closed (senders may race with close)
	closed      chan struct{}  // closed by close

	closeOnce sync.Once
	connOnce  sync.Once

	handingBack atomic.Bool // handBackSessions is ending the session: writes to the client end at once (writeDeadline)
	evicting    atomic.Bool // the session is being evicted: counted and logged once (evictOnce)
	noInput     atomic.Bool // the client closed its input: it can answer no question (unanswerable)
	closing     atomic.Bool // close has begun: no question is recorded for it now (askable)
	// handingOn is the pool id of the held request replayHeld took from
	// the queue, until a request table takes it (handedOn), with the mark
	// of a cancel that came first (handOnByUser, handOnByClient).
	handingOn atomic.Uint64

	owedMu sync.Mutex // guards owed; taken after sessionOut.mu, never before
	owed   []int32    // ledger slots released once what was queued before them is written (owe)

	stream atomic.Pointer[sessionOut] // a byte stream's output (startOutput); nil for HTTP
	part   atomic.Pointer[partition]  // the roots partition its requests go to (server.backendFor)
	// subChanges counts the session's own changes of subs (subscription),
	// each made under mu: a release moveStakes decided counts only if none
	// came since (backend.send), and a late drop of a lost stake only if
	// the session did not subscribe to its URI again since (subSince).
	subChanges atomic.Uint64
	// meta is the _meta members a modern child needs, for a legacy
	// client (adoptInitialize): its requests carry them to whichever of
	// its server's children speaks 2026-07-28, whatever the child it met
	// at its initialize spoke (forwardCounted, fitLine). nil for a modern
	// client.
	meta atomic.Pointer[[]byte]

	mu              sync.Mutex             // guards the fields below
	inflight        map[string]*pending    // client's original id bytes -> request
	bridged         map[string]bridgedCall // by inflight's key: a legacy client's call past its first round of a child's questions (inputbridge.go)
	inflightBytes   int                    // sum of the inflight requests' lines (fair shares)
	era             string
	clientName      string
	clientVersion   string
	protocolVersion string
	caps            clientCaps
	logs            bool
	subs            map[string]*backend  // subscribed resource URIs
	subSince        map[string]uint64    // of each URI in subs the session subscribed to, subChanges as it did (dropSubscriptionSince)
	subTurns        map[string]*subTurn  // the change of each URI between its decision and its count (awaitSubTurnLocked)
	listens         map[string]*listener // open subscriptions/listen, by request id (listen.go)
	lastActive      time.Time
	quiet           chan struct{} // closed when inflight empties and nothing is answering, for closeWhenIdle
	answering       int           // answers between their request's end and their delivery (answer)
	closeReason     error
	roots           []string  // declared roots, sorted (roots.go)
	rootNames       rootNames // and the name it gave each
	rootsAsk        string    // id of the pool's roots/list to the client, while unanswered
	rootsOwed       bool      // the client's roots are to be asked once it can receive a request (streamOpened)
	held            heldQueue // messages waiting for that answer
	changeHeld      bool      // held has a roots/list_changed: one more is dropped (holdForRoots)
	inputDone       bool      // the client closed its input: it is asked nothing more (inputEnded)
	replaying       bool      // the held messages are being handled: new ones still wait their turn
	handingOnKey    string    // the key of the request handingOn names (keyOf)
	heldBytes       int       // the bytes of held, bounded by Options.MaxSessionBytes
	heldRefused     bool      // holdForRoots refused a message past its bounds: logged once
	logLevel        int       // logSeverity of its logging/setLevel (loglevel.go)
	logMember       []byte    // that level as the _meta member a modern child is sent (logsAsked)
	// Its logging/setLevels its child answers, until they end (tryLevel).
	levelTries []levelTry
	// What a legacy client's initialize result said of list changes
	// holds for the session's life, whatever its child's era later
	// (deliverChange): those a legacy child declared (promised) are
	// bridged from a modern child that replaces it (union); none was
	// offered by a modern child (toldNone: legacyView), and a legacy
	// child that replaces it sends them in vain.
	promised filter
	toldNone bool
}

// sessionSetup is what a front door says of a session's transport. It is
// complete before the session exists: newSession copies it into the
// session before any other goroutine can see the session.
type sessionSetup struct {
	transport string
	peerPID   int
	closeConn func(*session) // ends the transport, once
	attached  bool           // the client's own pipes (an attached shim)
	hb        *handBack      // the way back to its shim, for a resumable session
	ledger    *ledger        // the shim's ledger of its requests in flight
	keepState stateKeeper    // what the shim keeps for a resume
	receiver  func() bool    // whether the client can be sent a request now
	resumed   string         // "run R session S", for a session its shim resumes
	began     time.Time      // when the session its shim resumes began (wire.Resume.Began)
	sink      outSink        // takes each message for the client (HTTP), instead of a queue and a writer
	stateless bool           // a server's stateless HTTP session (httpfront.go)
	// bind, when set, makes receiver and sink for the session, before
	// the session is shared: a transport whose client is a value made
	// with the session (a legacy HTTP session) is complete before its
	// server can reach it.
	bind func(*session) (receiver func() bool, sink outSink)
}

// statelessClient is what a stateless HTTP session shows as its client
// (with Modern as its version): the clients are its requests'.
const statelessClient = "stateless HTTP"

// clientCaps are the client capabilities that decide what a child is told
// and which client may answer its questions.
type clientCaps struct {
	sampling, roots bool
	// elicitationForm, elicitationURL: elicitation in form mode ({},
	// {"form":{}}: 2025-11-25, an empty object is form mode only) and in
	// URL mode ({"url":{}}). Elicitation in any mode is either.
	elicitationForm, elicitationURL bool
	// rootsChange: the roots answered to the child may change (a
	// session's own child follows its session's roots), so the child is
	// told listChanged and hears notifications/roots/list_changed.
	rootsChange bool
}

// clientCapsOf reads the capabilities a client declared, from the JSON
// object c (initialize's capabilities, _meta's clientCapabilities).
func clientCapsOf(c []byte) clientCaps {
	caps := clientCaps{sampling: jsonrpc.Member(c, "sampling").Present(), roots: jsonrpc.Member(c, "roots").Present()}
	if sp := jsonrpc.Member(c, "elicitation"); sp.Present() {
		e := sp.Of(c)
		caps.elicitationURL = jsonrpc.Member(e, "url").Present()
		// Form mode when named, or when no mode is (the empty object, or
		// a 2025-06-18 client's, whose revision has form mode alone).
		caps.elicitationForm = jsonrpc.Member(e, "form").Present() || !caps.elicitationURL
	}
	return caps
}

// has reports whether capability ("sampling", "elicitation" in any mode,
// "elicitation.form", "elicitation.url", "roots") was declared.
func (c clientCaps) has(capability string) bool {
	switch capability {
	case "sampling":
		return c.sampling
	case "elicitation":
		return c.elicitationForm || c.elicitationURL
	case "elicitation.form":
		return c.elicitationForm
	case "elicitation.url":
		return c.elicitationURL
	case "roots":
		return c.roots
	}
	return false
}

// newSession registers a session of server name, made as setup says.
// The caller runs its reader (handle), sets its output (startOutput, or
// HTTP reads out) and calls close when done.
func (p *Pool) newSession(name string, setup sessionSetup) (*session, error) {
	srv, err := p.server(name)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	s := &session{
		p: p, srv: srv, transport: setup.transport, peerPID: setup.peerPID, connectedAt: now, lastActive: now,
		id:        "s" + strconv.FormatUint(p.nextSession.Add(1), 10),
		closeConn: setup.closeConn, attached: setup.attached, hb: setup.hb, ledger: setup.ledger,
		keepState: setup.keepState, receiver: setup.receiver, resumed: setup.resumed, sink: setup.sink,
		began:     resumedBegan(setup.began, now),
		stateless: setup.stateless,
		ownChild:  srv.config().Share == ShareSession,
		closed:    make(chan struct{}),
		inflight:  map[string]*pending{},
		subs:      map[string]*backend{},
		subSince:  map[string]uint64{},
	}
	if setup.bind != nil {
		s.receiver, s.sink = setup.bind(s)
	}
	if s.sink == nil {
		s.out = make(chan outLine, p.opts.SessionQueue)
	}
	if s.stateless {
		s.era, s.protocolVersion, s.clientName, s.clientVersion = EraModern, Modern, statelessClient, Modern
	}
	if err := srv.join(s); err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		srv.leave(s, time.Time{})
		return nil, ErrPoolClosed
	}
	p.sessions[s] = struct{}{}
	p.mu.Unlock()
	p.emit(&Event{Kind: EventSessionOpened, Server: name, Session: s.id, Transport: s.transport, PID: s.peerPID,
		ClientName: s.clientName, ClientVersion: s.clientVersion})
	return s, nil
}

// handle processes one message from the client. It never blocks on
// another session or on a child's I/O; it may wait for the child's
// handshake when the client asks for it (initialize, server/discover).
func (s *session) handle(line []byte) { s.handleFrom(line, nil) }

// handleFrom is handle for a message an exchange carried (x, when not
// nil, gets what answers it).
func (s *session) handleFrom(line []byte, x *exchange) {
	msg, err := jsonrpc.ParseStrict(line) // handleMessage asks Strict
	if err != nil {
		s.p.parseErrors.Add(1)
		kind := errInvalid
		var id []byte
		if errors.Is(err, jsonrpc.ErrParse) {
			kind = errParse
		} else if msg.ID.Present() {
			id = append([]byte(nil), msg.IDBytes()...)
		}
		s.replyErrorTo(x, id, newError(kind, false, "", err))
		return
	}
	jsonrpc.OneLine(line)
	s.handleMessage(&msg, x)
}

// handleMessage is handleFrom for a message its caller parsed.
func (s *session) handleMessage(msg *jsonrpc.Message, x *exchange) {
	if err := jsonrpc.Strict(msg); err != nil {
		// What reaches a child must be what the pool classified.
		s.p.parseErrors.Add(1)
		var id []byte
		if msg.Kind == jsonrpc.KindRequest {
			id = append([]byte(nil), msg.IDBytes()...)
		}
		s.replyErrorTo(x, id, newError(errInvalid, false, "", err))
		return
	}
	s.mu.Lock()
	s.lastActive = time.Now()
	s.mu.Unlock()
	if msg.Kind != jsonrpc.KindResponse && msg.Method != "initialize" && msg.Method != "ping" {
		held, refusal := s.holdForRoots(msg, x)
		if refusal != nil && msg.Kind == jsonrpc.KindRequest {
			s.replyErrorTo(x, msg.IDBytes(), refusal)
		}
		if held || refusal != nil {
			return // its roots decide which child it goes to (roots.go)
		}
	}
	s.dispatch(msg, x, nil)
}

// dispatch takes a message the session classified, by its kind; a, when
// not nil, is a held request's arrival (roots.go).
func (s *session) dispatch(msg *jsonrpc.Message, x *exchange, a *arrival) {
	switch msg.Kind {
	case jsonrpc.KindRequest:
		s.onRequest(msg, x, a)
	case jsonrpc.KindNotification:
		s.onNotification(msg)
	case jsonrpc.KindResponse:
		s.onResponse(msg)
	}
}

func (s *session) replyError(id []byte, err error) { s.replyErrorTo(nil, id, err) }

// onRequest takes a client request; x, when not nil, is the exchange
// that carried it, which gets what answers it; a, when not nil, is its
// arrival, taken as it was read and held: the pending made for it takes
// it over.
func (s *session) onRequest(msg *jsonrpc.Message, x *exchange, a *arrival) {
	id := append([]byte(nil), msg.IDBytes()...)
	params := msg.Params.Of(msg.Raw)
	switch {
	case x != nil && x.stateless: // checked at the door
	case s.modernRequest(msg): // a 2026-07-28 request: checked as the HTTP front door checks it
		if bad := checkModern(nil, msg.Raw, *msg, false); bad != nil {
			s.replyErrorTo(x, id, bad.err)
			return
		}
	case msg.Method != "initialize" && msg.Method != "ping" && !s.choseLegacy():
		// Of neither era: no initialize chose legacy for the session, and
		// it lacks the _meta of 2026-07-28 (basic/versioning: how the
		// client opens decides). Served as legacy, it would get what
		// neither era's client expects.
		s.replyErrorTo(x, id, newError(errNotInitialized, false, "", msg.Method))
		return
	}
	if poolMayAnswer[msg.Method] && s.refusedInFlightID(x, id) {
		return
	}
	switch msg.Method {
	case "initialize":
		s.initialize(waitOf(msg, id, x, a), params)
		return
	case "ping":
		s.replyTo(x, id, []byte("{}"))
		return
	case "server/discover":
		s.noteModern(msg)
		w := waitOf(msg, id, x, a)
		if _, hs, err := s.handshaken(w); err != nil {
			w.refuse(s, err)
		} else {
			w.answer(s, hs.discoverResult(s.offersTasks()))
		}
		return
	case "logging/setLevel":
		b, err := s.backend(x)
		if err != nil {
			s.replyErrorTo(x, id, err)
			return
		}
		w := waitOf(msg, id, x, a)
		hs, err := s.awaitHandshakeFor(b, w)
		switch {
		case err == nil && s.setLogLevel(b, hs, w, params):
			return // answered
		case err != nil && (w.p != nil || errors.Is(err, errGivenBack)):
			w.refuse(s, err) // as its wait ended (handed back: unanswered, handback.go)
			return
		case !w.goOn():
			return // a stop or a user's cancel ended its wait, and answered it
		}
		// The child answers it (or, failed before it came, the pool
		// refuses it as it refuses any request), owed in the ledger
		// slot its wait held (goOn); refused before its forward took
		// the slot, it is owed until the refusal is written.
		s.forward(msg, id, x, w.at)
		s.releaseWhenWritten(w.at.takeSlot())
		return
	case "resources/subscribe", "resources/unsubscribe":
		if s.subscription(msg, id, params, x, a) {
			return
		}
	case "tools/call", "prompts/get", "resources/read":
		if s.resumeMRTR(msg, id, x) {
			return
		}
	case "subscriptions/listen":
		s.noteModern(msg)
		w := waitOf(msg, id, x, a)
		if refusal := longListenURI(params); refusal != nil {
			w.refuse(s, refusal)
		} else {
			s.listen(w, params)
		}
		s.releaseWhenWritten(w.at.takeSlot()) // not opened: owed until its refusal is written (an open listen took the slot: oweListen)
		return
	}
	s.forward(msg, id, x, a)
}

// poolMayAnswer are the methods whose requests the pool answers itself,
// or may (a subscribe that changes nothing at the child, a setLevel the
// pool keeps): no request table of a child's is there to refuse one under
// an id already in flight, as forward refuses one it sends on, so the
// session refuses it first. Answered, the client would get two answers
// for one id.
var poolMayAnswer = map[string]bool{"initialize": true, "ping": true, "server/discover": true,
	"logging/setLevel": true, "resources/subscribe": true, "resources/unsubscribe": true, "subscriptions/listen": true}

// refusedInFlightID refuses request id, carried by x, when a request of
// the session under its key is in flight (at a child, held for its
// roots, or an open listen), and reports whether it did.
func (s *session) refusedInFlightID(x *exchange, id []byte) bool {
	s.mu.Lock()
	dup := s.idInFlightLocked(keyOf(id, x)) || s.held.byKey[keyOf(id, x)] != nil
	s.mu.Unlock()
	if dup {
		s.replyErrorTo(x, id, newError(errDuplicateID, false, "", id))
	}
	return dup
}

// idInFlightLocked says whether a request of the session under key is in
// its table of requests in flight, or is an open listen: a request under
// it is refused. Those held for the session's roots are in held.byKey,
// which heldRefusalLocked and refusedInFlightID check as well.
func (s *session) idInFlightLocked(key string) bool {
	_, dup := s.inflight[key]
	_, listening := s.listens[key]
	return dup || listening
}

// subscription reference-counts resource subscriptions so the child sees
// one subscribe and one unsubscribe however many sessions ask: a change
// in what the session holds is forwarded for the backend to count as it
// queues it (backend.countLocked), and answered by the pool when the
// child need not hear it. It reports whether it handled the request.
func (s *session) subscription(msg *jsonrpc.Message, id, params []byte, x *exchange, a *arrival) bool {
	uri, ok := jsonrpc.String(params, jsonrpc.Member(params, "uri"))
	if !ok {
		return false // let the child explain the bad params
	}
	add := msg.Method == "resources/subscribe"
	if refusal := longSubscriptionURI(msg.Method, uri); add && refusal != nil {
		s.replyErrorTo(x, id, refusal) // never held: an unsubscribe of it is no change, answered below
		return true
	}
	b, err := s.backend(x)
	if err != nil {
		s.replyErrorTo(x, id, err)
		return true
	}
	s.mu.Lock()
	turn := s.awaitSubTurnLocked(uri)
	defer s.endSubTurn(uri, turn)
	holder, had := s.subs[uri]
	if refusal := s.overSubscribedLocked(add && !had, 1); refusal != nil {
		s.mu.Unlock()
		s.replyErrorTo(x, id, refusal)
		return true
	}
	// A subscribe again, or an unsubscribe of what it does not hold, is
	// no change: it leaves a late drop of a stake lost meanwhile its due.
	//
	// The shim is told as the session's subscriptions change, before the
	// child answers, and told again by whatever takes the change back
	// (undoSubscription, dropSubscription), rather than once the child
	// accepted: the client's {} is written after the shim's line, so a
	// crash never leaves a client told it is subscribed with a shim that
	// does not keep it. A crash before the child's refusal leaves the
	// shim one its client was never answered (the next pool answers it
	// as may have run, and subscribes it again: a refusal then drops it).
	kept := noKept
	if add != had || had && holder != b {
		n := s.subChanges.Add(1)
		if add {
			s.subs[uri], s.subSince[uri] = b, n
		} else {
			delete(s.subs, uri)
			delete(s.subSince, uri)
		}
		kept = s.keptSubscriptionLocked(uri, add) // before its answer can be written
	}
	s.mu.Unlock()
	kept()
	if had && holder != b {
		// Held at a child the session no longer routes to (of roots it
		// left, or one stopped or replaced since): released there; a
		// subscribe goes on to the child it routes to now.
		holder.changeSubscription(s, uri, false)
		if !add {
			s.replyTo(x, id, []byte("{}"))
			return true
		}
	} else if add == had {
		s.replyTo(x, id, []byte("{}")) // no change: the session held it, or did not
		return true
	}
	if !s.forwardCounted(msg, id, x, &subChange{uri: uri, add: add, holder: s, turn: turn}, a) {
		s.undoSubscription(b, uri, add)
	}
	return true
}

// subTurn is one change of a URI by a session, from its decision (under
// the session's mu) until its backend counted it (send, under the
// backend's mu) or it was refused before. An HTTP client's POSTs run at
// once: two changes of one URI decided in one order and counted in the
// other would leave the session holding the URI with no stake at the
// child (which may be unsubscribed, its updates lost), or a stake for a
// session that holds nothing (the child subscribed for nobody). A change
// of a URI waits for the one before it to be counted, and no lock is
// held meanwhile.
type subTurn struct {
	done chan struct{}
	once sync.Once
}

// end lets the next change of the turn's URI be decided; it is called
// once the change was counted, or will never be.
func (t *subTurn) end() {
	if t != nil {
		t.once.Do(func() { close(t.done) })
	}
}

// awaitSubTurnLocked waits, mu released meanwhile, until no change of
// uri by this session is between its decision and its count, and takes
// the turn for the change about to be decided. The wait is short: the
// turn ends as its change is counted, before anything is written to the
// child.
func (s *session) awaitSubTurnLocked(uri string) *subTurn {
	for {
		t := s.subTurns[uri]
		if t == nil {
			break
		}
		s.mu.Unlock()
		<-t.done
		s.mu.Lock()
		if s.subTurns[uri] == t {
			delete(s.subTurns, uri)
		}
	}
	if s.subTurns == nil {
		s.subTurns = map[string]*subTurn{}
	}
	t := &subTurn{done: make(chan struct{})}
	s.subTurns[uri] = t
	return t
}

// endSubTurn ends t, uri's turn, if its change has not ended it yet
// (refused before it was counted, or no change to count), and forgets it.
func (s *session) endSubTurn(uri string, t *subTurn) {
	t.end()
	s.mu.Lock()
	if s.subTurns[uri] == t {
		delete(s.subTurns, uri)
	}
	s.mu.Unlock()
}

// undoSubscription puts back what the session held of uri before a
// change the pool refused (it was answered with why), and tells its shim
// (if uri changed meanwhile, as its stakes moved, the shim has what it
// holds now). A session that closed meanwhile released what it held
// then, without uri: its stake, if the backend counts one, is released
// now.
func (s *session) undoSubscription(b *backend, uri string, add bool) {
	s.mu.Lock()
	closed, undone := isClosed(s.closed), false
	if !closed {
		if add && s.subs[uri] == b {
			delete(s.subs, uri)
			delete(s.subSince, uri)
			undone = true
		} else if _, held := s.subs[uri]; !add && !held {
			s.subs[uri] = b
			undone = true
		}
	}
	kept := noKept
	if undone || closed {
		kept = s.keptSubscriptionLocked(uri, !add)
	}
	s.mu.Unlock()
	kept()
	if closed && !add {
		b.changeSubscription(s, uri, false)
	}
}

// dropSubscription forgets a subscription of uri the session holds
// nothing of on b (the child refused it, the pool gave up on it, or b
// could not take it), and tells its shim: every way a subscription is
// lost goes through here, so that a resume never takes up one the
// session did not hold.
func (s *session) dropSubscription(b *backend, uri string) {
	s.dropSubscriptionSince(b, uri, math.MaxUint64) // whenever it subscribed
}

// dropSubscriptionSince is dropSubscription for a stake the backend took
// back when the session's subChanges was gen: unless the session
// subscribed to uri again since (under mu, as every change is), which a
// late drop would undo, forgetting a stake counted since. Its other
// changes since, and a subscribe again that changed nothing (it still
// held uri), leave the drop its due: else the session would keep uri
// with no stake in it, its next subscribe of it taken for no change.
func (s *session) dropSubscriptionSince(b *backend, uri string, gen uint64) {
	s.mu.Lock()
	kept := noKept
	if s.subs[uri] == b && s.subSince[uri] <= gen {
		delete(s.subs, uri)
		delete(s.subSince, uri)
		kept = s.keptSubscriptionLocked(uri, false)
	}
	s.mu.Unlock()
	kept()
}

// initialize answers a legacy client from the child's cached handshake:
// the pool initialized the child once, itself. One that waited for the
// handshake was in flight on the child meanwhile, and ends as any
// request does (initwait.go).
//
// Its shim is told the params before the client gets the answer (an
// attached shim's State line is written by then): a pool killed after
// the answer leaves a shim that resumes the session initialized, and one
// killed between the two an initialize owed, which the next pool answers
// with its result (session.answerLostInitialize). Told after, a kill
// between the two left a client that had initialized with a session the
// next pool took for one that had not.
func (s *session) initialize(w *handshakeWait, params []byte) {
	result, err := s.adoptInitialize(params, w)
	// A wait a stop or a cancel answered is not kept; one they answer
	// from here on is, and a resume initializes a session its client
	// would initialize again.
	if err == nil && !w.ended() {
		s.keep(wire.State{Initialize: params, InitializeID: keptID(w.id)})
	}
	switch {
	case w.p != nil:
		if !w.p.b.endWait(w.p, result, err) {
			return // another ending (a stop, a user's cancel) answered it
		}
	case err != nil:
		s.replyErrorTo(w.x, w.id, err)
	default:
		s.replyTo(w.x, w.id, result)
	}
}

// keptID is id as a State line carries it: one longer than a ledger slot
// holds is not carried (no ledger lists it).
func keptID(id []byte) string {
	if len(id) > wire.LedgerMaxID {
		return ""
	}
	return string(id)
}

// adoptInitialize makes the session what the client's initialize params
// declare (era, client, capabilities, protocol version) and returns the
// initialize result. A resumed session adopts its earlier initialize
// without answering it again (w nil); a client's waits for the child's
// handshake as w.
func (s *session) adoptInitialize(params []byte, w *handshakeWait) (json.RawMessage, error) {
	var req struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"` // only checked here: clientCapsOf reads them
		ClientInfo      Implementation             `json:"clientInfo"`
	}
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, newError(errBadParams, false, "", "initialize", err)
	}
	// What the client declared first: a child started for this handshake
	// is told the capabilities of the client it was started for.
	caps := clientCapsOf(mustRaw(params, "capabilities"))
	s.mu.Lock()
	s.clientName, s.clientVersion = req.ClientInfo.Name, req.ClientInfo.Version
	s.caps = caps
	s.mu.Unlock()
	hs, err := s.srv.handshake(s, w)
	if err != nil {
		// The client chose legacy all the same: its next requests are
		// legacy ones (answered, or refused for what failed this one,
		// as its server disabled), and a resumed session whose
		// initialize could not be adopted now is served once its child
		// is.
		s.mu.Lock()
		s.era = EraLegacy
		s.mu.Unlock()
		return nil, err
	}
	// For whichever child is modern, this one or one a config change or
	// a restart gives the session later; stored before the era that
	// makes forwardCounted read it.
	declared, _ := json.Marshal(rawOrEmpty(mustRaw(params, "capabilities")))
	if !s.offersTasks() {
		declared = untaskedCaps(declared) // a shared child's tasks are offered to no client (tasks.go)
	}
	info, _ := json.Marshal(req.ClientInfo)
	meta := []byte(`"` + metaProtocolVersion + `":"` + Modern + `","` + metaClientCapabilities + `":` +
		string(declared) + `,"` + metaClientInfo + `":` + string(info))
	s.meta.Store(&meta)
	s.mu.Lock()
	s.era = EraLegacy
	s.promised, s.toldNone = hs.legacyChanges(), hs.era == EraModern
	result := hs.initializeResult(req.ProtocolVersion, s.offersTasks())
	var v struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(result, &v)
	s.protocolVersion = v.ProtocolVersion
	s.mu.Unlock()
	if !s.asksRoots() {
		s.srv.move(s) // its partition is known now: no roots to ask
	}
	// Again, now that the client has named itself: recorders upsert.
	s.p.emit(&Event{Kind: EventSessionOpened, Server: s.srv.name, Session: s.id, Transport: s.transport,
		PID: s.peerPID, ClientName: req.ClientInfo.Name, ClientVersion: req.ClientInfo.Version})
	return result, nil
}

func mustRaw(obj []byte, key string) json.RawMessage {
	sp := jsonrpc.Member(obj, key)
	if !sp.Present() {
		return nil
	}
	return json.RawMessage(sp.Of(obj))
}

// choseLegacy reports whether the client's initialize made the session
// legacy.
func (s *session) choseLegacy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.era == EraLegacy
}

// modernRequest reports whether msg is a 2026-07-28 request of the
// session (modernIn): in a session an initialize made legacy, _meta
// naming a legacy revision leaves it the session's. The session's era,
// behind its lock, is asked only of such a request.
func (s *session) modernRequest(msg *jsonrpc.Message) bool {
	if !metaNamesLegacy(msg.Raw, *msg) {
		return modernRequest(msg.Raw, *msg)
	}
	return modernIn(msg.Raw, *msg, s.choseLegacy())
}

// noteModern records what a modern request says about its client, in a
// session no initialize made legacy. A stateless session's requests
// speak for their own clients only (exchange.go), and so do a legacy
// session's modern requests (2026-07-28 basic/versioning: initialize
// selects legacy semantics for the session, and a request carrying the
// modern _meta is served on its own): nothing of theirs becomes the
// session's.
func (s *session) noteModern(msg *jsonrpc.Message) {
	if s.stateless || !msg.Meta.Present() {
		return
	}
	m := msg.Meta.Of(msg.Raw)
	v, ok := jsonrpc.String(m, jsonrpc.Member(m, metaProtocolVersion))
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.era == EraLegacy || (s.era == EraModern && s.protocolVersion == v) {
		return
	}
	s.era, s.protocolVersion = EraModern, v
	var info Implementation
	if sp := jsonrpc.Member(m, metaClientInfo); sp.Present() && json.Unmarshal(sp.Of(m), &info) == nil {
		s.clientName, s.clientVersion = info.Name, info.Version
	}
	if sp := jsonrpc.Member(m, metaClientCapabilities); sp.Present() {
		s.caps = clientCapsOf(sp.Of(m))
	}
}

// requestCaps are the capabilities a 2026-07-28 request declared: its
// own _meta's (a stateless exchange read them already), else, for a
// request that names none, the session's latest declaration. A modern
// client may declare different ones request by request.
func (s *session) requestCaps(msg *jsonrpc.Message, x *exchange) clientCaps {
	if x != nil && x.stateless {
		return x.caps
	}
	if msg.Meta.Present() {
		m := msg.Meta.Of(msg.Raw)
		if sp := jsonrpc.Member(m, metaClientCapabilities); sp.Present() {
			return clientCapsOf(sp.Of(m))
		}
	}
	return s.capabilities()
}

// forward sends a client request to the child with a pool-unique id. x,
// when not nil, is the exchange that carried it: the request's record
// keeps it, and everything that answers the request goes there. a, when
// not nil, is its arrival (a request held for the session's roots): its
// pool id, arrival time and ledger slot become the request's.
func (s *session) forward(msg *jsonrpc.Message, id []byte, x *exchange, a *arrival) {
	s.forwardCounted(msg, id, x, nil, a)
}

// forwardCounted is forward of a request that changes what the session
// subscribes to (sub; nil for any other request). It reports whether the
// request was admitted: false when it was refused (and answered why).
func (s *session) forwardCounted(msg *jsonrpc.Message, id []byte, x *exchange, sub *subChange, a *arrival) (admitted bool) {
	s.p.requests.Add(1)
	s.mu.Lock()
	era := s.era
	s.mu.Unlock()
	switch {
	case era != EraLegacy:
		s.noteModern(msg)
		s.mu.Lock()
		era = s.era
		s.mu.Unlock()
	case modernIn(msg.Raw, *msg, true):
		era = EraModern // a 2026-07-28 request of a legacy session: served as one, the session's other requests legacy still
	}
	b, err := s.backend(x)
	if err != nil {
		s.replyErrorTo(x, id, err)
		return false
	}
	fwd, err := b.untasked(msg) // a shared child's tasks are offered to no client (tasks.go)
	if err != nil {
		s.replyErrorTo(x, id, err)
		return false
	}
	// A legacy client's request carries the _meta a modern child needs
	// when its child is one; made for a child not known to be one (it is
	// legacy, or still starting), it is bare, and fitted as it is
	// written if the child turns out modern (fitLine).
	var meta []byte
	legacy, bare := false, false
	if m := s.meta.Load(); m != nil && era == EraLegacy {
		legacy = true
		if b.readyModern() {
			meta = *m
		} else {
			bare = true
		}
	}
	poolID, received := a.take(s.p)
	logs, meta := s.logsAsked(msg, legacy, meta)
	in := rewriteRequest(fwd, poolID, meta)
	carrier := msg.Method == "logging/setLevel" && logs != 0
	if carrier {
		in.line = carrierLine(in.line) // the child is sent the pool's level, not the session's (sendLevel)
	}
	p := &pending{id: poolID, sess: s, b: b, origID: id, x: x, method: msg.Method, name: in.name, line: in.line,
		origToken: in.origToken, received: received, modern: era == EraModern, sub: sub, logs: logs, bare: bare}
	if p.modern {
		p.caps = s.requestCaps(msg, x)
	}
	if in.origToken != nil {
		p.token = poolID
	}

	key := keyOf(id, x)
	var heldFor time.Duration
	s.mu.Lock()
	if a != nil {
		heldFor = a.timeout // set while it was held: the server's as it came (holdForRoots)
	}
	if a != nil && s.held.inHand == a {
		s.held.inHand = nil // the replay's: it counts as any request in flight from here, if it is admitted
	}
	if s.idInFlightLocked(key) {
		s.mu.Unlock()
		s.replyErrorTo(x, id, newError(errDuplicateID, false, "", id))
		return false
	}
	if isClosed(s.closed) {
		s.mu.Unlock()
		return false
	}
	if refusal := s.overLimitLocked(len(p.line)); refusal != nil {
		s.mu.Unlock()
		s.replyErrorTo(x, id, refusal)
		return false
	}
	p.slot.Store(a.takeSlot()) // owed since it was read, if it was held; else trackLocked takes one
	s.trackLocked(key, id, p)
	s.mu.Unlock()

	ev := Event{Kind: EventRequestReceived, Time: p.received, Server: s.srv.name, Session: s.id, PoolID: poolID,
		Method: p.method, Name: p.name, OriginalID: string(id), Size: len(msg.Raw), Payload: b.capture(msg.Raw)}
	if x != nil && x.stateless {
		ev.ClientName, ev.ClientVersion = x.client.Name, x.client.Version
	}
	s.p.emit(&ev)
	// A request held for its session's roots goes on under the timeout
	// it came under, from its arrival, not under the server's as it goes
	// on (a config applied meanwhile), as a call's retry goes on with its
	// call's.
	b.reqs.carry(p, heldFor, 0)
	send := b.send
	if carrier {
		send = b.sendLevel
	}
	switch err := send(p); {
	case err == nil:
	case errors.Is(err, errNotForChild):
		b.answerCounted(p)
	case handingOnCancelled(err) != nil:
		b.finish(p, handOnCancel(handingOnCancelled(err).r, s.srv.name, p.method))
		return false
	case errors.Is(err, errPastDeadline):
		b.expire(p) // never written
		return false
	default: // (one ended as it was sent was answered by whoever ended it: finish does nothing)
		b.finish(p, outcome{kind: endRefused, rpcErr: asRPCError(err, s.srv.name)})
		return false
	}
	return true
}

func (s *session) onNotification(msg *jsonrpc.Message) {
	switch msg.Method {
	case "notifications/initialized":
		// The pool initialized the child itself, once; now it may ask the
		// client which roots its requests are partitioned by.
		s.askRootsOrOwe()
		return
	case "notifications/roots/list_changed":
		// The child's roots are its partition's, never this client's:
		// ask again, and move the session for its next requests.
		s.askRootsOrOwe()
		return
	case "notifications/cancelled":
		params := msg.Params.Of(msg.Raw)
		rid := jsonrpc.Member(params, "requestId")
		if !rid.Present() {
			return
		}
		key := string(rid.Of(params))
		s.mu.Lock()
		p := s.inflight[key]
		if p != nil {
			s.untrackLocked(key, p)
		}
		s.mu.Unlock()
		if p == nil {
			s.endListen(key)
		}
		if p != nil {
			reason, _ := jsonrpc.String(params, jsonrpc.Member(params, "reason"))
			if reason == "" {
				reason = "cancelled by the client"
			}
			p.b.cancel(p, reason)
		}
		return
	}
	// Other notifications (progress for a child's question, ones the
	// pool does not know) concern the child as a whole.
	b, err := s.srv.backendFor(s)
	if err != nil {
		return
	}
	if msg.Method == "notifications/progress" && !s.ownChild && !b.reqs.progressAsked(s, progressKey(progressTokenIn(msg))) {
		// Progress for a question this session was not asked (another
		// session's, its token guessed): not its to report.
		s.p.log.Debug("dropping progress for a question this session was not asked", "server", s.srv.name, "session", s.id)
		return
	}
	b.sendNotification(s, notificationForChild(msg))
}

// onResponse routes the client's answer to a child's request.
func (s *session) onResponse(msg *jsonrpc.Message) {
	if s.answerRoots(msg) {
		return
	}
	if s.answerRound(msg) {
		return // an answer to a modern child's question (inputbridge.go)
	}
	for _, b := range s.srv.backendsOf(s) {
		if b.answerChild(s, msg) {
			return
		}
	}
	s.p.log.Debug("client answered an unknown request", "session", s.id, "id", string(msg.IDBytes()))
}

// deliverResponse hands the client the answer to p, its request id,
// carried by x (nil: the session's output); code is the answer's JSON-RPC
// error code, 0 for a result. batch, when set, is the child's reader's:
// the answer may wait there for the rest of its read (outbatch.go).
func (s *session) deliverResponse(p *pending, id []byte, x *exchange, line []byte, code int, batch *outBatch) {
	s.answerIn(batch, x, line, code, s.ending(p, id, x))
}

// ending takes p, the client's request id carried by x, out of the
// session's requests in flight, and counts the answer the caller gives
// next (answer). It returns p's ledger slot, still taken: the answer
// releases it once written.
func (s *session) ending(p *pending, id []byte, x *exchange) (slot int32) {
	key := keyOf(id, x)
	s.mu.Lock()
	if s.inflight[key] == p {
		slot = s.dropLocked(key, p)
	} else {
		slot = p.slot.Swap(0) // a wait for its child's handshake, owed outside inflight (registerWait); else none
	}
	if !p.wait { // a wait's answer was counted as it was claimed (finish)
		s.answering++
	}
	s.mu.Unlock()
	return slot
}

// answerComing counts an answer under way (answering) for a wait for
// its child's handshake that is about to be claimed (finish).
func (s *session) answerComing() {
	s.mu.Lock()
	s.answering++
	s.mu.Unlock()
}

// answerGone takes back answerComing's count: the wait was another's to
// end, or ended with nothing to answer.
func (s *session) answerGone() {
	s.mu.Lock()
	s.answering--
	s.quietLocked()
	s.mu.Unlock()
}

// answer gives the client line, the answer to a request the caller ended
// (ending), and then counts it answered.
//
// Until then the session is not idle: a client that closed its input
// (halfclose.go), or a session handed back to its shim (handback.go), is
// closed only once its last answer is written or queued, not between its
// request's end and its answer, which would lose the answer. And the
// request's ledger slot is released only once the answer is written to
// the client: a pool that dies with the answer still in its memory
// leaves the request owed, so the next pool answers it.
func (s *session) answer(x *exchange, line []byte, code int, slot int32) {
	s.answerIn(nil, x, line, code, slot)
}

// answerIn is answer for an answer the child's reader handles, whose
// batch is batch (nil: none): the answer may wait there for the rest of
// its read (outbatch.go).
func (s *session) answerIn(batch *outBatch, x *exchange, line []byte, code int, slot int32) {
	if testHookAnswering != nil {
		testHookAnswering(s)
	}
	switch {
	case x != nil:
		x.respond(line, code)
		s.ledger.release(slot)
	case batch.holds(s, line) && batch.queue(s, line, slot): // the batch's flush writes it
	default:
		s.deliverOwing(line, slot) // (a batch's full queue: this evicts the session)
	}
	s.mu.Lock()
	s.answering--
	s.quietLocked()
	s.mu.Unlock()
}

// answerError is answer with err.
func (s *session) answerError(x *exchange, id []byte, err error, slot int32) {
	e := asRPCError(err, s.srv.name)
	s.answer(x, jsonrpc.AppendErrorResponse(nil, id, e), e.Code, slot)
}

// testHookAnswering, when set, runs between a request's end and its
// answer.
var testHookAnswering func(*session)

// testHookWaitClaimed, when set, runs as soon as a wait for a child's
// handshake is claimed by the ending that answers it (finish).
var testHookWaitClaimed func(*session)

// answerIfCurrent is deliverResponse for an answer the pool makes up for
// a call whose own answer already ended it (a round of questions, held
// for the client): it is delivered only while p is still what the
// session has in flight under id. A client that cancelled the call, or
// gave its id to a new request, gets nothing.
func (s *session) answerIfCurrent(p *pending, id []byte, x *exchange, line []byte, code int) {
	key := keyOf(id, x)
	var slot int32
	s.mu.Lock()
	current := s.inflight[key] == p
	if current {
		slot = s.dropLocked(key, p)
		s.answering++
	}
	s.mu.Unlock()
	if current {
		s.answer(x, line, code, slot)
	}
}

// forget takes p, the client's request id carried by x, out of the
// session's requests in flight: it ended unanswered (its client
// cancelled it), and x's caller, if any, waits for an answer no more.
func (s *session) forget(p *pending, id []byte, x *exchange) {
	key := keyOf(id, x)
	s.mu.Lock()
	if s.inflight[key] == p {
		s.untrackLocked(key, p)
	} else {
		s.ledger.release(p.slot.Swap(0)) // a wait for its child's handshake (registerWait): handed back, or its session ended
	}
	if p.wait {
		s.answering-- // counted as it was claimed (finish)
		s.quietLocked()
	}
	s.mu.Unlock()
	if x != nil {
		x.unanswered()
	}
}

// overLimitLocked says why one more request of size bytes would take this
// session past its fair share of the server: its count of requests in
// flight (overCountLocked), or the bytes they hold in the pool. A single
// request is always admitted when the session has nothing else in flight
// (the framing limit bounds it), so the byte limit refuses only piling
// up.
func (s *session) overLimitLocked(size int) *jsonrpc.Error {
	if refusal := s.overCountLocked(); refusal != nil {
		return refusal
	}
	if limit := s.p.opts.MaxSessionBytes; s.inflightBytes > 0 && s.inflightBytes+size > limit {
		return s.shareError(errSessionBytes, s.inflightBytes, size, limit)
	}
	return nil
}

// overCountLocked refuses one more request past the session's share of
// requests in flight (Options.MaxSessionInFlight): those in its table and
// those held for its roots answer (heldQueue.counted), in flight from
// their arrival.
func (s *session) overCountLocked() *jsonrpc.Error {
	if limit := s.p.opts.MaxSessionInFlight; len(s.inflight)+s.held.counted() >= limit {
		return s.shareError(errSessionBusy, limit)
	}
	return nil
}

// overSubscribedLocked refuses n more subscriptions (when adding) past the
// session's share (Options.MaxSessionSubscriptions), counting each
// resource it subscribed to, each listen it holds open, and each resource
// of those listens.
func (s *session) overSubscribedLocked(adding bool, n int) *jsonrpc.Error {
	if !adding {
		return nil
	}
	held := len(s.subs)
	for _, l := range s.listens {
		held += 1 + len(l.uris)
	}
	if limit := s.p.opts.MaxSessionSubscriptions; held+n > limit {
		return s.shareError(errSessionSubs, held, n, limit)
	}
	return nil
}

// statelessShare is each of a session's -32004s (shareError) as a
// server's stateless session says it: every stateless client of the
// server shares that session's limits, so "other sessions are not
// affected" would tell such a client that other clients are not.
var statelessShare = map[poolError]poolError{
	errSessionBusy: errStatelessBusy, errSessionBytes: errStatelessBytes, errSessionSubs: errStatelessSubs,
}

// shareError is the -32004 of a session past its share, kind
// (errSessionBusy, errSessionBytes, errSessionSubs) filled with args; a
// server's stateless session's names the server and says its stateless
// clients share the limit (statelessShare).
func (s *session) shareError(kind poolError, args ...any) *jsonrpc.Error {
	if twin, ok := statelessShare[kind]; ok && s.stateless {
		return newError(twin, false, "", append([]any{s.srv.name}, args...)...)
	}
	return newError(kind, false, "", args...)
}

// trackLocked and untrackLocked are the only writers of inflight and
// inflightBytes, so that the two always agree. key is keyOf(id, p's
// exchange).
func (s *session) trackLocked(key string, id []byte, p *pending) {
	if old := s.inflight[key]; old != nil {
		s.inflightBytes -= len(old.line)
		if old != p { // a retry in its place: the next one has a slot of its own
			s.ledger.release(old.slot.Swap(0))
		}
	}
	s.inflight[key] = p
	s.inflightBytes += len(p.line)
	if s.ledger != nil && p.slot.Load() == 0 {
		p.slot.Store(s.ledger.take(id))
	}
}

func (s *session) untrackLocked(id string, p *pending) {
	s.ledger.release(s.dropLocked(id, p))
}

// dropLocked is untrackLocked for a request about to be answered: it
// returns p's ledger slot, still taken, for the answer to release.
func (s *session) dropLocked(id string, p *pending) (slot int32) {
	delete(s.inflight, id)
	delete(s.bridged, id)
	s.inflightBytes -= len(p.line)
	s.quietLocked()
	if len(p.line) > keepBuf {
		s.p.releasedLarge() // only signals: no I/O under s.mu
	}
	return p.slot.Swap(0)
}

// ledgerWritten tells the session's ledger (ledger.go) that p is being
// written to a child; ledgerTaken that it is not after all. A nil
// session (the pool's own requests) has no ledger.
func (s *session) ledgerWritten(p *pending) {
	if s != nil {
		s.ledger.written(p.slot.Load())
	}
}

func (s *session) ledgerTaken(p *pending) {
	if s != nil {
		s.ledger.taken(p.slot.Load())
	}
}

// busyLocked reports whether the session has requests in flight or
// answers on their way to the client (answer).
func (s *session) busyLocked() bool { return len(s.inflight) > 0 || s.answering > 0 }

func (s *session) quietLocked() {
	if !s.busyLocked() && s.quiet != nil {
		close(s.quiet)
		s.quiet = nil
	}
}

// deliver offers a message to the client without blocking, with what
// its maker knows of it (f: a sink routes by it, and parses nothing). A
// full queue means the client stopped reading: it is evicted, so nobody
// else waits.
func (s *session) deliver(line []byte, f outFacts) {
	if s.sink != nil {
		s.sink(line, f)
		return
	}
	s.deliverOwing(line, 0)
}

// deliverOwing is deliver for the answer to a request whose ledger slot
// is slot: released once the answer is written (a queued line carries
// it: outLine). An answer's facts are none (outFacts).
func (s *session) deliverOwing(line []byte, slot int32) {
	if s.sink != nil {
		s.sink(line, outFacts{})
		s.ledger.release(slot)
		return
	}
	o := s.stream.Load()
	if o != nil && o.tryWrite(s, line, slot) {
		return
	}
	select {
	case s.out <- outLine{line: line, slot: slot}:
		if o == nil {
			o = s.stream.Load() // an output set meanwhile may have looked at the queue already
		}
		if o != nil {
			o.kick(s)
		}
	default:
		s.evictFull()
	}
}

// queueLine queues line for the client behind what is queued, as
// deliver does, but never writes it, nor waits: its caller may hold
// s.mu (session.keepLocked). It returns what is left to do once mu is
// released: start the writer, or evict a session whose queue is full.
func (s *session) queueLine(line []byte) (after func()) {
	select {
	case s.out <- outLine{line: line}:
		return func() {
			if o := s.stream.Load(); o != nil { // else the output, once set, looks at the queue
				o.kick(s)
			}
		}
	default:
		return s.evictFull
	}
}

// evictFull evicts s, whose queue is full, unless it closed. Its callers
// run in goroutines of the pool's and in others (an HTTP handler's): the
// end (endEvicted) is started in a goroutine Close waits for, or not at
// all once Close waits, which it does once it closed s itself.
func (s *session) evictFull() {
	if isClosed(s.closed) || !s.evictOnce("queued", len(s.out)) {
		return
	}
	if testHookEvicting != nil {
		testHookEvicting(s)
	}
	s.p.goBeforeWait(s.endEvicted)
}

// testHookEvicting, when set, runs as evictFull is about to end the
// session it evicts.
var testHookEvicting func(*session)

var errEvicted = errors.New("evicted: the client stopped reading its messages")

// evictOnce reports whether the caller is the first to evict s, counting
// and logging the eviction then: every delivery that finds the queue full
// before the session has closed would otherwise count it again.
func (s *session) evictOnce(detail ...any) bool {
	if !s.evicting.CompareAndSwap(false, true) {
		return false
	}
	s.p.evicted.Add(1)
	s.p.log.Warn("evicting a session that stopped reading", append([]any{"session", s.id, "server", s.srv.name}, detail...)...)
	return true
}

// endEvicted closes an evicted session, then asks for its memory back:
// what a client that stopped reading piled up (the requests it kept
// sending, their answers) is garbage now, though no single line of it
// was large, and an idle pool would not collect it for minutes.
func (s *session) endEvicted() {
	s.close(errEvicted)
	s.p.releasedLarge()
}

// owe notes slot, the ledger slot of a request whose answer is queued
// or written already, for the writer to release once what is queued
// is written: a writer that counted it has the answer queued or written
// (releaseOwed).
func (s *session) owe(slot int32) {
	if slot <= 0 {
		return
	}
	s.owedMu.Lock()
	s.owed = append(s.owed, slot)
	s.owedMu.Unlock()
}

// releaseWhenWritten releases slot, the ledger slot of a request the
// pool answered itself (a held one that no pending took over: roots.go),
// once what is queued for the client, its answer with it, is written: a
// pool killed before that leaves the request owed. The session's writer
// releases it as it does the slots of queued answers (owe).
func (s *session) releaseWhenWritten(slot int32) {
	if slot <= 0 {
		return
	}
	o := s.stream.Load()
	if o == nil {
		s.ledger.release(slot)
		return
	}
	s.owe(slot)
	o.kick(s)
}

// owedCount is how many answers' slots wait for their answers' writes.
func (s *session) owedCount() int {
	s.owedMu.Lock()
	defer s.owedMu.Unlock()
	return len(s.owed)
}

// releaseOwed releases the first n slots owed, counted (owedCount)
// before a writer wrote out everything queued and cut short: their
// answers are written.
func (s *session) releaseOwed(n int) {
	s.owedMu.Lock()
	defer s.owedMu.Unlock()
	for _, slot := range s.owed[:n] {
		s.ledger.release(slot)
	}
	s.owed = append(s.owed[:0], s.owed[n:]...)
}

// close ends the session: every request it has in flight is cancelled at
// the child (their late answers reach nobody), its stake in the child's own
// requests and subscriptions is released, and the transport is closed.
func (s *session) close(reason error) {
	s.closeOnce.Do(func() {
		// Before its questions are looked for (withdrawQuestions): none is
		// recorded after them, unwithdrawn.
		s.closing.Store(true)
		told := false // a listen's closing lines are queued for the output
		if reason != nil && !errors.Is(reason, errEvicted) {
			told = s.closeListens(reason) // the client is still there: while its output takes them
			told = s.dropRounds(reason) || told
			told = s.withdrawQuestions(errAskedClientLeft, reason.Error()) || told
		}
		if testHookClosing != nil {
			testHookClosing(s)
		}
		s.mu.Lock()
		s.closeReason = reason
		close(s.closed)
		inflight := make([]*pending, 0, len(s.inflight))
		for _, p := range s.inflight {
			inflight = append(inflight, p)
		}
		clear(s.inflight)
		s.inflightBytes = 0
		s.quietLocked()
		subs := s.subs
		s.subs, s.subSince = map[string]*backend{}, map[string]uint64{}
		led := s.ledger
		s.mu.Unlock()
		// A graceful end's last answers, and closing lines for listens,
		// are written out before the transport closes (flushQueued bounds
		// the wait), not dropped or cut mid-line.
		if o := s.stream.Load(); o != nil && (flushes(reason) || told) {
			done := s.p.writingOut(o.conn)
			s.p.wg.Go(func() {
				defer done()
				s.finishOutput(o) // the last answers first, and their slots released
				led.close()
			})
		} else {
			s.closeTransport()
			s.dropQueued()
			led.close()
		}
		why := "client disconnected"
		if reason != nil {
			why = reason.Error()
		}
		for _, p := range inflight {
			p.b.cancel(p, why)
		}
		s.endHolds(why) // a stdio client's: its retries could come on this connection alone
		s.endListens()
		bySub := map[*backend][]string{}
		for uri, b := range subs {
			bySub[b] = append(bySub[b], uri)
		}
		for _, b := range s.srv.backendsOf(s) {
			b.detach(s, bySub[b])
			delete(bySub, b)
		}
		for b, uris := range bySub {
			b.detach(s, uris)
		}
		s.p.mu.Lock()
		delete(s.p.sessions, s)
		s.p.mu.Unlock()
		s.srv.leave(s, quietSince(reason))
		s.p.emit(&Event{Kind: EventSessionClosed, Server: s.srv.name, Session: s.id, Err: why})
	})
}

// closeAll closes sessions at once, not one after another, and returns
// when all are closed: a session's own child (share "session") stops with
// it, which may take the stop's graces (seconds), and a token rotation or
// an expiry that ends 64 such sessions must not take minutes.
func closeAll(sessions []*session, reason func(*session) error) {
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() { s.close(reason(s)) })
	}
	wg.Wait()
}

// flushes reports whether a session closed for reason writes out what
// is queued for its client before its transport closes: a graceful end,
// whose requests were answered rather than cancelled (a half-close, a
// hand-back, a removed server's session once idle: closeWhenIdle), owes
// the client those answers.
func flushes(reason error) bool {
	return drained(reason) || errors.Is(reason, errServerRemoved)
}

// endsForGood reports whether a stdio session closed for reason ends for a
// reason no other pool would undo (its server removed from the config,
// its client's message left unfinished too long or past the pool's
// budget): its shim is told (a Farewell naming it, or Welcome.Ended when
// it comes back) and exits saying so. A relayed session's stream that
// ends with no Farewell is a pool that went away, whose session the shim
// resumes with the next: such an end must not look like that.
func endsForGood(reason error) bool {
	return errors.Is(reason, errServerRemoved) || errors.Is(reason, errUnfinishedLine) ||
		errors.Is(reason, errUnfinishedBudget)
}

// dropQueued empties the queue of a session that will write no more: its
// lines are nobody's now. A backlog that matters (a client that stopped
// reading while its answers piled up) is handed back to the system at
// once, not when the runtime next gets round to it.
func (s *session) dropQueued() {
	n := 0
	for {
		select {
		case q := <-s.out:
			n += len(q.line)
		default:
			if n > keepBuf {
				s.p.releasedLarge()
			}
			return
		}
	}
}

// closeWhenIdle closes the session once nothing of its is in flight (or
// held for its roots' answer).
func (s *session) closeWhenIdle(reason error) {
	for {
		s.mu.Lock()
		busy := s.busyLocked() || s.rootsAsk != "" || s.replaying
		if busy && s.quiet == nil {
			s.quiet = make(chan struct{})
		}
		q := s.quiet
		s.mu.Unlock()
		if !busy {
			break
		}
		select {
		case <-q:
		case <-s.closed:
			return
		}
	}
	s.close(reason)
}

// closeTransport ends the transport, once.
func (s *session) closeTransport() {
	s.connOnce.Do(func() {
		if s.closeConn != nil {
			s.closeConn(s)
		}
	})
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (s *session) alive() bool { return !isClosed(s.closed) }

// askable reports whether the session's client can still answer a
// child's question: it is open, not closing, and its input is (a look at
// a channel and flags: no lock, no wait).
func (s *session) askable() bool { return s.alive() && !s.closing.Load() && !s.noInput.Load() }

// canAnswer reports whether the client can be asked a child's request
// (method, with params) now.
func (s *session) canAnswer(method string, params []byte) bool {
	declared, receives := s.answerable(method, params)
	return declared && receives
}

// answerable reports whether the client declared what a child's request
// (method, with params) needs, and whether it can be sent a request now
// (an HTTP session with no stream open cannot: the child would wait for
// nothing).
func (s *session) answerable(method string, params []byte) (declared, receives bool) {
	need := questionNeeds(method, params) // before the lock: it reads params
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.era == EraModern {
		return false, false // 2026-07-28 has no server-to-client requests: MRTR carries them (mrtr.go)
	}
	return s.declaresLocked(method, need), s.receivesLocked()
}

// declaresLocked reports whether the client declared what a child's
// request of method needs (need: questionNeeds).
func (s *session) declaresLocked(method, need string) bool {
	switch method {
	case "sampling/createMessage":
		return s.caps.sampling
	case "elicitation/create":
		return s.caps.has(need)
	case "roots/list":
		return false // the pool answers it from the child's partition (roots.go)
	}
	return true
}

// receivesLocked reports whether the client can be sent a request now: a
// stdio client always; an HTTP one only while its GET stream is open.
func (s *session) receivesLocked() bool { return s.receiver == nil || s.receiver() }

func (s *session) lastActiveAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastActive
}

func (s *session) info() SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SessionInfo{ID: s.id, Server: s.srv.name, ClientName: s.clientName, ClientVersion: s.clientVersion,
		ProtocolVersion: s.protocolVersion, Transport: s.transport, ConnectedAt: s.connectedAt,
		LastActiveAt: s.lastActive, InFlight: len(s.inflight) + len(s.held.byID), PID: s.peerPID, Attached: s.attached,
		ReattachedFrom: s.resumed, BeganAt: s.began, Stateless: s.stateless}
}

// testHookClosing, when set, runs in close once the session's rounds and
// questions are ended, before it is marked closed.
var testHookClosing func(*session)
