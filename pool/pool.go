package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// Options tune a Pool. The zero value (or nil) gives the defaults.
type Options struct {
	// Logger receives the pool's logs; nil discards them.
	Logger *slog.Logger
	// Record receives every event, in order, in batches a few
	// milliseconds after they happened (not on the hot path), and all of
	// them by the time Close or Handover returns. It must not block: the
	// history store enqueues and counts drops.
	Record func(Event)
	// RedactText redacts a child's stderr lines before an error quotes
	// them to the session whose own child it was (share "session"): a
	// child may print a token it was given, or log a request with its
	// credentials. A shared child's stderr, written while it served
	// every session, is never quoted to one; nor is any child's when
	// RedactText is nil: the error points to `switchboard status`.
	RedactText func(string) string
	// MaxMessageBytes bounds one JSON-RPC message in either direction.
	// Default 64 MiB.
	MaxMessageBytes int
	// SessionQueue is the number of messages a session may have waiting to
	// be written to its client before it is evicted. Default 4096.
	SessionQueue int
	// EvictAfter evicts a session whose client has not accepted a write for
	// this long. Default 30 s.
	EvictAfter time.Duration
	// StartOn, when set, forks every child on one OS thread, which is what
	// lets Handover carry children over an exec (see StartOn).
	StartOn StartOn
	// Carried are the children an earlier pool handed over (Handover):
	// the first Apply adopts those whose server starts the same process
	// and stops the others.
	Carried *Carried
	// StopGrace is how long a stopping pool lets the requests in flight of
	// the sessions it hands back to their shims finish, and their answers
	// be written. Default DefaultStopGrace.
	StopGrace time.Duration
	// HandshakeTimeout bounds a child's answer to server/discover or
	// initialize. Default 60 s (npx may download the server first).
	HandshakeTimeout time.Duration
	// RootsWait bounds how long clients' requests wait for a new child
	// told of roots to ask for them (roots/list), while none of its
	// server's children was seen to: a server such as server-filesystem
	// asks once initialized, and a request it takes before it has its
	// answer runs with its own folders, not the client's. Once a child
	// of the server asked at start, the next wait up to twice as long
	// as it took (at least RootsWait, at most HandshakeTimeout); once one
	// did not ask in time, the next do not wait, until one asks at start
	// (an ask within a call counts within 5 RootsWait of initialized,
	// from a child that was not waited for). Default 1 s; negative: no
	// child is waited for.
	RootsWait time.Duration
	// MaxPending bounds the requests waiting on one backend. Default 65536.
	MaxPending int
	// MaxSessionInFlight bounds one session's requests in flight, so that
	// one client cannot fill a child's MaxPending and starve the others:
	// past it only that session gets -32004. Its requests held for its
	// answer to the pool's roots/list count too. Default MaxPending/8.
	MaxSessionInFlight int
	// MaxSessionBytes bounds the bytes one session's requests in flight
	// hold in the pool (a request waits in memory until its child answers,
	// for a retry after a crash): past it only that session gets -32004.
	// Default 2 * MaxMessageBytes, so one largest message always fits.
	MaxSessionBytes int
	// MaxSessionSubscriptions bounds one session's subscriptions (each
	// resource of its resources/subscribe, each listen it holds open and
	// each resource of those), so that one client cannot grow the child's
	// and the pool's subscription tables, and what a restarted child is
	// sent again, without end: past it only that session gets -32004.
	// Default 4096.
	MaxSessionSubscriptions int
	// MaxRootsChildren bounds the children one shared server runs at once,
	// one for each set of client roots, so that a client changing its
	// roots over and over cannot start child after child: a new set of
	// roots past it first stops a child no session is in any more (however
	// recently started; one that no call runs on first), and when every
	// child has sessions, its requests get -32004. It bounds the children
	// of a share "session" server too, one for each session: past it a new
	// session's requests get -32004 until one of those sessions ends.
	// Default 32.
	MaxRootsChildren int
	// RunID names this pool's run to attached shims (Welcome.Run), which
	// give it back when they resume their session with a later pool.
	RunID string
	// Unanswered lists the requests a session of an earlier run had in
	// flight when that pool went away (from its history), with the PID of
	// the session's shim, so that a resumed session's client gets their
	// at-most-once errors: the pool gives them only to a shim that is
	// that process (lostRequests). Nil: none are known.
	Unanswered func(ctx context.Context, run, session string) (Owed, error)
	// CapturePayloads, when positive, adds up to this many bytes of each
	// request and response to its events (redaction is the recorder's job).
	CapturePayloads int
	// ClientInfo is how the pool introduces itself to children.
	ClientInfo Implementation
	// Restart tunes crash-loop detection and backoff.
	Restart RestartPolicy
	// WarmupGrace is how long a freshly started shared child is kept even
	// when its sessions leave sooner than its idleTimeout allows: starting
	// an npx server costs seconds, and a client that reconnects right away
	// should find it warm. Default 1 min; negative means none.
	WarmupGrace time.Duration
	// HTTPToken, when set, returns the bearer token every HTTP front-door
	// request must carry (401 without it); it is called per request, so a
	// rotated token applies at once. Nil means no token (tests).
	HTTPToken func() string
	// HTTPAllowedOrigins are browser origins allowed besides the
	// listener's own (http.allowedOrigins in the config).
	HTTPAllowedOrigins []string
	// ConfigProblem, when set, says why the servers the pool runs are not
	// what the config file lists (it does not load), or nil: a session
	// refused for an unknown server is told, since the server it names
	// may be in the file. Called without the pool's locks held.
	ConfigProblem func() error
	// QuestionGrace is how long a child's question (sampling, elicitation)
	// asked of a legacy HTTP session waits for its client to open a GET
	// stream again once its stream ended: a client resuming with
	// Last-Event-ID is asked it again; past the grace it is asked of
	// another session that can answer it, or the child gets -32006, as
	// if the client had ended its session. Default DefaultQuestionGrace.
	QuestionGrace time.Duration
	// MaxLocalSessions caps the connections to the local socket open at
	// once (shims and their sessions, and connections that have not said
	// hello yet): each holds descriptors and memory, and a local process
	// opening connection after connection would otherwise take every
	// descriptor the pool has. Past it a new connection is refused in its
	// Welcome. Default 4096.
	MaxLocalSessions int
	// MaxUnfinishedBytes bounds the memory the local sessions' unfinished
	// lines hold together, counted from a line's first keepBuf (1 MiB)
	// unfinished, as the size of the buffer it needs: each session may
	// hold up to MaxMessageBytes for unfinishedLineTimeout, and thousands
	// of sessions each doing so would take all the machine's memory. A
	// session whose line would take the pool past it is closed, for good.
	// Default 8 * MaxMessageBytes (512 MiB).
	MaxUnfinishedBytes int
	// MaxHTTPSessions caps a server's legacy HTTP sessions; past it the
	// session whose client has sent no request for the longest is
	// evicted, and with every client having a request under way or sent
	// one in the last second a new one is refused (503). Default 64.
	MaxHTTPSessions int
	// ChildEnv is added to every child's environment, after the server's
	// own env; descendants inherit it. The app puts its run marker here so
	// that a leaked grandchild can be traced to the run that started it.
	// Each child also gets SWITCHBOARD_SERVER=<name>.
	ChildEnv []string
	// ProcessStart reads a process's start time as the OS reports it: a
	// started child's EventBackendStarted carries it as ProcessStart, on
	// the clock leak detection compares recorded children with. nil, or
	// an error: the time the pool saw the child start.
	ProcessStart func(pid int) (time.Time, error)
	// AskIDFloor, when set, is where the ids of the pool's own requests
	// to clients (newAskID) count from, in place of the clock: its owner
	// makes sure that no earlier run of the same home gave an id above
	// it, and that the next run counts from above what this one gives
	// (the app keeps a high-water mark in a file, app/askids.go), so that
	// they do not repeat across runs even when the system clock was set
	// back. Leave room below 2^53 for the ids a run gives: clients read
	// them as JavaScript numbers. Zero: the time of New in microseconds
	// since 1970.
	AskIDFloor uint64
}

