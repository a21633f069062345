package pool_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// samplingAnswer is the inputResponses member answering the fake child's
// sampling question under key.
func samplingAnswer(key string) string {
	return `,"inputResponses":{"` + key + `":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`
}

// TestMRTRMismatchedRetryKeepsTheState: a retry that names a held call's
// requestState on another tool is refused with -32602, and the state
// stays good: the call's own retry still gets its result. Before, the
// refused retry spent the state, and the right one was then told the
// pool held no call for it while the call stayed held at the child.
func TestMRTRMismatchedRetryKeepsTheState(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	roundTrip, _ := roundTrips(t, tp)
	for _, how := range []string{"http", "stdio"} {
		t.Run(how, func(t *testing.T) {
			send := roundTrip[how]
			first := readResult(t, send("1", askCall("1", "sampling", "")))
			if first.ResultType != "input_required" {
				t.Fatalf("first answer: %+v", first)
			}
			key := onlyInputKey(t, first)
			wrong := send("2", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"requestState":"`+
				first.RequestState+`"`+samplingAnswer(key)+`,`+samplingMeta+`}}`)
			if wrong.Error == nil || wrong.Error.Code != -32602 || !strings.Contains(wrong.Error.Message, "does not belong") {
				t.Fatalf("the state on another tool: %s, want -32602", wrong.raw)
			}
			done := send("3", askCall("3", "sampling", `,"requestState":"`+first.RequestState+`"`+samplingAnswer(key)))
			if r := readResult(t, done); r.ResultType != "complete" || len(r.Content) != 1 || !strings.Contains(r.Content[0].Text, "forty-two") {
				t.Fatalf("the call's own retry after a mismatched one: %s", done.raw)
			}
		})
	}
}

// firstAnswer posts body to url and returns the first message of its
// answer, a JSON response or its stream's first event; the response
// stays open (a listen stays open with it) until end is called.
func firstAnswer(t *testing.T, url, body string) (first msg, end func()) {
	t.Helper()
	resp, cancel := postOpen(t, url, body)
	end = func() { cancel(); resp.Body.Close() }
	t.Cleanup(end)
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		first.raw = string(b)
		if err := json.Unmarshal(b, &first); err != nil {
			t.Fatalf("answer %s %q: %v", resp.Status, b, err)
		}
		return first, end
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			first.raw = data
			if err := json.Unmarshal([]byte(data), &first); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			return first, end
		}
	}
	t.Fatalf("the stream ended with no event: %v", sc.Err())
	return first, end
}

// listenBody is a stateless subscriptions/listen for resources n from
// fake://rFROM on.
func listenBody(id string, from, n int) string {
	uris := make([]string, n)
	for i := range uris {
		uris[i] = fmt.Sprintf("%q", fmt.Sprintf("fake://r%d", from+i))
	}
	return `{"jsonrpc":"2.0","id":"` + id + `","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":[` +
		strings.Join(uris, ",") + `]},` + modernMeta + `}}`
}

// TestStatelessListenCannotTakeTheSharedShare: every stateless HTTP
// client of a server listens on its one stateless session, so the
// session's subscriptions are shared by them all. One listen may hold at
// most a quarter of them: a client asking for nearly all in one listen
// is refused (-32602), and another client's listen is acknowledged.
// Before, the one listen took the whole share and every other client's
// listen got -32004 saying other sessions were not affected. When the
// shared share is full, the -32004 says that stateless requests share
// it.
func TestStatelessListenCannotTakeTheSharedShare(t *testing.T) {
	const limit = 16 // a listen may ask for 4 resources
	tp := newTestPool(t, &pool.Options{MaxSessionSubscriptions: limit}, fake("srv"))
	url := newHTTPFront(t, tp) + "/mcp/srv"
	greedy, _ := firstAnswer(t, url, listenBody("x", 0, limit-1))
	if greedy.Error == nil || greedy.Error.Code != -32602 {
		t.Fatalf("one listen asking for nearly the whole share: %s, want -32602", greedy.raw)
	}
	other, _ := firstAnswer(t, url, listenBody("y", 100, 1))
	if other.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("another client's listen: %s", other.raw)
	}
	// Listens within the cap (4 resources) fill the rest: 2 + 2*5 = 12
	// held, and one more of 5 is past 16.
	for i := range 2 {
		if m, _ := firstAnswer(t, url, listenBody(fmt.Sprint("z", i), 10*i, limit/4)); m.Method != "notifications/subscriptions/acknowledged" {
			t.Fatalf("listen %d within the cap: %s", i, m.raw)
		}
	}
	full, _ := firstAnswer(t, url, listenBody("w", 200, limit/4))
	if full.Error == nil || full.Error.Code != -32004 || !strings.Contains(full.Error.Message, "stateless requests") ||
		strings.Contains(full.Error.Message, "other sessions are not affected") {
		t.Fatalf("a listen past the shared share: %s, want -32004 saying stateless requests share it", full.raw)
	}
}
