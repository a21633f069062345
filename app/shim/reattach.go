package shim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	"github.com/switchboard-mcp/switchboard/app/home"
	"github.com/switchboard-mcp/switchboard/app/launch"
	"github.com/switchboard-mcp/switchboard/app/localsock"
	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// attached is the shim of a session whose client pipes the pool holds. Its
// whole job is to wait for the session to end, and to outlive the pool:
// when the pool goes away (it was killed, or it stopped on purpose and
// handed the session back with a "pool-stopping" Farewell), the shim still
// has its copies of the client's pipes. It waits for a new pool, hands the
// pipes over again with the session's identity, its initialize and the
// input the last pool had read and not handled, and goes on waiting. The
// client sees no closed pipe and no new handshake.
//
// After a crash the shim starts a new pool at once (when clients may start
// one): the client is owed answers. After a planned stop it starts one only
// when the client sends something: a pool the user quit stays quit until
// it is needed, and an upgraded or restarted one is found when it listens.
// Where clients may not start one, it waits as long for the user to
// (userStartWait) once its client needs a pool, then answers what its
// client waits for and exits.
type attached struct {
	paths   home.Paths
	name    string
	run     string
	session string
	kept             // what a resume carries, from State lines
	pending []byte   // the client's input the last pool handed back unread
	ledger  *os.File // the session's ledger (wire.Ledger), nil without one
	// ledgerTaken says the pool the session is on maps the ledger
	// (Welcome.Ledger): only then does it list what that pool owes.
	ledgerTaken bool
}

var errClientGone = errors.New("the client went away")

// reattachPoll is how often the shim looks for a new pool.
const reattachPoll = 100 * time.Millisecond

func (a *attached) wait(conn net.Conn, br *bufio.Reader) error {
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			conn.Close()
			if conn, br, err = a.reattach(false); err != nil {
				if errors.Is(err, errClientGone) {
					return nil // nothing left to keep
				}
				return err
			}
			continue
		}
		var msg struct {
			End     *string `json:"end"`
			Pending []byte  `json:"pending"`
			wire.State
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			return fmt.Errorf("the pool said something unexpected: %q", line)
		}
		switch {
		case msg.End != nil && *msg.End == wire.EndPoolStopping:
			conn.Close()
			a.pending = msg.Pending
			if conn, br, err = a.reattach(true); err != nil {
				if errors.Is(err, errClientGone) {
					return nil
				}
				return err
			}
		case msg.End != nil:
			conn.Close()
			if *msg.End != wire.EndEOF {
				return errors.New(*msg.End)
			}
			return nil
		default:
			a.note(msg.State)
		}
	}
}

