//go:build unix

package pool_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A client's notifications/cancelled of a request held for its roots
// answer takes effect however many notifications the session holds
// already: past the 4,096 bound (or its bytes) the pool drops other
// notifications, but a cancel frees rather than costs, so it is taken
// at once. Before, it was dropped past the bound, and the request the
// client cancelled was written to the child and answered once the
// client answered roots/list.
func TestHeldCancelTakesEffectPastTheNotesBound(t *testing.T) {
	for _, n := range []int{4000, 4096, 5000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Cleanup(pool.SetRootsAskTimeout(10 * time.Minute))
			var rec recorder
			tp := newTestPool(t, &pool.Options{Record: rec.record}, fake("fs"))
			c := tp.dial(t, "fs")
			c.patience = time.Minute
			c.initialize("flood", `{"roots":{"listChanged":true}}`)
			ask := c.recv()
			if ask.Method != "roots/list" {
				t.Fatalf("want the pool's roots/list, got %s", ask.raw)
			}
			c.call(`"held"`, "echo", `{"text":"ran"}`)
			eventually(t, "the call held", func() bool { _, ok := heldInFlight(tp, `"held"`); return ok })
			note := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}` + "\n"
			c.send(strings.Repeat(note, n) + `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"held"}}` + "\n" + `{"jsonrpc":"2.0","id":"p","method":"ping"}`)
			c.recvID(`"p"`)
			c.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"roots":[]}}`, ask.ID)
			done := rec.waitFor(t, "the held call's end in history", func(e pool.Event) bool {
				return e.Kind == pool.EventRequestDone && e.Name == "echo"
			})
			if done.Status != pool.StatusCancelled || done.Written {
				t.Errorf("the call the client cancelled while it was held ended %q, written to the child: %v; want cancelled, never written", done.Status, done.Written)
			}
			c.call(`"after"`, "echo", `{"text":"after"}`)
			m, before := c.recvID(`"after"`)
			for _, b := range append(before, m) {
				if strings.Contains(b.raw, `"id":"held"`) {
					t.Errorf("the request the client cancelled was answered: %s", b.raw)
				}
			}
		})
	}
}
