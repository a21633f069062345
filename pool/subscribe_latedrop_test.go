//go:build unix

package pool_test

import (
	"fmt"
	"os"
	"testing"
)

// A session whose stake the child's refusal took back forgets it even if,
// before the pool's late drop of it, the session subscribed to the
// resource again (no change then: it still held it, answered {} as a
// repeated subscribe is) or subscribed to another resource: neither is a
// stake in the lost one taken since, so its next subscribe of it reaches
// the child. (Any change since made the drop void: the session kept the
// resource with no stake in it, and its next subscribe was taken for no
// change and never reached the child.)
func TestLateDropOfALostStakeOutlivesOtherChanges(t *testing.T) {
	for _, meanwhile := range []string{"the same again", "another resource"} {
		t.Run(meanwhile, func(t *testing.T) {
			a, logPath, gate, release := refusedStakeHeld(t) // the refusal's drop waits for the session's change
			switch meanwhile {
			case "the same again":
				askSubscribe(a, `"again"`)
				if m, _ := a.recvID(`"again"`); m.Error != nil {
					t.Fatalf("the subscribe again: %s, want {} (no change)", m.raw)
				}
			case "another resource":
				a.send(`{"jsonrpc":"2.0","id":"other","method":"resources/subscribe","params":{"uri":"fake://other"}}`)
				eventually(t, "the other subscribe at the child", func() bool { return countInLog(t, logPath, "resources/subscribe") == 2 })
			}
			close(release)
			if m, _ := a.recvID(`"refused"`); m.Error == nil {
				t.Fatalf("the first subscribe: %s, want the child's refusal", m.raw)
			}
			if err := os.Remove(gate); err != nil {
				t.Fatal(err)
			}
			before := countInLog(t, logPath, "resources/subscribe")
			askSubscribe(a, `"next"`)
			eventually(t, "the next subscribe to reach the child", func() bool {
				return countInLog(t, logPath, "resources/subscribe") == before+1
			}, func() string { return fmt.Sprint(countInLog(t, logPath, "resources/subscribe"), " subscribes") })
			subscribedNow(t, a, "a", `"next"`, `"n"`)
		})
	}
}
