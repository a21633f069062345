package pool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// inputRequiredResult is an InputRequiredResult as a modern client reads it.
type inputRequiredResult struct {
	ResultType    string `json:"resultType"`
	RequestState  string `json:"requestState"`
	InputRequests map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	} `json:"inputRequests"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
}

// onlyInputKey is the key of r's one input request.
func onlyInputKey(t *testing.T, r inputRequiredResult) string {
	t.Helper()
	if len(r.InputRequests) != 1 {
		t.Fatalf("want one input request: %+v", r)
	}
	for k := range r.InputRequests {
		return k
	}
	return ""
}

func readResult(t *testing.T, m msg) inputRequiredResult {
	t.Helper()
	var r inputRequiredResult
	if m.Error != nil || json.Unmarshal(m.Result, &r) != nil {
		t.Fatalf("not a result: %s", m.raw)
	}
	return r
}

const samplingMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{}}}`

func askCall(id, kind, extra string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"ask","arguments":{"kind":%q}%s,%s}}`,
		id, kind, extra, samplingMeta)
}

// roundTrips sends a request to server srv of tp and returns its answer,
// by how: "http" (the front door h, each request an exchange of the
// server's stateless session) or "stdio" (one session for them all).
func roundTrips(t *testing.T, tp *testPool) (roundTrip map[string]func(id, body string) msg, h *httpClient) {
	h = &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	stdio := tp.dial(t, "srv")
	return map[string]func(id, body string) msg{
		"http": func(_, body string) msg { return h.call(body) },
		"stdio": func(id, body string) msg {
			stdio.send(body)
			m, _ := stdio.recvID(id)
			return m
		},
	}, h
}

// TestMRTRBridgesLegacyChildQuestions: a legacy child asks its client for
// sampling in the middle of a modern client's call. The client gets
// input_required with the child's question and an opaque requestState; its
// retry with the answer completes the child's call, and the call's result
// reaches the retry. Over HTTP, where every request is an exchange of its
// own on the server's stateless session, and over stdio.
func TestMRTRBridgesLegacyChildQuestions(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	roundTrip, _ := roundTrips(t, tp)
	for _, how := range []string{"http", "stdio"} {
		t.Run(how, func(t *testing.T) {
			send := roundTrip[how]
			first := readResult(t, send("1", askCall("1", "sampling", "")))
			if first.ResultType != "input_required" || first.RequestState == "" || len(first.InputRequests) != 1 {
				t.Fatalf("first answer: %+v", first)
			}
			var key string
			for k, q := range first.InputRequests {
				key = k
				if q.Method != "sampling/createMessage" || !strings.Contains(string(q.Params), "six times seven") {
					t.Fatalf("question: %s %s", q.Method, q.Params)
				}
			}
			// A retry without the answer is asked again, with a new state.
			again := readResult(t, send("2", askCall("2", "sampling", `,"requestState":"`+first.RequestState+`"`)))
			if again.ResultType != "input_required" || again.RequestState == first.RequestState || len(again.InputRequests) != 1 {
				t.Fatalf("retry without an answer: %+v", again)
			}
			// The old state is spent.
			answer := `{"` + key + `":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`
			if m := send("3", askCall("3", "sampling", `,"requestState":"`+first.RequestState+`","inputResponses":`+answer)); strings.Contains(m.raw, "forty-two") {
				t.Fatalf("a spent requestState was honoured: %s", m.raw)
			}
			done := readResult(t, send("4", askCall("4", "sampling", `,"requestState":"`+again.RequestState+`","inputResponses":`+answer)))
			if done.ResultType != "complete" || len(done.Content) != 1 || !strings.Contains(done.Content[0].Text, "forty-two") {
				t.Fatalf("final answer: %+v", done)
			}
		})
	}
	if n := len(tp.Snapshot().Sessions); n != 2 {
		t.Fatalf("%d sessions, want 2: the stdio one and the server's stateless HTTP one", n)
	}
}

// TestMRTRUnknownStateIsRefused: a retry whose requestState the pool gave
// out and no longer holds (spent by an earlier retry, or given out by a
// pool that has since stopped) is refused with -32602. Passed on as a new
// call, it ran the legacy child's tool again: a replayed retry re-ran a
// call that may have done its work before it asked.
func TestMRTRUnknownStateIsRefused(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	roundTrip, _ := roundTrips(t, tp)
	answer := func(key string) string {
		return `,"inputResponses":{"` + key + `":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`
	}
	refused := func(t *testing.T, what string, m msg) {
		t.Helper()
		if m.Error == nil || m.Error.Code != -32602 || !strings.Contains(m.Error.Message, "requestState") {
			t.Fatalf("%s: %s, want -32602 naming the requestState", what, m.raw)
		}
	}
	for _, how := range []string{"http", "stdio"} {
		t.Run(how, func(t *testing.T) {
			send := roundTrip[how]
			// No call held anywhere: a state of the pool's shape from another run.
			refused(t, "a state no pool of this run gave out",
				send("1", askCall("1", "sampling", `,"requestState":"sb1.00112233445566778899aabbccddeeff"`+answer("q"))))
			first := readResult(t, send("2", askCall("2", "sampling", "")))
			var key string
			for k := range first.InputRequests {
				key = k
			}
			done := readResult(t, send("3", askCall("3", "sampling", `,"requestState":"`+first.RequestState+`"`+answer(key))))
			if done.ResultType != "complete" {
				t.Fatalf("the retry: %+v", done)
			}
			refused(t, "the same retry again", send("4", askCall("4", "sampling", `,"requestState":"`+first.RequestState+`"`+answer(key))))
		})
	}
}

// TestMRTRRefusesWhatTheClientCannotAnswer: a modern client that did not
// declare sampling gets -32021 (HTTP 400) for a call whose legacy child
// asks for sampling, and the child's question is refused; a requestState
// presented on another tool is refused.
func TestMRTRRefusesWhatTheClientCannotAnswer(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	resp := h.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"sampling"},` + modernMeta + `}}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "-32021") || !strings.Contains(string(b), `"requiredCapabilities":{"sampling":{}}`) {
		t.Fatalf("undeclared sampling: %s %s, want 400 with -32021", resp.Status, b)
	}
	first := readResult(t, h.call(askCall("2", "elicitation", "")))
	if first.ResultType != "input_required" {
		t.Fatalf("elicitation: %+v", first)
	}
	m := h.call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"requestState":"` +
		first.RequestState + `",` + samplingMeta + `}}`)
	if m.Error == nil || m.Error.Code != -32602 {
		t.Fatalf("requestState on another tool: %s", m.raw)
	}
}

