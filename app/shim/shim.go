// Package shim is `switchboard connect NAME`: the process an MCP client
// starts for each session, relaying its stdin and stdout to the pool over
// the pool's Unix socket. A client may run dozens of these at once, so the
// package imports little (no GUI, no SQL) and the relay copies bytes
// without parsing them: framing and routing are the pool's job.
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
	"time"

	"github.com/switchboard-mcp/switchboard/app/home"
	"github.com/switchboard-mcp/switchboard/app/launch"
	"github.com/switchboard-mcp/switchboard/app/localsock"
	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// ErrNoPool means no Switchboard is running for this SWITCHBOARD_HOME and
// none could be started.
var ErrNoPool = errors.New("switchboard is not running")

// bufSize is the relay's buffer each way: one read or write moves a
// whole burst of messages.
const bufSize = 64 << 10

// Connect relays in to the pool's server name and the pool's answers to
// out, until in ends (then it returns nil at once) or the pool closes the
// connection. When in and out are this process's stdin and stdout and
// are pipes or sockets, it hands them to the pool instead (SCM_RIGHTS)
// and only waits for the session to end: the pool then reads and writes
// the client's pipes itself.
func Connect(name string, in io.Reader, out io.Writer) error {
	paths, err := home.Resolve()
	if err != nil {
		return err
	}
	attach := attachable(in, out)
	var ledger *os.File
	if attach {
		ledger = newLedger()
	}
	hello, _ := json.Marshal(wire.Hello{Server: name, PID: os.Getpid(), Attach: attach, Ledger: ledger != nil, Resumable: !attach})
	// A pool that dies as this shim connects (its socket still accepts
	// for a moment) is no pool: try again, which finds or starts the
	// next, up to three times. One that says it is stopping (an upgrade
	// in place, a restart) is tried again until the next one answers.
	// One at its limit of local connections is tried again for busyWait
	// (busyRetry). Giving up, the shim answers what its client sent
	// (answerRefused).
	var conn net.Conn
	var br *bufio.Reader
	var w wire.Welcome
	deadline := time.Now().Add(launch.StartTimeout)
	var busy busyRetry
	for died := 0; ; {
		if conn, err = dialPool(paths); err != nil {
			return answerRefused(attach, in, out, name, err)
		}
		if br, w, err = greet(conn, append(hello, '\n'), nil, attach, ledger, 10*time.Second); err == nil {
			break
		}
		conn.Close()
		var gone *poolGoneError
		var refused refusedError
		if errors.As(err, &refused) {
			return answerRefused(attach, in, out, name, err)
		}
		var full busyError
		if errors.As(err, &full) {
			wait, err := busy.next(err)
			if err != nil {
				return answerRefused(attach, in, out, name, err)
			}
			time.Sleep(wait)
			continue
		}
		if !errors.As(err, &gone) || time.Now().After(deadline) {
			// Alive but stuck, or something unexpected: not retried.
			return answerRefused(attach, in, out, name, err)
		}
		if !gone.stopping {
			if died++; died == 3 {
				return answerRefused(attach, in, out, name, err)
			}
		}
		time.Sleep(reattachPoll)
	}
	defer conn.Close()
	k := kept{began: time.Now()} // the session began: the next pools are told when
	if attach && !w.Attached {
		ownStdio() // the pool relays, and did not keep the pipes it was sent
	}
	if w.Attached {
		return (&attached{paths: paths, name: name, run: w.Run, session: w.Session, kept: k, ledger: ledger,
			ledgerTaken: w.Ledger}).wait(conn, br)
	}
	r := startRelay(paths, name, w, in, out)
	r.kept = k
	return r.relay(conn, br)
}

// dialPool connects to the pool, starting it when none runs and clients
// may.
func dialPool(paths home.Paths) (net.Conn, error) {
	sock := paths.PoolSocket()
	conn, err := localsock.DialTimeout(sock, 5*time.Second)
	if err == nil {
		return conn, nil
	}
	// No pool (or a stale socket of a killed one): start it, as the user
	// would otherwise have to before every client.
	conn, err = launch.Ensure(paths, func() (net.Conn, error) { return localsock.DialTimeout(sock, time.Second) })
	if errors.Is(err, launch.ErrDisabled) {
		return nil, fmt.Errorf("%w (no pool socket at %s) and %v in %s: start it with `switchboard` (tray) or `switchboard serve`, or turn autostart.fromClients on", ErrNoPool, sock, err, launch.ConfigOf(paths))
	}
	if err != nil {
		return nil, fmt.Errorf("%w (no pool socket at %s) and starting one failed: %v", ErrNoPool, sock, err)
	}
	return conn, nil
}

// poolGoneError is a connection that ended before the pool's Welcome,
// or whose Welcome said the pool is stopping.
type poolGoneError struct {
	err      error
	stopping bool
}

func (e *poolGoneError) Error() string { return "the pool did not answer: " + e.err.Error() }
func (e *poolGoneError) Unwrap() error { return e.err }

