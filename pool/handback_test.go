//go:build unix

package pool_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

const (
	handBackInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}`
	handBackList = `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
)

// TestHandBackCarriesAMessageWaitingForAStartingChild: a client whose
// initialize waits for a slow child (an npx server installing itself)
// when the pool stops has that initialize, and what it sent after it,
// handed back to its shim unanswered and in order; the next pool answers
// each exactly once. Before, the stop's grace ran out with the reader
// still waiting, the session went back with nothing pending, and what
// the reader held was lost: the client waited forever.
func TestHandBackCarriesAMessageWaitingForAStartingChild(t *testing.T) {
	tp := newTestPool(t, &pool.Options{StopGrace: 300 * time.Millisecond}, fake("slow", "-startup-delay", "5s"))
	a := tp.attach(t, "slow")
	sent := handBackInit + "\n" + handBackList + "\n"
	if _, err := a.in.WriteString(sent); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the initialize to start the child it waits for", func() bool { return len(tp.Snapshot().Backends) == 1 })
	stopped := closeInBackground(tp)
	bye := a.goodbye(10 * time.Second)
	<-stopped
	if bye.End != wire.EndPoolStopping {
		t.Fatalf("farewell %+v: not handed back", bye)
	}
	if string(bye.Pending) != sent {
		t.Fatalf("Pending %q, want what the client sent, in order: %q", bye.Pending, sent)
	}
	if got := a.rest(t); got != "" {
		t.Fatalf("the stopped pool answered %q, and handed it back too", got)
	}

	next := newTestPool(t, nil, fake("slow"))
	b := next.resumeAttached(t, "slow", nil, bye.Pending)
	for _, id := range []string{"0", "7"} {
		line, err := b.out.ReadString('\n')
		if err != nil {
			t.Fatalf("answer %s: %q, %v", id, line, err)
		}
		var m msg
		if err := json.Unmarshal([]byte(line), &m); err != nil || string(m.ID) != id || m.Error != nil || m.Result == nil {
			t.Fatalf("the next pool answered %q, want the result for id %s", line, id)
		}
	}
	b.in.Close() // the client is done: its session ends once it has its answers
	if got := b.rest(t); got != "" {
		t.Fatalf("the next pool answered more: %q", got)
	}
}

// TestHandBackOfARelayedSessionCarriesAMessageWaitingForAStartingChild:
// the same through a relaying shim: the Farewell's Pending carries the
// waiting initialize and what came after it.
func TestHandBackOfARelayedSessionCarriesAMessageWaitingForAStartingChild(t *testing.T) {
	tp := newTestPool(t, &pool.Options{StopGrace: 300 * time.Millisecond}, fake("slow", "-startup-delay", "5s"))
	conn, err := net.Dial("unix", tp.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, `{"server":"slow","resumable":true}`+"\n")
	br := bufio.NewReader(conn)
	if line, err := br.ReadBytes('\n'); err != nil || !bytes.Contains(line, []byte(`"session"`)) {
		t.Fatalf("welcome: %q, %v", line, err)
	}
	sent := handBackInit + "\n" + handBackList + "\n"
	if _, err := conn.Write([]byte(sent)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the initialize to start the child it waits for", func() bool { return len(tp.Snapshot().Backends) == 1 })
	stopped := closeInBackground(tp)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var bye pool.Farewell
	for bye.End == "" {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("the stream ended without a farewell: %q, %v", line, err)
		}
		if len(line) == 0 || line[0] != wire.Control {
			t.Fatalf("the stopped pool answered %q, and hands it back too", line)
		}
		bye = shimControl(t, conn, line)
	}
	<-stopped
	if bye.End != wire.EndPoolStopping || string(bye.Pending) != sent {
		t.Fatalf("farewell %q with Pending %q, want %q with %q", bye.End, bye.Pending, wire.EndPoolStopping, sent)
	}
}

// TestHandBackCarriesASetLevelWaitingForItsOwnChild: a logging/setLevel
// that waits for its session's own child (share "session": the session's
// initialize was answered from another child's handshake) goes back like
// an initialize, and is not sent to the child as well: a setLevel whose
// wait fails is otherwise forwarded for the child to answer.
func TestHandBackCarriesASetLevelWaitingForItsOwnChild(t *testing.T) {
	cfg := fake("own", "-startup-delay", "3s")
	cfg.Share = pool.ShareSession
	tp := newTestPool(t, &pool.Options{StopGrace: 300 * time.Millisecond}, cfg)
	first := tp.attach(t, "own")
	first.initialize() // the server's handshake is known from now on
	a := tp.attach(t, "own")
	a.initialize() // answered from it: its own child is started by its first request
	sent := `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}` + "\n" + handBackList + "\n"
	if _, err := a.in.WriteString(sent); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the setLevel to start the child it waits for", func() bool { return len(tp.Snapshot().Backends) == 2 })
	closeExpectingHandBack(t, tp, a, 10*time.Second, sent)
}

