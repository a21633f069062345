package pool_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// urlMeta is a modern request's _meta declaring elicitation in URL mode.
const urlMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}`

// askURLCall is a modern tools/call of the fake's ask tool in URL mode:
// it is refused until file exists.
func askURLCall(id, file, extra, meta string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"url","file":%q}%s,%s}}`,
		id, file, extra, meta)
}

// TestModernClientOfLegacyChildGetsURLElicitation: a legacy child refuses
// a call with -32042 (URLElicitationRequiredError, 2025-11-25) until its
// user has been to a URL. 2026-07-28 retired that error: its client gets
// input_required with the URL as an elicitation/create in URL mode (no
// elicitationId, which 2026-07-28 removed), and its retry once the user
// is done is a new call, which the child answers. Over HTTP and stdio. A
// client that did not declare URL mode gets -32021 (HTTP 400); a legacy
// client gets the child's error as it is.
func TestModernClientOfLegacyChildGetsURLElicitation(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	roundTrip, h := roundTrips(t, tp)
	for _, how := range []string{"http", "stdio"} {
		t.Run(how, func(t *testing.T) {
			send := roundTrip[how]
			file := filepath.Join(t.TempDir(), "authorized")
			first := readResult(t, send("1", askURLCall("1", file, "", urlMeta)))
			if first.ResultType != "input_required" || first.RequestState != "" || len(first.InputRequests) != 1 {
				t.Fatalf("first answer: %+v", first)
			}
			var key string
			for k, q := range first.InputRequests {
				key = k
				want := `{"mode":"url","message":"Authorize fakemcp to continue.","url":"https://auth.example/connect?id=` + k + `"}`
				if q.Method != "elicitation/create" || string(q.Params) != want {
					t.Fatalf("input request %q: %s %s, want elicitation/create %s", k, q.Method, q.Params, want)
				}
			}
			// The user is done at the URL; the client retries with its answer.
			if err := os.WriteFile(file, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			done := readResult(t, send("2", askURLCall("2", file, `,"inputResponses":{"`+key+`":{"action":"accept"}}`, urlMeta)))
			if done.ResultType != "complete" || len(done.Content) != 1 || done.Content[0].Text != "authorized" {
				t.Fatalf("retry: %+v", done)
			}
		})
	}

	resp := h.post(askURLCall("3", filepath.Join(t.TempDir(), "x"), "", samplingMeta)) // elicitation: form mode only
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "-32021") ||
		!strings.Contains(string(b), `"requiredCapabilities":{"elicitation":{"url":{}}}`) {
		t.Fatalf("form mode only: %s %s, want 400 with -32021", resp.Status, b)
	}

	old := tp.dial(t, "srv")
	old.initialize("old", `{"elicitation":{"url":{}}}`)
	old.call("4", "ask", fmt.Sprintf(`{"kind":"url","file":%q}`, filepath.Join(t.TempDir(), "x")))
	m, _ := old.recvID("4")
	if m.Error == nil || m.Error.Code != -32042 || !strings.Contains(string(m.Error.Data), `"elicitationId":"url-`) {
		t.Fatalf("a legacy client: %s, want the child's -32042", m.raw)
	}
}