// TestMRTRKeepsAnAnswerForTheRetry: the child finishes a held call before
// the client retries (here it stops waiting for its question); the retry
// gets that result, as a 2026-07-28 result, and nothing more reaches the
// child for the question.
func TestMRTRKeepsAnAnswerForTheRetry(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv", "-ask-timeout", "50ms"))
	h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	first := readResult(t, h.call(askCall("1", "sampling", "")))
	if first.ResultType != "input_required" {
		t.Fatalf("first answer: %+v", first)
	}
	eventually(t, "the child to finish the held call", func() bool { return len(tp.Snapshot().InFlight) == 0 })
	var key string
	for k := range first.InputRequests {
		key = k
	}
	answer := `{"` + key + `":{"role":"assistant","content":{"type":"text","text":"late"},"model":"m"}}`
	done := readResult(t, h.call(askCall("2", "sampling", `,"requestState":"`+first.RequestState+`","inputResponses":`+answer)))
	if done.ResultType != "complete" || len(done.Content) != 1 || done.Content[0].Text != "no answer" {
		t.Fatalf("retry after the child finished: %+v", done)
	}
}

// TestMRTRHeldCallWaitsForItsClient: a person may take minutes to answer
// a child's question, longer than the server's request timeout. While a
// call is held for its client's answer its timeout waits too: the answer
// that comes after two timeouts still reaches the child, and the retry
// gets the call's result. The wait is bounded by how long the pool keeps
// a held call for its retry: a client that never comes back leaves
// nothing running at the child, and one that comes back after that gets
// an error saying it did not answer in time (here the pool keeps it 3 s,
// not 10 minutes). On the first edition the held call timed out under
// the person, and the retry got -32001 for the child's silence. The
// claim is that the hold outlasts the timeout, not a bound on the
// child's work: the timeout (1 s) is large next to a round at the child,
// so the retry's round does not run out on a slow machine, and the hold
// is kept a second past the two timeouts the retry waits.
func TestMRTRHeldCallWaitsForItsClient(t *testing.T) {
	const timeout, keep = time.Second, 3 * time.Second
	t.Cleanup(pool.SetHoldKeep(keep)) // restored once the pool has closed
	cfg := fake("srv")
	tp := newTestPool(t, nil, cfg)
	h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	// The child starts under the default timeout: the test's is the held
	// call's (applyRequestTimeout).
	if m := h.call(`{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"echo","arguments":{"text":"up"},` + samplingMeta + `}}`); m.text() != "up" {
		t.Fatalf("the call that starts the child: %s", m.raw)
	}
	tp.applyRequestTimeout(t, &cfg, timeout)
	first := readResult(t, h.call(askCall("1", "sampling", "")))
	if first.ResultType != "input_required" {
		t.Fatalf("first answer: %+v", first)
	}
	start := time.Now()
	eventually(t, "two request timeouts to pass, the call held", func() bool {
		if len(tp.Snapshot().InFlight) != 1 {
			t.Fatalf("the held call ended while its client's person answered")
		}
		return time.Since(start) > 2*timeout
	})
	var key string
	for k := range first.InputRequests {
		key = k
	}
	answer := `{"` + key + `":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`
	done := readResult(t, h.call(askCall("2", "sampling", `,"requestState":"`+first.RequestState+`","inputResponses":`+answer)))
	if done.ResultType != "complete" || len(done.Content) != 1 || !strings.Contains(done.Content[0].Text, "forty-two") {
		t.Fatalf("the retry after two timeouts: %+v", done)
	}

	first = readResult(t, h.call(askCall("3", "sampling", "")))
	eventually(t, "a held call to end once its hold is no longer kept", func() bool { return len(tp.Snapshot().InFlight) == 0 })
	m := h.call(askCall("4", "sampling", `,"requestState":"`+first.RequestState+`","inputResponses":{}`))
	if m.Error == nil || m.Error.Code != -32001 || !strings.Contains(m.Error.Message, "the client did not answer") {
		t.Fatalf("retry after the hold was let go: %s", m.raw)
	}
}

