package pool

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/accept"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// Hello, Welcome and Farewell are the local socket's messages (package
// wire, shared with the connect program).
type (
	Hello    = wire.Hello
	Welcome  = wire.Welcome
	Farewell = wire.Farewell
)

// EndEOF is a Farewell for a session whose client closed its input.
const EndEOF = wire.EndEOF

// helloLimit bounds a shim's hello line. A resuming shim's carries what
// its session was: the client's initialize params (one message, as
// base64), a lost entry for each request the dead pool owed (as many
// as a session may have in flight, or a ledger holds) and the
// subscriptions it keeps (wire.MaxKeptSubscriptions at most).
func (p *Pool) helloLimit() int {
	return helloRest + base64.StdEncoding.EncodedLen(p.opts.MaxMessageBytes) +
		max(p.opts.MaxSessionInFlight, wire.LedgerSlots)*maxLostEntry +
		wire.MaxKeptSubscriptions*maxKeptEntry
}

// maxLost bounds the lost requests a resume lists: what a session can
// owe. A ledger lists at most wire.LedgerSlots; a relaying shim's count
// holds the requests in flight (MaxSessionInFlight at most) and those the
// dead pool had not yet read, or had refused and not yet told. The
// hello's length bounds its bytes only, and short entries are many
// (hundreds of megabytes and seconds of CPU for a hello of 97 MiB).
func (p *Pool) maxLost() int { return p.opts.MaxSessionInFlight + wire.LedgerSlots }

// tooManyLostError is a resume that lists more lost requests than a
// session can owe (Pool.maxLost).
type tooManyLostError struct{ limit int }

func (e *tooManyLostError) Error() string {
	return fmt.Sprintf("bad hello: its resume lists more lost requests than a session can owe (%d)", e.limit)
}

// decodeHello decodes a hello line, refusing one whose resume lists more
// than maxLost lost requests as the first past the bound is read (the
// rest are never decoded).
func decodeHello(line []byte, maxLost int) (Hello, error) {
	in := helloJSON{Resume: resumeJSON{maxLost: maxLost}}
	if err := json.Unmarshal(line, &in); err != nil {
		return Hello{}, fmt.Errorf("decode the hello: %w", err)
	}
	in.Hello.Resume = in.Resume.r
	return in.Hello, nil
}

// helloJSON is a Hello as decodeHello decodes it: its resume in a field
// of its own (resumeJSON), which hides Hello's.
type helloJSON struct {
	Hello
	Resume resumeJSON `json:"resume"`
}

// resumeJSON decodes a hello's resume with its lost requests bounded.
type resumeJSON struct {
	maxLost int
	r       *wire.Resume // nil unless the hello has one
}

func (rj *resumeJSON) UnmarshalJSON(data []byte) error {
	if bytes.Equal(data, []byte("null")) {
		rj.r = nil
		return nil
	}
	in := struct {
		wire.Resume
		Lost lostJSON `json:"lost"` // hides Resume's
	}{Lost: lostJSON{max: rj.maxLost}}
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	in.Resume.Lost = in.Lost.list
	rj.r = &in.Resume
	return nil
}

// lostJSON decodes a resume's lost requests, at most max of them.
type lostJSON struct {
	max  int
	list []wire.Lost
}

func (l *lostJSON) UnmarshalJSON(data []byte) error {
	l.list = nil // as a slice is decoded: a second "lost" replaces the first
	if bytes.Equal(data, []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return fmt.Errorf("the resume's lost requests are not a list: %.20s", data)
	}
	l.list = []wire.Lost{} // as json.Unmarshal: [] is empty, not absent
	for dec.More() {
		if len(l.list) == l.max {
			return &tooManyLostError{l.max}
		}
		var e wire.Lost
		if err := dec.Decode(&e); err != nil {
			return fmt.Errorf("a lost request: %w", err)
		}
		l.list = append(l.list, e)
	}
	return nil
}

// helloRest is room for a hello's other fields; maxLostEntry is one lost
// request as JSON: an id a ledger can hold, each byte escaped at worst
// (\u003c), and its fields; maxKeptEntry one subscription, its URI
// escaped at worst.
const (
	helloRest    = 16 << 10
	maxLostEntry = 6*wire.LedgerMaxID + 64
	maxKeptEntry = 6*wire.MaxKeptURI + 3
)

// helloTooLongError is a hello line longer than the pool takes.
type helloTooLongError struct{ limit int }

func (e *helloTooLongError) Error() string {
	return fmt.Sprintf("the hello is longer than this pool takes (%d bytes)", e.limit)
}

// maxHelloFiles is the most descriptors a hello passes: a shim that
// attaches sends its client's stdin and stdout, and its ledger.
const maxHelloFiles = 3

// errHelloFiles is a hello that passed more descriptors than a shim
// sends. Each held one is one the pool's children and clients cannot
// have, so the hello is refused as the first one past the bound comes.
var errHelloFiles = fmt.Errorf("the hello passed more file descriptors than a shim sends (%d at most)", maxHelloFiles)

