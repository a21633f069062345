package pool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// backend is one supervised child slot: the child process, its restarts,
// and every request waiting on it. Its goroutines, one job each:
//
//   - supervise (one per backend) alone starts, handshakes, waits for and
//     restarts children, and applies the at-most-once rule when one dies;
//   - readLoop (one per child) alone reads the child's stdout;
//   - writeLoop (one per child) writes the child's stdin, except that a
//     sender whose request finds nothing queued and nobody writing
//     writes it itself, without waiting (send); writing says who writes;
//   - stderrLoop (one per child) fills the child's stderr tail.
//
// Its fields are grouped by what owns them, as x/net/http2's serverConn
// does: set once, owned by supervise, the request table (its own lock),
// and the groups guarded by mu. mu is never held across a read, a write,
// a blocking send or a callback; the request table's lock may be taken
// under it, never the other way round.
type backend struct {
	// Set by buildBackend (rootNames by newBackend, before the backend
	// is shared or its supervisor starts; none for a carried child's) and
	// never changed after: read by any goroutine.
	p         *Pool
	srv       *server
	id        uint64     // pool-unique (BackendInfo.ID)
	owner     *session   // set in share "session" mode
	roots     []string   // the partition's roots, answered to the child's roots/list (roots.go)
	rootNames rootNames  // their names, answered with them
	caps      clientCaps // what the pool declares to the child: roots only with roots, sampling/elicitation only when its first session has them
	createdAt time.Time
	log       *slog.Logger
	wake      chan struct{} // cap 1: the write queue changed
	stopReq   chan struct{} // closed by stop
	restartQ  chan struct{} // cap 1: the user asked for a restart
	done      chan struct{} // closed when supervise returns
	detachQ   chan struct{} // closed by carry: supervise returns and leaves the child running
	stopOnce  sync.Once

	// Owned by supervise: set before it starts, then read only by it. A
	// child an earlier pool handed over, and its handshake: supervise
	// adopts it instead of starting its first child.
	carried   *child
	carriedHS *handshake
	// crashed is what the last child's crash left to answer (reap), for
	// noteCrash: whether they may be sent again depends on whether the
	// server restarts, which the restart budget decides.
	crashed crashedCalls

	// The requests in flight, the progress tokens and the child's own
	// requests to clients: their own lock (requests.go).
	reqs *requestTable
	// The progress tokens of the tasks a session's own child made of its
	// calls: their own lock (tasks.go).
	tasks taskTokens

	// retired is closed once by retire, when the server is removed or
	// disabled: a wait for the handshake ends (handshakeResult).
	retired chan struct{}

	// Counted by readLoop, read by snapshots.
	badLines, orphaned atomic.Uint64
	// Client notifications dropped past their bound (sendNotification).
	notesDropped atomic.Uint64
	// ambiguousWarned is when the pool last logged a question it could
	// put to nobody because several clients' calls were in flight
	// (warnAmbiguous), as nanoseconds since createdAt plus one; 0: never.
	ambiguousWarned atomic.Int64
	// lateProbe is the pool id of the handshake's probe it stopped
	// waiting for (server/discover once initialize answered, or the
	// reverse), set by handshake: the child's late answer to it is the
	// pool's own affair, taken by readLoop without counting an orphan.
	lateProbe atomic.Uint64
	// stderr is the stderr tail status shows: its current child's, or
	// while none runs its last one's; set by supervise as each child's
	// loops start (startLoops), read by snapshots. Its own lock: the
	// stderr reader never waits for mu.
	stderr atomic.Pointer[ring]

	// mu guards the groups below.
	mu sync.Mutex

	// carrying is the child a hand-over takes (carry), set once under mu.
	carrying *child

	// What is written to the child: send, sendRaw, sendNotification and
	// writeLoop. notes counts the bytes of each session's notifications
	// in queue, notesBytes all of them: what leaves the queue leaves the
	// count (unqueuedLocked, notesGoneLocked).
	child      *child
	queue      []outItem
	writing    bool      // a write to the child's stdin is under way: writeLoop's or a sender's (send), or writeLoop waits for room
	stalled    time.Time // since when the child has taken none of what writeLoop has for it; zero: it takes it (stalledLocked)
	notes      map[*session]int
	notesBytes int

	// The backend's life: written by supervise (and stop, drain,
	// reconfigure), read by sessions and snapshots.
	cfg         ServerConfig
	state       string
	hs          *handshake     // the child's cached answer; nil until the first handshake
	hsDone      chan struct{}  // closed at the first handshake's end, or when the backend stops
	hsErr       error          // why the backend cannot serve (failed, stopped)
	hsWhole     *jsonrpc.Error // a failure's hsErr as the views have it (they redact it): quoting the child's stderr, which hsErr may not (stderrNote)
	restarts    int
	startedAt   time.Time
	warmFrom    time.Time // when its warm-up began, on the pool's clock: its current process's start, a carried child's adoption; zero before its first (idlePolicy)
	handshaking time.Time // when the running handshake began; zero when none runs
	lastErr     string
	lastTold    string // lastErr as a session's error may say it (toldCause)
	stopErr     error
	draining    bool
	retiredBy   error    // the final reason it drains for (the server removed or disabled), once retire set it
	reason      string   // why the state is what it is, when not obvious (resolve.go)
	resolved    []string // what the child was started as, when resolved; nil: as configured
	resolveNote string

	// What the child's sessions share on it.
	subs       map[string]int      // resource URI -> its holders (sessions, listens)
	holds      map[subHold]uint64  // which holder holds which URI (each counts once), and the stake it took it with (countLocked)
	stakes     uint64              // the last stake countLocked gave
	subWaits   map[string]*subWait // resource URI -> a legacy child's subscribe of it not answered yet
	hints      map[string]bool     // tools the child declared safe to repeat
	lastClient *session            // most recently active session, for server-to-client requests
	childLevel string              // the log level the pool set on the child; "" never set (loglevel.go)

	up upstream // a modern child's one subscriptions/listen, for all listeners (listen.go); own lock

	// levelSync serialises syncLogLevel from reading the sessions' levels
	// to queueing the child's: the level the child hears last is the one
	// computed last. Taken before mu, never while a session's is held.
	levelSync sync.Mutex
	levelGen  uint64 // guarded by levelSync: counts the levels decided for the child (levelEnded)
}

// outItem is one line for the child: a request, or (p == nil) a
// notification or an answer to the child's own request.
type outItem struct {
	p     *pending
	line  []byte
	early bool // part of the handshake: written before the child is ready
	// rest is what a sender that began writing line itself left unwritten
	// (the child has the line's start), then the line's newline: written
	// first, and only to restFor, whatever became of p. It is a part of
	// line, not a copy; a non-nil restFor says there is a rest.
	rest    []byte
	restFor *child
	// from is the session whose notification this is: its bytes count
	// in backend.notes while it is queued.
	from *session
}

func newBackend(srv *server, cfg ServerConfig, owner *session, roots []string, names rootNames, caps clientCaps) *backend {
	b := buildBackend(srv, cfg, owner, roots, caps, nil)
	b.rootNames = names
	srv.p.wg.Go(b.supervise)
	return b
}

// adoption is a running child an earlier pool handed over (carry.go),
// for a new backend to adopt instead of starting its first child.
type adoption struct {
	child    *child
	hs       *handshake
	logLevel string   // the level the earlier pool set on it
	resolved []string // what it was started as
}

// buildBackend makes a backend, complete, without starting its
// supervisor. adopt, when set, is the child it begins with.
func buildBackend(srv *server, cfg ServerConfig, owner *session, roots []string, caps clientCaps, adopt *adoption) *backend {
	if owner != nil {
		caps.rootsChange = caps.roots // its session's roots, as they change
	} else {
		caps.roots = len(roots) > 0 // its partition's, fixed
	}
	b := &backend{
		p: srv.p, srv: srv, owner: owner, roots: roots, caps: caps, cfg: cfg, createdAt: srv.p.clock.Now(),
		id:       srv.p.nextBackend.Add(1),
		log:      srv.p.log.With("server", cfg.Name),
		wake:     make(chan struct{}, 1),
		stopReq:  make(chan struct{}),
		restartQ: make(chan struct{}, 1),
		done:     make(chan struct{}),
		state:    StateStarting,
		hsDone:   make(chan struct{}),
		retired:  make(chan struct{}),
		subs:     map[string]int{},
		holds:    map[subHold]uint64{},
		subWaits: map[string]*subWait{},
		hints:    map[string]bool{},
		detachQ:  make(chan struct{}),
	}
	b.stderr.Store(newRing(1))         // no child yet: an empty tail
	b.reqs = newRequestTable(b.expire) // before b is shared: its timeouts expire through b
	b.reqs.after = srv.p.afterFunc     // its sweep is the pool's work: Close waits for it
	if adopt != nil {
		b.carried, b.carriedHS = adopt.child, adopt.hs
		b.child, b.startedAt = adopt.child, adopt.child.started // shown at once; supervise makes it ready
		// Its warm-up from now: its clients come back to it now, as to a
		// fresh child.
		b.warmFrom = b.createdAt
		b.childLevel, b.resolved = adopt.logLevel, adopt.resolved
	}
	return b
}