// TestLegacyClientOfModernChildAnswersInputRequired: a modern child answers
// a legacy client's call with input_required; the pool asks the client
// the child's question as a request of its own, retries the call at the
// child with the answer and the child's requestState, and the client gets
// the final result under its own id. A client that did not declare the
// capability gets an error, not a result it cannot read.
func TestLegacyClientOfModernChildAnswersInputRequired(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
	c := tp.dial(t, "srv")
	c.initialize("old", `{"sampling":{}}`)
	c.call(`"call"`, "ask", `{"kind":"sampling"}`)
	q := c.recv()
	if q.Method != "sampling/createMessage" || len(q.ID) == 0 || !strings.Contains(string(q.Params), "six times seven") {
		t.Fatalf("question: %s", q.raw)
	}
	c.send(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`)
	m, _ := c.recvID(`"call"`)
	var r inputRequiredResult
	if err := json.Unmarshal(m.Result, &r); err != nil || len(r.Content) != 1 || !strings.Contains(r.Content[0].Text, "forty-two") {
		t.Fatalf("final result: %s", m.raw)
	}

	without := tp.dial(t, "srv")
	without.initialize("no-sampling", "")
	without.call("7", "ask", `{"kind":"sampling"}`)
	if m, _ := without.recvID("7"); m.Error == nil {
		t.Fatalf("a client without sampling: %s", m.raw)
	}
}

// TestMRTRHoldsAreBounded: a held call has left its session's requests in
// flight, so a modern client that never retries could pile up held calls
// on the child without end. Each session holds at most its share
// (MaxSessionInFlight): past it the child's question is answered with an
// error and the call goes on without the client, while another session
// still gets its questions (of another server's child: on this one, the
// greedy session's held calls are in flight, so a question there could be
// either session's, and goes to neither), and a retry gives the room
// back.
func TestMRTRHoldsAreBounded(t *testing.T) {
	const share = 2
	tp := newTestPool(t, &pool.Options{MaxSessionInFlight: share}, fake("srv"), fake("srv2"))
	greedy, other := tp.dial(t, "srv"), tp.dial(t, "srv2")
	var states []string
	for i := range share {
		id := fmt.Sprint(i)
		greedy.send(askCall(id, "sampling", ""))
		m, _ := greedy.recvID(id)
		r := readResult(t, m)
		if r.ResultType != "input_required" {
			t.Fatalf("held call %d within the share: %s", i, m.raw)
		}
		states = append(states, r.RequestState)
	}
	greedy.send(askCall("9", "sampling", ""))
	m, _ := greedy.recvID("9")
	if strings.Contains(m.raw, "input_required") {
		t.Fatalf("a held call past the session's share: %s", m.raw)
	}
	other.send(askCall("1", "sampling", ""))
	if m, _ := other.recvID("1"); readResult(t, m).ResultType != "input_required" {
		t.Fatalf("another session's question: %s", m.raw)
	}
	// A retry without the answer takes its hold and puts it back: the
	// share is full again, not over.
	greedy.send(askCall("10", "sampling", `,"requestState":"`+states[0]+`"`))
	if m, _ := greedy.recvID("10"); readResult(t, m).ResultType != "input_required" {
		t.Fatalf("a retry within the share is asked again: %s", m.raw)
	}
	greedy.send(askCall("11", "sampling", ""))
	if m, _ := greedy.recvID("11"); strings.Contains(m.raw, "input_required") {
		t.Fatalf("a held call past the share after a retry: %s", m.raw)
	}
}

// A legacy client that never answers the pool's questions gets -32001,
// saying it did not answer, once the wait for a person is over (here the
// pool waits 2 s, not 10 minutes), not at the request timeout (1 s). A
// client that cancelled its call meanwhile and gave the id to a new
// request gets that request's answer only: the abandoned round ends
// without a word. (Under -race the first case also checks that the
// round's timer is armed only once the round is whole.) The claims are
// about which wait ends the round, not its exact length: the timeout is
// large next to the child's work under it (asking, a 100 ms sleep), so a
// slow machine does not time those out, and the wait for a person is
// twice the timeout, so the two stay apart.
func TestUnansweredQuestions(t *testing.T) {
	const timeout, keep = time.Second, 2 * time.Second
	t.Cleanup(pool.SetHoldKeep(keep)) // restored once the pool has closed
	cfg := fake("srv", "-era", "modern")
	tp := newTestPool(t, nil, cfg)

	c := tp.dial(t, "srv")
	c.initialize("old", `{"sampling":{}}`)
	tp.applyRequestTimeout(t, &cfg, timeout)
	c.call(`"call"`, "ask", `{"kind":"sampling"}`)
	if q := c.recv(); q.Method != "sampling/createMessage" {
		t.Fatalf("want the child's question, got %s", q.raw)
	}
	asked := time.Now()
	m, _ := c.recvID(`"call"`)
	if m.Error == nil || m.Error.Code != -32001 || !strings.Contains(m.Error.Message, "the client did not answer") {
		t.Fatalf("unanswered questions: want -32001 saying the client did not answer, got %s", m.raw)
	}
	if waited := time.Since(asked); waited < keep-timeout/2 {
		t.Fatalf("unanswered questions ended after %s, before the wait for a person (%s)", waited, keep)
	}

	d := tp.dial(t, "srv")
	d.initialize("canceller", `{"sampling":{}}`)
	d.call(`"call"`, "ask", `{"kind":"sampling"}`)
	if q := d.recv(); q.Method != "sampling/createMessage" {
		t.Fatalf("want the child's question, got %s", q.raw)
	}
	asked = time.Now()
	d.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"call","reason":"user"}}`)
	d.call(`"call"`, "echo", `{"text":"mine"}`) // the same id, a new request
	if m, _ := d.recvID(`"call"`); m.text() != "mine" {
		t.Fatalf("the new request: %s", m.raw)
	}
	// Until past the abandoned round's wait, nothing else may come.
	for i := 0; time.Since(asked) < keep+100*time.Millisecond; i++ {
		d.call(fmt.Sprint(i), "sleep", `{"ms":100}`)
		if m, other := d.recvID(fmt.Sprint(i)); m.Error != nil || len(other) != 0 {
			t.Fatalf("while the abandoned round ran out: %s, and before it %d more: %v", m.raw, len(other), other)
		}
	}
}

