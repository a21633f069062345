package pool_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Isolation: a's listen for a resource the child has is still on its way
// (the first upstream listen, nothing covered yet) when b's listen for a
// resource the child refuses replaces it. The refused reopen added both
// resources, so it cannot say which one the child refused: each is tried
// on its own, and a keeps fake://counter (it was taken for refused too,
// for b's fake://gone, and a was acknowledged with nothing).
func TestAnotherSessionsRefusedResourceCostsANothing(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-log", logPath, "-subscribe-delay", "1s", "-refuse-subscribe", "fake://gone"))
	a, b, other := tp.dial(t, "srv"), tp.dial(t, "srv"), tp.dial(t, "srv")
	a.send(`{"jsonrpc":"2.0","id":"a","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fake://counter"]},` + modernMeta + `}}`)
	eventually(t, "the child to have the pool's listen", func() bool { return countInLog(t, logPath, "subscriptions/listen") == 1 })
	b.send(`{"jsonrpc":"2.0","id":"b","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fake://gone"]},` + modernMeta + `}}`)
	if ack := a.recv(); ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(ack.raw, "fake://counter") {
		t.Errorf("a's ack: %s, want fake://counter promised (only b's fake://gone is refused)", ack.raw)
	}
	if ack := b.recv(); ack.Method != "notifications/subscriptions/acknowledged" || strings.Contains(ack.raw, "fake://gone") {
		t.Errorf("b's ack: %s, want one without the refused resource", ack.raw)
	}
	callModern(other, `"n"`, "notify", `{"kind":"updated"}`)
	other.recvID(`"n"`)
	if got := notifiedBefore(a, `"s"`); !slices.Equal(got, []string{`notifications/resources/updated "a"`}) {
		t.Errorf("an update after a's acknowledgement: a got %q, want it", got)
	}
}

// A resource the child refused is asked of the restarted child (restarted,
// say, once the resource exists): the refusal was the dead child's.
func TestRefusedResourceAskedOfTheRestartedChild(t *testing.T) {
	dir := t.TempDir()
	logPath, missing := filepath.Join(dir, "child.log"), filepath.Join(dir, "missing")
	if err := os.WriteFile(missing, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-log", logPath, "-refuse-subscribe", "fake://counter", "-refuse-while", missing))
	a, other := tp.dial(t, "srv"), tp.dial(t, "srv")
	a.send(`{"jsonrpc":"2.0","id":"a","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fake://counter"]},` + modernMeta + `}}`)
	if ack := a.recv(); ack.Method != "notifications/subscriptions/acknowledged" || strings.Contains(ack.raw, "fake://counter") {
		t.Fatalf("a's ack: %s, want one without the refused resource", ack.raw)
	}
	if err := os.Remove(missing); err != nil {
		t.Fatal(err)
	}
	callModern(other, `"c"`, "crash", `{}`)
	other.recvID(`"c"`)
	n := 0
	eventually(t, "an update of fake://counter on a", func() bool {
		n++
		id := `"wait` + strconv.Itoa(n) + `"`
		callModern(other, id, "notify", `{"kind":"updated"}`)
		other.recvID(id)
		return slices.Contains(notifiedBefore(a, `"seen`+strconv.Itoa(n)+`"`), `notifications/resources/updated "a"`)
	})
}
