package pool_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestQuestionAcrossErasGoesToNoCaller: a legacy client's call is the
// oldest on the child, a 2026-07-28 call that declared elicitation came
// later, and then the legacy client's call asks. The child does not say
// which call asks, and the calls are two clients': neither is asked, the
// child gets -32006 at once, the legacy client's call gets what the
// child makes of that, and the modern call gets its own result. On the
// first edition any modern call that declared what the question needs
// carried it (input_required), however young: an unrelated client saw
// the legacy client's question, and its answer became that client's
// result; later the oldest caller was asked, which, had the modern call
// asked, was the same leak the other way.
func TestQuestionAcrossErasGoesToNoCaller(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	url := newHTTPFront(t, tp) + "/mcp/srv"
	legacy := tp.dial(t, "srv")
	legacy.initialize("legacy", `{"elicitation":{}}`)
	legacy.call(`"slow"`, "sleep", `{"ms":3000}`)
	eventually(t, "the legacy call to reach the child", func() bool {
		in := tp.Snapshot().InFlight
		return len(in) == 1 && in[0].WrittenToChild
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	modern := make(chan []msg, 1)
	declared := strings.Replace(modernCall("1", "", "C", "sleep_echo", `{"ms":1500,"text":"mine"}`),
		`clientCapabilities":{}`, `clientCapabilities":{"elicitation":{}}`, 1)
	go func() {
		m, _ := postStream(ctx, t, url, declared)
		modern <- m
	}()
	eventually(t, "the modern call to reach the child", func() bool {
		in := tp.Snapshot().InFlight
		return len(in) == 2 && in[0].WrittenToChild && in[1].WrittenToChild
	})
	legacy.call(`"ask"`, "ask", `{"kind":"elicitation"}`)
	m, other := legacy.recvID(`"ask"`)
	if !strings.Contains(m.text(), "-32006") || !strings.Contains(m.text(), "several clients") || len(other) != 0 {
		t.Errorf("the legacy call: %s after %s, want the child told -32006, and no question", m.raw, raws(other))
	}
	got := <-modern
	if len(got) != 1 || got[0].Error != nil || !strings.Contains(got[0].raw, "mine") {
		t.Fatalf("the younger modern call got %s, want its own result", raws(got))
	}
	if m, other := legacy.recvID(`"slow"`); m.text() != "slept 3000" || len(other) != 0 {
		t.Fatalf("the legacy client's slow call: %s after %s", m.raw, raws(other))
	}
}

// raws is what a response carried, message by message.
func raws(ms []msg) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString(m.raw + "\n")
	}
	return b.String()
}