// TestHandBackCarriesAResumingSessionsInput: a session that its shim
// resumes as the pool starts its child (the client's initialize is
// adopted once the child's handshake is known) when that pool stops too
// goes back with the input the shim brought: the pool had read it and
// handled none of it. Before, the session went back with nothing pending,
// and that input was lost.
func TestHandBackCarriesAResumingSessionsInput(t *testing.T) {
	tp := newTestPool(t, &pool.Options{StopGrace: 300 * time.Millisecond}, fake("slow", "-startup-delay", "5s"))
	var init struct {
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal([]byte(handBackInit), &init); err != nil {
		t.Fatal(err)
	}
	carried := handBackList + "\n"
	a := tp.resumeAttached(t, "slow", init.Params, []byte(carried))
	eventually(t, "the resumed initialize to start the child it waits for", func() bool { return len(tp.Snapshot().Backends) == 1 })
	closeExpectingHandBack(t, tp, a, 15*time.Second, carried)
}

// TestHandBackStopsSessionsOwnChildrenTogether: the children of handed
// back sessions of a share "session" server stop side by side, as
// Pool.Close stops every other session's: each may take its stop's graces
// (here the child ignores both its stdin closing and SIGTERM), and one
// after another they held the stop up for the sum of them. Side by side,
// every child's stop begins before any of them ends; one after another,
// the first ends before the next begins.
func TestHandBackStopsSessionsOwnChildrenTogether(t *testing.T) {
	const k = 4
	cfg := fake("own", "-exit-on-stdin-eof=false", "-ignore-sigterm")
	cfg.Share = pool.ShareSession
	var rec recorder
	tp := newTestPool(t, &pool.Options{StopGrace: 200 * time.Millisecond, Record: rec.record}, cfg)
	var sessions []*attached
	for range k {
		a := tp.attach(t, "own")
		a.initialize()
		if got := a.roundTrip(handBackList); !strings.Contains(got, `"result"`) { // its own child answers
			t.Fatalf("tools/list: %q", got)
		}
		sessions = append(sessions, a)
	}
	if n := len(tp.Snapshot().Backends); n != k {
		t.Fatalf("%d children, want one for each of the %d sessions", n, k)
	}
	start := time.Now()
	tp.Close()
	took := time.Since(start)
	for _, a := range sessions {
		if end := a.goodbye(time.Second).End; end != wire.EndPoolStopping {
			t.Errorf("farewell %q: not handed back", end)
		}
	}
	stops := rec.find(func(e pool.Event) bool { return e.Kind == pool.EventBackendState && e.State == pool.StateStopping })
	exits := rec.find(func(e pool.Event) bool { return e.Kind == pool.EventBackendExited })
	if len(stops) != k || len(exits) != k {
		t.Fatalf("%d children stopping and %d exited, want %d of each", len(stops), len(exits), k)
	}
	for _, stop := range stops {
		for _, exit := range exits {
			if exit.Time.Before(stop.Time) {
				t.Fatalf("child %d exited before child %d began to stop: one after another", exit.PID, stop.PID)
			}
		}
	}
	t.Logf("%d sessions handed back, their children stopped in %s", k, took)
}

// goodbye reads the shim's connection to the pool's Farewell, past any
// State lines.
func (a *attached) goodbye(within time.Duration) pool.Farewell {
	a.t.Helper()
	_ = a.conn.SetReadDeadline(time.Now().Add(within))
	for {
		line, err := a.shim.ReadBytes('\n')
		var bye pool.Farewell
		if err != nil || json.Unmarshal(line, &bye) != nil {
			a.t.Fatalf("farewell: %q, %v", line, err)
		}
		if bye.End != "" {
			return bye
		}
	}
}

// closeInBackground starts tp.Close on a goroutine of its own (the pool
// waits for its sessions to go back), and returns a channel closed once
// it has returned.
func closeInBackground(tp *testPool) <-chan struct{} {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tp.Close()
	}()
	return stopped
}

// closeExpectingHandBack closes tp, as a stop does, and checks that a's
// session goes back to its shim with pending as Pending, within the wait,
// and that the stopped pool answered nothing of it.
func closeExpectingHandBack(t *testing.T, tp *testPool, a *attached, within time.Duration, pending string) {
	t.Helper()
	stopped := closeInBackground(tp)
	bye := a.goodbye(within)
	<-stopped
	if bye.End != wire.EndPoolStopping || string(bye.Pending) != pending {
		t.Fatalf("farewell %q with Pending %q, want %q with %q", bye.End, bye.Pending, wire.EndPoolStopping, pending)
	}
	if got := a.rest(t); got != "" {
		t.Fatalf("the stopped pool answered %q, and handed it back too", got)
	}
}