// TestLegacyClientOfModernChildGetsURLElicitation: a modern child answers
// a legacy client's call with input_required asking for a URL
// interaction. The pool asks the client as 2025-11-25 has it, with the
// elicitationId that revision requires of URL mode; the client's accept,
// once the user is done, retries the call at the child, and the client
// gets its result.
func TestLegacyClientOfModernChildGetsURLElicitation(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
	file := filepath.Join(t.TempDir(), "authorized")
	c := tp.dial(t, "srv")
	c.initialize("old", `{"elicitation":{"url":{}}}`)
	c.call(`"call"`, "ask", fmt.Sprintf(`{"kind":"url","file":%q}`, file))
	q := c.recv()
	var p struct {
		Mode          string `json:"mode"`
		Message       string `json:"message"`
		URL           string `json:"url"`
		ElicitationID string `json:"elicitationId"`
	}
	if err := json.Unmarshal(q.Params, &p); err != nil || q.Method != "elicitation/create" || len(q.ID) == 0 ||
		p.Mode != "url" || p.Message == "" || !strings.HasPrefix(p.URL, "https://auth.example/") || p.ElicitationID == "" {
		t.Fatalf("question: %s, want a URL-mode elicitation/create with an elicitationId", q.raw)
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c.send(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{"action":"accept"}}`)
	if m, _ := c.recvID(`"call"`); m.text() != "authorized" {
		t.Fatalf("final result: %s", m.raw)
	}
}

// TestURLElicitationAfterAQuestion: a legacy child asks a modern client's
// call a question first (carried as input_required, the call held), and
// then refuses the call with -32042. The retry that carried the answer
// gets the URL as input_required. So does a retry that comes after the
// child, tired of waiting for its answer, refused the held call; and it
// is judged by its own capabilities, not the first call's: one that
// declared form mode only gets -32021.
func TestURLElicitationAfterAQuestion(t *testing.T) {
	tp := newTestPool(t, nil, fake("waits"), fake("tires", "-ask-timeout", "50ms"))
	front := newHTTPFront(t, tp)
	const formAndURL = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{},"url":{}}}}`
	file := filepath.Join(t.TempDir(), "authorized")
	const first = `,"first":"elicitation"`
	call := func(id, extra, meta string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"url","file":%q%s}%s,%s}}`,
			id, file, first, extra, meta)
	}
	question := func(h *httpClient) (key, state string) {
		t.Helper()
		r := readResult(t, h.call(call("1", "", formAndURL)))
		for k, q := range r.InputRequests {
			if q.Method != "elicitation/create" || !strings.Contains(string(q.Params), "requestedSchema") {
				t.Fatalf("question: %s %s", q.Method, q.Params)
			}
			key = k
		}
		if r.ResultType != "input_required" || len(r.InputRequests) != 1 || r.RequestState == "" {
			t.Fatalf("first answer: %+v", r)
		}
		return key, r.RequestState
	}
	answer := func(key, state string) string {
		return `,"requestState":"` + state + `","inputResponses":{"` + key + `":{"action":"accept","content":{"name":"Ada"}}}`
	}

	waits := &httpClient{t: t, url: front + "/mcp/waits"}
	key, state := question(waits)
	r := readResult(t, waits.call(call("2", answer(key, state), formAndURL)))
	if r.ResultType != "input_required" || r.RequestState != "" || len(r.InputRequests) != 1 {
		t.Fatalf("the retry with the answer: %+v", r)
	}
	for _, q := range r.InputRequests {
		if q.Method != "elicitation/create" || !strings.Contains(string(q.Params), `"mode":"url"`) {
			t.Fatalf("input request: %s %s", q.Method, q.Params)
		}
	}

	tires := &httpClient{t: t, url: front + "/mcp/tires"}
	key, state = question(tires)
	eventually(t, "the child to refuse the held call", func() bool { return len(tp.Snapshot().InFlight) == 0 })
	resp := tires.post(call("3", answer(key, state), samplingMeta)) // elicitation: form mode only
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "-32021") ||
		!strings.Contains(string(b), `"requiredCapabilities":{"elicitation":{"url":{}}}`) {
		t.Fatalf("a form-mode retry of a refused held call: %s %s, want 400 with -32021", resp.Status, b)
	}
}

// initializeCaps are the capabilities the pool declared in each
// initialize the fake child logged at path.
func initializeCaps(t *testing.T, path string) []map[string]json.RawMessage {
	t.Helper()
	var told []map[string]json.RawMessage
	for _, m := range childLog(t, path) {
		if m["method"] != "initialize" {
			continue
		}
		raw, _ := json.Marshal(m["params"])
		var p struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		told = append(told, p.Capabilities)
	}
	return told
}

// A legacy child is told the elicitation modes the session that started
// it declared: form mode alone as the empty object, which 2025-06-18
// children know. On the first edition every child was told form mode
// only, so a spec-following child never asked in URL mode (a sign-in at a
// third party) through the pool; on the second a URL-only session's child
// was told form mode too.
func TestLegacyChildHearsElicitationModes(t *testing.T) {
	dir := shortTempDir(t)
	for i, c := range []struct{ declared, want string }{
		{`{"elicitation":{}}`, `{}`},
		{`{"elicitation":{"form":{}}}`, `{}`},
		{`{"elicitation":{"url":{}}}`, `{"url":{}}`},
		{`{"elicitation":{"form":{},"url":{}}}`, `{"form":{},"url":{}}`},
	} {
		logPath := filepath.Join(dir, fmt.Sprintf("%d.log", i))
		tp := newTestPool(t, nil, fake("srv", "-log", logPath))
		tp.dial(t, "srv").initialize("c", c.declared)
		told := initializeCaps(t, logPath)
		if len(told) != 1 || string(told[0]["elicitation"]) != c.want {
			t.Errorf("%s: the child was told %s, want elicitation %s", c.declared, told, c.want)
		}
	}
}

// A legacy child's elicitation in URL mode goes only to a session that
// declared URL mode (2025-11-25: a server must not ask in a mode its
// client did not declare): the caller that did is asked it; a form-only
// session's call that asks it gets the child's -32006, and no client is
// asked, not even one that declared URL mode (the question is the
// caller's). On the first edition the form-only session whose call asked
// got the question; later the URL-mode session was asked it in the
// form-only session's stead.
func TestURLElicitationOnlyToClientsThatDeclaredURLMode(t *testing.T) {
	tp := newTestPool(t, nil, fake("mixed"), fake("form"))
	signIn := tp.dial(t, "mixed")
	signIn.initialize("sign-in", `{"elicitation":{"form":{},"url":{}}}`)
	form := tp.dial(t, "mixed")
	form.initialize("form", `{"elicitation":{}}`)
	signIn.call("1", "ask", `{"kind":"elicitation_url"}`)
	q := signIn.recv()
	var p struct {
		Mode string `json:"mode"`
	}
	if err := json.Unmarshal(q.Params, &p); err != nil || q.Method != "elicitation/create" || p.Mode != "url" {
		t.Fatalf("the URL-mode session got %s, want the URL-mode elicitation", q.raw)
	}
	signIn.send(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{"action":"accept"}}`)
	if m, other := signIn.recvID("1"); m.text() != `{"action":"accept"}` || len(other) > 0 {
		t.Fatalf("the call: %s after %v, want the URL-mode session's answer", m.raw, other)
	}
	form.call("1", "ask", `{"kind":"elicitation_url"}`)
	select {
	case q := <-signIn.in:
		t.Fatalf("the URL-mode session got %s, a question of the form-only session's call", q.raw)
	case m := <-form.in:
		if string(m.ID) != "1" || m.Method != "" || !strings.Contains(m.text(), "no connected client") || !strings.Contains(m.text(), "32006") {
			t.Fatalf("the form-only session got %s, want its call's answer with the child's -32006", m.raw)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the form-only session's call got no answer")
	}

	asker, other := tp.dial(t, "form"), tp.dial(t, "form")
	asker.initialize("asker", `{"elicitation":{}}`)
	other.initialize("other", `{"elicitation":{"form":{}}}`)
	asker.call("2", "ask", `{"kind":"elicitation_url"}`)
	if m := asker.recv(); string(m.ID) != "2" || m.Method != "" ||
		!strings.Contains(m.text(), "no connected client") || !strings.Contains(m.text(), "32006") {
		t.Fatalf("with form-only sessions alone the asker got %s, want its call's answer with the child's -32006", m.raw)
	}
	other.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	if _, got := other.recvID(`"p"`); len(got) > 0 {
		t.Fatalf("the other form-only session got %s", got[0].raw)
	}
}

