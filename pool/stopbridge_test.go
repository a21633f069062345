//go:build unix

package pool_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

const (
	bridgedInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"a","version":"1"}}}`
	bridgedCall = `{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"ask","arguments":{"kind":"elicitation"}}}`
)

// linesOf parses the client's lines in out.
func linesOf(out string) (got []msg) {
	for _, line := range strings.Split(out, "\n") {
		var m msg
		if json.Unmarshal([]byte(line), &m) == nil {
			m.raw = line
			got = append(got, m)
		}
	}
	return got
}

// restartedAfterWithdrawal checks that got, what a legacy client read
// before its session's Farewell, withdraws question q and then answers
// the client's "call" with "restarted", which it may have run.
func restartedAfterWithdrawal(t *testing.T, q msg, got []msg) {
	t.Helper()
	raw := make([]string, len(got))
	for i, m := range got {
		raw[i] = m.raw
	}
	withdrawnOnce(t, q, got)
	for i, m := range got {
		if string(m.ID) != `"call"` || m.Method != "" {
			continue
		}
		if m.Error == nil || m.Error.Code != -32003 || !strings.Contains(m.Error.Message, "restarted") ||
			!strings.Contains(string(m.Error.Data), `"mayHaveExecuted":true`) {
			t.Fatalf("the call was answered %s, want -32003 restarted, may have executed", m.raw)
		}
		if ids := withdrawn(got[:i]); len(ids) != 1 {
			t.Fatalf("the call was answered before its question was withdrawn: %q", raw)
		}
		return
	}
	t.Fatalf("the call was not answered before the Farewell: the client got %q", raw)
}

// A legacy client's call waits for its answers to a 2026-07-28 child's
// question (a bridged round) as the pool stops and hands the session
// back: the question is withdrawn, and the call gets the "restarted"
// error every call still running gets, before the Farewell, recorded as
// they are. On the first edition the round was dropped unanswered,
// recorded cancelled: the client waited for an answer nobody would send.
func TestBridgedRoundAnsweredAtHandBack(t *testing.T) {
	t.Cleanup(pool.SetHoldKeep(time.Minute))
	var rec recorder
	tp := newTestPool(t, &pool.Options{Record: rec.record, StopGrace: 300 * time.Millisecond}, fake("srv", "-era", "modern"))
	a := tp.attach(t, "srv")
	a.roundTrip(bridgedInit)
	a.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	a.send(bridgedCall)
	q := a.next(t)
	if q.Method != "elicitation/create" {
		t.Fatalf("want the child's question, got %s", q.raw)
	}
	stopped := closeInBackground(tp)
	a.goodbye(10 * time.Second)
	<-stopped
	restartedAfterWithdrawal(t, q, linesOf(a.rest(t)))
	done := rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.Method == "tools/call" })
	if len(done) != 1 || done[0].Status != pool.StatusFailed || done[0].ErrCode != -32003 {
		t.Fatalf("history recorded the call as %+v, want failed -32003", done)
	}
}

// The same over a relaying shim's connection: the client's answer comes
// before the Farewell, so the shim, which clears its count of the calls
// in flight at the hand-back, owes the client nothing.
func TestBridgedRoundAnsweredAtRelayedHandBack(t *testing.T) {
	t.Cleanup(pool.SetHoldKeep(time.Minute))
	tp := newTestPool(t, &pool.Options{StopGrace: 300 * time.Millisecond}, fake("srv", "-era", "modern"))
	conn, err := net.Dial("unix", tp.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, `{"server":"srv","resumable":true}`+"\n")
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	br := bufio.NewReader(conn)
	if line, err := br.ReadBytes('\n'); err != nil || !bytes.Contains(line, []byte(`"session"`)) {
		t.Fatalf("welcome: %q, %v", line, err)
	}
	fmt.Fprintf(conn, "%s\n%s\n%s\n", bridgedInit, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, bridgedCall)
	var q msg
	for q.Method != "elicitation/create" {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("no question: %q, %v", line, err)
		}
		if line[0] != wire.Control {
			_ = json.Unmarshal(line, &q)
			q.raw = string(line)
		}
	}
	stopped := closeInBackground(tp)
	var got []msg
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("no farewell: %v", err)
		}
		if line[0] != wire.Control {
			got = append(got, linesOf(string(line))...)
			continue
		}
		var ctl struct {
			Drain bool `json:"drain"`
			pool.Farewell
		}
		_ = json.Unmarshal(line[1:], &ctl)
		if ctl.Drain {
			_, _ = conn.Write([]byte(wire.ControlDone))
		}
		if ctl.End != "" {
			break
		}
	}
	<-stopped
	restartedAfterWithdrawal(t, q, got)
}

// A legacy child asks a question for a call of a session that is
// closing (its client left), while another session could answer it: the
// question is the closing session's call's, and goes to no other
// session; the child is told the client that was asked is gone. On the
// first edition the closing session was passed over and the other
// client was asked a question for a call it never made.
func TestQuestionOfAClosingSessionGoesToNoOther(t *testing.T) {
	picked, asks, restorePicked := pool.HoldPicked()
	t.Cleanup(restorePicked) // after the pool closed: cleanups run last first
	closing, closes, restoreClosing := pool.HoldClosing()
	t.Cleanup(restoreClosing)
	var rec recorder
	tp := newTestPool(t, &pool.Options{Record: rec.record, CapturePayloads: 4096}, fake("srv"))
	t.Cleanup(asks) // before the pool closes: a failure half-way must not leave it waiting
	t.Cleanup(closes)
	a := tp.dial(t, "srv")
	a.initialize("a", `{"elicitation":{}}`)
	b := tp.dial(t, "srv")
	b.initialize("b", `{"elicitation":{}}`)
	a.call(`"call"`, "ask", `{"kind":"elicitation"}`)
	<-picked // a, whose call asks
	go a.close()
	<-closing
	asks()
	// The child is answered while a's session is still closing: its
	// call ends with what the child made of that answer.
	var done []pool.Event
	eventually(t, "the child to answer the call", func() bool {
		done = rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.Method == "tools/call" })
		return len(done) > 0
	})
	closes()
	if !strings.Contains(string(done[0].Payload), "disconnected") {
		t.Fatalf("the call ended with %q, want the child told its client disconnected", done[0].Payload)
	}
	b.call(`"after"`, "echo", `{"text":"x"}`)
	if _, before := b.recvID(`"after"`); len(questionsIn(before)) > 0 {
		t.Fatalf("another session's client was asked %v", questionsIn(before))
	}
}
