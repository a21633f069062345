package shim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/app/home"
	"github.com/switchboard-mcp/switchboard/app/launch"
	"github.com/switchboard-mcp/switchboard/app/localsock"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// relayed is the shim of a session whose bytes it relays: the client's
// stdin and stdout are a terminal or a file, or descriptors cannot be
// passed (Windows). Like an attached shim it outlives the pool: the pool's
// stream carries control lines (wire.Control) with what a resume needs
// (the client's initialize) and, when the pool stops on purpose, a Drain
// and then a Farewell with the input it had not handled. The shim then
// holds what the client sends, finds the next pool, resumes the session
// there and sends the held input first. After a crash (the stream ends
// with no Farewell) it does the same at once. A stream that ends with no
// Farewell may also be an eviction (the pool could not write the Farewell
// to a full stream): the pool then refuses the resume saying so
// (Welcome.Ended), and the shim exits with that, as after the Farewell.
type relayed struct {
	paths   home.Paths
	name    string
	run     string
	session string
	kept    // what a resume carries, from control lines (State)
	out     io.Writer

	fromClient <-chan []byte // the client's input, by readClient; closed at its end
	clientErr  chan error    // readClient's end: nil at EOF
	clientEOF  atomic.Bool   // the client's input ended; set by the relay loop
	held       []byte        // the client's input no pool has taken yet; the relay loop's
	count      *unanswered   // the client's requests not answered yet
	// cutLine says the client's output ends inside a line a pool did not
	// finish (it went away while writing an answer); the relay loop's.
	cutLine bool
}

// poolEnd is how a pool connection's stream ended.
type poolEnd struct {
	end     relayEnd
	err     error  // the pool ended the session with this error
	pending []byte // with relayPlanned: the input the pool hands back
	cutLine bool   // the stream ended inside a line of the client's
}

// How a pool connection ended.
type relayEnd int

const (
	relayDone    relayEnd = iota // the client is finished (its input ended and its answers are out, or its output is gone)
	relayPlanned                 // the pool handed the session back
	relayLost                    // the pool went away without a Farewell
)

// startRelay starts reading the client's input.
func startRelay(paths home.Paths, name string, w wire.Welcome, in io.Reader, out io.Writer) *relayed {
	chunks := make(chan []byte, 16)
	r := &relayed{paths: paths, name: name, run: w.Run, session: w.Session, out: out, fromClient: chunks,
		clientErr: make(chan error, 1), count: newUnanswered()}
	go readClient(in, chunks, r.clientErr)
	return r
}

// readClient sends the client's input in chunks until it ends.
func readClient(in io.Reader, chunks chan<- []byte, end chan<- error) {
	defer close(chunks)
	buf := make([]byte, bufSize)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			chunks <- append([]byte(nil), buf[:n]...)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			end <- err
			return
		}
	}
}

// relay relays over conn, and over the pools after it, until the client is
// finished.
func (r *relayed) relay(conn net.Conn, br *bufio.Reader) error {
	for {
		end, err := r.serve(conn, br)
		conn.Close()
		if end == relayDone || err != nil {
			return err
		}
		if conn, br, err = r.reconnect(end == relayPlanned); err != nil {
			if errors.Is(err, errClientGone) {
				return nil
			}
			return err
		}
	}
}

// serve relays over one pool connection until it ends.
func (r *relayed) serve(conn net.Conn, br *bufio.Reader) (relayEnd, error) {
	fromPool := make(chan poolEnd, 1)
	drain := make(chan struct{})
	go func() { fromPool <- r.copyFromPool(br, drain) }()
	draining, broken := false, false
	input := r.fromClient
	if r.clientEOF.Load() {
		input = nil
		if !halfClose(conn) {
			return relayDone, nil
		}
	}
	for {
		select {
		case c, ok := <-input:
			if !ok {
				input = nil
				r.clientEOF.Store(true)
				if err := <-r.clientErr; err != nil {
					return relayDone, fmt.Errorf("read stdin: %w", err)
				}
				// The client has finished sending, not stopped listening:
				// the pool answers what it has, then ends. (Where a
				// connection cannot be half-closed, the relay ends here.)
				if !draining && !halfClose(conn) {
					return relayDone, nil
				}
				continue
			}
			if draining || broken {
				r.held = append(r.held, c...)
				continue
			}
			r.count.sent(c) // before the write: the answers may come before it returns
			if n, err := conn.Write(c); err != nil {
				// The pool is going (killed, its connection refuses what
				// it can no longer read): no pool took c[n:], so it is
				// held for the next, after the head of its line.
				broken = true
				r.count.unsent(c, n)
				r.held = append(r.held, c[n:]...)
			}
		case <-drain:
			draining, drain = true, nil
			_, _ = conn.Write([]byte(wire.ControlDone))
		case e := <-fromPool:
			if e.end == relayPlanned {
				r.held = append(e.pending, r.held...) // the pool had taken these first
			}
			r.cutLine = e.cutLine
			return e.end, e.err
		}
	}
}

