package pool_test

import (
	"strings"
	"testing"
)

// TestHTTPModernQuestionWithoutGetStream: a legacy HTTP client that
// declared elicitation but has no GET stream open, calling a 2026-07-28
// child's tool that asks, is told at once that it has no stream to be
// asked on, retryable (a legacy child's question gets -32006 at once
// then too); with its stream open, the same call is asked and answered.
// On the first edition the error said the client had not declared
// elicitation, not retryable.
func TestHTTPModernQuestionWithoutGetStream(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	c.initializeWith("c", `{"elicitation":{}}`)
	m := c.call(legacyAskCall(2, "elicitation"))
	if m.Error == nil || m.Error.Code != -32006 || !strings.Contains(m.Error.Message, "no GET stream") ||
		!strings.Contains(string(m.Error.Data), `"retryable":true`) {
		t.Fatalf("the call without a GET stream: %s, want -32006 saying so, retryable", m.raw)
	}
	st := openGetStream(t, c.url, c.sid, "") // open once answered: the pool marks it so before its headers
	call := goCall(t.Context(), c, legacyAskCall(3, "elicitation"))
	_, q := st.event()
	if q.Method != "elicitation/create" {
		t.Fatalf("the stream's event: %s, want the child's question", q.raw)
	}
	answerQuestion(t, c, q, "Ada")
	if m := result(t, "the call with a stream open", call); m.Error != nil || !strings.Contains(m.raw, "Ada") {
		t.Fatalf("the call with a stream open: %s", m.raw)
	}
}