// A 2026-07-28 call whose request declared elicitation in form mode only
// is not carried a legacy child's URL-mode elicitation: it gets -32021
// naming URL mode, as a -32042 of the child's gets it. A call that
// declared URL mode is carried it. Over HTTP and stdio. On the first
// edition the form-only call got the question as input_required.
func TestMRTRURLElicitationNeedsURLMode(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	roundTrip, h := roundTrips(t, tp)
	const want = `"requiredCapabilities":{"elicitation":{"url":{}}}`
	resp := h.post(askCall("1", "elicitation_url", "")) // elicitation: form mode only
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "-32021") || !strings.Contains(string(b), want) {
		t.Fatalf("form mode only, over HTTP: %s %s, want 400 with -32021 requiring elicitation in URL mode", resp.Status, b)
	}
	if m := roundTrip["stdio"]("1", askCall("1", "elicitation_url", "")); m.Error == nil || m.Error.Code != -32021 ||
		!strings.Contains(string(m.Error.Data), want) {
		t.Fatalf("form mode only, over stdio: %s, want -32021 requiring elicitation in URL mode", m.raw)
	}
	for _, how := range []string{"http", "stdio"} {
		t.Run(how, func(t *testing.T) {
			send := roundTrip[how]
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"elicitation_url"},%s}}`, urlMeta)
			r := readResult(t, send("2", body))
			if r.ResultType != "input_required" || len(r.InputRequests) != 1 {
				t.Fatalf("URL mode: %+v, want the question", r)
			}
			for key, q := range r.InputRequests {
				if q.Method != "elicitation/create" || !strings.Contains(string(q.Params), `"mode":"url"`) {
					t.Fatalf("URL mode: asked %s %s", q.Method, q.Params)
				}
				retry := fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"elicitation_url"},"inputResponses":{%q:{"action":"accept"}},"requestState":%q,%s}}`,
					key, r.RequestState, urlMeta)
				if m := send("3", retry); m.text() != `{"action":"accept"}` {
					t.Fatalf("the retry with the answer: %s", m.raw)
				}
			}
		})
	}
}