// halfClose tells the pool the client has finished sending.
func halfClose(conn net.Conn) bool {
	cw, ok := conn.(interface{ CloseWrite() error })
	return ok && cw.CloseWrite() == nil
}

// copyFromPool copies the pool's stream to the client, taking out the
// control lines, and says how the stream ended, and whether it ended
// inside a line: a pool that died while writing an answer leaves part of
// it, which the relay ends before anything else is written to the client
// (endCutLine), and only then. A session that ended there (evicted) leaves
// it as it is: a newline would pass the broken line off as whole.
func (r *relayed) copyFromPool(br *bufio.Reader, drain chan<- struct{}) (end poolEnd) {
	var ctl []byte // a control line being read
	inCtl := false
	midLine := false // the client's output ends inside a line
	defer func() { end.cutLine = midLine && end.end != relayDone }()
	buf := make([]byte, bufSize)
	for {
		n, err := br.Read(buf)
		chunk := buf[:n]
		for len(chunk) > 0 {
			if inCtl {
				i := bytes.IndexByte(chunk, '\n')
				if i < 0 {
					ctl = append(ctl, chunk...)
					break
				}
				ctl = append(ctl, chunk[:i]...)
				chunk = chunk[i+1:]
				inCtl = false
				if e, done := r.control(ctl, drain); done {
					return e
				}
				ctl = ctl[:0]
				continue
			}
			i := bytes.IndexByte(chunk, wire.Control)
			if i < 0 {
				i = len(chunk)
			}
			if i > 0 {
				r.count.received(chunk[:i])
				if _, werr := r.out.Write(chunk[:i]); werr != nil {
					return poolEnd{end: relayDone} // the client stopped reading: nothing left to keep
				}
				midLine = chunk[i-1] != '\n'
			}
			if i < len(chunk) {
				inCtl = true
				i++
			}
			chunk = chunk[i:]
		}
		if err != nil {
			if r.clientEOF.Load() && errors.Is(err, io.EOF) && !r.count.owed() {
				return poolEnd{end: relayDone} // the pool answered a finished client and ended
			}
			return poolEnd{end: relayLost}
		}
	}
}

// control handles one control line from the pool; done says the stream
// has ended with it.
func (r *relayed) control(line []byte, drain chan<- struct{}) (poolEnd, bool) {
	var msg struct {
		End     *string `json:"end"`
		Pending []byte  `json:"pending"`
		Drain   bool    `json:"drain"`
		wire.State
	}
	if json.Unmarshal(line, &msg) != nil {
		return poolEnd{}, false // not ours to judge: skip it
	}
	switch {
	case msg.Drain:
		close(drain)
	case msg.End != nil && *msg.End == wire.EndPoolStopping:
		return poolEnd{end: relayPlanned, pending: msg.Pending}, true
	case msg.End != nil && *msg.End != wire.EndEOF:
		return poolEnd{end: relayDone, err: errors.New(*msg.End)}, true
	case msg.End != nil:
		return poolEnd{end: relayDone}, true
	default:
		r.note(msg.State)
	}
	return poolEnd{}, false
}

