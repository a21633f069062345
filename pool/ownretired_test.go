//go:build unix

package pool_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// The child a config change retires finishes its calls in flight, and a
// question it asked for one of them stays answerable once its session
// has the child of the new config. With share "session" the session's
// retired own child was out of its sight as soon as it had a new own
// one: the client's answer was dropped and the call timed out. (Shared:
// the partition's retired child was always in sight; kept as a guard.)
func TestRetiredChildsQuestionAnsweredAfterNextRequest(t *testing.T) {
	for _, share := range []pool.Share{pool.ShareSession, pool.ShareShared} {
		t.Run(string(share), func(t *testing.T) {
			cfg := fake("srv")
			cfg.Share = share
			cfg.RequestTimeout = 4 * time.Second
			tp := newTestPool(t, nil, cfg)
			a := tp.dial(t, "srv")
			a.initialize("a", `{"sampling":{}}`)
			a.call("1", "ask", `{"kind":"sampling"}`)
			q := a.recv()
			if q.Method != "sampling/createMessage" {
				t.Fatalf("want the child's question, got %s", q.raw)
			}
			first := a.pidOf("2")
			cfg.Env = map[string]string{"SWITCHBOARD_TEST_RELOAD": "1"}
			if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
				t.Fatal(err)
			}
			if again := a.pidOf("3"); again == first { // the session's next request: the new child
				t.Fatalf("after the change the call ran on the old child (%s)", first)
			}
			a.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`, q.ID)
			if res, _ := a.recvID("1"); !strings.Contains(res.text(), "forty-two") {
				t.Fatalf("the call got %s, want the client's answer", res.raw)
			}
		})
	}
}

// The same with no request after the change: the session's subscription
// makes the change start its new own child at once.
func TestRetiredOwnChildsQuestionAnsweredWithStakes(t *testing.T) {
	cfg := fake("own")
	cfg.Share = pool.ShareSession
	cfg.RequestTimeout = 4 * time.Second
	tp := newTestPool(t, nil, cfg)
	a := tp.dial(t, "own")
	a.initialize("a", `{"sampling":{}}`)
	a.send(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
	if m, _ := a.recvID("2"); m.Error != nil {
		t.Fatalf("subscribe: %s", m.raw)
	}
	a.call("1", "ask", `{"kind":"sampling"}`)
	q := a.recv()
	if q.Method != "sampling/createMessage" {
		t.Fatalf("want the child's question, got %s", q.raw)
	}
	cfg.Env = map[string]string{"SWITCHBOARD_TEST_RELOAD": "1"}
	if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	a.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`, q.ID)
	if res, _ := a.recvID("1"); !strings.Contains(res.text(), "forty-two") {
		t.Fatalf("the call got %s, want the client's answer", res.raw)
	}
}

// A session that closes releases the questions its retired own child
// asked it: the child gets -32006 for each, as from its current one.
// (The retired child is kept running here by a request of its own: once
// the session's calls are cancelled it would otherwise stop at once.)
func TestRetiredOwnChildsQuestionReleasedOnClose(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	cfg := fake("own", "-log", logPath)
	cfg.Share = pool.ShareSession
	cfg.RequestTimeout = 30 * time.Second
	tp := newTestPool(t, nil, cfg)
	a := tp.dial(t, "own")
	a.initialize("a", `{"sampling":{}}`)
	a.call("1", "ask", `{"kind":"sampling"}`)
	if q := a.recv(); q.Method != "sampling/createMessage" {
		t.Fatalf("want the child's question, got %s", q.raw)
	}
	cfg.Env = map[string]string{"SWITCHBOARD_TEST_RELOAD": "1"}
	if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	a.pidOf("2") // the session's new own child
	if n := pool.BusyRetiredChildren(tp.Pool, "own"); n != 1 {
		t.Fatalf("%d retired children, want the session's old one", n)
	}
	a.close()
	eventually(t, "the retired child's question answered -32006", func() bool {
		n, code := childAnswers(t, logPath, "srv-1")
		return n == 1 && code == -32006
	}, func() string {
		n, code := childAnswers(t, logPath, "srv-1")
		return fmt.Sprintf("%d answers, the last with code %v", n, code)
	})
}

// An HTTP session's GET stream that ends and opens again writes again
// the question its retired own child asked on the first, and the answer
// completes the call; and past Options.QuestionGrace with no stream open
// the question is taken back, the child getting -32006, as from the
// session's current child. Both missed the retired child once the
// session had a new one: the question was not written again, nor taken
// back, and the call waited for its timeout.
func TestRetiredOwnChildsQuestionOverHTTP(t *testing.T) {
	pidCall := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"pid","arguments":{}}}`
	setup := func(t *testing.T, grace time.Duration, flags ...string) (url string, a *httpClient, q msg, call <-chan callResult) {
		t.Helper()
		cfg := fake("own", flags...)
		cfg.Share = pool.ShareSession
		cfg.RequestTimeout = 5 * time.Second
		tp := newTestPool(t, &pool.Options{QuestionGrace: grace}, cfg)
		url = newHTTPFront(t, tp) + "/mcp/own"
		a = &httpClient{t: t, url: url}
		a.initializeWith("a", `{"elicitation":{}}`)
		st := openedGetStream(t, url, a.sid)
		call = goCall(t.Context(), a, legacyAskCall(2, "elicitation"))
		if _, q = st.event(); q.Method != "elicitation/create" {
			t.Fatalf("the stream's first event: %s, want the child's question", q.raw)
		}
		cfg.Env = map[string]string{"SWITCHBOARD_TEST_RELOAD": "1"}
		if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
			t.Fatal(err)
		}
		a.call(fmt.Sprintf(pidCall, 3)) // the session's new own child
		st.conn.Close()
		return url, a, q, call
	}
	t.Run("next stream", func(t *testing.T) {
		url, a, q, call := setup(t, time.Minute)
		st := reopen(t, url, a.sid, "")
		a.call(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"}}}`)
		if _, m := st.event(); string(m.ID) != string(q.ID) {
			t.Fatalf("the next stream's first event: %.200s, want the question again", m.raw)
		}
		answerQuestion(t, a, q, "Ada")
		if m := result(t, "the call", call); !strings.Contains(m.text(), "Ada") {
			t.Fatalf("the call: %s, want the client's answer", m.raw)
		}
	})
	t.Run("taken back", func(t *testing.T) {
		logPath := filepath.Join(t.TempDir(), "child.log")
		_, _, _, call := setup(t, 100*time.Millisecond, "-log", logPath)
		if m := result(t, "the call", call); !strings.Contains(m.text(), "the client that was asked disconnected") {
			t.Fatalf("the call: %s, want the child's question refused", m.raw)
		}
		if n, code := childAnswers(t, logPath, "srv-1"); n != 1 || code != -32006 {
			t.Fatalf("the child got %d answers to its question, the last with code %v; want one, -32006", n, code)
		}
	})
}