// Implementation names a client or server, as in MCP's clientInfo.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// RestartPolicy says how a crashed child is restarted.
type RestartPolicy struct {
	// MaxRestarts within Window mark the server failed. Default 5 in 60 s.
	MaxRestarts int
	Window      time.Duration
	// Backoff starts at MinBackoff and doubles up to MaxBackoff.
	MinBackoff time.Duration
	MaxBackoff time.Duration
}

// or is r with def's value in place of each zero (or negative) field: a
// server's overrides over the pool's policy.
func (r RestartPolicy) or(def RestartPolicy) RestartPolicy {
	if r.MaxRestarts <= 0 {
		r.MaxRestarts = def.MaxRestarts
	}
	if r.Window <= 0 {
		r.Window = def.Window
	}
	if r.MinBackoff <= 0 {
		r.MinBackoff = def.MinBackoff
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = def.MaxBackoff
	}
	return r
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.MaxMessageBytes <= 0 {
		r.MaxMessageBytes = wire.MaxMessageBytes
	}
	if r.SessionQueue <= 0 {
		r.SessionQueue = 4096
	}
	if r.EvictAfter <= 0 {
		r.EvictAfter = 30 * time.Second
	}
	if r.StopGrace <= 0 {
		r.StopGrace = DefaultStopGrace
	}
	if r.HandshakeTimeout <= 0 {
		r.HandshakeTimeout = 60 * time.Second
	}
	if r.RootsWait == 0 {
		r.RootsWait = time.Second
	}
	if r.MaxPending <= 0 {
		r.MaxPending = 1 << 16
	}
	if r.MaxSessionInFlight <= 0 {
		r.MaxSessionInFlight = max(r.MaxPending/8, 1)
	}
	if r.MaxSessionBytes <= 0 {
		r.MaxSessionBytes = 2 * r.MaxMessageBytes
	}
	if r.MaxSessionSubscriptions <= 0 {
		r.MaxSessionSubscriptions = 4096
	}
	if r.MaxRootsChildren <= 0 {
		r.MaxRootsChildren = 32
	}
	if r.MaxLocalSessions <= 0 {
		r.MaxLocalSessions = 4096
	}
	if r.MaxUnfinishedBytes <= 0 {
		r.MaxUnfinishedBytes = 8 * r.MaxMessageBytes
	}
	if r.MaxHTTPSessions <= 0 {
		r.MaxHTTPSessions = 64
	}
	if r.QuestionGrace <= 0 {
		r.QuestionGrace = DefaultQuestionGrace
	}
	if r.WarmupGrace == 0 {
		r.WarmupGrace = time.Minute
	}
	if r.ClientInfo.Name == "" {
		r.ClientInfo = Implementation{Name: "switchboard", Version: "dev"}
	}
	if r.Restart.MaxRestarts <= 0 {
		r.Restart.MaxRestarts = DefaultMaxRestarts
	}
	if r.Restart.Window <= 0 {
		r.Restart.Window = DefaultRestartWindow
	}
	if r.Restart.MinBackoff <= 0 {
		r.Restart.MinBackoff = DefaultMinBackoff
	}
	if r.Restart.MaxBackoff <= 0 {
		r.Restart.MaxBackoff = DefaultMaxBackoff
	}
	return r
}

