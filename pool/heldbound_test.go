//go:build unix

package pool_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// refusedBefore finds the answer to the request id among msgs, the
// messages that came before a later ping's answer.
func refusedBefore(msgs []msg, id string) (msg, bool) {
	for _, m := range msgs {
		if string(m.ID) == id && m.Method == "" {
			return m, true
		}
	}
	return msg{}, false
}

// A client that does not answer the pool's roots/list cannot pile up
// requests past its share while they wait: a request held for the answer
// is in flight, and counts against MaxSessionInFlight with those at its
// child; one past the bound is refused at once with the -32004 any
// request past it gets, and those held go on once the client answers.
// Before, held requests were bounded only by their bytes
// (MaxSessionBytes): a client could hold hundreds of thousands, each with
// a timer of its own, and taking each in looked through all those held
// before it (10,000 took 0.14 s, 40,000 2.6 s).
func TestHeldRequestsCountAgainstTheSessionsInFlight(t *testing.T) {
	t.Cleanup(pool.SetRootsAskTimeout(time.Minute)) // the hold ends when the client answers
	const limit = 4
	busy := fmt.Sprintf("this session has %d requests in flight, its limit: wait for answers before sending more (other sessions are not affected)", limit)
	tp := newTestPool(t, &pool.Options{MaxSessionInFlight: limit}, fake("fs"))
	c := tp.dial(t, "fs")
	c.initRoots("holder")
	c.call(`"s1"`, "sleep", `{"ms":60000}`) // at the child until the pool closes
	c.call(`"s2"`, "sleep", `{"ms":60000}`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	ask := c.rootsAsk() // asked again

	c.call(`"h1"`, "echo", `{"text":"h1"}`) // held: with s1 and s2, the bound
	c.call(`"h2"`, "echo", `{"text":"h2"}`)
	c.call(`"h3"`, "echo", `{"text":"h3"}`) // one past it
	c.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	_, before := c.recvID(`"p"`)
	m, ok := refusedBefore(before, `"h3"`)
	if !ok {
		t.Fatalf("the request past the bound was not refused as it came (answers before a ping behind it: %v); in flight: %+v",
			before, tp.Snapshot().InFlight)
	}
	if m.Error == nil || m.Error.Code != -32004 || m.Error.Message != busy {
		t.Fatalf("the held request past the bound: %s; want -32004 %q", m.raw, busy)
	}
	if _, ok := refusedBefore(before, `"h2"`); ok {
		t.Fatalf("a request within the bound was answered while held: %v", before)
	}
	for _, s := range tp.Snapshot().Sessions {
		if s.ClientName == "holder" && s.InFlight != limit {
			t.Errorf("the session counts %d requests in flight, want %d", s.InFlight, limit)
		}
	}

	c.answerRootsAsk(ask)
	answered := textsOfNext(c, 2) // the held calls, answered in any order
	if want := map[string]string{`"h1"`: "h1", `"h2"`: "h2"}; !maps.Equal(answered, want) {
		t.Fatalf("the held calls once the client answered: %v, want %v", answered, want)
	}
	// Not held, with s1 and s2 still at the child: the same bound, the
	// same refusal.
	c.call(`"n1"`, "sleep", `{"ms":60000}`)
	c.call(`"n2"`, "sleep", `{"ms":60000}`)
	c.call(`"n3"`, "echo", `{"text":"n3"}`)
	if m, _ := c.recvID(`"n3"`); m.Error == nil || m.Error.Code != -32004 || m.Error.Message != busy {
		t.Fatalf("a request past the bound, not held: %s; want -32004 %q", m.raw, busy)
	}
}

// A request held for its client's roots answer is in flight: one with an
// id already in flight in the session, held or at its child, is refused
// at once, as one not held is. Before, it was held as well, and refused
// or run as it went on, depending on whether the first was still in
// flight then.
func TestHeldRequestWithAnIDInFlightIsRefused(t *testing.T) {
	t.Cleanup(pool.SetRootsAskTimeout(time.Minute)) // the hold ends when the client answers
	tp := newTestPool(t, nil, fake("fs"))
	c := tp.dial(t, "fs")
	c.initRoots("dup")
	c.call(`"s"`, "sleep", `{"ms":60000}`) // at the child until the pool closes
	c.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	ask := c.rootsAsk() // asked again
	c.call(`"d"`, "echo", `{"text":"first"}`)
	c.call(`"d"`, "echo", `{"text":"second"}`)
	c.call(`"s"`, "echo", `{"text":"again"}`)
	c.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	_, before := c.recvID(`"p"`)
	for _, id := range []string{`"d"`, `"s"`} {
		m, ok := refusedBefore(before, id)
		if !ok || m.Error == nil || m.Error.Code != -32600 || !strings.Contains(m.Error.Message, "already in flight") {
			t.Errorf("a held request under id %s in flight: %s (answers before a ping behind it: %v); want -32600 already in flight", id, m.raw, before)
		}
	}
	c.answerRootsAsk(ask)
	if m, _ := c.recvID(`"d"`); m.text() != "first" {
		t.Fatalf("the held call once the client answered: %s", m.raw)
	}
}

// A held request ends at its own requestTimeout, the one its server had
// as it came, whatever was held before it: one that came after a lower
// timeout was applied ends first, and the one before it, under the
// higher, is still held then.
func TestHeldRequestsEndAtTheirOwnDeadlines(t *testing.T) {
	const short = 300 * time.Millisecond
	tp, c, _ := heldLongThenLower(t, short)
	c.call(`"short"`, "echo", `{"text":"short"}`)
	m, _ := c.recvID(`"short"`)
	if want := fmt.Sprintf("server %q did not answer tools/call within %v", "fs", short); m.Error == nil || m.Error.Code != -32001 || m.Error.Message != want {
		t.Fatalf("the call held under the lower timeout: %s; want -32001 %q", m.raw, want)
	}
	if _, ok := heldInFlight(tp, `"long"`); !ok {
		t.Fatalf("the call held under the higher timeout ended with it: in flight %+v", tp.Snapshot().InFlight)
	}
}

// heldLongThenLower starts a pool whose fs has a requestTimeout of a
// minute, and a client that declares roots and leaves the pool's
// roots/list (returned) unanswered; its call "long" is held for the
// answer, and then the server's requestTimeout is lowered to lower.
func heldLongThenLower(t *testing.T, lower time.Duration) (*testPool, *client, msg) {
	t.Helper()
	t.Cleanup(pool.SetRootsAskTimeout(time.Minute)) // the hold ends when the client answers
	cfg := fake("fs")
	cfg.RequestTimeout = time.Minute
	tp := newTestPool(t, nil, cfg)
	c := tp.dial(t, "fs")
	ask := c.initRootsAsked("a")
	c.call(`"long"`, "echo", `{"text":"long"}`)
	eventually(t, "the call held", func() bool { _, ok := heldInFlight(tp, `"long"`); return ok })
	cfg.RequestTimeout = lower
	if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	return tp, c, ask
}

// A held request is timed by its server's requestTimeout as it is read:
// once the snapshot lists it held, a config applied does not change it.
// Before, the reader read the timeout only after the request showed as
// held, so a lower timeout applied in between timed the one that came
// under a minute too, and it ended with the call that came after.
func TestHeldRequestTakesItsTimeoutAsItIsRead(t *testing.T) {
	t.Cleanup(pool.SetRootsAskTimeout(time.Minute)) // the hold ends when the client answers
	held, resume, restore := pool.PauseHolding()    // the reader, once "long" is held
	t.Cleanup(restore)
	cfg := fake("fs")
	cfg.RequestTimeout = time.Minute
	tp := newTestPool(t, nil, cfg)
	t.Cleanup(resume) // before the pool closes: the reader must not stay paused
	c := tp.dial(t, "fs")
	c.initRootsAsked("a")
	c.call(`"long"`, "echo", `{"text":"long"}`)
	select {
	case <-held:
	case <-time.After(15 * time.Second):
		t.Fatal("the call was not held")
	}
	if _, ok := heldInFlight(tp, `"long"`); !ok {
		t.Fatalf("the held call is not in flight: %+v", tp.Snapshot().InFlight)
	}
	cfg.RequestTimeout = 300 * time.Millisecond
	if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	resume()
	c.call(`"short"`, "echo", `{"text":"short"}`)
	m, before := c.recvID(`"short"`)
	if m.Error == nil || m.Error.Code != -32001 {
		t.Fatalf("the call held under the lower timeout: %s; want -32001", m.raw)
	}
	if m, ok := refusedBefore(before, `"long"`); ok {
		t.Fatalf("the call held under a minute was answered first: %s", m.raw)
	}
	if _, ok := heldInFlight(tp, `"long"`); !ok {
		t.Fatalf("the call held under a minute ended with it: in flight %+v", tp.Snapshot().InFlight)
	}
}

// A held request keeps its own requestTimeout once its client's roots
// answer lets it go on: the child's table times it by the timeout it came
// under, not by the server's as it goes on. On the first edition the one
// held under a minute went on under the 300 ms applied while it was held,
// and ended at once, timed out, never written.
func TestHeldRequestGoesOnUnderItsOwnTimeout(t *testing.T) {
	_, c, ask := heldLongThenLower(t, 300*time.Millisecond)
	// A call held under the lower timeout ends at it: past that, from
	// the first call's arrival too.
	c.call(`"short"`, "echo", `{"text":"short"}`)
	if m, _ := c.recvID(`"short"`); m.Error == nil || m.Error.Code != -32001 {
		t.Fatalf("the call held under the lower timeout: %s; want -32001", m.raw)
	}
	c.answerRootsAsk(ask)
	if m, _ := c.recvID(`"long"`); m.text() != "long" {
		t.Fatalf("the call held under a minute, once the client answered: %s; want its answer", m.raw)
	}
}

// The held request a replay has taken and not yet handed on still counts
// against the session's share: a request that comes meanwhile, past the
// share, is refused as it comes, and the replay hands on all it held
// without refusing any of them.
func TestHeldRequestBeingReplayedStillCounts(t *testing.T) {
	// The ask ends on its timer, whose goroutine runs the replay: the
	// session's reader reads on as it is paused.
	t.Cleanup(pool.SetRootsAskTimeout(time.Second))
	taken, resume, restore := pool.PauseReplaying() // the first held message replayed: none is held before the second ask
	t.Cleanup(restore)
	const limit = 3
	tp := newTestPool(t, &pool.Options{MaxSessionInFlight: limit}, fake("fs"))
	t.Cleanup(resume) // before the pool closes: the replay must not stay paused
	c := tp.dial(t, "fs")
	c.initRoots("holder")                   // or it ran out: no roots either way
	c.call(`"s1"`, "sleep", `{"ms":60000}`) // at the child until the pool closes
	c.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	c.rootsAsk()                            // asked again
	c.call(`"h1"`, "echo", `{"text":"h1"}`) // held: with s1, the bound
	c.call(`"h2"`, "echo", `{"text":"h2"}`)
	select { // the ask ran out: the replay took h1, and waits
	case <-taken:
	case <-time.After(15 * time.Second):
		t.Fatal("the held calls were not replayed")
	}
	c.call(`"h3"`, "echo", `{"text":"h3"}`) // one past it
	c.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	_, before := c.recvID(`"p"`)
	m, ok := refusedBefore(before, `"h3"`)
	if !ok || m.Error == nil || m.Error.Code != -32004 {
		t.Fatalf("a request past the bound while the replay has one in hand: %s (answers before a ping behind it: %v); want -32004", m.raw, before)
	}
	resume()
	answered := textsOfNext(c, 2) // the held calls, answered in any order
	if want := map[string]string{`"h1"`: "h1", `"h2"`: "h2"}; !maps.Equal(answered, want) {
		t.Fatalf("the held calls once the ask ran out: %v, want %v", answered, want)
	}
}

// textsOfNext reads c's next n messages and returns each one's text by id.
func textsOfNext(c *client, n int) map[string]string {
	c.t.Helper()
	texts := map[string]string{}
	for range n {
		m := c.recv()
		texts[string(m.ID)] = m.text()
	}
	return texts
}