// growLine makes room in buf, the part of a line read so far, for more of
// it, up to limit bytes in all.
func growLine(buf []byte, limit int) ([]byte, error) {
	if len(buf) < cap(buf) {
		return buf, nil
	}
	if len(buf) >= limit {
		return buf, &helloTooLongError{limit}
	}
	n := min(max(cap(buf), 4<<10), limit-len(buf))
	return slices.Grow(buf, n)[: len(buf) : len(buf)+n], nil
}

// ServeStdio accepts shim connections on l until l is closed or the pool
// closes. Each connection names its server in a Hello line and then
// carries newline-delimited JSON-RPC in both directions.
func (p *Pool) ServeStdio(l net.Listener) error {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-p.closing:
			l.Close()
		case <-stop:
		}
	}()
	var backoff acceptBackoff
	for {
		conn, err := l.Accept()
		if err != nil {
			if isClosed(p.closing) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			if accept.Temporary(err) {
				// Out of descriptors (a flood of connections, say): the
				// pool serves on once some are closed, and stops only
				// when it is told to.
				if backoff.wait(p, err) {
					continue
				}
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		backoff.delay = 0
		release, ok := p.local.take(p.opts.MaxLocalSessions)
		if !ok {
			p.refuseLocal(conn)
			continue
		}
		if !p.goUnlessClosed(func() { p.serveShim(conn, release) }) {
			// The pool began to stop after this connection came in: its
			// shim finds the next pool (an upgrade's new program).
			release()
			writeLine(conn, Welcome{Error: ErrPoolClosed.Error(), Stopping: true})
			conn.Close()
		}
	}
}

// acceptBackoff paces an accept loop through accept.Temporary errors as
// net/http's Server.Serve does: 5 ms, doubling up to 1 s. It warns at
// most every 10 s.
type acceptBackoff struct {
	delay  time.Duration
	warned time.Time
	failed int // since the last warning
}

// wait sleeps before the next accept after err. It reports false if the
// pool began to close meanwhile.
func (b *acceptBackoff) wait(p *Pool, err error) bool {
	b.delay = min(max(2*b.delay, 5*time.Millisecond), time.Second)
	b.failed++
	if now := time.Now(); now.Sub(b.warned) >= 10*time.Second {
		p.log.Warn("cannot accept a connection; retrying", "err", err, "failures", b.failed, "wait", b.delay)
		b.warned, b.failed = now, 0
	}
	t := time.NewTimer(b.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.closing:
		return false
	}
}

// goUnlessClosed runs f in a goroutine Close waits for, unless the pool
// is closing: the accept loop is not the pool's, and a goroutine it adds
// as Close begins to wait would be one Close does not wait for.
func (p *Pool) goUnlessClosed(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Go(f)
	return true
}

// joinUnlessClosed counts its caller, a goroutine that is not the pool's
// (an HTTP handler's), among those Close waits for, as goUnlessClosed
// counts one it starts, until the caller calls p.wg.Done: what it starts
// meanwhile is started before Close waits. It reports false, counting
// nothing, once the pool is closing: the caller must then leave the pool
// alone. What runs counted must end once the pool's sessions and
// children have (Close ends them before it waits).
func (p *Pool) joinUnlessClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	return true
}

// goBeforeWait runs f in a goroutine Close waits for, unless Close (or
// Handover) waits for them already, and reports whether it did. It is
// for work that the pool's timers, whose goroutines are not the pool's,
// hand it: that work goes on while the pool closes (a hand-back's grace,
// the children's stop), and is done with once Close waits, for the
// sessions are closed and the children stopped by then.
func (p *Pool) goBeforeWait(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting {
		return false
	}
	p.wg.Go(f)
	return true
}

// afterFunc is the clock's AfterFunc for the pool's timers: f runs in a
// goroutine Close waits for, or not at all once it waits (goBeforeWait).
// What a timer's own goroutine started, or did, as Close waits would be
// a goroutine Close does not wait for, or, added from none as Close
// waits, a misuse of its WaitGroup.
func (p *Pool) afterFunc(d time.Duration, f func()) *time.Timer {
	return p.clock.AfterFunc(d, func() { p.goBeforeWait(f) })
}