// DefaultQuestionGrace is Options.QuestionGrace's default: twice what
// the TypeScript SDK's client takes to try its two reconnections of a
// GET stream (after 1 s, then 1.5 s more), so that a client that comes
// back keeps its questions, and one that left costs the call that asked
// seconds, not its request timeout.
const DefaultQuestionGrace = 5 * time.Second

// Defaults of a ServerConfig's zero fields and of Options.Restart's: the
// app's config compares values with them applied, so that a setting
// written out at its default is no change.
const (
	DefaultRequestTimeout = 120 * time.Second
	DefaultIdleTimeout    = 10 * time.Minute
	DefaultMaxRestarts    = 5
	DefaultRestartWindow  = 60 * time.Second
	DefaultMinBackoff     = 100 * time.Millisecond
	DefaultMaxBackoff     = 10 * time.Second
)

// Sentinel errors callers branch on.
var (
	ErrPoolClosed    = errors.New("pool is closed")
	ErrUnknownServer = errors.New("no such server")
	ErrDisabled      = errors.New("server is disabled")
)

// Pool multiplexes client sessions onto supervised children. It is safe
// for concurrent use. Create it with New and end it with Close.
type Pool struct {
	opts   Options
	log    *slog.Logger
	events hub
	clock  clock // the timing policies' (policy.go)

	nextID      atomic.Uint64 // pool-unique ids of its requests to children, shared by all backends
	nextAskID   atomic.Uint64 // ids of its requests to clients (newAskID)
	carried     *Carried      // Options.Carried until the first Apply; guarded by mu
	nextSession atomic.Uint64
	local       localSlots       // the local socket's connections open (MaxLocalSessions)
	unfinished  unfinishedBudget // the bytes unfinished lines hold (MaxUnfinishedBytes)
	nextBackend atomic.Uint64    // BackendInfo.ID: names one child slot for RestartBackend

	requests, errorsN, timeouts, cancelled, orphaned, evicted, parseErrors atomic.Uint64

	hangups hangups       // attached sessions' shim connections, polled by one goroutine (hangup_unix.go)
	ended   endedSessions // sessions it ended without telling their shims, for their resumes (resume.go)
	holds   mrtrHolds     // child questions carried to modern clients (mrtr.go)
	rounds  inputRounds   // a modern child's questions asked of legacy clients (inputbridge.go)
	closing chan struct{} // closed by Close
	trim    trimmer       // memtrim.go
	wg      sync.WaitGroup

	// open is held for reading by the calls from outside the pool's
	// goroutines that start some of them (Apply, Restart, Subscribe,
	// HTTPHandler: enter), and for writing by beginClose. Each such call
	// has started its goroutines before the pool closes, so before Close
	// or Handover waits on wg, or finds the pool closed and starts none:
	// a goroutine added as wg is waited on, or after, is one nothing
	// waits for. An HTTP request, which may wait for its answer as long
	// as the pool runs, is counted in wg instead (joinUnlessClosed).
	open sync.RWMutex

	front atomic.Pointer[httpFront] // the HTTP front door, once HTTPHandler made it

	mu       sync.Mutex // guards the fields below; never held across I/O
	servers  map[string]*server
	draining []*server // removed from the config, finishing their requests
	// removed names the servers removed from the config this run and not
	// configured since: a session asked of one is refused saying so.
	removed  map[string]bool
	sessions map[*session]struct{}
	// flushing are the outputs whose writes a stop cuts short
	// (writingOut): ended sessions writing out their last answers, and
	// the responses of the HTTP requests Close waits for.
	flushing map[writeDeadliner]struct{}
	closed   bool
	waiting  bool // Close (or Handover) waits for p.wg: the timers start nothing (goBeforeWait)

}

