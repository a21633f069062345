package pool

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// A request held for its session's roots, which no request table has,
// ends as finish ends a request of its table that no child had, of the
// same kind, whatever the kind (those the pool answers): counted the
// same, answered with the same code, and recorded once with the same
// status, error and size. Before, its end was a copy of finish's, which
// called the kind's counter even for the kinds that have none.
func TestHeldEndsAsFinishEnds(t *testing.T) {
	type end struct {
		counters Counters
		answers  int
		ev       Event
	}
	held := func(r *endingRig, o outcome) {
		line := []byte(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"t"}}`)
		h := &heldMessage{line: line, req: &arrival{id: 41, received: time.Now(), method: "tools/call", name: "t",
			origID: []byte(`"a"`), key: `"a"`, at: -1}}
		r.s.mu.Lock()
		r.s.held.push(h)
		r.s.heldBytes += len(line)
		r.s.endHeldLocked(h, o)
	}
	table := func(r *endingRig, o outcome) { r.b.finish(r.add(41, `"a"`, stQueued, false), o) }
	endAs := func(t *testing.T, how func(*endingRig, outcome), o outcome) end {
		r := newEndingRig(t)
		how(r, o)
		r.p.events.record.flush() // what Options.Record would be handed within recordDelay
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.done) != 1 {
			t.Fatalf("%d EventRequestDone, want exactly one", len(r.done))
		}
		ev := r.done[0]
		ev.Time, ev.PID, ev.Payload = time.Time{}, 0, nil
		return end{counters: r.p.Snapshot().Counters, answers: len(r.answers()), ev: ev}
	}
	for kind, rule := range endRules {
		if !rule.answers {
			continue
		}
		t.Run(fmt.Sprintf("kind %d %s", kind, rule.status), func(t *testing.T) {
			o := outcome{kind: endKind(kind), rpcErr: &jsonrpc.Error{Code: jsonrpc.CodeRequestCancelled, Message: "ended for the test"}}
			want := endAs(t, table, o)
			if got := endAs(t, held, o); !reflect.DeepEqual(got, want) {
				t.Errorf("held: %+v\nwant as finish: %+v", got, want)
			}
		})
	}
}
