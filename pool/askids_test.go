//go:build unix

package pool_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestQuestionIDsDoNotRepeatAcrossPools: a child asks a legacy client a
// question (an elicitation: a person fills in a form); the pool stops
// before the answer, and the session's shim resumes it on the next pool,
// whose child asks questions of its own. The client's late answer to the
// stopped pool's question reaches nothing: every question of the next
// pool has another id, and its call gets the answer given to it. Before,
// each pool numbered its questions from 1: the next pool asked under the
// open question's id, and the late answer became the new call's result.
func TestQuestionIDsDoNotRepeatAcrossPools(t *testing.T) {
	const init = `{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"person","version":"1"}}`
	question := func(a *attached) string {
		t.Helper()
		for {
			if m := a.next(t); m.Method == "elicitation/create" {
				return string(m.ID)
			}
		}
	}

	first := newTestPool(t, &pool.Options{StopGrace: 300 * time.Millisecond}, fake("srv"))
	a := first.attach(t, "srv")
	a.roundTrip(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + init + `}`)
	a.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	a.send(`{"jsonrpc":"2.0","id":"first","method":"tools/call","params":{"name":"ask","arguments":{"kind":"elicitation"}}}`)
	old := question(a)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		first.Close()
	}()
	bye := a.goodbye(10 * time.Second)
	<-stopped

	next := newTestPool(t, nil, fake("srv"))
	b := next.resumeAttached(t, "srv", []byte(init), bye.Pending)
	// The client goes on with its work: it lists the tools.
	b.send(`{"jsonrpc":"2.0","id":"list","method":"tools/list"}`)
	for m := b.next(t); string(m.ID) != `"list"`; m = b.next(t) {
	}
	for k := range 5 {
		id := fmt.Sprintf(`"next-%d"`, k)
		b.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"elicitation"}}}`)
		asked := question(b)
		if asked == old {
			t.Errorf("question %d of the next pool has id %s, the stopped pool's open question's", k, asked)
		}
		// The person submits the stopped pool's form, then answers the
		// next pool's question.
		b.send(`{"jsonrpc":"2.0","id":` + old + `,"result":{"action":"accept","content":{"name":"late"}}}`)
		b.send(`{"jsonrpc":"2.0","id":` + asked + `,"result":{"action":"accept","content":{"name":"fresh"}}}`)
		for {
			m := b.next(t)
			if string(m.ID) != id || m.Method != "" {
				continue
			}
			if m.Error != nil || !strings.Contains(string(m.Result), "fresh") || strings.Contains(string(m.Result), "late") {
				t.Fatalf("call %s: %s; want the answer to its own question (fresh), not the late one to the stopped pool's", id, m.raw)
			}
			break
		}
	}
}

// TestQuestionIDsStartAboveTheFloor: the pool's own requests to a client
// (its roots/list, a child's question) have ids above Options.AskIDFloor,
// whatever the clock says. The floor is the high-water mark the previous
// run of the home left; here it lies a day ahead of the clock, as it does
// after the clock was set back a day across a restart. Before, the pool
// counted from its clock alone and asked under ids below the mark: ids
// the previous run may have asked under, whose late answers the client
// still owes.
func TestQuestionIDsStartAboveTheFloor(t *testing.T) {
	floor := uint64(time.Now().Add(24 * time.Hour).UnixMicro())
	tp := newTestPool(t, &pool.Options{AskIDFloor: floor}, fake("srv"))
	a := tp.attach(t, "srv")
	a.roundTrip(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{},"elicitation":{}},"clientInfo":{"name":"person","version":"1"}}}`)
	a.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	roots := a.next(t)
	if roots.Method != "roots/list" {
		t.Fatalf("want the pool's roots/list, got %s", roots.raw)
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(string(roots.ID), `"switchboard-roots-`), `"`), 10, 64)
	if err != nil || n <= floor {
		t.Errorf("roots/list id %s: want switchboard-roots-N with N above the floor %d", roots.ID, floor)
	}
	a.send(`{"jsonrpc":"2.0","id":` + string(roots.ID) + `,"result":{"roots":[]}}`)
	a.send(`{"jsonrpc":"2.0","id":"ask","method":"tools/call","params":{"name":"ask","arguments":{"kind":"elicitation"}}}`)
	for {
		m := a.next(t)
		if m.Method != "elicitation/create" {
			continue
		}
		if q, err := strconv.ParseUint(string(m.ID), 10, 64); err != nil || q <= floor || q > 1<<53-1 {
			t.Errorf("question id %s: want a number above the floor %d and below 2^53", m.ID, floor)
		}
		break
	}
}