// TestMRTRHoldOutlivesTheQuietSession: a modern client takes longer than
// the stateless session stays without an exchange (its server's
// idleTimeout) to answer a child's question (a person reading a form).
// The held call must still be there for its retry, on a shared child and
// on a child of the stateless session's own: the session does not end
// while it holds a call waiting for a retry. Once the retry took it, the
// session ends once quiet as before.
func TestMRTRHoldOutlivesTheQuietSession(t *testing.T) {
	for _, share := range []pool.Share{pool.ShareShared, pool.ShareSession} {
		t.Run(string(share), func(t *testing.T) {
			cfg := fake("srv")
			cfg.Share = share
			tp := newTestPool(t, nil, cfg)
			handler := tp.HTTPHandler()
			front := newHTTPFrontOf(t, handler)
			h := &httpClient{t: t, url: front + "/mcp/srv"}

			first := readResult(t, h.call(askCall("1", "sampling", "")))
			if first.ResultType != "input_required" {
				t.Fatalf("first answer: %+v", first)
			}
			var key string
			for k := range first.InputRequests {
				key = k
			}
			pool.ExpireHTTPIdle(handler, time.Now().Add(2*pool.DefaultIdleTimeout))
			answer := `{"` + key + `":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`
			done := readResult(t, h.call(askCall("2", "sampling", `,"requestState":"`+first.RequestState+`","inputResponses":`+answer)))
			if done.ResultType != "complete" || len(done.Content) != 1 || !strings.Contains(done.Content[0].Text, "forty-two") {
				t.Fatalf("the retry after the session's quiet time: %+v", done)
			}
			// The retry's POST counts done once its answer is written,
			// which its client may have read first.
			eventually(t, "the stateless session to end once nothing is held", func() bool {
				pool.ExpireHTTPIdle(handler, time.Now().Add(2*pool.DefaultIdleTimeout))
				return len(tp.Snapshot().Sessions) == 0
			})
		})
	}
}