// New returns a pool with no servers; give it some with Apply.
func New(opts *Options) *Pool {
	o := opts.withDefaults()
	p := &Pool{
		opts:     o,
		log:      o.Logger,
		clock:    systemClock{},
		events:   newHub(o.Record),
		closing:  make(chan struct{}),
		trim:     trimmer{kick: make(chan struct{}, 1)},
		servers:  map[string]*server{},
		removed:  map[string]bool{},
		sessions: map[*session]struct{}{},
		flushing: map[writeDeadliner]struct{}{},
		carried:  o.Carried,
	}
	p.nextAskID.Store(askIDSeed(o.AskIDFloor, time.Now()))
	if o.Carried != nil {
		p.nextID.Store(o.Carried.NextID)
	}
	return p
}

// newAskID is an id for a request of the pool's own to a client: a
// child's question it puts to the client, its roots/list. A session
// outlives its pool (its shim resumes it on the next one, after a stop,
// an upgrade or a crash), so these ids never repeat across runs: a
// client's late answer to a question of a pool gone would answer the next
// pool's question of the same id, and reach its child. A run counts them
// from Options.AskIDFloor, above every id an earlier run of the home
// could give, whatever the clock says (askIDSeed). Ids to children stay
// small (nextID): a child lives in one run (a carried one keeps its
// count: Carried.NextID).
func (p *Pool) newAskID() uint64 { return p.nextAskID.Add(1) }

