//go:build unix

package pool_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// subscriptionLog is what the child's log (-log) says it was told of
// resources, in arrival order: "subscribe" and "unsubscribe".
func subscriptionLog(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	lines := strings.Split(string(b), "\n")
	for _, l := range lines[:len(lines)-1] { // the last is unfinished or empty
		switch {
		case strings.Contains(l, `"method":"resources/subscribe"`):
			out = append(out, "subscribe")
		case strings.Contains(l, `"method":"resources/unsubscribe"`):
			out = append(out, "unsubscribe")
		}
	}
	return out
}

// waitSubscriptionLog waits for the child's log to say want.
func waitSubscriptionLog(t *testing.T, path, what string, want ...string) {
	t.Helper()
	eventually(t, what, func() bool { return slices.Equal(subscriptionLog(t, path), want) },
		func() string { return "the child was told " + strings.Join(subscriptionLog(t, path), ", ") })
}

// A subscribe the pool gave up on after the child took it (it timed out,
// its client cancelled it, its session ended) is undone at the child when
// nobody holds the resource: the pool unsubscribes it, so that it sends
// no updates nobody asked for; another session's subscribe and
// unsubscribe after that reach the child. (The child was told
// notifications/cancelled only, too late to undo it, and stayed
// subscribed for its life.)
func TestGivenUpSubscribeTheChildTookIsUndone(t *testing.T) {
	for _, how := range []string{"timed out", "cancelled", "session ended"} {
		t.Run(how, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "child.log")
			cfg := fake("srv", "-log", logPath, "-unanswered-subscribes", "1")
			tp := newTestPool(t, nil, cfg)
			a, b := tp.dial(t, "srv"), tp.dial(t, "srv")
			a.initialize("a", "")
			b.initialize("b", "")
			if how == "timed out" {
				tp.applyRequestTimeout(t, &cfg, 300*time.Millisecond)
			}
			askSubscribe(a, `"a1"`)
			waitSubscriptionLog(t, logPath, "the child to take a's subscribe", "subscribe")
			switch how {
			case "timed out":
				if m, _ := a.recvID(`"a1"`); m.Error == nil || m.Error.Code != -32001 {
					t.Fatalf("a's subscribe: %s, want the timeout", m.raw)
				}
				tp.applyRequestTimeout(t, &cfg, 30*time.Second)
			case "cancelled":
				a.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a1"}}`)
			case "session ended":
				a.close()
			}
			waitSubscriptionLog(t, logPath, "the pool to unsubscribe the child", "subscribe", "unsubscribe")
			askSubscribe(b, `"b1"`)
			subscribedNow(t, b, "b", `"b1"`, `"b2"`)
			b.send(`{"jsonrpc":"2.0","id":"b3","method":"resources/unsubscribe","params":{"uri":"fake://counter"}}`)
			if m, _ := b.recvID(`"b3"`); m.Error != nil {
				t.Fatalf("b's unsubscribe: %s", m.raw)
			}
			waitSubscriptionLog(t, logPath, "b's unsubscribe to reach the child", "subscribe", "unsubscribe", "subscribe", "unsubscribe")
		})
	}
}

// Another session's subscribe of the resource after a subscribe the pool
// gave up on leaves the child subscribed: counted after the pool's
// unsubscribe was queued, it reaches the child after it. One that came
// while the given-up subscribe was on its way holds the resource: the
// child hears the pool's subscribe in its place, and no unsubscribe.
func TestGivenUpSubscribeUndoneBeforeAnothersSubscribe(t *testing.T) {
	for _, meanwhile := range []bool{false, true} {
		name := map[bool]string{false: "another subscribes after", true: "another subscribes meanwhile"}[meanwhile]
		t.Run(name, func(t *testing.T) {
			_, logPath := cancelAroundAnothersSubscribe(t, meanwhile, "-unanswered-subscribes", "1")
			want := []string{"subscribe", "unsubscribe", "subscribe"} // a's, the pool's undoing it, b's
			if meanwhile {
				want = []string{"subscribe", "subscribe"} // a's, the pool's in its place
			}
			if got := subscriptionLog(t, logPath); !slices.Equal(got, want) {
				t.Errorf("the child was told %q, want %q", got, want)
			}
		})
	}
}