// A legacy child's question goes only to a modern call whose own request
// declared what it needs, and never fails a call that declared nothing:
// of one client's calls (a 2026-07-28 stdio session), the asker that
// declared it carries it. Two stateless HTTP calls are two clients'
// calls: neither gets the question, the child gets -32006, and the
// bystander its own result. On the first edition the oldest modern call
// on the child carried any question, whoever sent it: a call that needed
// nothing was failed with -32021, and the client whose call asked got an
// error for its own question.
func TestMRTRQuestionGoesToACallThatDeclaredIt(t *testing.T) {
	for _, how := range []string{"stdio", "http"} {
		t.Run(how, func(t *testing.T) {
			tp := newTestPool(t, nil, fake("srv"))
			url := newHTTPFront(t, tp) + "/mcp/srv"
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			bystanderCall := modernCall(`"by"`, "", "M", "sleep_echo", `{"ms":1500,"text":"mine"}`)
			var bystander func() msg
			var asker func() msg
			if how == "stdio" {
				c := tp.dial(t, "srv")
				c.send(bystanderCall)
				bystander = func() msg { m, _ := c.recvID(`"by"`); return m }
				asker = func() msg { c.send(askCall("2", "sampling", "")); m, _ := c.recvID("2"); return m }
			} else {
				got := make(chan []msg, 1)
				go func() {
					m, _ := postStream(ctx, t, url, bystanderCall)
					got <- m
				}()
				bystander = func() msg {
					m := <-got
					if len(m) != 1 {
						t.Fatalf("the bystander got %s", raws(m))
					}
					return m[0]
				}
				h := &httpClient{t: t, url: url}
				asker = func() msg { return h.call(askCall("2", "sampling", "")) }
			}
			eventually(t, "the bystander's call to reach the child", func() bool {
				in := tp.Snapshot().InFlight
				return len(in) == 1 && in[0].WrittenToChild
			})
			m := asker()
			first := readResult(t, m)
			switch {
			case how == "stdio" && (first.ResultType != "input_required" || len(first.InputRequests) != 1):
				t.Fatalf("the asker got %s, want its own question", m.raw)
			case how == "http" && (first.ResultType != "complete" || len(first.Content) != 1 ||
				!strings.Contains(first.Content[0].Text, "-32006") || !strings.Contains(first.Content[0].Text, "several clients")):
				t.Fatalf("the asker got %s, want the child told -32006: two clients' calls were in flight", m.raw)
			}
			if got := bystander(); got.Error != nil || !strings.Contains(got.raw, "mine") {
				t.Fatalf("the bystander, which declared nothing and needed nothing, got %s", got.raw)
			}
		})
	}
}