// askIDSeed is where a run's ids of its requests to clients count from:
// the floor its owner gives; with none (tests, embedders), the time in
// microseconds since 1970, which is above the ids of an earlier run as
// long as the clock was not set back (an earlier run started earlier,
// and gave fewer ids than microseconds passed since) and stays below
// 2^53, where clients read ids exactly, until the year 2255.
func askIDSeed(floor uint64, now time.Time) uint64 {
	if floor != 0 {
		return floor
	}
	return uint64(now.UnixMicro())
}

// Apply makes cfgs the configured servers. New servers become available;
// removed ones take no new requests, let those in flight finish and then
// stop; changed ones start a new child for new requests while the old child
// drains; unchanged ones are not touched.
func (p *Pool) Apply(cfgs []ServerConfig) error {
	seen := map[string]bool{}
	for _, c := range cfgs {
		if c.Name == "" {
			return errors.New("apply: a server has no name")
		}
		if seen[c.Name] {
			return fmt.Errorf("apply: server %q configured twice", c.Name)
		}
		seen[c.Name] = true
	}
	if !p.enter() {
		return ErrPoolClosed
	}
	defer p.leave()
	var removed, kept []*server
	var added []ServerConfig
	p.mu.Lock()
	for name, s := range p.servers {
		if !seen[name] {
			removed = append(removed, s)
			delete(p.servers, name)
			p.draining = append(p.draining, s)
			p.removed[name] = true
		}
	}
	for _, c := range cfgs {
		delete(p.removed, c.Name)
		if s, ok := p.servers[c.Name]; ok {
			kept = append(kept, s)
			continue
		}
		s := newServer(p, c)
		// s is not shared yet: nothing else locks it until the resolution
		// starts, whose goroutine reads it (emitState), so it starts last.
		if p.carried != nil {
			p.carried.Children = s.adoptCarriedLocked(p.carried.Children)
		}
		s.startResolvingLocked()
		p.servers[c.Name] = s
		added = append(added, c)
	}
	var unclaimed []CarriedChild
	if p.carried != nil {
		unclaimed, p.carried = p.carried.Children, nil // the first config takes them or never will
	}
	p.mu.Unlock()

	p.endCarried(unclaimed)
	for _, s := range removed {
		p.log.Info("server removed", "server", s.name)
		s.remove()
	}
	byName := map[string]ServerConfig{}
	for _, c := range cfgs {
		byName[c.Name] = c
	}
	for _, s := range kept {
		s.reconfigure(byName[s.name])
	}
	for _, c := range added {
		p.log.Info("server added", "server", c.Name)
	}
	return nil
}

// Servers lists the configured server names, sorted.
func (p *Pool) Servers() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.namesLocked()
}

