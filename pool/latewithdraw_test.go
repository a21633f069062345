package pool_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// questionsIn lists the ids of the elicitations among ms.
func questionsIn(ms []msg) (ids []string) {
	for _, m := range ms {
		if m.Method == "elicitation/create" {
			ids = append(ids, string(m.ID))
		}
	}
	return ids
}

// The pool closes a legacy client's session (a stop) as a 2026-07-28
// child's input_required round for its call is shared, before the round's
// questions are posed: close's dropRounds ends the round, which has
// nothing posed to withdraw, and the session is not marked closed yet.
// The asker, which still finds the call tracked, poses nothing: on the
// first edition it delivered the question, and close flushed it to the
// client, never withdrawn.
func TestBridgedQuestionNotPosedAfterItsRoundEnded(t *testing.T) {
	shared, restore := pool.HoldBridgedAskerForClose()
	t.Cleanup(restore) // after the pool closed: cleanups run last first
	tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
	c := tp.dial(t, "srv")
	c.initialize("person", `{"elicitation":{}}`)
	c.call(`"call"`, "ask", `{"kind":"elicitation"}`)
	<-shared
	got := restAsPoolCloses(t, tp, c)
	if asked := questionsIn(got); len(asked) > 0 {
		t.Fatalf("the client was asked %v after the round ended (withdrawn: %v)", asked, withdrawn(got))
	}
}

// A legacy child asks a question as the pool closes the session it picked
// to ask (a stop): the close has withdrawn the session's questions and
// not yet marked it closed. The question is not recorded for it, and the
// child gets the pool's "the client that was asked disconnected", not
// "closed its input". On the first edition it was recorded and
// delivered, and the close's flush wrote it to the client, never
// withdrawn.
func TestLegacyQuestionNotAskedOfAClosingSession(t *testing.T) {
	picked, asks, restorePicked := pool.HoldPicked()
	t.Cleanup(restorePicked) // after the pool closed: cleanups run last first
	closing, closes, restoreClosing := pool.HoldClosing()
	t.Cleanup(restoreClosing)
	t.Cleanup(asks) // a failure half-way must not leave the pool waiting
	t.Cleanup(closes)
	tp := newTestPool(t, nil, fake("srv"))
	c := tp.dial(t, "srv")
	c.initialize("person", `{"elicitation":{}}`)
	c.call(`"call"`, "ask", `{"kind":"elicitation"}`)
	<-picked
	closed := make(chan error, 1)
	go func() { closed <- tp.Close() }()
	<-closing
	asks()
	first := c.recv() // once the asker is done: its question, or the call's answer
	closes()
	got := append([]msg{first}, c.rest()...)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if asked := questionsIn(got); len(asked) > 0 {
		t.Fatalf("the closing session's client was asked %v (withdrawn: %v)", asked, withdrawn(got))
	}
	if string(first.ID) != `"call"` || !strings.Contains(first.raw, "the client that was asked disconnected") {
		t.Fatalf("want the call to report the pool's client-gone error, got %s", first.raw)
	}
}

// legacyWithStream starts a pool (questions kept a minute) whose child's
// questions go to legacy HTTP client "a", which takes elicitations and
// has its GET stream open.
func legacyWithStream(t *testing.T) (*testPool, http.Handler, string, *httpClient, *getStream) {
	t.Helper()
	tp := newTestPool(t, &pool.Options{QuestionGrace: time.Minute}, fake("srv"))
	h := tp.HTTPHandler()
	url := newHTTPFrontOf(t, h) + "/mcp/srv"
	a := &httpClient{t: t, url: url}
	a.initializeWith("a", `{"elicitation":{}}`)
	st := openedGetStream(t, url, a.sid)
	return tp, h, url, a, st
}

// A legacy HTTP client's GET stream shows a child's question, ends, and
// comes back past it (Last-Event-ID) only to end again (a network blip,
// within QuestionGrace); the child is killed meanwhile. Its withdrawal
// waits for the next stream, as the question would have: on the first
// edition it was dropped, a notification with no stream open, and the
// client's form stayed open.
func TestHTTPWithdrawalWaitsWhileStreamDown(t *testing.T) {
	tp, h, url, a, st := legacyWithStream(t)
	call := goCall(t.Context(), a, legacyAskCall(2, "elicitation"))
	evID, q := st.event()
	if q.Method != "elicitation/create" {
		t.Fatalf("want the question, got %s", q.raw)
	}
	st.conn.Close()
	reopen(t, url, a.sid, evID).conn.Close() // the client has the question: it is not written again
	eventually(t, "the GET stream to end", func() bool { return !pool.HTTPStreamOpen(h, a.sid) })
	if err := tp.KillChild(childPID(t, tp)); err != nil {
		t.Fatal(err)
	}
	result(t, "the call", call) // answered after the child's questions were withdrawn (reap)
	if n := pool.HTTPStreamWaiting(h, a.sid); n != 1 {
		t.Fatalf("%d messages wait for the next GET stream, want the withdrawal", n)
	}
	_, m := reopen(t, url, a.sid, evID).event()
	if got := withdrawn([]msg{m}); !slices.Equal(got, []string{string(q.ID)}) {
		t.Fatalf("the next stream wrote %s, want the withdrawal of %s", m.raw, q.ID)
	}
}

// A legacy HTTP client's GET stream ends after the pool picked its
// session to ask a child's question and before the question was
// written: it waits, unwritten, for the next stream. The child is killed
// meanwhile: the question goes, with no withdrawal for a question the
// client never got. On the first edition it stayed, and the next stream
// asked it of the client for a child that was gone.
func TestHTTPUnwrittenQuestionGoesWhenWithdrawn(t *testing.T) {
	picked, asks, restore := pool.HoldPicked()
	t.Cleanup(restore) // after the pool closed: cleanups run last first
	t.Cleanup(asks)
	tp, h, _, a, st := legacyWithStream(t)
	call := goCall(t.Context(), a, legacyAskCall(2, "elicitation"))
	<-picked
	st.conn.Close()
	eventually(t, "the GET stream to end", func() bool { return !pool.HTTPStreamOpen(h, a.sid) })
	asks()
	eventually(t, "the question to wait for the next stream", func() bool { return pool.HTTPStreamWaiting(h, a.sid) == 1 })
	if err := tp.KillChild(childPID(t, tp)); err != nil {
		t.Fatal(err)
	}
	result(t, "the call", call) // answered after the child's questions were withdrawn (reap)
	if n := pool.HTTPStreamWaiting(h, a.sid); n != 0 {
		t.Fatalf("%d messages wait for the next GET stream, want none: neither the question nor its withdrawal", n)
	}
}