// A 2026-07-28 stdio client's capabilities are its requests' own: each
// names them in _meta, and a later request may declare what an earlier one
// did not, or not declare what an earlier one did. On the first edition the
// session's first request decided for all of them.
func TestMRTRStdioCapabilitiesArePerRequest(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	noCaps := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	a := tp.dial(t, "srv")
	a.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + noCaps + `}}`)
	a.recvID("1")
	a.send(askCall("2", "sampling", ""))
	m, _ := a.recvID("2")
	r := readResult(t, m)
	if r.ResultType != "input_required" {
		t.Fatalf("a request declaring sampling after one that did not: %s", m.raw)
	}
	// Answered, its call ends: while it is in flight, another client's
	// question could be either's, and goes to neither.
	a.send(askCall("3", "sampling", `,"requestState":"`+r.RequestState+`","inputResponses":{"`+onlyInputKey(t, r)+
		`":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`))
	if m, _ := a.recvID("3"); readResult(t, m).ResultType != "complete" {
		t.Fatalf("the retry with the answer: %s", m.raw)
	}

	b := tp.dial(t, "srv")
	b.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + samplingMeta + `}}`)
	b.recvID("1")
	b.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"sampling"},` + noCaps + `}}`)
	m, _ = b.recvID("2")
	if m.Error == nil || m.Error.Code != -32021 {
		t.Errorf("a request declaring nothing after one that declared sampling: %s, want -32021", m.raw)
	}
}

// After a 2026-07-28 client's retry takes over a call held for its
// answer, the call's progress goes under the retry's progressToken (the
// first request has ended: its token names nothing), or, when the retry
// asked for no progress, not at all. On the first edition it went on under
// the first request's token. The legacy child sends its progress after
// the client's answer reaches it.
func TestMRTRProgressAfterARetryNamesTheRetrysToken(t *testing.T) {
	meta := func(token string) string {
		if token != "" {
			token = `"progressToken":` + token + `,`
		}
		return `"_meta":{` + token + `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}`
	}
	for _, tc := range []struct {
		name, retryToken string
		want             []string
	}{
		{"the retry asks for progress", `"retry"`, []string{`"retry"`, `"retry"`}},
		{"the retry asks for none", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestPool(t, nil, fake("srv"))
			c := tp.dial(t, "srv")
			c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"sampling","steps":2},` + meta(`"first"`) + `}}`)
			m, _ := c.recvID("1")
			first := readResult(t, m)
			if first.ResultType != "input_required" || len(first.InputRequests) != 1 {
				t.Fatalf("first answer: %s", m.raw)
			}
			var key string
			for k := range first.InputRequests {
				key = k
			}
			answer := `{"` + key + `":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`
			c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"sampling","steps":2},"requestState":"` +
				first.RequestState + `","inputResponses":` + answer + `,` + meta(tc.retryToken) + `}}`)
			m, before := c.recvID("2")
			if done := readResult(t, m); done.ResultType != "complete" {
				t.Fatalf("the retry's answer: %s", m.raw)
			}
			var tokens []string
			for _, n := range before {
				var p struct {
					ProgressToken json.RawMessage `json:"progressToken"`
				}
				if n.Method != "notifications/progress" || json.Unmarshal(n.Params, &p) != nil {
					t.Fatalf("before the retry's answer: %s", n.raw)
				}
				tokens = append(tokens, string(p.ProgressToken))
			}
			if strings.Join(tokens, " ") != strings.Join(tc.want, " ") {
				t.Errorf("the call's progress after the retry named tokens %q, want %q", tokens, tc.want)
			}
		})
	}
}