// rest reads what the client's output has left, up to its end (the pool
// has closed its copy).
func (a *attached) rest(t *testing.T) string {
	t.Helper()
	_ = a.outFile.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(a.out)
	if err != nil {
		t.Fatalf("the client's output did not end: %q, %v", b, err)
	}
	return strings.TrimSpace(string(b))
}

// resumeAttached resumes a handed-back session on tp as its shim does
// (app/shim reattach): the hello names the earlier session and the
// client's initialize params (init, when not nil), the client's pipes go
// with it, and pending follows it. The client's pipes are new ones here:
// what matters is that the pool reads pending first.
func (tp *testPool) resumeAttached(t *testing.T, server string, init, pending []byte) *attached {
	t.Helper()
	hello, _ := json.Marshal(pool.Hello{Server: server, Attach: true,
		Resume: &wire.Resume{Run: "earlier", Session: "s1", Initialize: init, PendingBytes: len(pending)}})
	return tp.attachHello(t, hello, nil, pending)
}

// TestHandBackTakesWhatAReplayLeavesHeld: a client's messages held while
// the pool asks its roots are replayed when the ask times out; one of them
// (its roots/list_changed) makes the pool ask again, and those after it
// wait for that answer. A hand-back that comes as the replay runs takes
// them to the shim. Before, the replay had them in hand as the reader
// handed over what was held, and put them back afterwards where nobody
// would take them again: neither answered nor handed back, their client
// waited for ever.
func TestHandBackTakesWhatAReplayLeavesHeld(t *testing.T) {
	t.Cleanup(pool.SetRootsAskTimeout(250 * time.Millisecond))
	paused, resume, restore := pool.PauseAfterReplayed()
	t.Cleanup(restore)
	tp := newTestPool(t, &pool.Options{StopGrace: 300 * time.Millisecond}, fake("fs"))
	t.Cleanup(resume) // before the pool closes: the replay must not stay paused

	a := tp.attach(t, "fs")
	const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"pid","arguments":{}}}`
	// With initialized: held at once, well before the ask times out.
	a.initRootsAsked(t, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, call)
	select { // the ask timed out; list_changed, replayed, asked again
	case <-paused:
	case <-time.After(15 * time.Second):
		t.Fatal("the held messages were not replayed")
	}

	stopped := closeInBackground(tp)
	bye := a.goodbye(10 * time.Second)
	resume()
	<-stopped
	if bye.End != wire.EndPoolStopping || string(bye.Pending) != call+"\n" {
		t.Errorf("farewell %q with Pending %q, want %q with the call the replay had not reached: %q",
			bye.End, bye.Pending, wire.EndPoolStopping, call+"\n")
	}
	if got := a.rest(t); strings.Contains(got, `"id":7`) {
		t.Errorf("the stopped pool answered the call %q, and handed it back too", got)
	}
}

// TestHandBackWaitsForAReplayedMessage: a client's call held while the
// pool asks its roots is replayed when the ask times out; a hand-back
// comes after the replay took it from the held messages and before it
// became a request in flight. The call is then answered by this pool or
// handed back, exactly one of the two. Before, the hand-back saw the
// session idle and closed it: the call was neither held, so not handed
// back, nor in flight, so not answered.
func TestHandBackWaitsForAReplayedMessage(t *testing.T) {
	t.Cleanup(pool.SetRootsAskTimeout(500 * time.Millisecond))
	taken, restore := pool.PauseReplayUntilHandBackWaits()
	t.Cleanup(restore)
	tp := newTestPool(t, &pool.Options{StopGrace: 5 * time.Second}, fake("fs"))

	a := tp.attach(t, "fs")
	const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"pid","arguments":{}}}`
	// With initialized: held at once, well before the ask times out.
	a.initRootsAsked(t, call)
	select { // the ask timed out; the replay took the call, and waits for the hand-back
	case <-taken:
	case <-time.After(15 * time.Second):
		t.Fatal("the held call was not replayed")
	}

	stopped := closeInBackground(tp)
	bye := a.goodbye(15 * time.Second)
	<-stopped
	answered := strings.Contains(a.rest(t), `"id":7`)
	handed := strings.Contains(string(bye.Pending), call)
	if bye.End != wire.EndPoolStopping || answered == handed {
		t.Errorf("farewell %q with Pending %q, call answered %t: want %q, and the call either answered or handed back",
			bye.End, bye.Pending, answered, wire.EndPoolStopping)
	}
}

// shimControl reads one of the pool's control lines as a shim does,
// answering a drain (nothing more comes), and returns the farewell it
// carries, if any.
func shimControl(t *testing.T, conn net.Conn, line []byte) pool.Farewell {
	t.Helper()
	var ctl struct {
		Drain bool `json:"drain"`
		pool.Farewell
	}
	if err := json.Unmarshal(line[1:], &ctl); err != nil {
		t.Fatalf("control line %q: %v", line, err)
	}
	if ctl.Drain {
		conn.Write([]byte(wire.ControlDone)) // as the shim: nothing more comes
	}
	return ctl.Farewell
}