// A legacy client that declared elicitation in URL mode only
// ({"elicitation":{"url":{}}}; 2025-11-25: an empty object is form mode
// only, so one without form has no form mode) is never asked a form-mode
// elicitation: with nobody else to ask, the child gets -32006. The child
// started for it is told URL mode only. On the first edition the session
// was asked the form, and its child was told both modes.
func TestURLOnlyClientGetsNoFormQuestion(t *testing.T) {
	dir := shortTempDir(t)
	logPath := filepath.Join(dir, "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	u := tp.dial(t, "srv")
	u.initialize("url-only", `{"elicitation":{"url":{}}}`)
	if told := initializeCaps(t, logPath); len(told) != 1 || string(told[0]["elicitation"]) != `{"url":{}}` {
		t.Errorf("the child was told %s, want elicitation {\"url\":{}}", told)
	}
	u.call("1", "ask", `{"kind":"elicitation"}`) // form mode
	if m := u.recv(); m.Method == "elicitation/create" {
		t.Errorf("the URL-only session was asked a form-mode elicitation: %s", m.raw)
		u.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"action":"decline"}}`)
		u.recvID("1")
	} else if string(m.ID) != "1" || !strings.Contains(m.raw, "32006") {
		t.Errorf("the call: %s, want its answer with the child's -32006", m.raw)
	}
}

// A 2026-07-28 call whose request declared elicitation in URL mode only is
// not carried a legacy child's form-mode elicitation: being the one call
// that can have asked, it gets -32021 requiring form mode. Over HTTP and
// stdio. On the first edition it was carried the form as input_required.
func TestMRTRURLOnlyCallGetsNoFormQuestion(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	roundTrip, h := roundTrips(t, tp)
	const want = `"requiredCapabilities":{"elicitation":{"form":{}}}`
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"elicitation"},` + urlMeta + `}}`
	resp := h.post(body)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "-32021") || !strings.Contains(string(b), want) {
		t.Errorf("a URL-only call asked a form, over HTTP: %s %s, want 400 with -32021 requiring elicitation in form mode", resp.Status, b)
	}
	if m := roundTrip["stdio"]("1", body); m.Error == nil || m.Error.Code != -32021 || !strings.Contains(string(m.Error.Data), want) {
		t.Errorf("a URL-only call asked a form, over stdio: %s, want -32021 requiring elicitation in form mode", m.raw)
	}
}