func (b *backend) config() ServerConfig {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cfg
}

func (b *backend) setConfig(cfg ServerConfig) {
	b.mu.Lock()
	b.cfg = cfg
	b.mu.Unlock()
}

func (b *backend) requestTimeout() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requestTimeoutLocked()
}

func (b *backend) requestTimeoutLocked() time.Duration {
	return b.cfg.requestTimeout()
}

func (b *backend) pid() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.child == nil {
		return 0
	}
	return b.child.pid
}

// warmupFrom is when the backend's warm-up began (backend.warmFrom).
func (b *backend) warmupFrom() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.warmFrom
}

func (b *backend) stateName() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// shownState is the backend's state and why it is that, as a snapshot
// shows them (BackendInfo.State, StateReason).
func (b *backend) shownState() (state, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state, b.stateReasonLocked()
}

// stateReasonLocked is why the state is what it is, when that is not
// obvious: the reason set with it (resolving the package: resolve.go),
// else, while a started child has not answered the pool's handshake,
// that it waits for it.
func (b *backend) stateReasonLocked() string {
	if b.reason == "" && !b.handshaking.IsZero() {
		return fmt.Sprintf("waiting for its handshake (server/discover, initialize): restarted if it does not answer within %s",
			b.p.opts.HandshakeTimeout)
	}
	return b.reason
}

func (b *backend) failed() bool { return b.stateName() == StateFailed }

func (b *backend) failureMessage() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == StateFailed && b.hsWhole != nil {
		return b.hsWhole.Message // what a reader needs: not the code
	}
	if b.state == StateFailed && b.hsErr != nil {
		if je := (*jsonrpc.Error)(nil); errors.As(b.hsErr, &je) {
			return je.Message // what a reader needs: not the code
		}
		return b.hsErr.Error()
	}
	return ""
}