// reattach waits for a pool and hands it the session. It gives up only
// when the client is gone (nothing to keep), when a pool refuses the
// session (its server was removed from the config meanwhile, or the pool
// runs without it because its config does not load), when no pool can be
// started (maxFailedStarts, backing off between them), when as many pools
// in a row took the connection and did not answer its hello (helloBackoff),
// when pools at their limit of local connections refused it for busyWait
// (busyRetry), or when clients may not start one and none came in
// userStartWait; then
// it answers what the client waits for (giveUp). planned says the last
// pool stopped on purpose: a new one is started only for a client that
// sends something.
// After a crash one is started at once; where clients may not start one,
// it is waited for (userStartWait) only once the client is owed answers
// (it sent a request): an idle session waits for the user as long as it
// takes. A client that closes its input while owed nothing is finished.
func (a *attached) reattach(planned bool) (net.Conn, *bufio.Reader, error) {
	sock := a.paths.PoolSocket()
	dial := func() (net.Conn, error) { return localsock.DialTimeout(sock, time.Second) }
	var backoff startBackoff
	var user userStart
	var unanswered helloBackoff
	var lost []wire.Lost
	midLine, fresh, eof, asked := false, true, false, false
	for {
		if fresh { // what the last pool owed; kept until a pool has taken the session
			more, cut := takeLedger(a.ledger)
			lost, midLine, fresh = mergeLost(lost, notCarried(more, a.pending)), midLine || cut, false
		}
		if clientGone() {
			return nil, nil, errClientGone
		}
		if !eof && !asked {
			in, end := takeClientInput()
			a.pending, eof = append(a.pending, in...), end
			asked = waitsForAnswer(a.pending)
		}
		// The client is owed answers to what the dead pool took and to the
		// requests it sent since. Without a ledger that pool wrote, a crash
		// may have left any request unanswered: it counts as owing.
		owed := len(lost) > 0 || asked || (!planned && !a.ledgerTaken)
		if eof && !owed {
			return nil, nil, errClientGone // the client finished, and waits for nothing
		}
		if !unanswered.ready() {
			time.Sleep(reattachPoll)
			continue
		}
		conn, err := dial()
		if err != nil && backoff.ready() && (!planned || owed || len(a.pending) > 0) {
			conn, err = launch.Ensure(a.paths, dial)
			switch {
			case errors.Is(err, launch.ErrDisabled):
				if owed && user.over() { // the user did not start one meanwhile
					return nil, nil, a.giveUp(noPoolCame(a.paths, err), lost, midLine)
				}
			case err != nil && backoff.failed():
				return nil, nil, a.giveUp(fmt.Errorf("%w (no pool socket at %s) and starting one failed %d times; the last time: %v",
					ErrNoPool, sock, maxFailedStarts, err), lost, midLine)
			case err == nil:
				backoff.succeeded()
			}
		}
		if err != nil {
			time.Sleep(reattachPoll)
			continue
		}
		resume := a.resume(a.run, a.session)
		resume.PendingBytes, resume.Lost, resume.Ledger, resume.MidLine = len(a.pending), lost, a.ledgerTaken, midLine
		hello, _ := json.Marshal(wire.Hello{Server: a.name, PID: os.Getpid(), Attach: true, Ledger: a.ledger != nil, Resume: resume})
		// The pool may start the child before it answers.
		br, w, err := greet(conn, append(hello, '\n'), a.pending, true, a.ledger, time.Minute)
		fresh = true // a pool that read it may have taken requests before it went
		if err != nil {
			conn.Close()
			if sessionEnded(err) {
				return nil, nil, err
			}
			if err := unanswered.next(err, w, a.run); err != nil {
				return nil, nil, a.giveUp(err, lost, midLine)
			}
			continue
		}
		if !w.Attached {
			conn.Close()
			return nil, nil, a.giveUp(errors.New("the restarted pool did not take the session back: it did not take the client's pipes"), lost, midLine)
		}
		a.run, a.session, a.ledgerTaken = w.Run, w.Session, w.Ledger
		a.pending = nil
		return conn, br, nil
	}
}

// giveUp ends a session that no pool will take: it answers what the
// client waits for with an error naming cause (the requests the ledger
// lists, which a dead pool took; the input the last pool handed back;
// what the client sent since, which no pool read) and returns cause, for
// the shim to print as it exits. lost and midLine are what the ledger
// said already.
func (a *attached) giveUp(cause error, lost []wire.Lost, midLine bool) error {
	ownStdio()
	more, cut := takeLedger(a.ledger)
	lost = mergeLost(lost, more)
	var out []byte
	if midLine || cut {
		out = append(out, '\n') // end the answer the dead pool cut off
	}
	out = answerLost(out, lost, a.name, cause)
	out = answerInput(out, append(a.pending, readWaiting(maxGiveUpInput)...), a.name, cause, lostIDs(lost))
	if len(out) > 0 {
		_, _ = os.Stdout.Write(out)
	}
	return cause
}

// notCarried is lost without the requests the ledger lists only because
// a pool that died before its Welcome had taken the input the shim
// carried to it (a pool lists them before it welcomes the shim): that
// input goes to the next pool, which answers them.
func notCarried(lost []wire.Lost, carried []byte) []wire.Lost {
	if len(lost) == 0 || len(carried) == 0 {
		return lost
	}
	ids := map[string]bool{}
	for len(carried) > 0 {
		line, rest, whole := bytes.Cut(carried, []byte{'\n'})
		if !whole {
			break
		}
		carried = rest
		if m, err := jsonrpc.Parse(line); err == nil && m.Kind == jsonrpc.KindRequest {
			ids[string(m.IDBytes())] = true
		}
	}
	return slices.DeleteFunc(lost, func(l wire.Lost) bool { return ids[l.ID] && !l.Written && !l.Listen })
}

// maxGiveUpInput bounds the client's input a shim reads to answer it when
// it gives up.
const maxGiveUpInput = 16 << 20