// TestRetrysProgressNeverGoesBack: a legacy client's call to a 2026-07-28
// child is retried by the pool once the client answered the child's
// question, and the child's progress starts again from 1 on the retry;
// the client's progress never goes back: it hears 1, 2, 3 once, then
// the result.
func TestRetrysProgressNeverGoesBack(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
	c := tp.dial(t, "srv")
	c.initialize("old", `{"sampling":{}}`)
	c.send(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"ask","arguments":{"kind":"sampling","steps":3},"_meta":{"progressToken":"tok"}}}`)
	var seen []string
	q := c.recv()
	for q.Method == "notifications/progress" {
		seen = append(seen, progressOf(t, q))
		q = c.recv()
	}
	if q.Method != "sampling/createMessage" {
		t.Fatalf("question: %s", q.raw)
	}
	c.send(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`)
	_, before := c.recvID(`"call"`)
	for _, m := range before {
		seen = append(seen, progressOf(t, m))
	}
	if want := []string{"1", "2", "3"}; !slices.Equal(seen, want) {
		t.Errorf("the client's progress: %v, want %v", seen, want)
	}
}

// progressOf is a progress notification's value, as JSON.
func progressOf(t *testing.T, m msg) string {
	t.Helper()
	var p struct {
		Token    json.RawMessage `json:"progressToken"`
		Progress json.RawMessage `json:"progress"`
	}
	if m.Method != "notifications/progress" || json.Unmarshal(m.Params, &p) != nil || string(p.Token) != `"tok"` {
		t.Fatalf("not the call's progress: %s", m.raw)
	}
	return string(p.Progress)
}

// A legacy child that asks roots/list during a 2026-07-28 client's call
// is answered by the pool, as every legacy child's roots/list is, from
// the call's roots partition: 2026-07-28 requests declare no roots to the
// pool, so the child is told none, and the client gets the call's result,
// never input_required, whether or not its request declared roots. Over
// HTTP and stdio.
func TestMRTRLegacyChildRootsAnsweredByThePool(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	roundTrip, _ := roundTrips(t, tp)
	const rootsMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}`
	for _, how := range []string{"http", "stdio"} {
		for _, meta := range []string{rootsMeta, modernMeta} {
			m := roundTrip[how]("1", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"roots"},`+meta+`}}`)
			if r := readResult(t, m); r.ResultType != "complete" || len(r.Content) != 1 || r.Content[0].Text != `{"roots":[]}` {
				t.Fatalf("%s, %s: %s, want the call's result with the child told no roots", how, meta, m.raw)
			}
		}
	}
}