// reconnect finds the next pool and resumes the session there, sending
// the held input first. After a planned stop it starts a pool only for a
// client that has sent something since. Like an attached shim's reattach
// it backs off between failed starts, and between pools that did not
// answer its hello, and gives up after maxFailedStarts of either in a row,
// when a pool refuses the session, when pools at their limit of local
// connections refused it for busyWait, or when clients may not start one
// and none came in userStartWait, answering what the client waits for
// (giveUp). That wait starts once the client is owed answers (it sent a
// request): an idle session waits for the user as long as it takes. A
// client that closed its input is finished once it is owed nothing; until
// then, as when it half-closes with a pool, it waits for the answers.
func (r *relayed) reconnect(planned bool) (net.Conn, *bufio.Reader, error) {
	sock := r.paths.PoolSocket()
	dial := func() (net.Conn, error) { return localsock.DialTimeout(sock, time.Second) }
	var backoff startBackoff
	var user userStart
	var unanswered helloBackoff
	// After a crash, what was sent and not answered is owed, and the
	// head of a line the dead pool had read goes to the next first. After
	// a planned stop the pool answered everything it took, and what it
	// did not take comes back in held, to be sent again: nothing is owed.
	var lost []wire.Lost
	var head []byte
	if planned {
		r.count.handedBack()
	} else {
		lost, head = r.count.lost(), r.count.head()
	}
	asked := false
	for {
		r.takeInput()
		asked = asked || waitsForAnswer(r.held)
		owed := len(lost) > 0 || asked
		if r.clientEOF.Load() && !owed {
			return nil, nil, errClientGone // the client finished, and waits for nothing
		}
		if !unanswered.ready() {
			time.Sleep(reattachPoll)
			continue
		}
		conn, err := dial()
		if err != nil && backoff.ready() && (!planned || owed || len(r.held) > 0) {
			conn, err = launch.Ensure(r.paths, dial)
			switch {
			case errors.Is(err, launch.ErrDisabled):
				if owed && user.over() { // the user did not start one meanwhile
					return nil, nil, r.giveUp(noPoolCame(r.paths, err), lost, head)
				}
			case err != nil && backoff.failed():
				return nil, nil, r.giveUp(fmt.Errorf("%w (no pool socket at %s) and starting one failed %d times; the last time: %v",
					ErrNoPool, sock, maxFailedStarts, err), lost, head)
			case err == nil:
				backoff.succeeded()
			}
		}
		if err != nil {
			time.Sleep(reattachPoll)
			continue
		}
		resume := r.resume(r.run, r.session)
		resume.Lost, resume.Counted = lost, true
		hello, _ := json.Marshal(wire.Hello{Server: r.name, PID: os.Getpid(), Resumable: true, Resume: resume})
		br, w, err := greet(conn, append(hello, '\n'), append(head[:len(head):len(head)], r.held...), false, nil, time.Minute)
		if err != nil {
			conn.Close()
			if sessionEnded(err) {
				return nil, nil, err // evicted: the pool ended the session, and nobody owes the client anything
			}
			if err := unanswered.next(err, w, r.run); err != nil {
				return nil, nil, r.giveUp(err, lost, head)
			}
			continue
		}
		// This pool writes next: the line the last one cut off ends first.
		r.endCutLine()
		r.count.sent(r.held) // this pool has them now (head is counted already)
		r.run, r.session, r.held = w.Run, w.Session, nil
		return conn, br, nil
	}
}

// takeInput moves what the client sent meanwhile into held.
func (r *relayed) takeInput() {
	for !r.clientEOF.Load() {
		select {
		case c, ok := <-r.fromClient:
			if !ok {
				r.clientEOF.Store(true)
				<-r.clientErr
				return
			}
			r.held = append(r.held, c...)
		default:
			return
		}
	}
}

// giveUp ends a session that no pool will take: it answers what the
// client waits for with an error naming cause (lost, which a dead pool
// took; the input no pool took, after head, the start of its first line
// that a dead pool read) and returns cause, for the shim to print as it
// exits.
func (r *relayed) giveUp(cause error, lost []wire.Lost, head []byte) error {
	r.takeInput()
	r.endCutLine()
	out := answerLost(nil, lost, r.name, cause)
	out = answerInput(out, append(head[:len(head):len(head)], r.held...), r.name, cause, lostIDs(lost))
	if len(out) > 0 {
		_, _ = r.out.Write(out)
	}
	return cause
}

// endCutLine ends the line a pool that went away left unfinished on the
// client's output, before more is written there: the client reads one
// unreadable line, then whole answers, not the next one glued to it.
func (r *relayed) endCutLine() {
	if !r.cutLine {
		return
	}
	r.cutLine = false
	r.count.received([]byte{'\n'}) // the broken line is no answer
	_, _ = r.out.Write([]byte{'\n'})
}