// handshakeResult waits for the child's cached handshake, as a client's
// initialize or server/discover needs it.
// A client waits no longer than the request timeout: a child that never
// finishes its handshake is restarted only at the handshake timeout, and
// a slow crash loop may never spend the restart budget. Nor past its
// server's removal or disable (retire): the child's handshake would
// answer for a server that takes no more requests.
func (b *backend) handshakeResult(cancel <-chan struct{}) (*handshake, error) {
	b.mu.Lock()
	ch := b.hsDone
	timeout := b.requestTimeoutLocked()
	b.mu.Unlock()
	select {
	case <-ch:
	default:
		t := b.p.clock.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-ch:
		case <-cancel:
			return nil, errSessionEnded
		case <-b.retired:
			b.mu.Lock()
			why := b.retiredBy
			b.mu.Unlock()
			return nil, newError(errServerGone, false, b.srv.name, b.srv.name, why)
		case <-t.C:
			b.mu.Lock()
			last := b.lastTold
			b.mu.Unlock()
			if last != "" {
				last = " (the last child: " + last + ")"
			}
			return nil, newError(errStartTimeout, false, b.srv.name, b.srv.name, timeout, last)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hs != nil && b.state != StateFailed {
		return b.hs, nil
	}
	if b.hsErr != nil {
		return nil, b.hsErr
	}
	return nil, fmt.Errorf("server %q is not running", b.srv.name)
}

// send queues a request for the child. The caller has already rewritten
// its id to p.id. An error means the request was not queued;
// errAlreadyEnded means it was ended (and answered) before it could be;
// errNotForChild that it is a subscription change the child need not hear;
// errSubChanged that its holder changed what it holds since it was decided.
func (b *backend) send(p *pending) error {
	b.mu.Lock()
	if p.sub != nil {
		p.sub.turn.end() // counted (or not) below, before anyone else can count: the session's next change of the URI comes after
	}
	if c := p.sub; c != nil && c.changes != nil && c.changes.Load() != c.gen {
		b.mu.Unlock()
		return errSubChanged
	}
	if p.sub != nil && !b.countLocked(p.sub) {
		if p.sub.add {
			p.sub.wait = b.subWaits[p.sub.uri] // the subscribe on its way this holder relies on, if any
		}
		b.mu.Unlock()
		return errNotForChild
	}
	sess, err := b.registerLocked(p)
	if err != nil {
		if p.sub != nil { // the child never heard it: undone
			b.countLocked(&subChange{uri: p.sub.uri, add: !p.sub.add, holder: p.sub.holder})
		}
		b.mu.Unlock()
		return err
	}
	if p.sub != nil && p.sub.add {
		b.subscribingLocked(p)
	}
	if c := b.child; c != nil && c.direct != nil && c.ready && !c.rootsWait && !b.writing && len(b.queue) == 0 && !(p.bare && c.modern) {
		// Nothing is queued and nobody is writing: this goroutine writes
		// the request itself, without a hand-off to writeLoop.
		var ok bool
		b.reqs.update(func(in *inFlight) { ok, sess = in.startWriteLocked(p, c.pid) })
		if ok {
			b.writing = true
			sess.ledgerWritten(p)
			b.mu.Unlock()
			b.writeDirect(c, p)
			return nil
		}
	}
	b.queue = append(b.queue, outItem{p: p, line: p.line})
	b.mu.Unlock()
	b.signal()
	return nil
}

// registerLocked enters p in the request table, or says why the child
// cannot take it; sess is p's session (nil for the pool's own requests).
func (b *backend) registerLocked(p *pending) (*session, error) {
	switch {
	case b.state == StateFailed:
		return nil, b.hsErr
	case b.stopErr != nil:
		return nil, newError(errServerStopped, false, b.srv.name, b.srv.name, b.stopErr, p.method)
	}
	timeout := b.requestTimeoutLocked()
	if p.open {
		timeout = 0
	}
	r, sess, n := b.reqs.register(p, b.p.opts.MaxPending, timeout)
	switch r {
	case alreadyEnded:
		return nil, errAlreadyEnded
	case cancelledByUser, cancelledByClient:
		return nil, &cancelledHandingOn{r}
	case tableFull:
		return nil, newError(errServerBusy, false, b.srv.name, b.srv.name, n)
	case pastDeadline:
		return nil, errPastDeadline
	}
	if sess != nil {
		b.lastClient = sess
	}
	return sess, nil
}

// errAlreadyEnded refuses to queue a request that was ended before it
// reached its backend: whoever ended it answered it.
var errAlreadyEnded = errors.New("the request ended before it was queued")

// errPastDeadline refuses to queue a request whose timeout ran out before
// it came (held for its session's roots): its sender expires it.
var errPastDeadline = errors.New("the request's timeout ran out before it was queued")

// cancelledHandingOn refuses to queue a request whose user or client
// cancelled it as its session handed it on from its held messages
// (session.handedOn, r): its sender ends it as that cancel
// (handOnCancel).
type cancelledHandingOn struct{ r registration }

func (*cancelledHandingOn) Error() string { return "the request was cancelled before it was queued" }

// handingOnCancelled is err's cancelledHandingOn, nil for none: apart
// from forwardCounted, which would otherwise allocate errors.As's target
// for every request it sends, answered or not.
func handingOnCancelled(err error) *cancelledHandingOn {
	var c *cancelledHandingOn
	if errors.As(err, &c) {
		return c
	}
	return nil
}

// writeDirect is send's own write of p to c, begun with writing set.
// What the pipe does not take at once goes to the front of the queue
// for writeLoop: the whole request when nothing was taken, else the rest
// of its line. Like writeLoop, it marks p written only once every byte
// of it was taken.
func (b *backend) writeDirect(c *child, p *pending) {
	n, err := c.direct.writeNow(p.line)
	now := time.Now()
	var wrote, untake *session
	requeued := false
	b.mu.Lock()
	b.writing = false
	switch {
	case n == len(p.line)+1:
		b.reqs.update(func(in *inFlight) { _, wrote = in.wroteLocked(p, now, c.pid) })
	case n == 0:
		b.reqs.update(func(in *inFlight) { requeued, untake = in.unwriteLocked(p) })
		if requeued {
			untake.ledgerTaken(p)
			b.queue = slices.Insert(b.queue, 0, outItem{p: p, line: p.line})
		}
	default:
		// The child has the line's start: its end follows, first,
		// whatever became of p meanwhile.
		b.queue = slices.Insert(b.queue, 0, outItem{p: p, line: p.line, rest: p.line[min(n, len(p.line)):], restFor: c})
	}
	more := len(b.queue) > 0
	b.mu.Unlock()
	if wrote != nil {
		b.p.emit(&Event{Kind: EventRequestWritten, Time: now, Server: b.srv.name, Session: wrote.id, PID: c.pid, PoolID: p.id})
	}
	if more {
		b.signal()
	}
	if err != nil {
		b.log.Debug("write to child failed", "pid", c.pid, "err", err)
	}
}

// sendRaw queues a line that is not a request: the pool's own
// notification (a cancellation) or an answer to the child's own request.
// What a client notifies goes through sendNotification.
func (b *backend) sendRaw(line []byte) {
	b.mu.Lock()
	if b.stopErr != nil && b.child == nil {
		b.mu.Unlock()
		return
	}
	b.queue = append(b.queue, outItem{line: line})
	b.mu.Unlock()
	b.signal()
}

// The bounds on what client notifications hold in one backend's queue:
// one session's, and all sessions' together. Past either, a notification
// is dropped, counted and logged; a session with none queued, on a
// backend with none queued, always has room for one (the framing limit
// bounds it), as overLimitLocked admits one request.
//
// Why dropped, and not counted in MaxSessionBytes: a request is kept
// until its child answers (for a retry after a crash) and its client
// waits for that answer, so past the share it is refused with an error.
// A notification waits for no answer and is kept only until it is
// written; a backlog means the child does not read (it stopped, is
// restarting, or failed). Dropping it needs no answer, never blocks the
// session's reader and takes no lock of the session's: the count is the
// backend's own. A session's share is far below MaxSessionBytes (by
// default 128 MiB, sized for one largest request): no child that reads
// lets a megabyte of notifications wait. The total bounds what many
// sessions, and sessions that came and went, leave on a child that does
// not read; it takes sixteen full shares to reach, so one session alone
// never crowds out the others' notifications.
const (
	maxSessionNoteBytes = 1 << 20
	maxNoteBytes        = 16 << 20
)

// sendNotification queues a client's notification for the child, unless
// from's share or the backend's bound is full: then it is dropped.
func (b *backend) sendNotification(from *session, line []byte) {
	size := len(line)
	b.mu.Lock()
	if b.stopErr != nil && b.child == nil {
		b.mu.Unlock()
		return
	}
	mine := b.notes[from]
	if mine > 0 && mine+size > maxSessionNoteBytes || b.notesBytes > 0 && b.notesBytes+size > maxNoteBytes {
		all := b.notesBytes
		b.mu.Unlock()
		b.droppedNotification(from, mine, all, size)
		return
	}
	if b.notes == nil {
		b.notes = map[*session]int{}
	}
	b.notes[from] = mine + size
	b.notesBytes += size
	b.queue = append(b.queue, outItem{line: line, from: from})
	b.mu.Unlock()
	b.signal()
}

func (b *backend) droppedNotification(from *session, mine, all, size int) {
	n := b.notesDropped.Add(1)
	log := b.log.Debug
	if n <= 10 || n%1000 == 0 {
		log = b.log.Warn
	}
	log("dropping a client's notification: the child is not reading what it was sent", "session", from.id,
		"bytes", size, "sessionQueued", mine, "queued", all, "dropped", n)
}

// unqueuedLocked uncounts a line that leaves the queue.
func (b *backend) unqueuedLocked(it *outItem) {
	if it.from == nil {
		return
	}
	if n := b.notes[it.from] - len(it.line); n > 0 {
		b.notes[it.from] = n
	} else {
		delete(b.notes, it.from)
	}
	b.notesBytes -= len(it.line)
}

// notesGoneLocked uncounts every notification, after the queue lost them
// all (a dead child's, or everything when the backend fails or stops).
func (b *backend) notesGoneLocked() {
	clear(b.notes)
	b.notesBytes = 0
}

func (b *backend) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// writeLoop writes the child's stdin whenever a sender did not (send): it
// takes what is queued, in order, up to maxBatch bytes (a longer line
// alone), writes it with one write, and marks a request written only when
// the write reports all of its bytes (and newline) taken: at-most-once
// depends on that bit. A request the child took any byte of before a
// write failed may have run, and is never queued again as if it had not.
// Where the write never waits (writeOut), what a full pipe did not take
// goes back to the front of the queue, the rest of a line the child has
// part of first, and the writer waits for room: a request the child
// takes nothing of, because it does not read, is queued meanwhile, not
// being written (its snapshot says why it waits: requestTable.infos).
// The ledger hears "written" before the write, so a pool killed mid-write
// never under-reports. It exits when the child exits or a write fails.
func (b *backend) writeLoop(c *child) {
	defer close(c.writerDone)
	const maxBatch = 256 << 10
	var (
		out    gather
		batch  []outItem
		ends   []int
		wrote  []*pending
		whose  []*session
		ledger []*session // whose ledgers hear of batch's requests, in batch order (nil: none)
		vec    [][]byte   // the batch's pieces, for one writev
	)
	for {
		batch, ends, ledger = batch[:0], ends[:0], ledger[:0]
		b.mu.Lock()
		if !b.writing {
			keep := b.queue[:0]
			full := false // an item did not fit: it and every later one wait for the next write, in order
			b.reqs.update(func(in *inFlight) {
				for _, it := range b.queue {
					switch {
					case it.restFor != nil:
						if it.restFor != c {
							continue // the end of a line for a child that is gone
						}
						out.add(it.rest) // first in the queue: the child has the line's start
						out.addByte('\n')
					case it.p != nil && in.isDoneLocked(it.p):
						continue // ended while queued: the child never needs it
					case !c.ready && !it.early:
						keep = append(keep, it) // the handshake's lines go first
						continue
					case c.rootsWait && it.clientsLocked():
						keep = append(keep, it) // the child's roots go first (awaitRoots)
						continue
					case full || out.size > 0 && out.size+len(it.line) > maxBatch:
						// Nothing overtakes a line held back: the child
						// hears its lines in the order they were queued.
						full = true
						keep = append(keep, it)
						continue
					default:
						if it.p != nil {
							ok, sess := in.startWriteLocked(it.p, c.pid)
							if !ok {
								continue
							}
							ledger = append(ledger, sess)
							if it.p.bare && c.modern {
								it.line = fitLine(it.p) // rare: a legacy client's request its modern child was not known for
							}
						}
						out.add(it.line)
						out.addByte('\n')
					}
					ends = append(ends, out.size)
					batch = append(batch, it)
				}
			})
			clear(b.queue[len(keep):])
			b.queue = keep
			b.writing = len(batch) > 0
			if len(batch) == 0 {
				b.stalled = time.Time{} // nothing waits for the child
			}
			i := 0
			for _, it := range batch {
				b.unqueuedLocked(&it)
				if it.p != nil && it.restFor == nil {
					ledger[i].ledgerWritten(it.p)
					i++
				}
			}
		}
		b.mu.Unlock()

		if len(batch) == 0 {
			select {
			case <-b.wake:
				continue
			case <-c.exited:
				return
			case <-c.detach:
				return
			}
		}
		n, full, err := b.writeOut(c, &out, &vec)
		now := time.Now()
		wrote, whose, ledger = wrote[:0], whose[:0], ledger[:0]
		var requeue []outItem
		b.mu.Lock()
		b.writing = full // a full pipe: senders queue behind the writer while it waits for room
		b.stalledLocked(full, n, now)
		b.reqs.update(func(in *inFlight) {
			for i, it := range batch {
				start := startOf(ends, i)
				switch {
				case ends[i] <= n:
					if it.p == nil {
						continue
					}
					if ok, sess := in.wroteLocked(it.p, now, c.pid); ok && sess != nil {
						wrote, whose = append(wrote, it.p), append(whose, sess)
					}
				case start >= n && it.restFor == nil && it.p != nil:
					// None of it was taken: the pipe was full, or a write
					// failed (the child is gone). It goes back to the
					// queue as it was, for this child or the next;
					// ended meanwhile, it is dropped.
					if requeued, untake := in.unwriteLocked(it.p); requeued {
						requeue, ledger = append(requeue, it), append(ledger, untake)
					}
				case !full:
					// (After a failed write: the child is gone.) A line
					// for it is void; a request it took part of, maybe
					// all but its newline, may have run (a streaming
					// decoder needs no newline): it stays being written,
					// as writeDirect leaves a request the pipe took part
					// of, and its child's death answers it as may have
					// run.
				case start >= n:
					// A line none of which was taken (its bytes no
					// longer counted: a batch's worth at most), or the
					// end of one the child has the start of.
					it.from = nil
					requeue, ledger = append(requeue, it), append(ledger, nil)
				default:
					// The child has the start of it: the rest goes
					// first, and the request stays being written.
					requeue, ledger = append(requeue, restOf(it, n-start, c)), append(ledger, nil)
				}
			}
		})
		for i, it := range requeue {
			if ledger[i] != nil {
				ledger[i].ledgerTaken(it.p)
			}
		}
		if len(requeue) > 0 {
			b.queue = append(requeue, b.queue...)
		}
		b.mu.Unlock()
		for i, p := range wrote {
			b.p.emit(&Event{Kind: EventRequestWritten, Time: now, Server: b.srv.name, Session: whose[i].id, PID: c.pid, PoolID: p.id})
		}
		clear(batch)
		clear(whose)
		clear(ledger)
		if slices.ContainsFunc(out.refs, func(r []byte) bool { return len(r) > keepBuf }) {
			b.p.releasedLarge() // the memory trim waits for large requests to stop
		}
		out.reset() // while it waits, the writer holds no request
		if err == nil && full {
			err = c.direct.awaitRoom()
			b.mu.Lock()
			b.writing = false
			if err != nil {
				b.stalled = time.Time{} // stdin closed: the child is gone
			}
			b.mu.Unlock()
		}
		if err != nil {
			b.log.Debug("write to child failed", "pid", c.pid, "err", err)
			return
		}
	}
}

// writeOut writes a batch to the child. Where stdin can be written
// without waiting (directWriter), it never waits: full says the pipe took
// only the first n bytes, and writeLoop puts back what it did not take
// before it waits for room. A request the child took no byte of is then
// queued, not being written, however long the child leaves its input
// unread: ended meanwhile, it never ran. Elsewhere the write waits, and
// every request in it counts as may have run until it returns.
func (b *backend) writeOut(c *child, out *gather, vec *[][]byte) (n int, full bool, err error) {
	if c.direct == nil {
		n, err = out.writeTo(c.stdin)
		return n, false, err
	}
	*vec = out.pieces((*vec)[:0])
	n, err = c.direct.writevNow(*vec)
	clear(*vec)
	return n, err == nil && n < out.size, err
}

// restOf is the rest of batch item it, of which the child took k bytes
// (fewer than all, newline included): written first, to c alone.
func restOf(it outItem, k int, c *child) outItem {
	from := it.line
	if it.restFor != nil {
		from = it.rest
	}
	return outItem{p: it.p, line: it.line, rest: from[min(k, len(from)):], restFor: c}
}

// stalledLocked notes whether the child takes what the writer has for
// it: a write that left bytes in the pipe starts a stall, unless one runs
// and the child took none since it began; a write taken whole ends it.
func (b *backend) stalledLocked(full bool, n int, now time.Time) {
	switch {
	case !full:
		b.stalled = time.Time{}
	case n > 0 || b.stalled.IsZero():
		b.stalled = now
	}
}

// startOf is where the i-th of a write's lines starts, given where each
// ends.
func startOf(ends []int, i int) int {
	if i == 0 {
		return 0
	}
	return ends[i-1]
}

// readLoop is the only reader of the child's stdout. It resolves responses,
// routes the child's notifications and requests, and never blocks on a
// session: delivery is an offer to the session's bounded queue. It exits at
// EOF or a read error, which it tells the supervisor (outEnded): a child
// whose stdout ended can answer nothing more.
func (b *backend) readLoop(c *child) {
	defer close(c.readerDone)
	out := c.output
	if len(c.unread) > 0 {
		out = io.MultiReader(bytes.NewReader(c.unread), c.output)
	}
	lr := newLineReader(out, b.p.opts.MaxMessageBytes)
	lr.onRelease = b.p.releasedLarge
	batch := &outBatch{}
	defer batch.flush()
	for {
		if !lr.lineReady() {
			batch.flush() // before a read that may wait
		}
		line, err := lr.next()
		if err != nil {
			if isClosed(c.detach) {
				c.leftover <- lr.unread() // for the next pool
				return
			}
			var tl *tooLongError
			if errors.As(err, &tl) {
				b.oversize(tl)
				if errors.Unwrap(err) == nil || err == error(tl) {
					continue
				}
			}
			close(c.outEnded)
			return
		}
		batch.more = lr.lineReady()
		msg, err := jsonrpc.Parse(line)
		if err != nil {
			b.badLine(line, err)
			continue
		}
		if msg.Kind != jsonrpc.KindResponse {
			batch.flush() // answers first, and none waits on what comes next
		}
		switch msg.Kind {
		case jsonrpc.KindResponse:
			b.onResponse(&msg, batch)
		case jsonrpc.KindRequest:
			b.onChildRequest(c, &msg)
		case jsonrpc.KindNotification:
			b.onChildNotification(&msg)
		}
	}
}

func (b *backend) badLine(line []byte, err error) {
	n := b.badLines.Add(1)
	if n <= 10 || n%1000 == 0 {
		b.log.Warn("child wrote a line that is not JSON-RPC", "count", n, "err", err, "line", truncate(string(line), 120))
	}
}

// oversize fails the request an oversize response was meant for, if its id
// can be found at either end of the line.
func (b *backend) oversize(tl *tooLongError) {
	b.log.Warn("child wrote an oversize message", "bytes", tl.size, "limit", b.p.opts.MaxMessageBytes)
	id, ok := headPoolID(tl.head)
	if !ok {
		id, ok = tailPoolID(tl.tail)
	}
	if !ok {
		return
	}
	if p := b.reqs.lookup(id); p != nil {
		b.finish(p, failure(endUnusable, errAnswerTooLarge, b.srv.name, tl.size, b.p.opts.MaxMessageBytes))
	}
}

// onResponse routes a child's answer to the one session that asked. An
// answer nobody waits for (its request ended: cancelled, timed out) is an
// orphan, counted and delivered nowhere.
func (b *backend) onResponse(msg *jsonrpc.Message, batch *outBatch) {
	id, ok := jsonrpc.ParseUint(msg.IDBytes())
	if ok {
		o := answered(msg)
		o.batch = batch
		if p := b.reqs.lookup(id); p != nil && b.finish(p, o) {
			return
		}
	}
	if ok && id != 0 && b.lateProbe.CompareAndSwap(id, 0) {
		b.log.Debug("a late answer to its handshake probe, no longer waited for", "poolID", id)
		return
	}
	b.orphaned.Add(1)
	b.p.orphaned.Add(1)
	b.p.emit(&Event{Kind: EventOrphan, Server: b.srv.name, OriginalID: string(msg.IDBytes()), Status: StatusOrphaned})
}

// progressValue reads a progress notification's progress number.
func progressValue(params []byte) (float64, bool) {
	sp := jsonrpc.Member(params, "progress")
	if !sp.Present() {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(sp.Of(params)), 64)
	return v, err == nil
}

func (b *backend) capture(line []byte) []byte { return b.p.capture(line) }

// capture is the part of line history keeps (Options.CapturePayloads).
func (p *Pool) capture(line []byte) []byte {
	n := p.opts.CapturePayloads
	if n <= 0 {
		return nil
	}
	return append([]byte(nil), line[:min(n, len(line))]...)
}

// onChildNotification routes a notification from the child. Nothing is
// broadcast blindly: progress goes to its token's owner, a resource update
// to its subscribers, list changes to the server's sessions, a log message
// to the session that asked for it (loglevel.go).
func (b *backend) onChildNotification(msg *jsonrpc.Message) {
	params := msg.Params.Of(msg.Raw)
	if b.routeTagged(msg) {
		return // a modern child's notification for one subscriptions/listen
	}
	switch msg.Method {
	case "notifications/progress":
		token, at, ok := poolTokenOf(msg)
		if !ok {
			return
		}
		progress, hasValue := progressValue(params)
		to, x, origToken := b.reqs.progress(token, progress, hasValue)
		if to == nil {
			to, origToken = b.taskProgress(token) // its call was answered with its task (tasks.go)
		}
		if to == nil {
			return // the request ended (its client no longer cares), waits for a retry, or went back
		}
		to.relate(x, progressForClient(msg, at, origToken), msg.Method)
	case "notifications/cancelled":
		// The child ends the pool's listen, or gives up on a request it
		// sent to a client.
		childID, at := childCancelTarget(msg)
		if childID == nil || b.listenCancelled(childID) {
			return
		}
		poolID, sess := b.reqs.withdrawQuestion(childID)
		if sess == nil {
			return
		}
		sess.deliver(cancelledForClient(msg, at, poolID), withdrawal(poolID))
	case "notifications/resources/updated":
		uri, _ := jsonrpc.String(params, jsonrpc.Member(params, "uri"))
		for _, s := range b.sessions() {
			s.deliverChange(b, msg, uri, false)
		}
	case "notifications/elicitation/complete":
		b.elicitationCompleted(msg) // to the one session asked it (elicitcomplete.go)
	case "notifications/message":
		b.routeLog(msg, params)
	case "notifications/tasks/status":
		b.taskStatus(msg, params) // its one session's task; a shared child's are no one's (tasks.go)
	default:
		if strings.HasSuffix(msg.Method, "/list_changed") {
			b.forgetHintsIf(msg.Method)
			for _, s := range b.sessions() {
				s.deliverChange(b, msg, "", false)
			}
			return
		}
		b.log.Debug("dropping a notification no session asked for", "method", msg.Method)
	}
}

// sessions lists the sessions this backend serves.
func (b *backend) sessions() []*session {
	if b.owner != nil {
		return []*session{b.owner}
	}
	return b.srv.membersOf(b)
}

// onChildRequest routes a server-to-client request (sampling, elicitation)
// to one live session: while requests are in flight here, to the caller
// whose request is oldest among those that can answer, if they are all
// one client's, else to nobody; when none is in flight, to the most
// recently active session that can (routeQuestion), a session that
// closes as it is picked passed over. Ping and roots/list are answered
// here.
func (b *backend) onChildRequest(c *child, msg *jsonrpc.Message) {
	childID := append([]byte(nil), msg.IDBytes()...)
	if msg.Method == "ping" {
		b.sendRaw(jsonrpc.AppendResponse(nil, childID, []byte("{}")))
		return
	}
	if msg.Method == "roots/list" {
		b.answerRootsList(c, childID) // never a client's (roots.go)
		return
	}
	if !b.ask(msg, childID) {
		b.sendRaw(jsonrpc.AppendErrorResponse(nil, childID, newError(errNoClient, false, "", msg.Method)))
	}
}

// ask routes the child's question msg, the child's request childID, as
// routeQuestion picks: to a modern call that carries it (carryAsMRTR),
// or to one session under a pool id of its own; one for a client that
// closed its input, or for several clients, or for a caller that closes
// as it is picked, is answered -32006 here, and one that only an
// undeclared modern call can be for fails that call (failUndeclared).
// False: nobody could be asked, and the caller answers the child.
func (b *backend) ask(msg *jsonrpc.Message, childID []byte) bool {
	id := b.p.newAskID()
	elicitationID := urlElicitationID(msg)
	for {
		r := b.routeQuestion(msg)
		switch {
		case r.refusal != 0:
			b.sendRaw(jsonrpc.AppendErrorResponse(nil, childID, newError(r.refusal, false, "", r.args...)))
			return true
		case r.carrier != nil:
			b.carryAsMRTR(msg, childID, r.carrier)
			return true
		case r.undeclared != nil:
			b.failUndeclared(msg, childID, r.undeclared)
			return true
		case r.target == nil:
			return false
		}
		target := r.target
		if testHookPicked != nil {
			testHookPicked(target)
		}
		if posing := b.reqs.addQuestion(id, childID, target, elicitationID, personAnswers(msg.Method), progressKey(progressTokenOf(msg))); posing != nil {
			// Should target close from now on, its close answers the
			// child, and withdraws the question once it is out.
			target.deliver(requestForClient(msg, id), asking(msg.Method, id))
			if testHookPosing != nil {
				testHookPosing(b, id, target)
			}
			close(posing)
			if why, void := b.reqs.posed(id); void {
				// Voided as it went out, its child dead (a session's own
				// void waits for it instead: withdrawQuestions):
				// withdrawn after it, never before.
				withdrawVoid([]openQuestion{{id: id, sess: target}}, why)
			}
			return true
		}
		if r.caller {
			// The question was target's, whose call is in flight: its
			// close leaves it to nobody else.
			b.sendRaw(jsonrpc.AppendErrorResponse(nil, childID, newError(errAskedClientLeft, false, "")))
			return true
		}
		// target, asked for want of a caller, closed since the pick, and
		// is never picked again: pick another, or answer the child.
	}
}

// askAgain asks again the child's question childID that the pool took
// back, as line, from a client that left it unread (an HTTP client whose
// GET stream ended and did not come back: httpSession.takeBack): as a new
// question, of another session that can answer it now, or the child
// gets -32006, as if that client had ended its session (detach).
func (b *backend) askAgain(childID, line []byte) {
	if msg, err := jsonrpc.Parse(line); err != nil || !b.ask(&msg, childID) { // the pool made line: it parses
		b.sendRaw(jsonrpc.AppendErrorResponse(nil, childID, newError(errAskedClientLeft, false, "")))
	}
}

// personAnswers reports whether a person may take minutes over a child's
// question of method: an elicitation, a sampling (which the client may
// show its user to approve). The timeouts of the calls it may be for
// wait for its answer (requestTable.addQuestion). roots/list is not
// one: the pool answers it itself, at once (answerRootsList).
func personAnswers(method string) bool {
	return method == "elicitation/create" || method == "sampling/createMessage"
}

// testHookPicked, when set, runs between the pick of the session to ask
// a child's question and the question's record.
var testHookPicked func(*session)

// testHookPosing, when set, runs between the delivery of a child's
// question id to the session asked and the close of its posing.
var testHookPosing func(b *backend, id uint64, s *session)

// questionRoute is where a child's question goes (routeQuestion): at most
// one of target, carrier, undeclared and refusal is set (refusal with its
// args, target with caller); none: nobody can be asked, and the child
// gets -32006.
type questionRoute struct {
	target     *session  // the legacy session to ask
	carrier    *caller   // the modern call to carry it to its client (MRTR)
	undeclared *pending  // the one modern call it can be for, which did not declare what it needs
	refusal    poolError // the child's answer instead, at once
	args       []any     // the refusal's message args
	caller     bool      // with target: target has a call in flight here, whose question it is
}

// routeQuestion picks where the child's question msg goes. A legacy
// child does not say which call asks, so while any client's request is
// in flight on it (requestTable.callers) the question is one of theirs.
// When those callers are of more than one party (callerParty: clients
// the pool keeps apart), it cannot tell whose it is, and showing it to
// one could show that client another's question and hand the other's
// call its answer: nobody is asked, and the child gets errAskAmbiguous
// (-32006) at once. Every caller counts, one that could not have asked
// (a ping, a list) too: the pool cannot tell what a call did at the
// child, and a client must not be able to steer another's question to
// itself by declaring nothing. When they are all one party's, it goes
// to the oldest of its callers that can answer it, of either era: a
// legacy session that declared what it needs and can receive now
// (session.canAnswer), or a modern call whose own request declared it
// (2026-07-28: a server must not ask what the client did not declare),
// carried as input_required; a younger call never takes an older one's
// question. When the oldest caller that declared it cannot answer any
// more (session.askable: it closed its input, or it closes or closed),
// the question is its own, and the child gets refusal (-32006). When no
// caller can answer, no other session is asked either (the question is
// the party's): the one modern call that can carry a question, if there
// is exactly one, is failed for it (-32021: it did not declare what its
// own question needs); else the child gets -32006. Only when no request
// is in flight (the server asks on its own) is the most recently active
// session that can answer it asked (recentAnswerer), as the routing
// contract says.
func (b *backend) routeQuestion(msg *jsonrpc.Message) questionRoute {
	params := msg.Params.Of(msg.Raw)
	callers := b.reqs.callers(questionNeeds(msg.Method, params))
	if len(callers) == 0 {
		return questionRoute{target: b.recentAnswerer(msg.Method, params)}
	}
	if n := partiesOf(callers); n > 1 {
		b.warnAmbiguous(msg.Method, n)
		return questionRoute{refusal: errAskAmbiguous, args: []any{b.srv.name, msg.Method}}
	}
	var carriers []*pending
	for i := range callers {
		c := &callers[i]
		switch {
		case c.modern && c.declared:
			return questionRoute{carrier: c}
		case c.modern:
			if c.canCarry {
				carriers = append(carriers, c.p)
			}
		case c.sess.canAnswer(msg.Method, params):
			switch {
			case c.sess.closing.Load(): // (a closed session was closing)
				return questionRoute{refusal: errAskedClientLeft}
			case !c.sess.askable():
				return questionRoute{refusal: errAskedClosedInput}
			}
			return questionRoute{target: c.sess, caller: true}
		}
	}
	if len(carriers) == 1 {
		return questionRoute{undeclared: carriers[0]}
	}
	return questionRoute{}
}

// callerParty is the client a caller's request speaks for, as far as the
// pool can tell: its session, one connection of one client (a legacy
// session, stdio or HTTP; a 2026-07-28 stdio session), or, on a
// server's stateless HTTP session, which carries every 2026-07-28 HTTP
// client's requests, the call itself.
func callerParty(c *caller) any {
	if c.sess.stateless {
		return c.p
	}
	return c.sess
}

// partiesOf counts the parties (callerParty) of callers.
func partiesOf(callers []caller) int {
	var seen []any
	for i := range callers {
		if k := callerParty(&callers[i]); !slices.Contains(seen, k) {
			seen = append(seen, k)
		}
	}
	return len(seen)
}

// ambiguousWarnEvery bounds how often a backend logs the questions it
// could put to nobody (warnAmbiguous): a server that asks on every call
// must not flood the log.
const ambiguousWarnEvery = time.Minute

// warnAmbiguous logs, at most once per ambiguousWarnEvery, that the
// child asked method while calls of parties clients were in flight, and
// that nobody was asked.
func (b *backend) warnAmbiguous(method string, parties int) {
	now := int64(b.p.clock.Now().Sub(b.createdAt)) + 1
	last := b.ambiguousWarned.Load()
	if last != 0 && time.Duration(now-last) < ambiguousWarnEvery || !b.ambiguousWarned.CompareAndSwap(last, now) {
		return
	}
	b.log.Warn("a server's question went to no client: calls of several clients were in flight on its shared child, "+
		"and a legacy server does not say which call asks; \"share\": \"session\" gives each session its own child",
		"method", method, "clients", parties)
}

// recentAnswerer is the session to ask a child's question (method, with
// params) that no request in flight can be for: the most recently active
// one that can answer it now, or nil.
func (b *backend) recentAnswerer(method string, params []byte) *session {
	can := func(s *session) bool { return s != nil && s.askable() && s.canAnswer(method, params) }
	b.mu.Lock()
	last := b.lastClient
	b.mu.Unlock()
	if can(last) {
		return last
	}
	var best *session
	for _, s := range b.sessions() {
		if can(s) && (best == nil || s.lastActiveAt().After(best.lastActiveAt())) {
			best = s
		}
	}
	return best
}

// answerChild routes a client's answer to one of the child's requests back
// to the child, with the child's own id restored.
func (b *backend) answerChild(from *session, msg *jsonrpc.Message) bool {
	id, ok := jsonrpc.ParseUint(msg.IDBytes())
	if !ok {
		return false
	}
	childID, ok := b.reqs.takeAnswer(id, from)
	if !ok {
		return false
	}
	b.sendRaw(answerForChild(msg, childID))
	return true
}

// leftBy forgets a session that moved to the child of other roots as
// the one to ask this child's questions, and sets the child's log level
// to what its remaining sessions ask.
func (b *backend) leftBy(s *session) {
	b.mu.Lock()
	if b.lastClient == s {
		b.lastClient = nil
	}
	b.mu.Unlock()
	b.syncLogLevel()
	if s.promisesChanges() {
		b.syncUpstream() // without the list changes it was promised
	}
}

// takeStakes carries to b, a backend just made for sessions whose child
// was stopped or replaced (by the user, a config change, a child that
// stopped for good), the subscriptions they held there: b hears them as
// it becomes ready, as a restarted child does, so the sessions get its
// resources/updated without subscribing again. Their log level needs no
// carrying: b asks its sessions theirs as it becomes ready. Only b's own
// sessions' stakes: a session's own child takes its session's alone.
func (b *backend) takeStakes() {
	for _, s := range b.sessions() {
		s.moveStakes(b)
	}
}

// detach forgets a session's stake in the child: its answers to the
// child's requests become errors, its subscriptions are released.
func (b *backend) detach(s *session, subs []string) {
	unanswered := b.reqs.dropQuestionsOf(s)
	b.mu.Lock()
	if b.lastClient == s {
		b.lastClient = nil
	}
	b.mu.Unlock()
	for _, id := range unanswered {
		b.sendRaw(jsonrpc.AppendErrorResponse(nil, id, newError(errAskedClientLeft, false, "")))
	}
	for _, uri := range subs {
		b.changeSubscription(s, uri, false)
	}
	b.syncLogLevel() // s is closed: the child goes back to what the others asked
	if s.promisesChanges() {
		b.syncUpstream() // the same for the list changes it was promised
	}
}

// withdrawQuestions ends the legacy children's questions to s, which
// will answer none of them now, for why: each child gets the pool's
// error kind (it answers its call, and the timeouts the question paused
// go on), and s's client notifications/cancelled for each, so that no
// form or prompt stays open there for an answer nobody will use (MCP:
// the sender of a request may cancel it). A question its asker is still
// delivering is withdrawn here too, once it is out (a brief wait: the
// asker's delivery never blocks), not left to the asker, which could
// find s closed: told then counts it, and close writes it out before the
// stream ends. The caller makes sure s is not closed yet: its output
// still takes the withdrawals. told: it sent any.
func (s *session) withdrawQuestions(kind poolError, why string) (told bool) {
	for _, b := range s.srv.backendsOf(s) {
		childIDs, open := b.reqs.voidQuestionsTo(s)
		for _, id := range childIDs {
			b.sendRaw(jsonrpc.AppendErrorResponse(nil, id, newError(kind, false, "")))
		}
		for _, q := range open {
			if q.posing != nil {
				<-q.posing // its asker delivers it without waiting: the withdrawal follows it
			}
			s.deliver(cancelForChild(q.id, why), withdrawal(q.id))
		}
		told = told || len(open) > 0
	}
	return told
}

// withdrawVoid withdraws at their clients the questions of a child that
// died (reap), for why, but at sessions closed already, whose output
// takes nothing more.
func withdrawVoid(void []openQuestion, why string) {
	for _, q := range void {
		if !isClosed(q.sess.closed) {
			q.sess.deliver(cancelForChild(q.id, why), withdrawal(q.id))
		}
	}
}

// internalRequest sends a request of the pool's own whose answer nobody
// waits for (for example the tools/list that refreshes the tools' hints).
func (b *backend) internalRequest(method string, params []byte) {
	_ = b.send(b.newInternal(method, params)) // refused: the backend stopped or failed, and the child with it
}

// queueLocked queues a request of the pool's own behind what is queued,
// under b.mu: its place among the child's input is decided with the state
// the caller changed. It reports why the table refused it.
func (b *backend) queueLocked(p *pending) error {
	if _, err := b.registerLocked(p); err != nil {
		return err
	}
	b.queue = append(b.queue, outItem{p: p, line: p.line})
	return nil
}

// newInternal is a request of the pool's own, ready to send.
func (b *backend) newInternal(method string, params []byte) *pending {
	id := b.p.nextID.Add(1)
	return &pending{id: id, method: method, received: time.Now(), reply: make(chan []byte, 1),
		line: jsonrpc.AppendRequest(nil, id, method, params)}
}

// subChange is a subscribe (add) or unsubscribe of uri by one holder (a
// session or a listen), which the backend counts so that the child
// hears one subscribe and one unsubscribe however many ask.
type subChange struct {
	uri    string
	add    bool
	holder any      // *session or *listener
	wait   *subWait // set by send on a subscribe: the child's subscribe of uri on its way, if any
	stake  uint64   // set by countLocked on a subscribe that took its holder's stake: which one it took
	// changes, if set, is the holder session's count of its own changes
	// (session.subChanges), gen what it was when the change was decided:
	// send counts the change only if it is still that (else errSubChanged).
	changes *atomic.Uint64
	gen     uint64
	// turn, if set, is its session's turn for uri (session.subscription):
	// send ends it as it counts the change, so that the session's next
	// change of uri is counted after it.
	turn *subTurn
}

// subWait is a legacy child's resources/subscribe of a URI on its way:
// sent for its first holder (or by becomeReady for all), it is what every
// holder counted until the child answers it relies on. A listen's
// acknowledgement waits for it (subscribed), and so does the answer to a
// session's subscribe (answerCounted).
type subWait struct {
	p       *pending
	done    chan struct{}   // closed once p ended
	refused bool            // set before done is closed: the holders that relied on p hold nothing (the child refused p, or the pool gave up on p, its own)
	refusal jsonrpc.Message // refused by the child: its answer (its own copy), which the holders that relied on p get too
	failed  *outcome        // refused as the pool gave up on p: how, which the subscribes that relied on p end with too
	gaveUp  bool            // set before done is closed: the pool gave up on p, a holder's own, and that holder's stake went with it
	next    *subWait        // set before done is closed: the subscribe sent in p's place (gaveUp) for the holders that relied on p
}

// last waits for w's subscribe to end, and for each one sent again in
// its place, and returns the one whose end the holders that relied on w
// go by.
func (w *subWait) last() *subWait {
	<-w.done
	for w.next != nil {
		w = w.next
		<-w.done
	}
	return w
}

// subscribingLocked records p, a subscribe the child is to hear, as the
// one its URI's holders rely on until it ends (subscribeEnded).
func (b *backend) subscribingLocked(p *pending) {
	w := &subWait{p: p, done: make(chan struct{})}
	p.sub.wait = w
	b.subWaits[p.sub.uri] = w
}

// subHold is one holder's stake in a URI.
type subHold struct {
	uri    string
	holder any
}

// countLocked counts c; tell says the child must hear it: the first
// holder's subscribe or the last one's unsubscribe, while the child is
// ready. Before that (starting, restarting), the child gets the count
// from becomeReady instead, so it hears of each URI once. send counts a
// change as it queues it, under the same lock, so the child hears the
// changes in the order they were counted. A holder counts once: a
// change that is no change for it (a second subscribe, an unsubscribe
// of what it does not hold) counts nothing, so no session can release
// another's stake, whatever it sends.
func (b *backend) countLocked(c *subChange) (tell bool) {
	k := subHold{uri: c.uri, holder: c.holder}
	if _, held := b.holds[k]; held == c.add {
		return false
	}
	n := b.subs[c.uri]
	if c.add {
		b.stakes++
		c.stake, b.holds[k] = b.stakes, b.stakes
		n++
	} else {
		delete(b.holds, k)
		n--
	}
	if n <= 0 {
		delete(b.subs, c.uri)
		delete(b.subWaits, c.uri) // nobody relies on a subscribe on its way
	} else {
		b.subs[c.uri] = n
	}
	return b.state == StateReady && (c.add && n == 1 || !c.add && n == 0)
}

// subscribeEnded is told how a subscribe of the pool's or a session's
// ended (finish, with o). One the child answered with an error takes
// back the stakes that relied on it: they hold nothing. Those are every
// holder of its URI while it is the one on its way (subWaits: the
// holders counted after its first relied on it, as every holder does on
// a ready child's, becomeReady's), else its own holder's alone. So does
// one the pool gave up on (its timeout, a cancel, a stop: the kinds that
// tell the child, which drops it, if it saw it at all), with one
// difference: a holder's own (a session's or a listen's) takes back its
// holder's stake alone, so that nothing one holder's request does
// releases another's; the holders that relied on it keep theirs, and a
// ready child hears the pool's own subscribe for them in its place,
// which they rely on next (subWait.next), and which is not sent again if
// the pool gives up on it too. A holder's own stake goes only if it is
// still the one the subscribe took (subChange.stake), not one taken
// again since. A session that lost its stake forgets it too, shim
// included (dropSubscriptionSince), so that its next subscribe reaches
// the child (whose own answer it then gets) and is not taken for one it
// holds, unless it subscribed to the URI again since: a stake it took
// again meanwhile is kept. One given up on after it was written (written) may
// have been carried out, the cancel coming too late: if it was its URI's
// one on its way and nobody holds the URI now, the child hears the pool's
// own unsubscribe of it, queued under the lock that counts, so that a
// subscribe counted after reaches the child after it and leaves it
// subscribed. The listens and subscribes that waited for it are then let go
// (done).
func (b *backend) subscribeEnded(p *pending, o *outcome, written bool) {
	c := p.sub
	refused := o.kind == endAnswered && o.answer.Error.Present()
	gaveUp := endRules[o.kind].tellChild // the pool ended it unanswered, its child alive: told to drop it, if it saw it
	var lost []any
	var gens []uint64 // of each lost session's subChanges as its stake went: its drop is void if it subscribed to the URI again since
	var unsent error
	b.mu.Lock()
	w := c.wait
	if w != nil && w.p != p {
		w = nil // it relied on another's subscribe: that one's end lets its waiters go
	}
	current := w != nil && b.subWaits[c.uri] == w
	if current {
		delete(b.subWaits, c.uri)
	}
	stake := b.holds[subHold{uri: c.uri, holder: c.holder}]
	own := c.holder != nil && stake != 0 && stake == c.stake
	switch {
	case current && (refused || gaveUp && c.holder == nil):
		for k := range b.holds {
			if k.uri == c.uri {
				lost = append(lost, k.holder)
			}
		}
	case (refused || gaveUp) && own:
		lost = []any{c.holder}
	}
	for _, h := range lost {
		b.countLocked(&subChange{uri: c.uri, holder: h})
		if s, ok := h.(*session); ok {
			gens = append(gens, s.subChanges.Load())
		}
	}
	switch {
	case w == nil:
	case refused:
		w.refused, w.refusal = true, o.answer
		w.refusal.Raw = append([]byte(nil), o.answer.Raw...) // the reader's buffer is reused
	case gaveUp && c.holder == nil:
		failed := *o
		w.refused, w.failed = true, &failed
	case gaveUp:
		w.gaveUp = own
		// Queued under the lock that counts, as becomeReady's are: an
		// unsubscribe counted after it reaches the child after it. (A
		// stop gives up on what is in flight: the next pool subscribes
		// its sessions again.)
		if current && b.subs[c.uri] > 0 && b.state == StateReady && o.kind != endPoolStops {
			again := b.newSubscriptionChange(nil, c.uri, true)
			if unsent = b.queueLocked(again); unsent == nil {
				b.subscribingLocked(again)
				w.next = again.sub.wait
			}
		}
	}
	var unsubscribed bool
	var stray error // the child may stay subscribed: its unsubscribe was not queued
	if gaveUp && written && current && b.subs[c.uri] == 0 && b.state == StateReady && b.stopErr == nil && o.kind != endPoolStops {
		// No holder's: counted nowhere; dropped with the other
		// subscription changes if the child dies (reap).
		stray = b.queueLocked(b.newSubscriptionChange(nil, c.uri, false))
		unsubscribed = stray == nil
	}
	b.mu.Unlock()
	if unsent != nil {
		b.log.Warn("the child is not subscribed to a resource its sessions hold", "err", unsent)
	}
	if stray != nil {
		b.log.Warn("the child may stay subscribed to a resource nobody holds", "err", stray)
	}
	if testHookLosingStakes != nil && len(gens) > 0 {
		testHookLosingStakes()
	}
	// Forgotten before the subscribes that waited are answered: a
	// session's next subscribe, once it read the answer, reaches the
	// child. One that subscribed to the URI again since its stake went
	// (an unsubscribe, and a subscribe that took a new stake) keeps what
	// it holds now.
	for _, h := range lost {
		if s, ok := h.(*session); ok {
			s.dropSubscriptionSince(b, c.uri, gens[0])
			gens = gens[1:]
		}
	}
	if unsubscribed {
		b.signal()
	}
	if w != nil {
		if w.next != nil {
			b.signal()
		}
		close(w.done)
	}
}

// testHookLosingStakes, when set, runs in subscribeEnded between the
// count that took back sessions' stakes and the sessions' drop of them.
var testHookLosingStakes func()

// answerCounted answers a session's subscription change the child need
// not hear (errNotForChild): {}, but a subscribe that relies on another
// holder's still on its way (a legacy child's) is answered once the child
// answered that one, or the one sent in its place, and with its refusal
// if it refused it (or the pool's error, if the pool gave up on the one
// sent in its place). The wait is not the session's reader's: it exits
// once that subscribe ended (its answer, its child's death, its timeout,
// the pool's stop).
func (b *backend) answerCounted(p *pending) {
	w := p.sub.wait
	if w == nil {
		b.finish(p, outcome{kind: endNotForChild})
		return
	}
	b.p.wg.Go(func() {
		o := outcome{kind: endNotForChild}
		switch w = w.last(); {
		case w.failed != nil:
			o = *w.failed
		case w.refused:
			o.answer = w.refusal
		}
		b.finish(p, o) // (one the client cancelled meanwhile is ended: finish does nothing)
	})
}

// errSubChanged is send's word that a change decided on what its holder
// held (moveStakes' release) was not counted: the holder changed it since.
var errSubChanged = errors.New("the session changed its subscriptions since")

// errNotForChild is send's word that a counted subscription change need
// not reach the child (countLocked): whoever sent it answers it.
var errNotForChild = errors.New("the child need not hear this subscription change")

// changeSubscription sends the pool's own subscribe or unsubscribe of uri
// for holder (a listener, or a session that left), if the child must
// hear it.
func (b *backend) changeSubscription(holder any, uri string, add bool) {
	_ = b.send(b.newSubscriptionChange(holder, uri, add)) // not for the child, or refused: the backend stopped or failed, and the child with it
}

// newSubscriptionChange is the pool's own subscribe (add) or unsubscribe
// of uri for holder, for send to count (countLocked).
func (b *backend) newSubscriptionChange(holder any, uri string, add bool) *pending {
	method := "resources/unsubscribe"
	if add {
		method = "resources/subscribe"
	}
	p := b.newInternal(method, subscribeParams(uri))
	p.sub = &subChange{uri: uri, add: add, holder: holder}
	return p
}

func subscribeParams(uri string) []byte {
	return append(appendJSONString([]byte(`{"uri":`), uri), '}')
}

// snapshot copies the backend's state for Pool.Snapshot.
func (b *backend) snapshot(now time.Time) (BackendInfo, []RequestInfo) {
	b.mu.Lock()
	lastErr := b.lastErr
	info := BackendInfo{
		ID: b.id, Server: b.srv.name, State: b.state, StartedAt: b.startedAt, Restarts: b.restarts,
		Command:         b.cfg.shownLine(),
		ResolvedCommand: b.cfg.shownResolved(b.resolved), ResolveNote: b.resolveNote, StateReason: b.reason,
	}
	if b.child != nil {
		info.PID = b.child.pid
		info.CarriedOver = b.child.carried
	}
	if b.hs != nil {
		info.Era, info.ProtocolVersion = b.hs.era, b.hs.protocolVersion
	}
	if b.owner != nil {
		info.Session = b.owner.id
	}
	if !b.handshaking.IsZero() {
		waited := now.Sub(b.handshaking).Milliseconds()
		info.HandshakeWaitMs = &waited
	}
	info.StateReason = b.stateReasonLocked()
	childPID := info.PID
	st := b.stallLocked(now)
	b.mu.Unlock()
	info.LastError, info.BadLines, info.Orphaned = lastErr, b.badLines.Load(), b.orphaned.Load()
	info.DroppedNotifications = b.notesDropped.Load()
	reqs := b.reqs.infos(b.srv.name, childPID, now, st)
	info.InFlight = len(reqs)
	info.StderrTail = b.stderr.Load().tail(20)
	if b.owner != nil {
		info.Sessions = 1
	} else {
		info.Sessions = len(b.srv.membersOf(b))
	}
	info.Roots = b.roots
	return info, reqs
}

// stallShown is how long a child must have taken none of its input
// before a snapshot says so: a child that reads takes a large request in
// many pipefuls, the writer waiting for room before each.
const stallShown = time.Second

// stall is what a snapshot says of a child that does not read its input
// (requestTable.infos): for how long it has taken none (0: it reads, or
// not for stallShown yet), and the line ahead, the one it has the start
// of: its request (nil: not a request, or none), and how many of its
// bytes the child has, of all of them (0 of 0: none).
type stall struct {
	none        time.Duration
	p           *pending
	taken, size int
}

// stallLocked is the child's stall, for a snapshot at now.
func (b *backend) stallLocked(now time.Time) (st stall) {
	if b.child == nil || b.stalled.IsZero() || now.Sub(b.stalled) < stallShown {
		return st
	}
	st.none = now.Sub(b.stalled)
	if len(b.queue) > 0 && b.queue[0].restFor == b.child {
		it := b.queue[0]
		st.p, st.taken, st.size = it.p, len(it.line)-len(it.rest), len(it.line)+1
	}
	return st
}

// reasons are the stateReasons of the requests a stalled child holds up:
// the one it has part of, and those queued.
func (st stall) reasons() (writing, waiting string) {
	if st.none == 0 {
		return "", ""
	}
	none := st.none.Round(time.Second)
	if st.size == 0 {
		return "", fmt.Sprintf("waiting: the child is not reading its input (nothing taken for %s)", none)
	}
	writing = fmt.Sprintf("being written: the child is not reading its input (nothing taken for %s; %d of its %d bytes written)",
		none, st.taken, st.size)
	waiting = fmt.Sprintf("waiting: the child is not reading its input (nothing taken for %s; %d of the %d bytes of the message ahead written)",
		none, st.taken, st.size)
	return writing, waiting
}

// learnHints records which tools the child declared safe to repeat, from a
// tools/list result. Only servers with trustAnnotations use them.
func (b *backend) learnHints(result []byte) {
	if !b.config().TrustAnnotations {
		return
	}
	safe := toolHints(result)
	b.mu.Lock()
	for name, ok := range safe {
		b.hints[name] = ok
	}
	b.mu.Unlock()
}

// listToolsForHints lists a ready child's tools itself when the server's
// annotations are trusted and the pool has no hints: a retry after a crash
// must not depend on a client having listed tools on this child.
func (b *backend) listToolsForHints() {
	b.mu.Lock()
	need := b.cfg.TrustAnnotations && len(b.hints) == 0
	b.mu.Unlock()
	if !need {
		return
	}
	params := []byte("{}")
	if b.isModern() { // a 2026-07-28 child refuses a request without its _meta
		params, _ = json.Marshal(map[string]any{"_meta": b.p.ownMeta()})
	}
	b.internalRequest("tools/list", params)
}

// ownMeta is the _meta of the pool's own requests to a 2026-07-28 child:
// the revision, no client capabilities (the pool answers no questions of
// its own) and the pool's client info.
func (p *Pool) ownMeta() map[string]any {
	info, _ := json.Marshal(p.opts.ClientInfo)
	return map[string]any{metaProtocolVersion: Modern, metaClientCapabilities: map[string]any{}, metaClientInfo: json.RawMessage(info)}
}

func (b *backend) forgetHintsIf(method string) {
	if method == "notifications/tools/list_changed" {
		b.mu.Lock()
		clear(b.hints)
		b.mu.Unlock()
	}
}

// safeToRepeatLocked is DESIGN.md's rule for a written request whose child
// died: list methods, resources/read and server/discover may be sent again;
// a tools/call only when the user trusts the server's annotations and the
// tool said it is read-only or idempotent.
func (b *backend) safeToRepeatLocked(p *pending) bool {
	switch p.method {
	case "tools/list", "resources/list", "resources/templates/list", "prompts/list", "resources/read", "server/discover", "ping":
		return true
	case "tools/call":
		return b.cfg.TrustAnnotations && b.hints[p.name]
	}
	return false
}

var (
	errSessionEnded  = errors.New("session ended")
	errIdle          = errors.New("stopped after being idle")
	errMadeRoom      = errors.New("it had no session left, and its place went to the child of other roots")
	errConfigChanged = errors.New("the server's configuration changed")
	errServerRemoved = &finalStop{msg: "the server was removed from the configuration"}
)

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
