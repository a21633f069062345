//go:build unix

package pool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
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
			dir := t.TempDir()
			logPath := filepath.Join(dir, "child.log")
			gate := filepath.Join(dir, "refuse")
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			reached, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			t.Cleanup(pool.SetLosingStakesHook(func() {
				once.Do(func() { // the refusal's drop waits for the session's change
					close(reached)
					<-release
				})
			}))
			tp := newTestPool(t, nil, fake("srv", "-log", logPath, "-refuse-subscribe", "fake://counter", "-refuse-while", gate))
			a := tp.dial(t, "srv")
			a.initialize("a", "")
			askSubscribe(a, `"refused"`)
			select {
			case <-reached:
			case <-time.After(15 * time.Second):
				t.Fatal("the child did not refuse the subscribe")
			}
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
