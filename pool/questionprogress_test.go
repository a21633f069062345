package pool_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// A child's question to one session may carry a progressToken, for the
// progress its client reports as it answers. Only that client's progress
// for it reaches the child: another session of the shared child that
// sends progress under the token (SDKs often use the question's id,
// which is easy to guess) is not passed on, as its cancels and answers
// for what it was not asked are not. The pool passed every session's
// progress to the child as it came.
func TestQuestionProgressComesOnlyFromTheSessionAsked(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	a := tp.dial(t, "srv")
	a.initialize("a", `{"sampling":{}}`)
	b := tp.dial(t, "srv")
	b.initialize("b", `{"sampling":{}}`)

	a.call("1", "ask", `{"kind":"sampling","questionToken":"q-tok"}`)
	q := a.recv()
	if q.Method != "sampling/createMessage" {
		t.Fatalf("a got %s, want the child's question", q.raw)
	}
	var params struct {
		Meta struct {
			ProgressToken string `json:"progressToken"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(q.Params, &params); err != nil || params.Meta.ProgressToken != "q-tok" {
		t.Fatalf("the question %s does not carry its progressToken", q.raw)
	}
	b.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"q-tok","progress":1,"message":"from b"}}`)
	b.call("2", "pid", `{}`) // after b's notification, at the child
	if m, _ := b.recvID("2"); m.Error != nil {
		t.Fatalf("b's call: %s", m.raw)
	}
	a.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"q-tok","progress":2,"message":"from a"}}`)
	a.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"42"},"model":"m"}}`, q.ID)
	if m, _ := a.recvID("1"); m.Error != nil {
		t.Fatalf("a's call: %s", m.raw)
	}
	var got []string
	for _, line := range childLog(t, logPath) {
		if line["method"] == "notifications/progress" {
			p, _ := line["params"].(map[string]any)
			got = append(got, p["message"].(string))
		}
	}
	if len(got) != 1 || got[0] != "from a" {
		t.Fatalf("progress the child got: %q, want a's alone", got)
	}
}