// greet sends the hello, then extra (input the session carries to this
// pool), and reads the pool's Welcome within wait.
func greet(conn net.Conn, hello, extra []byte, attach bool, ledger *os.File, wait time.Duration) (*bufio.Reader, wire.Welcome, error) {
	var w wire.Welcome
	_ = conn.SetWriteDeadline(time.Now().Add(wait)) // a pool that reads nothing is stuck
	err := writeHello(conn, hello, attach, ledger)
	if err == nil && len(extra) > 0 {
		_, err = conn.Write(extra)
	}
	_ = conn.SetWriteDeadline(time.Time{})
	if err != nil {
		// A pool that began to stop as this connection came in, or that
		// refused the hello, answers why before it closes the connection,
		// maybe before it read all of it.
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		line, _ := bufio.NewReader(conn).ReadBytes('\n')
		if json.Unmarshal(line, &w) == nil && w.Error != "" {
			return nil, w, welcomeError(w)
		}
		return nil, w, &poolGoneError{err: err}
	}
	br := bufio.NewReaderSize(conn, bufSize)
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	line, err := br.ReadBytes('\n')
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return nil, w, fmt.Errorf("the pool did not answer within %s: %w", wait, err) // alive but stuck
	}
	if err != nil {
		return nil, w, &poolGoneError{err: err}
	}
	_ = conn.SetReadDeadline(time.Time{})
	if err := json.Unmarshal(line, &w); err != nil {
		return nil, w, fmt.Errorf("the pool answered something unexpected: %q", line)
	}
	if w.Error != "" {
		return nil, w, welcomeError(w)
	}
	return br, w, nil
}

// welcomeError is the error of a Welcome that did not take the session:
// a pool that is stopping (the next pool, or the upgraded one, takes it),
// one at its limit of connections (it may take it a moment later), or
// one that refused it.
func welcomeError(w wire.Welcome) error {
	switch {
	case w.Stopping:
		return &poolGoneError{err: errors.New(w.Error), stopping: true}
	case w.Ended:
		return endedError(w.Error)
	case w.Busy:
		return busyError(w.Error)
	}
	return refusedError(w.Error)
}

// busyError is a pool's Welcome refusing the connection at its limit of
// local connections (Welcome.Busy), before it read the hello: it did not
// refuse the session, and may take it once a connection closed
// (busyRetry).
type busyError string

func (e busyError) Error() string { return string(e) }

// endedError is a pool's Welcome saying that the session the shim came to
// resume ended there (Welcome.Ended): the shim exits with it, and tells
// its client nothing more, as after a Farewell with that reason.
type endedError string

func (e endedError) Error() string { return string(e) }

// sessionEnded reports whether err, a failed resume, says the session
// ended.
func sessionEnded(err error) bool {
	var ended endedError
	return errors.As(err, &ended)
}

// refusedError is a pool's Welcome refusing the session (no such server):
// it closed the client's pipes it was handed.
type refusedError string

func (e refusedError) Error() string { return string(e) }

// refusedWait bounds how long a shim whose session no pool takes waits
// for its client's first request (its initialize), to answer it with the
// reason: a client may write it only after the refusal came.
const refusedWait = 3 * time.Second

// answerRefused answers the requests the client has sent, its initialize
// at least (waited for up to refusedWait), with err, when no pool took
// its session (none runs, one refused it, or one did not answer the
// hello: stopped, stuck), so that it sees why as an answer and not only
// as the shim's exit; and returns err. No pool read those requests: they
// did not run.
func answerRefused(attach bool, in io.Reader, out io.Writer, name string, err error) error {
	deadline := time.Now().Add(refusedWait)
	var input []byte
	if attach {
		// A pool that refused the session had the pipes.
		ownStdio()
		input = readUntilRequest(maxGiveUpInput, deadline) // our fd 0: in is os.Stdin
	} else {
		input = readRequest(in, maxGiveUpInput, deadline)
	}
	if answers := answerInput(nil, input, name, err, map[string]bool{}); len(answers) > 0 {
		_, _ = out.Write(answers)
	}
	return err
}

// readRequest reads in until what it read holds a request, in ends, max
// bytes are read or deadline passes. It reads in another goroutine,
// which ends when in does: in `switchboard connect` the process exits
// first, and the client's pipe with it.
func readRequest(in io.Reader, max int, deadline time.Time) []byte {
	chunks, done := make(chan []byte), make(chan struct{})
	defer close(done)
	go func() {
		defer close(chunks)
		buf := make([]byte, 32<<10)
		for {
			n, err := in.Read(buf)
			if n > 0 {
				select {
				case chunks <- append([]byte(nil), buf[:n]...):
				case <-done: // no one reads any more: go on to in's end
				}
			}
			if err != nil {
				return
			}
		}
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var input []byte
	for len(input) < max && !hasRequest(input) {
		select {
		case c, ok := <-chunks:
			if !ok {
				return input
			}
			input = append(input, c...)
		case <-timer.C:
			return input
		}
	}
	return input
}

// hasRequest reports whether input holds a whole request line.
func hasRequest(input []byte) bool {
	for len(input) > 0 {
		line, rest, ok := bytes.Cut(input, []byte("\n"))
		if !ok {
			return false
		}
		if m, err := jsonrpc.Parse(line); err == nil && m.Kind == jsonrpc.KindRequest {
			return true
		}
		input = rest
	}
	return false
}

// waitsForAnswer reports whether the client's input no pool has read
// holds a request, or is longer than notifications would be (the rest of
// a large request may follow): a client that sent it waits for an answer.
func waitsForAnswer(input []byte) bool {
	return len(input) >= bufSize || hasRequest(input)
}