// serveShim runs one shim connection: hello, then the session's reader in
// this goroutine and its writer in another. release counts the
// connection out of MaxLocalSessions: as it closes, once its session
// ended (which may be after this returns: a session whose client closed
// its input still delivers its answers), or here when no session began.
func (p *Pool) serveShim(conn net.Conn, release func()) {
	began := false
	defer func() {
		if !began {
			release()
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, rest, files, err := readHello(conn, p.helloLimit())
	if err != nil {
		p.log.Warn("a connection ended before its hello", "err", err)
		// A shim whose hello the pool cannot take is told why: it ends
		// its session rather than try the next pool.
		var tooLong *helloTooLongError
		if errors.As(err, &tooLong) || errors.Is(err, errHelloFiles) {
			writeLine(conn, Welcome{Error: err.Error()})
		}
		conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	hello, err := decodeHello(line, p.maxLost())
	if err != nil || hello.Server == "" {
		closeFiles(files)
		why := "bad hello: expected {\"server\":NAME}"
		var tooMany *tooManyLostError
		if errors.As(err, &tooMany) {
			p.log.Warn("a hello was refused", "err", err)
			why = tooMany.Error()
		}
		writeLine(conn, Welcome{Error: why})
		conn.Close()
		return
	}
	// The shim's PID is the socket's word where it has one: the hello's is
	// what the shim claims, and names whose session a resume is.
	peer := shimPeerPID(conn, hello.PID)
	if why, ok := p.ended.take(hello.Resume, p.opts.RunID, peer); ok {
		p.log.Info("a shim came back to resume a session this pool evicted; told it so", "session", hello.Resume.Session, "pid", peer)
		closeFiles(files)
		writeLine(conn, Welcome{Error: why, Ended: true})
		conn.Close()
		return
	}
	var in, out, ledgerFile *os.File
	var carried []byte // what the shim's earlier pool had read and not handled
	want := 2
	if hello.Ledger {
		want = 3
	}
	if hello.Attach && len(files) == want {
		if n := resumedBytes(hello); n > 0 {
			carried, err = readCarried(conn, rest, n, p.opts.MaxMessageBytes)
			rest = nil
		}
		if err == nil && len(rest) == 0 {
			in, out = files[0], files[1]
			if want == 3 {
				ledgerFile = files[2]
			}
		}
	}
	if in == nil {
		if len(files) > 0 {
			p.log.Warn("a shim's descriptors were not taken", "attach", hello.Attach, "files", len(files), "err", err)
		}
		closeFiles(files)
	}
	// Everything the session's transport is, is decided before the session
	// is published: a Pool.Close racing with this start must find it whole.
	setup := sessionSetup{transport: "stdio", peerPID: peer, resumed: resumedFrom(hello.Resume)}
	if hello.Resume != nil {
		setup.began = hello.Resume.Began
	}
	setup.closeConn = func(*session) { conn.Close() }
	switch {
	case in == nil && hello.Resumable:
		// The shim relays, and reads control lines: it keeps what it needs
		// to resume the session, and takes it back when the pool stops.
		setup.hb = newHandBack(conn)
		setup.keepState = func(s *session, st wire.State) func() { return s.queueLine(controlLine(st)) }
		setup.closeConn = func(s *session) {
			switch {
			case errors.Is(s.closeReason, errHandedBack):
				s.handOverRelay(conn)
			case errors.Is(s.closeReason, errEvicted):
				// Its stream is full: no Farewell gets through. The
				// shim is told when it comes back to resume it.
				p.ended.add(s.id, peer, s.closeReason)
			case endsForGood(s.closeReason):
				// After the last answers (finishOutput): the shim exits
				// saying why, as an attached one does. One whose stream
				// does not take it is told when it comes back.
				p.farewellDeadline(conn)
				if writeControl(conn, Farewell{End: s.closeReason.Error()}) != nil {
					p.ended.add(s.id, peer, s.closeReason)
				}
			}
			conn.Close()
		}
	case in != nil:
		// Attached: the client's pipes are the session's transport; the
		// connection only tells each side when the other is gone, and the
		// shim what it needs to resume the session with another pool.
		setup.attached = true
		setup.hb = newHandBack(in)
		if ledgerFile != nil {
			if setup.ledger, err = openLedger(ledgerFile); err != nil {
				p.log.Warn("a shim's ledger is unusable; its session's requests are not recorded there", "pid", peer, "err", err)
			}
		}
		lines := &shimLines{p: p, conn: conn}
		setup.keepState = func(s *session, st wire.State) func() {
			lines.keep(s, st)
			if st.Initialize != nil {
				return func() { lines.flush(s) } // before the initialize's answer (session.initialize)
			}
			return nil
		}
		setup.closeConn = func(s *session) {
			p.hangups.forget(s) // before conn closes: its descriptor may be reused
			in.Close()
			out.Close()
			bye := Farewell{End: EndEOF}
			switch {
			case errors.Is(s.closeReason, errHandedBack):
				bye = Farewell{End: wire.EndPoolStopping, Pending: s.hb.pending}
			case s.closeReason != nil && !drained(s.closeReason):
				bye.End = s.closeReason.Error()
			}
			if !lines.end(s, bye) && (errors.Is(s.closeReason, errEvicted) || endsForGood(s.closeReason)) {
				// No Farewell got through (its shim stopped reading): it
				// is told when it comes back to resume the session.
				p.ended.add(s.id, peer, s.closeReason)
			}
			conn.Close()
		}
	}
	closeConn := setup.closeConn
	setup.closeConn = func(s *session) {
		closeConn(s)
		release()
	}
	s, err := p.newSession(hello.Server, setup)
	began = err == nil
	if err != nil {
		setup.ledger.close()
		closeFiles(files)
		writeLine(conn, Welcome{Error: err.Error(), Stopping: errors.Is(err, ErrPoolClosed), Run: p.opts.RunID})
		conn.Close()
		return
	}
	if in == nil {
		if err := writeLine(conn, Welcome{Session: s.id, Run: p.opts.RunID}); err != nil {
			s.close(err)
			return
		}
		s.startOutput(conn) // a resume's answers need no child: they go out as it waits for one
		if hello.Resume != nil {
			s.resume(hello.Resume, nil)
		}
		s.readFrom(io.MultiReader(bytes.NewReader(rest), newRawReader(conn)), rawConn(conn), s.hb)
		return
	}
	var claim *resumeClaim
	if r := hello.Resume; r != nil {
		// The shim forgets what it carried once welcomed: the ledger
		// lists it first.
		claim = s.claimResume(r, carried)
		setup.hb.claim = claim
	}
	if err := writeLine(conn, Welcome{Session: s.id, Attached: true, Run: p.opts.RunID, Ledger: setup.ledger != nil}); err != nil {
		s.close(err)
		return
	}
	s.startOutput(out) // a resume's answers need no child: they go out as it waits for one
	if r := hello.Resume; r != nil {
		if r.Ledger && setup.ledger == nil {
			// A ledger this pool refuses, the last one likely refused too
			// (a shim from before Welcome.Ledger says it has one all the
			// same): it may list nothing. The history says what was owed.
			r.Ledger = false
		}
		s.resume(r, claim)
	}
	// The shim sends nothing more: its connection ending means it exited
	// (or was killed), and its client with it.
	if !p.hangups.watch(p, s, conn, out) {
		p.wg.Go(func() {
			_, _ = conn.Read(make([]byte, 1))
			s.close(nil)
		})
	}
	input := newRawReader(in)
	if claim != nil {
		input = io.MultiReader(claim.reader(carried), input)
	} else if len(carried) > 0 {
		input = io.MultiReader(bytes.NewReader(carried), input)
	}
	s.readFrom(input, rawConn(out), s.hb)
}

// shimLines are the lines an attached session's connection carries to its
// shim: State lines as the session's state changes, then the Farewell.
// Whoever changes the state (the session's reader, a child's reader that
// hears a log level accepted) only makes its line and queues it (what it
// says may be in a buffer the caller reuses), never waits on the shim:
// one goroutine at a time writes what is queued, in order, and the
// Farewell goes after all of it. A shim that takes no line for
// shimWriteTimeout has stopped reading: the link is broken (a line may be
// cut), nothing more is written, and the session is evicted, as one whose
// client stops reading is.
type shimLines struct {
	p    *Pool
	conn net.Conn

	writing sync.Mutex // held by whoever writes to conn

	mu     sync.Mutex // guards the fields below; never held across I/O
	queue  [][]byte   // lines, each with its newline
	active bool       // a goroutine writes the queue
	ended  bool       // the Farewell is written or on its way: nothing more is queued
	broken bool       // a write failed: nothing more is written
	by     time.Time  // when someone waiting (flush, end) needs the writes done; zero if no one
}

// shimWriteTimeout is how long a shim has to take one line from its
// session, and all a flush or an end waits for.
var shimWriteTimeout = 5 * time.Second

// keep queues st for s's shim. It never waits: its caller holds s.mu
// (session.keepLocked).
func (l *shimLines) keep(s *session, st wire.State) {
	line, _ := json.Marshal(st)
	line = append(line, '\n')
	l.mu.Lock()
	if l.ended || l.broken {
		l.mu.Unlock()
		return
	}
	l.queue = append(l.queue, line)
	start := !l.active
	l.active = true
	l.mu.Unlock()
	if start {
		l.p.wg.Go(func() { l.write(s) })
	}
}

// write writes what is queued until nothing is.
func (l *shimLines) write(s *session) {
	if testHookShimLines != nil {
		testHookShimLines()
	}
	l.writing.Lock()
	defer l.writing.Unlock()
	for {
		l.mu.Lock()
		q := l.queue
		l.queue = nil
		if len(q) == 0 {
			l.active = false
		}
		l.mu.Unlock()
		if len(q) == 0 {
			return
		}
		l.writeLines(s, q)
	}
}

// flush writes what is queued now, on the caller's goroutine, and
// returns once it is written: after a write under way, which took its
// lines first. Only the initialize waits so (its State line must reach
// the shim before its answer reaches the client), and for
// shimWriteTimeout at most: a write under way that has not ended by then
// breaks the link.
func (l *shimLines) flush(s *session) {
	by := l.hurry()
	l.writing.Lock()
	defer l.writing.Unlock()
	l.mu.Lock()
	q := l.queue
	l.queue = nil
	l.mu.Unlock()
	l.writeLines(s, q)
	l.mu.Lock()
	if l.by.Equal(by) && !l.ended {
		l.by = time.Time{}
	}
	l.mu.Unlock()
}

// end writes what is still queued, then the Farewell bye: after a write
// under way, which took its lines before these. It waits shimWriteTimeout
// at most, and reports whether bye was written.
func (l *shimLines) end(s *session, bye Farewell) bool {
	l.hurry()
	l.mu.Lock()
	q := l.queue
	l.queue, l.ended = nil, true
	l.mu.Unlock()
	l.writing.Lock()
	defer l.writing.Unlock()
	l.writeLines(s, q)
	b, _ := json.Marshal(bye)
	return l.writeLines(s, [][]byte{append(b, '\n')})
}

// hurry has every write from now on end within shimWriteTimeout, and
// returns when they must.
func (l *shimLines) hurry() time.Time {
	by := time.Now().Add(shimWriteTimeout)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by.IsZero() || by.Before(l.by) {
		l.by = by
	}
	return l.by
}

// testHookShimLines, when set, runs as a goroutine begins to write an
// attached session's State lines, before it takes them from the queue.
var testHookShimLines func()

// writeLines writes lines to s's shim, each within shimWriteTimeout and
// all by the time someone waiting needs them (hurry), and reports whether
// they were written. The first that is not breaks the link and evicts s
// (unless it is closing already): what is queued, and what would be, is
// dropped.
func (l *shimLines) writeLines(s *session, lines [][]byte) bool {
	for _, line := range lines {
		l.mu.Lock()
		broken, by := l.broken, l.by
		l.mu.Unlock()
		if broken {
			return false
		}
		if d := time.Now().Add(shimWriteTimeout); by.IsZero() || d.Before(by) {
			by = d
		}
		_ = l.conn.SetWriteDeadline(by)
		_, err := l.conn.Write(line)
		_ = l.conn.SetWriteDeadline(time.Time{})
		if err != nil {
			l.mu.Lock()
			l.broken, l.queue = true, nil
			l.mu.Unlock()
			if !isClosed(s.closed) && s.evictOnce("shim", err) {
				s.p.wg.Go(s.endEvicted)
			}
			return false
		}
	}
	return true
}

// resumedBytes is how many bytes of its earlier pool's unread input a
// resuming shim sends after its hello.
func resumedBytes(h Hello) int {
	if h.Resume == nil || h.Resume.PendingBytes < 0 {
		return 0
	}
	return h.Resume.PendingBytes
}

// readCarried reads the n bytes a resuming shim sends after its hello, of
// which rest were read with the hello. They were one client's unhandled
// input: at most one message and a buffer's worth more.
func readCarried(conn net.Conn, rest []byte, n, maxMessage int) ([]byte, error) {
	if n > maxMessage+1<<20 || len(rest) > n {
		return nil, fmt.Errorf("carried input of %d bytes is more than a session can have left", n)
	}
	buf := make([]byte, n)
	copy(buf, rest)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer conn.SetReadDeadline(time.Time{})
	if _, err := io.ReadFull(conn, buf[len(rest):]); err != nil {
		return nil, fmt.Errorf("read carried input: %w", err)
	}
	return buf, nil
}

// rawConn is c's descriptor for polling, or nil.
func rawConn(c any) syscall.RawConn {
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			return rc
		}
	}
	return nil
}

// writeLine writes v as one JSON line to a shim's connection.
func writeLine(conn net.Conn, v any) error {
	b, _ := json.Marshal(v)
	return writeBytes(conn, append(b, '\n'))
}

// writeBytes writes b to a shim's connection, giving it 5 s to take them.
func writeBytes(conn net.Conn, b []byte) error {
	_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := conn.Write(b)
	_ = conn.SetWriteDeadline(time.Time{})
	return err
}

// readLine reads conn up to the first newline, at most limit bytes, and
// returns the line without it, and whatever was read after it as rest.
func readLine(conn net.Conn, limit int) (line, rest []byte, err error) {
	var buf []byte
	for {
		if buf, err = growLine(buf, limit); err != nil {
			return nil, nil, err
		}
		n, err := conn.Read(buf[len(buf):cap(buf)])
		seen := len(buf)
		buf = buf[:len(buf)+n]
		if i := indexNL(buf[seen:]); i >= 0 {
			return buf[:seen+i], buf[seen+i+1:], nil
		}
		if err != nil {
			return nil, nil, err
		}
	}
}

func indexNL(b []byte) int { return bytes.IndexByte(b, '\n') }

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// readFrom is the session's reader for a byte stream: one message per
// line. It returns when the session ends; EOF is a half-close (halfclose.go)
// and peer the output watched meanwhile. hb, when set, can stop it for a
// hand-back (handback.go).
func (s *session) readFrom(r io.Reader, peer syscall.RawConn, hb *handBack) {
	unfinished := &unfinishedLine{s: s}
	defer unfinished.hold(0)
	lr := &lineReader{r: r, max: s.p.opts.MaxMessageBytes, onRelease: s.p.releasedLarge, onLong: unfinished.hold, progress: &unfinished.have}
	for {
		line, err := lr.next()
		if err != nil {
			var tl *tooLongError
			if errors.As(err, &tl) && err == error(tl) {
				s.p.parseErrors.Add(1)
				id, _ := findClientID(tl.head)
				s.replyError(id, newError(errMessageTooLarge, false, "", s.p.opts.MaxMessageBytes))
				continue
			}
			if errors.Is(err, errUnfinishedBudget) {
				s.close(err) // not handed back: the next pool would be sent the same line
				return
			}
			if hb.stopped(lr, s) {
				return // the pool is stopping; the session goes back to its shim
			}
			if errors.Is(err, io.EOF) {
				s.halfClose(peer)
				return
			}
			s.close(nil)
			return
		}
		hb.handle(s, line) // s.handle(line), unless the session goes back to its shim
	}
}

// startOutput makes conn the session's output. Lines are written by the
// goroutine that offers them when nothing is queued (tryWrite); a drain
// goroutine runs only while something is (kick).
func (s *session) startOutput(conn deadlineWriter) {
	o := &sessionOut{conn: conn, w: newDirectWriter(conn)}
	s.stream.Store(o)
	if len(s.out) > 0 {
		o.kick(s) // offered before the output was set
	}
}

// sessionOut is a byte-stream session's output. Whoever holds mu writes to
// the client: a deliverer that found nothing queued (tryWrite), or drain.
type sessionOut struct {
	conn   deadlineWriter
	w      *directWriter // nil: every line goes through drain
	active atomic.Bool   // a drain goroutine runs

	// What a write began and the client took only part of: rest and a
	// newline go first. rest is the end of a line or of several (a
	// batch's, a cut drain's: a copy), or of one line a deliverer wrote
	// (not a copy: a delivered line is the session's); ends are the
	// lines in it that answer requests, their slots released once they
	// are written. Guarded by mu.
	mu   sync.Mutex
	cut  bool
	rest []byte
	ends []lineEnd
	// stalled: a write waited EvictAfter for the client and timed out.
	// A client that reads nothing is written nothing more, not even a
	// graceful end's last answers (finishOutput). Guarded by mu.
	stalled bool
}

// kick makes sure a drain goroutine runs for what is queued. Its callers
// are the pool's goroutines and calls that entered it (Pool.Cancel), so
// the drain is counted before Close waits.
func (o *sessionOut) kick(s *session) {
	if o.active.CompareAndSwap(false, true) {
		s.p.wg.Go(func() { s.drain(o) })
	}
}

// writers are the buffers drain goroutines write through: only a session
// with a backlog holds one.
var writers = sync.Pool{New: func() any { return &taken{bw: bufio.NewWriterSize(nil, 64<<10)} }}

// writerFor is a buffer from writers that writes to conn; putWriter
// gives it back.
func writerFor(conn deadlineWriter) *taken {
	t := writers.Get().(*taken)
	t.bw.Reset(conn)
	return t
}

func putWriter(t *taken) {
	t.reset()
	t.bw.Reset(nil)
	writers.Put(t)
}

// outLine is a line queued for the client, and the ledger slot of the
// request it answers (0: none), released once the line is written.
type outLine struct {
	line []byte
	slot int32
}

// lineEnd is where a line that answers a request ends in what a writer
// writes (the offset just past its newline), and the request's ledger
// slot.
type lineEnd struct {
	at   int
	slot int32
}

// releaseWritten releases the slots of the lines of ends that the first
// n bytes written complete, and returns the others, moved back by n.
func (s *session) releaseWritten(ends []lineEnd, n int) []lineEnd {
	i := 0
	for ; i < len(ends) && ends[i].at <= n; i++ {
		s.ledger.release(ends[i].slot)
	}
	left := ends[i:]
	for j := range left {
		left[j].at -= n
	}
	return left
}

// drain writes what is queued for the client until nothing is, then
// exits; every write must be taken within EvictAfter, or the session is
// evicted. Once the session has closed, its last answers are flushQueued's.
func (s *session) drain(o *sessionOut) {
	t := writerFor(o.conn)
	defer putWriter(t)
	for {
		o.mu.Lock()
		var err error
		owed, wrote := s.owedCount(), false
		// Handed back, or closed: what is queued now (a listen's closing
		// lines) is finishOutput's, under its own deadline; a write here
		// would only meet the hand-back's cut.
		if !isClosed(s.closed) && !s.handingBack.Load() {
			s.ledger.midLine(true) // a write that blocks may stop anywhere
			err = s.writeQueued(o.conn, t, o)
			if wrote = err == nil; wrote {
				s.ledger.midLine(false) // what was queued ended with a whole line
			}
			if isTimeout(err) && !s.handingBack.Load() {
				o.stalled = true
			}
		}
		if wrote {
			s.releaseOwed(owed) // their answers were queued before the count, so are written
		}
		o.mu.Unlock()
		if err != nil {
			o.active.Store(false)
			switch {
			case isClosed(s.closed) || s.handingBack.Load():
				// Closed meanwhile, or handed back (its write was cut
				// short: handBackSessions): the closer writes what is left.
			case isTimeout(err):
				if s.evictOnce() {
					s.endEvicted()
				} else {
					s.close(errEvicted) // evicted meanwhile by a delivery: it is counted
				}
			default:
				s.close(nil)
			}
			return
		}
		o.active.Store(false)
		// A line offered since the queue was last seen empty found this
		// goroutine still active: look again.
		o.mu.Lock()
		more := (len(s.out) > 0 || o.cut || s.owedCount() > 0) && !isClosed(s.closed) && !s.handingBack.Load()
		o.mu.Unlock()
		if !more || !o.active.CompareAndSwap(false, true) {
			return
		}
	}
}

// finishOutput writes the last answers of a session that ended
// gracefully, releases their ledger slots, then closes its transport. A
// client that let a write time out (stalled) gets none: it would be
// evicted, and is not given EvictAfter again.
func (s *session) finishOutput(o *sessionOut) {
	t := writerFor(o.conn)
	o.mu.Lock()
	if !o.stalled {
		owed := s.owedCount()
		s.ledger.midLine(true)
		if s.flushQueued(o.conn, t, o) == nil {
			s.ledger.midLine(false)
			s.releaseOwed(owed)
		}
	}
	o.mu.Unlock()
	putWriter(t)
	s.closeTransport()
	s.dropQueued() // what the client did not take in time
}

// tryWrite writes line to the client at once, when nothing is queued
// before it and nobody is writing, with one write that never waits. It
// reports false when line is still the caller's to queue. A line the
// client takes only part of is finished by drain, before anything else.
func (o *sessionOut) tryWrite(s *session, line []byte, slot int32) bool {
	if o.w == nil || len(s.out) > 0 || !o.mu.TryLock() {
		return false
	}
	if len(s.out) > 0 || o.cut || isClosed(s.closed) {
		o.mu.Unlock()
		return false
	}
	n, _ := o.w.writeNow(line) // an error comes back to drain's write of the queued line
	cut := n > 0 && n <= len(line)
	switch {
	case cut:
		o.cut, o.rest = true, line[n:]
		if slot > 0 {
			o.ends = []lineEnd{{at: len(line) - n + 1, slot: slot}} // released by the writer of the rest
		}
		s.ledger.midLine(true)
	case n > 0:
		// Under mu, as every release of a written answer's slot: a
		// client that has read a later line of this output knows this
		// one's request is owed no more, even if the pool dies now.
		s.ledger.release(slot)
	}
	o.mu.Unlock()
	if n == 0 {
		return false
	}
	if cut {
		o.kick(s)
	}
	if len(line) > keepBuf {
		s.p.releasedLarge()
	}
	return true
}

// writeQueued writes the end of a write cut short, then everything
// queued, in writes of up to 48 KiB that each must be taken within
// EvictAfter. A write that fails (a hand-back cut it short) leaves what
// it did not write to go first (taken.cut): the session's last flush
// (finishOutput) writes it, or its requests stay owed.
func (s *session) writeQueued(conn deadlineWriter, t *taken, o *sessionOut) error {
	err := s.bufferQueued(conn, t, o)
	if err != nil {
		t.cut(s, o)
	}
	return err
}

// bufferQueued is writeQueued's writing, through t.
func (s *session) bufferQueued(conn deadlineWriter, t *taken, o *sessionOut) error {
	if o.cut {
		rest, ends := o.rest, o.ends
		o.cut, o.rest, o.ends = false, nil, nil
		if err := s.buffer(conn, t, rest, ends...); err != nil {
			return err
		}
	}
	for {
		select {
		case q := <-s.out:
			err := s.buffer(conn, t, q.line, lineEnd{at: len(q.line) + 1, slot: q.slot})
			if len(q.line) > keepBuf {
				s.p.releasedLarge()
			}
			if err != nil {
				return err
			}
			if t.bw.Buffered() < 48<<10 {
				continue
			}
		default:
			if t.bw.Buffered() == 0 {
				t.written(s)
				return nil
			}
		}
		s.writeDeadline(conn)
		if err := t.flush(s); err != nil {
			return err
		}
	}
}

// taken is what a writer took for the client (the rest of a write cut
// short, queued lines) and gave its buffer since the buffer was last
// empty: the ledger slot of each line is released once the buffer has
// written the line's last byte, and a write that fails leaves what it
// did not write to be written first (cut).
type taken struct {
	bw       *bufio.Writer
	pieces   [][]byte  // in order, each followed by a newline
	ends     []lineEnd // where the lines among them that answer requests end
	size     int       // the pieces' bytes, their newlines included
	accepted int       // how many of those bw took
}

// put gives bw piece and a newline; ends are the lines in them that
// answer requests (slot 0: none).
func (t *taken) put(piece []byte, ends ...lineEnd) error {
	for _, e := range ends {
		if e.slot > 0 {
			t.ends = append(t.ends, lineEnd{at: t.size + e.at, slot: e.slot})
		}
	}
	t.pieces = append(t.pieces, piece)
	t.size += len(piece) + 1
	n, err := t.bw.Write(piece)
	t.accepted += n
	if err == nil {
		if err = t.bw.WriteByte('\n'); err == nil {
			t.accepted++
		}
	}
	return err
}

// flush writes what bw holds; then everything taken is written.
func (t *taken) flush(s *session) error {
	err := t.bw.Flush()
	if err == nil {
		t.written(s)
	}
	return err
}

// written releases the slots of the lines taken, all written, and
// forgets them.
func (t *taken) written(s *session) {
	s.releaseWritten(t.ends, t.size)
	t.reset()
}

func (t *taken) reset() {
	clear(t.pieces)
	t.pieces, t.ends, t.size, t.accepted = t.pieces[:0], t.ends[:0], 0, 0
}

// cut is for a write that failed: the slots of the lines it wrote whole
// are released (under o.mu, as every release of a written answer's
// slot), and what it did not write goes first when o is written next,
// those lines' slots with it.
func (t *taken) cut(s *session, o *sessionOut) {
	n := t.accepted - t.bw.Buffered() // what reached the client
	ends := s.releaseWritten(t.ends, n)
	if n < t.size {
		rest := make([]byte, 0, t.size-n)
		off := 0
		for _, p := range t.pieces {
			if end := off + len(p) + 1; end > n {
				rest = append(append(rest, p[max(0, n-off):]...), '\n')
			}
			off += len(p) + 1
		}
		o.cut, o.rest, o.ends = true, rest[:len(rest)-1], slices.Clone(ends)
	}
	t.reset()
}

// writeDeadline gives the client EvictAfter to take the next write, or
// no time once the session is being handed back (handBackSessions sets
// handingBack, then cuts the write under way short; a deadline set here
// in between is cut short here).
func (s *session) writeDeadline(conn deadlineWriter) {
	_ = conn.SetWriteDeadline(time.Now().Add(s.p.opts.EvictAfter))
	switch {
	case s.handingBack.Load():
		_ = conn.SetWriteDeadline(time.Now())
	case isClosed(s.p.closing) && s.p.opts.StopGrace < s.p.opts.EvictAfter:
		// The pool is stopping: the last writes of a session that ended
		// before it get StopGrace (beginClose cut the write under way).
		_ = conn.SetWriteDeadline(time.Now().Add(s.p.opts.StopGrace))
	}
}

// buffer adds b and a newline to t (ends: taken.put). Bytes that do not
// fit go to conn at once, so the client gets EvictAfter from here to
// take them.
func (s *session) buffer(conn deadlineWriter, t *taken, b []byte, ends ...lineEnd) error {
	if len(b) > t.bw.Available() {
		s.writeDeadline(conn)
	}
	return t.put(b, ends...)
}

// flushQueued writes what is still queued after a graceful end: the last
// answers a half-closed client is owed, the end of a write cut short
// first. It reports whether all of it was written; if not, the answers
// it did not write whole stay owed.
func (s *session) flushQueued(conn deadlineWriter, t *taken, o *sessionOut) error {
	s.p.lastWriteDeadline(conn)
	if o.cut {
		_ = t.put(o.rest, o.ends...) // an error comes back from the flush
		o.cut, o.rest, o.ends = false, nil, nil
	}
	for {
		select {
		case q := <-s.out:
			_ = t.put(q.line, lineEnd{at: len(q.line) + 1, slot: q.slot})
			continue
		default:
		}
		break
	}
	err := t.flush(s)
	if err != nil {
		t.cut(s, o)
	}
	return err
}

// lastWriteDeadline gives the client of a session that ended
// gracefully EvictAfter to take its last answers (flushQueued), or
// StopGrace at most once the pool is stopping.
func (p *Pool) lastWriteDeadline(conn deadlineWriter) {
	wait := p.opts.EvictAfter
	if isClosed(p.closing) {
		wait = min(wait, p.opts.StopGrace) // the pool is stopping: no client holds it up
	}
	_ = conn.SetWriteDeadline(time.Now().Add(wait))
}

// writingOut enters conn, an output whose writes a stop cuts short to
// StopGrace (beginClose), so that a client that does not read holds the
// stop up no longer than one of the pool's own sessions would: the
// output of a session that ended and writes out its last answers, or
// the response of an HTTP request Close waits for (joinUnlessClosed).
// The pool already stopping, it is cut short here. Either the stop sees
// conn here, or this sees the pool closed. done removes it once written;
// from then on the stop leaves it alone (a response is done with once
// its handler returns).
func (p *Pool) writingOut(conn writeDeadliner) (done func()) {
	p.mu.Lock()
	closed := p.closed
	if !closed {
		p.flushing[conn] = struct{}{}
	}
	p.mu.Unlock()
	if closed {
		_ = conn.SetWriteDeadline(time.Now().Add(p.opts.StopGrace))
	}
	return func() {
		p.mu.Lock()
		delete(p.flushing, conn)
		p.mu.Unlock()
	}
}

// stopDeadline gives the next write to rc, an output entered with
// writingOut, d, or StopGrace once the pool is stopping. It looks at the
// pool after it set d: a stop that began before the look is seen, and
// one that began after cuts rc itself (beginClose), later.
func (p *Pool) stopDeadline(rc writeDeadliner, d time.Duration) error {
	err := rc.SetWriteDeadline(time.Now().Add(d))
	if isClosed(p.closing) && p.opts.StopGrace < d {
		err = rc.SetWriteDeadline(time.Now().Add(p.opts.StopGrace))
	}
	return err
}

// farewellDeadline bounds the write of a relayed session's Farewell, on
// a stream its last answers were written to (writingOut): a shim has
// shimWriteTimeout to take it, and StopGrace once the pool stops. A stop
// that begins after this sets its own deadline (beginClose), which wins;
// one that began before is seen here.
func (p *Pool) farewellDeadline(conn net.Conn) {
	_ = conn.SetWriteDeadline(time.Now().Add(shimWriteTimeout))
	if isClosed(p.closing) {
		_ = conn.SetWriteDeadline(time.Now().Add(min(shimWriteTimeout, p.opts.StopGrace)))
	}
}

// deadlineWriter is a session's output: a shim's connection, or the
// client's own stdout pipe when the shim attached.
type deadlineWriter interface {
	io.Writer
	writeDeadliner
}

// writeDeadliner is an output whose writes can be cut short: a
// connection, an HTTP response's controller.
type writeDeadliner interface {
	SetWriteDeadline(time.Time) error
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