func (p *Pool) namesLocked() []string {
	names := make([]string, 0, len(p.servers))
	for n := range p.servers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// server returns the configured server a new session of name joins.
func (p *Pool) server(name string) (*server, error) {
	s, err := p.lookupServer(name)
	if errors.Is(err, ErrUnknownServer) && p.opts.ConfigProblem != nil {
		if cause := p.opts.ConfigProblem(); cause != nil {
			err = fmt.Errorf("%w; the config file does not load, and the pool runs without what it lists until it is fixed: %v", err, cause)
		}
	}
	return s, err
}

func (p *Pool) lookupServer(name string) (*server, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrPoolClosed
	}
	s, ok := p.servers[name]
	if !ok {
		configured := "no servers are configured"
		if len(p.servers) > 0 {
			configured = "configured: " + strings.Join(p.namesLocked(), ", ")
		}
		if p.removed[name] {
			configured = "it was removed from the config; " + configured
		}
		return nil, fmt.Errorf("%w %q (%s)", ErrUnknownServer, name, configured)
	}
	if cfg := s.config(); cfg.Disabled {
		return nil, disabledError(cfg)
	}
	return s, nil
}

// allServers lists every server, including removed ones still draining.
func (p *Pool) allServers() []*server {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*server, 0, len(p.servers)+len(p.draining))
	for _, s := range p.servers {
		out = append(out, s)
	}
	return append(out, p.draining...)
}

// drained forgets a removed server once its last backend stopped.
func (p *Pool) drained(s *server) {
	p.mu.Lock()
	p.draining = slices.DeleteFunc(p.draining, func(x *server) bool { return x == s })
	p.mu.Unlock()
}

// Close stops accepting sessions, cancels every request in flight, shuts
// every child down per the MCP stdio rule (close stdin, wait, SIGTERM,
// wait, SIGKILL) and waits for all of the pool's goroutines.
func (p *Pool) Close() error {
	sessions, ok := p.beginClose()
	if !ok {
		p.wg.Wait() // as the first Close (or Handover) does, which may not wait yet
		return nil
	}
	closeAll(p.handBackSessions(sessions, p.opts.StopGrace), poolClosing)
	var wg sync.WaitGroup
	for _, s := range p.allServers() {
		for _, b := range s.backends() {
			wg.Go(func() { b.stop(errPoolClosing) })
		}
	}
	wg.Wait()
	p.waitGoroutines()
	p.events.closeRecord()
	return nil
}

// waitGoroutines waits for every goroutine the pool counts (p.wg): the
// last wait of Close (and Handover), once the pool is marked closed and
// no goroutine but the pool's own can start another; from now on, the
// pool's timers start none either (goBeforeWait).
func (p *Pool) waitGoroutines() {
	p.mu.Lock()
	p.waiting = true
	p.mu.Unlock()
	p.wg.Wait()
}

var errPoolClosing = errors.New("switchboard is shutting down")

// poolClosing is every session's reason to close when the pool does.
func poolClosing(*session) error { return errPoolClosing }

// enter keeps the pool from closing until leave, for a call from outside
// its goroutines that starts some (Pool.open); ok is false, and nothing
// is held, when the pool is closed. What runs entered must not wait for
// anything the closing does.
func (p *Pool) enter() (ok bool) {
	p.open.RLock()
	if isClosed(p.closing) {
		p.open.RUnlock()
		return false
	}
	return true
}

// leave ends what enter began.
func (p *Pool) leave() { p.open.RUnlock() }

// beginClose marks the pool closed and returns its sessions; ok is false
// if it was closed already. Sessions that ended before may still be
// writing out their last answers, each within EvictAfter, and HTTP
// requests writing their responses, each within streamWriteTimeout:
// those writes now have StopGrace at most, so that a client that does
// not read holds the stop up no longer than one of the pool's own
// sessions would.
func (p *Pool) beginClose() (sessions []*session, ok bool) {
	p.open.Lock() // waits out the entered calls (enter)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.open.Unlock()
		return nil, false
	}
	p.closed = true
	close(p.closing)
	p.open.Unlock()
	p.trim.stop()
	sessions = make([]*session, 0, len(p.sessions))
	for s := range p.sessions {
		sessions = append(sessions, s)
	}
	// Under mu, for an HTTP response is its handler's only until its
	// writingOut is done; setting a deadline waits for no client.
	for w := range p.flushing {
		_ = w.SetWriteDeadline(time.Now().Add(p.opts.StopGrace))
	}
	p.mu.Unlock()
	return sessions, true
}

