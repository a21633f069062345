package pool_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestQuestionGoesToTheOldestCallerAcrossEras: a legacy client's call is
// the oldest on the child, a 2026-07-28 call that declared elicitation
// came later, and then the legacy client's call asks. The legacy client,
// whose call is the oldest and which can answer, is asked; the modern
// call gets its own result. On the first edition any modern call that
// declared what the question needs carried it (input_required), however
// young: an unrelated client saw the legacy client's question, and its
// answer became that client's result.
func TestQuestionGoesToTheOldestCallerAcrossEras(t *testing.T) {
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
	q := legacy.question(`"ask"`, "elicitation")
	legacy.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"name":"Ada"}}}`, q.ID)
	if m, _ := legacy.recvID(`"ask"`); !strings.Contains(m.raw, "Ada") {
		t.Errorf("the legacy call: %s, want its client's answer", m.raw)
	}
	got := <-modern
	if len(got) != 1 || got[0].Error != nil || !strings.Contains(got[0].raw, "mine") {
		t.Fatalf("the younger modern call got %s, want its own result", raws(got))
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