// A legacy child's notifications/elicitation/complete reaches the
// legacy session it asked that URL-mode elicitation (2025-11-25: only
// the client that was asked), once, and no other session. A 2026-07-28
// client, carried the elicitation as input_required, gets none: that
// revision removed the notification, and the retry brings the outcome.
// On the first edition the pool dropped every completion.
func TestElicitationCompleteGoesToTheSessionAsked(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	const urlMode = `{"elicitation":{"url":{}}}`
	asked, bystander := tp.dial(t, "srv"), tp.dial(t, "srv")
	asked.initialize("asked", urlMode)
	bystander.initialize("bystander", urlMode)
	quiet := func(c *client, who string) {
		t.Helper()
		c.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
		if _, got := c.recvID(`"p"`); len(got) > 0 {
			t.Fatalf("%s got %s", who, got[0].raw)
		}
	}

	asked.call("1", "ask", `{"kind":"elicitation_url","complete":true}`)
	q := asked.recv()
	var p struct {
		ElicitationID string `json:"elicitationId"`
	}
	if err := json.Unmarshal(q.Params, &p); err != nil || q.Method != "elicitation/create" || p.ElicitationID == "" {
		t.Fatalf("the asked session got %s, want the URL-mode elicitation", q.raw)
	}
	asked.send(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{"action":"accept"}}`)
	m, before := asked.recvID("1")
	if m.text() != `{"action":"accept"}` || len(before) != 1 || before[0].Method != "notifications/elicitation/complete" ||
		!strings.Contains(string(before[0].Params), `"elicitationId":"`+p.ElicitationID+`"`) {
		t.Fatalf("the asked session: %s after %v, want the child's completion of %q, then the result", m.raw, before, p.ElicitationID)
	}
	quiet(bystander, "the session not asked")

	h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	modern := tp.dial(t, "srv")
	send := map[string]func(id, body string) msg{
		"http": func(_, body string) msg { return h.call(body) },
		"stdio": func(id, body string) msg {
			modern.send(body)
			m, other := modern.recvID(id)
			if len(other) > 0 {
				t.Errorf("the modern stdio client got %s", other[0].raw)
			}
			return m
		},
	}
	for _, how := range []string{"http", "stdio"} {
		t.Run(how, func(t *testing.T) {
			body := func(id, extra string) string {
				return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"elicitation_url","complete":true}%s,%s}}`,
					id, extra, urlMeta)
			}
			r := readResult(t, send[how]("2", body("2", "")))
			if r.ResultType != "input_required" || len(r.InputRequests) != 1 {
				t.Fatalf("the modern call: %+v, want the elicitation as input_required", r)
			}
			for key := range r.InputRequests {
				retry := body("3", fmt.Sprintf(`,"inputResponses":{%q:{"action":"accept"}},"requestState":%q`, key, r.RequestState))
				if m := send[how]("3", retry); m.text() != `{"action":"accept"}` {
					t.Fatalf("the retry: %s", m.raw)
				}
			}
			quiet(asked, "a legacy session not asked")
			quiet(bystander, "a legacy session not asked")
		})
	}
}