// Snapshot copies the pool's live state. Ages are computed at the time of
// the snapshot; the UI ticks them forward from TakenAt.
func (p *Pool) Snapshot() Snapshot {
	now := time.Now()
	snap := Snapshot{TakenAt: now}
	p.mu.Lock()
	sessions := make([]*session, 0, len(p.sessions))
	for s := range p.sessions {
		sessions = append(sessions, s)
	}
	p.mu.Unlock()
	var backends []*backend
	for _, s := range p.allServers() {
		snap.Servers = append(snap.Servers, s.info())
		backends = append(backends, s.backends()...)
	}

	for _, s := range sessions {
		snap.Sessions = append(snap.Sessions, s.info())
		snap.InFlight = append(snap.InFlight, s.heldInfos(now)...) // held for its roots: at no child yet
	}
	snap.InFlight = append(snap.InFlight, p.rounds.infos(now)...) // asking their clients: at no child now
	for _, b := range backends {
		info, inflight := b.snapshot(now)
		snap.Backends = append(snap.Backends, info)
		snap.InFlight = append(snap.InFlight, inflight...)
	}
	countSessionsInFlight(snap.Sessions, snap.InFlight)
	sort.Slice(snap.Servers, func(i, j int) bool { return snap.Servers[i].Name < snap.Servers[j].Name })
	sort.Slice(snap.Sessions, func(i, j int) bool { return snap.Sessions[i].ConnectedAt.Before(snap.Sessions[j].ConnectedAt) })
	sort.Slice(snap.Backends, func(i, j int) bool {
		if snap.Backends[i].Server != snap.Backends[j].Server {
			return snap.Backends[i].Server < snap.Backends[j].Server
		}
		return snap.Backends[i].StartedAt.Before(snap.Backends[j].StartedAt)
	})
	sort.Slice(snap.InFlight, func(i, j int) bool { return snap.InFlight[i].ReceivedAt.Before(snap.InFlight[j].ReceivedAt) })
	snap.Counters = Counters{
		Requests:    p.requests.Load(),
		Errors:      p.errorsN.Load(),
		Timeouts:    p.timeouts.Load(),
		Cancelled:   p.cancelled.Load(),
		Orphaned:    p.orphaned.Load(),
		Evicted:     p.evicted.Load(),
		ParseErrors: p.parseErrors.Load(),
	}
	if snap.Sessions == nil {
		snap.Sessions = []SessionInfo{}
	}
	if snap.Backends == nil {
		snap.Backends = []BackendInfo{}
	}
	if snap.InFlight == nil {
		snap.InFlight = []RequestInfo{}
	}
	if snap.Servers == nil {
		snap.Servers = []ServerInfo{}
	}
	return snap
}

// countSessionsInFlight sets each session's InFlight to how many of
// inflight are its own, so that the two agree: a request that waits for
// its child's handshake (initialize) or for its client's answers is
// listed, though the session's own table does not hold it.
func countSessionsInFlight(sessions []SessionInfo, inflight []RequestInfo) {
	n := make(map[string]int, len(sessions))
	for _, r := range inflight {
		n[r.Session]++
	}
	for i := range sessions {
		sessions[i].InFlight = n[sessions[i].ID]
	}
}

// emit hands e to the recorder and the subscribers, stamped with the
// time now unless it has one. It takes the event by pointer: an Event is
// 384 bytes, and each copy of it on the way was stack that a session's
// goroutine had to grow again after every collection shrank it.
func (p *Pool) emit(e *Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	p.events.emit(e)
}
