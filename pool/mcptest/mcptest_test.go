package mcptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// fakeBin is the fake MCP server, built once by TestMain.
var fakeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcptest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if fakeBin, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// modernMeta is the _meta of a 2026-07-28 request from a client that can
// answer every kind of question.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{},"roots":{}}}`

// msg is one line the fake wrote.
type msg struct {
	raw    string
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// text is the first text content of a tools/call result.
func (m msg) text() string {
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(m.Result, &r)
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// field decodes one top-level field of the result.
func (m msg) field(name string) any {
	var r map[string]any
	_ = json.Unmarshal(m.Result, &r)
	return r[name]
}

// fake is one running fakemcp, driven over pipes.
type fake struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // stdout, line by line; closed at EOF
	stderr *lockedBuffer
	exited chan struct{} // closed once Wait returned
	// started is just before the process started: nothing it does on
	// its own clock can be seen sooner after this.
	started time.Time
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func start(t *testing.T, flags ...string) *fake {
	t.Helper()
	f := &fake{t: t, cmd: exec.Command(fakeBin, flags...), lines: make(chan string, 1<<12),
		stderr: &lockedBuffer{}, exited: make(chan struct{})}
	f.cmd.Stderr = f.stderr
	var err error
	if f.stdin, err = f.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := f.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	f.started = time.Now()
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(f.exited)
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				f.lines <- strings.TrimSuffix(line, "\n")
			}
			if err != nil {
				break
			}
		}
		close(f.lines)
		_ = f.cmd.Wait() // after the last read, as StdoutPipe requires
	}()
	t.Cleanup(func() {
		go func() {
			for range f.lines { // let the reader reach EOF
			}
		}()
		f.stdin.Close()
		select {
		case <-f.exited:
		case <-time.After(2 * time.Second):
			_ = f.cmd.Process.Kill()
			<-f.exited
		}
	})
	return f
}

func (f *fake) send(lines ...string) {
	f.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(f.stdin, l+"\n"); err != nil {
			f.t.Fatalf("write to the fake: %v", err)
		}
	}
}

// line is the next raw stdout line.
func (f *fake) line() string {
	f.t.Helper()
	select {
	case l, ok := <-f.lines:
		if !ok {
			f.t.Fatalf("the fake closed stdout; stderr:\n%s", f.stderr)
		}
		return l
	case <-time.After(10 * time.Second):
		f.t.Fatalf("nothing from the fake within 10s; stderr:\n%s", f.stderr)
	}
	return ""
}

// recv is the next message, which must be JSON.
func (f *fake) recv() msg {
	f.t.Helper()
	l := f.line()
	var m msg
	if err := json.Unmarshal([]byte(l), &m); err != nil {
		f.t.Fatalf("not JSON on stdout: %q", l)
	}
	m.raw = l
	return m
}

// recvID waits for the response with id (raw bytes), collecting the rest.
func (f *fake) recvID(id string) (msg, []msg) {
	f.t.Helper()
	var other []msg
	for {
		m := f.recv()
		if string(m.ID) == id && m.Method == "" {
			return m, other
		}
		other = append(other, m)
	}
}

// request sends a request and waits for its response; params may be "".
func (f *fake) request(id, method, params string) (msg, []msg) {
	f.t.Helper()
	if params == "" {
		f.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q}`, id, method))
	} else {
		f.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, params))
	}
	return f.recvID(id)
}

// call sends a legacy tools/call and waits for its response.
func (f *fake) call(id, tool, args string) (msg, []msg) {
	f.t.Helper()
	return f.request(id, "tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, tool, args))
}

// callModern sends a 2026-07-28 tools/call and waits for its response.
func (f *fake) callModern(id, tool, args string) (msg, []msg) {
	f.t.Helper()
	return f.request(id, "tools/call", `{"name":"`+tool+`","arguments":`+args+`,`+modernMeta+`}`)
}

// listenTools opens a 2026-07-28 listen (id "a") for tools list changes
// and checks it is acknowledged (what: which listen, for the failure).
func (f *fake) listenTools(what string) {
	f.t.Helper()
	f.send(`{"jsonrpc":"2.0","id":"a","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`)
	if m := f.recv(); m.Method != "notifications/subscriptions/acknowledged" {
		f.t.Fatalf("%s: %s", what, m.raw)
	}
}

// exitCode waits for the process to end: its exit code, or -1 if a signal
// ended it.
func (f *fake) exitCode() int {
	f.t.Helper()
	go func() {
		for range f.lines {
		}
	}()
	select {
	case <-f.exited:
		return f.cmd.ProcessState.ExitCode()
	case <-time.After(10 * time.Second):
		f.t.Fatalf("the fake did not exit within 10s; stderr:\n%s", f.stderr)
	}
	return 0
}

// stillRunning reports whether the process is alive after d. Only the
// flags that promise to do nothing need this wait.
func (f *fake) stillRunning(d time.Duration) bool {
	select {
	case <-f.exited:
		return false
	case <-time.After(d):
		return true
	}
}

// kill ends the process.
func (f *fake) kill() {
	_ = f.cmd.Process.Kill()
	f.exitCode()
}

// eventually polls cond until it holds or a deadline passes: stderr goes
// through a copying goroutine, so it can lag behind stdout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func wantError(t *testing.T, m msg, code int) {
	t.Helper()
	if m.Error == nil || m.Error.Code != code {
		t.Fatalf("want error %d, got %s", code, m.raw)
	}
}

func wantJSON(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v: %s", what, err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got %s\nwant %s", what, got, want)
	}
}

const capabilitiesJSON = `{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"prompts":{"listChanged":true},"logging":{}}`

// The legacy era's methods, one process for all, in order.
func TestLegacyMethods(t *testing.T) {
	f := start(t)
	cases := []struct {
		name, id, method, params string
		check                    func(t *testing.T, m msg)
	}{
		{"initialize echoes 2024-11-05", "1", "initialize", `{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`, func(t *testing.T, m msg) {
			wantJSON(t, "initialize", m.Result, `{"protocolVersion":"2024-11-05","capabilities":`+capabilitiesJSON+
				`,"serverInfo":{"name":"fakemcp","version":"1.0.0"},"instructions":"A fake MCP server for tests."}`)
		}},
		{"initialize echoes 2025-03-26", "2", "initialize", `{"protocolVersion":"2025-03-26"}`, func(t *testing.T, m msg) {
			if v := m.field("protocolVersion"); v != "2025-03-26" {
				t.Fatal(m.raw)
			}
		}},
		{"initialize echoes 2025-06-18", "3", "initialize", `{"protocolVersion":"2025-06-18"}`, func(t *testing.T, m msg) {
			if v := m.field("protocolVersion"); v != "2025-06-18" {
				t.Fatal(m.raw)
			}
		}},
		{"initialize offers 2025-11-25 for an unknown version", "4", "initialize", `{"protocolVersion":"2099-01-01"}`, func(t *testing.T, m msg) {
			if v := m.field("protocolVersion"); v != "2025-11-25" {
				t.Fatal(m.raw)
			}
		}},
		{"initialize offers 2025-11-25 for the modern version", "5", "initialize", `{"protocolVersion":"2026-07-28"}`, func(t *testing.T, m msg) {
			if v := m.field("protocolVersion"); v != "2025-11-25" {
				t.Fatal(m.raw)
			}
		}},
		{"ping", `"p"`, "ping", "", func(t *testing.T, m msg) { wantJSON(t, "ping", m.Result, `{}`) }},
		{"tools/list", "6", "tools/list", "", func(t *testing.T, m msg) {
			var r struct {
				Tools []struct {
					Name        string          `json:"name"`
					InputSchema map[string]any  `json:"inputSchema"`
					Annotations json.RawMessage `json:"annotations"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(m.Result, &r); err != nil {
				t.Fatal(err)
			}
			var names []string
			annotations := map[string]string{}
			for _, tool := range r.Tools {
				names = append(names, tool.Name)
				if tool.InputSchema["type"] != "object" {
					t.Errorf("%s: inputSchema %v", tool.Name, tool.InputSchema)
				}
				annotations[tool.Name] = string(tool.Annotations)
			}
			want := "echo sleep_echo sleep count idem_count ro_count crash progress ro_progress ask big notify log flood pid end_listens roots retool"
			if got := strings.Join(names, " "); got != want {
				t.Errorf("tools %q, want %q", got, want)
			}
			if annotations["count"] != "" || annotations["idem_count"] != `{"idempotentHint":true}` || annotations["ro_count"] != `{"readOnlyHint":true}` {
				t.Errorf("annotations %q", annotations)
			}
		}},
		{"resources/list", "7", "resources/list", "", func(t *testing.T, m msg) {
			wantJSON(t, "resources", m.Result, `{"resources":[{"uri":"fake://counter","name":"counter","mimeType":"text/plain"}]}`)
		}},
		{"resources/read", "8", "resources/read", `{"uri":"fake://counter"}`, func(t *testing.T, m msg) {
			wantJSON(t, "read", m.Result, `{"contents":[{"uri":"fake://counter","mimeType":"text/plain","text":"0"}]}`)
		}},
		{"resources/read of an unknown resource", "9", "resources/read", `{"uri":"fake://nope"}`, func(t *testing.T, m msg) { wantError(t, m, -32002) }},
		{"resources/subscribe", "10", "resources/subscribe", `{"uri":"fake://counter"}`, func(t *testing.T, m msg) { wantJSON(t, "subscribe", m.Result, `{}`) }},
		{"resources/unsubscribe", "11", "resources/unsubscribe", `{"uri":"fake://counter"}`, func(t *testing.T, m msg) { wantJSON(t, "unsubscribe", m.Result, `{}`) }},
		{"prompts/list", "12", "prompts/list", "", func(t *testing.T, m msg) { wantJSON(t, "prompts", m.Result, `{"prompts":[]}`) }},
		{"logging/setLevel", "13", "logging/setLevel", `{"level":"debug"}`, func(t *testing.T, m msg) { wantJSON(t, "setLevel", m.Result, `{}`) }},
		{"logging/setLevel with an unknown level", "14", "logging/setLevel", `{"level":"loud"}`, func(t *testing.T, m msg) { wantError(t, m, -32602) }},
		{"server/discover is unknown", "15", "server/discover", `{` + modernMeta + `}`, func(t *testing.T, m msg) { wantError(t, m, -32601) }},
		{"unknown method", "16", "tools/frobnicate", "", func(t *testing.T, m msg) { wantError(t, m, -32601) }},
		{"_meta protocolVersion is ignored", "17", "prompts/list", `{` + modernMeta + `}`, func(t *testing.T, m msg) { wantJSON(t, "prompts", m.Result, `{"prompts":[]}`) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.t = t
			m, other := f.request(c.id, c.method, c.params)
			if len(other) > 0 {
				t.Errorf("unexpected messages before the response: %s", other[0].raw)
			}
			c.check(t, m)
		})
	}
}

// Lines that are not requests get JSON-RPC errors, and nothing else.
func TestInvalidInput(t *testing.T) {
	cases := []struct{ line, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: not a JSON-RPC object"}}`},
		{`{"jsonrpc":"1.0","id":9,"method":"ping"}`, `{"jsonrpc":"2.0","id":9,"error":{"code":-32600,"message":"Invalid Request"}}`},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}`},
		{`{"jsonrpc":"2.0","id":"x"}`, `{"jsonrpc":"2.0","id":"x","error":{"code":-32600,"message":"Invalid Request"}}`},
	}
	f := start(t)
	for _, c := range cases {
		t.Run(c.line, func(t *testing.T) {
			f.t = t
			f.send(c.line)
			wantJSON(t, "answer", []byte(f.line()), c.want)
		})
	}
	f.t = t
	if m, other := f.request(`"after"`, "ping", ""); m.Error != nil || len(other) > 0 {
		t.Fatalf("after bad input: %s %v", m.raw, other)
	}
}

// Every tool, each in a fresh process.
func TestTools(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, f *fake)
	}{
		{"echo returns the text and the raw request id", func(t *testing.T, f *fake) {
			for _, id := range []string{`"a<b>&c"`, `1.0`, `7`, `"7"`} {
				m, _ := f.call(id, "echo", `{"text":"hi <there> & \u00e9"}`)
				if string(m.ID) != id || m.text() != "hi <there> & é" {
					t.Fatalf("id %s: %s", id, m.raw)
				}
				var r struct {
					StructuredContent map[string]json.RawMessage `json:"structuredContent"`
				}
				_ = json.Unmarshal(m.Result, &r)
				if got := string(r.StructuredContent["requestId"]); got != id {
					t.Errorf("structuredContent.requestId %s, want %s", got, id)
				}
				if got := string(r.StructuredContent["text"]); got != `"hi <there> & é"` {
					t.Errorf("structuredContent.text %s", got)
				}
				if _, ok := r.StructuredContent["protocolVersion"]; ok {
					t.Errorf("a legacy echo names a protocol version: %s", m.raw)
				}
			}
		}},
		{"sleep answers after ms", func(t *testing.T, f *fake) {
			begin := time.Now()
			if m, _ := f.call("1", "sleep", `{"ms":50}`); m.text() != "slept 50" {
				t.Fatal(m.raw)
			}
			if d := time.Since(begin); d < 50*time.Millisecond {
				t.Fatalf("answered after %s", d)
			}
		}},
		{"requests are answered out of order", func(t *testing.T, f *fake) {
			f.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":300}}}`,
				`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep_echo","arguments":{"ms":10,"text":"quick"}}}`)
			if m := f.recv(); string(m.ID) != "2" || m.text() != "quick" {
				t.Fatalf("first answer: %s", m.raw)
			}
			if m := f.recv(); string(m.ID) != "1" {
				t.Fatalf("second answer: %s", m.raw)
			}
		}},
		{"a cancelled sleep is not answered", func(t *testing.T, f *fake) {
			f.send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"sleep","arguments":{"ms":30000}}}`,
				`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow","reason":"test"}}`)
			if _, other := f.request(`"barrier"`, "ping", ""); len(other) > 0 {
				t.Fatalf("cancelled request answered: %s", other[0].raw)
			}
			eventually(t, "the cancellation recorded on stderr", func() bool {
				return strings.Contains(f.stderr.String(), `cancelled "slow" (tools/call): "test"`)
			})
			f.stdin.Close()
			for l := range f.lines {
				t.Errorf("after the cancellation: %s", l)
			}
		}},
		{"ignoreCancel answers anyway", func(t *testing.T, f *fake) {
			f.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":100,"ignoreCancel":true}}}`,
				`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`)
			if m, _ := f.recvID("5"); m.text() != "slept 100" {
				t.Fatal(m.raw)
			}
		}},
		{"count, idem_count and ro_count append and count lines", func(t *testing.T, f *fake) {
			file := filepath.Join(t.TempDir(), "count")
			for i, tool := range []string{"count", "idem_count", "ro_count", "count"} {
				m, _ := f.call(strconv.Itoa(i), tool, fmt.Sprintf(`{"file":%q,"text":"%s-%d"}`, file, tool, i))
				if m.text() != strconv.Itoa(i+1) {
					t.Fatalf("%s: %s", tool, m.raw)
				}
			}
			f.call(`"no-text"`, "count", fmt.Sprintf(`{"file":%q}`, file))
			b, _ := os.ReadFile(file)
			if want := "count-0\nidem_count-1\nro_count-2\ncount-3\n\"no-text\"\n"; string(b) != want {
				t.Fatalf("file %q, want %q", b, want)
			}
		}},
		{"a count cancelled while waiting has no effect", func(t *testing.T, f *fake) {
			file := filepath.Join(t.TempDir(), "count")
			f.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count","arguments":{"file":%q,"ms":30000}}}`, file),
				`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
			if _, other := f.request(`"barrier"`, "ping", ""); len(other) > 0 {
				t.Fatalf("cancelled count answered: %s", other[0].raw)
			}
			if _, err := os.Stat(file); !os.IsNotExist(err) {
				t.Fatalf("the cancelled count ran: %v", err)
			}
		}},
		{"count without a file", func(t *testing.T, f *fake) {
			m, _ := f.call("1", "count", `{}`)
			wantError(t, m, -32602)
		}},
		{"crash exits with the code, unanswered", func(t *testing.T, f *fake) {
			f.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crash","arguments":{"code":7}}}`)
			if code := f.exitCode(); code != 7 {
				t.Fatalf("exit code %d", code)
			}
		}},
		{"crash exits 3 by default", func(t *testing.T, f *fake) {
			f.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crash","arguments":{}}}`)
			if code := f.exitCode(); code != 3 {
				t.Fatalf("exit code %d", code)
			}
		}},
		{"progress echoes the raw token", func(t *testing.T, f *fake) {
			for _, token := range []string{`"tok<1>"`, `1.50`} {
				m, notes := f.request("9", "tools/call", `{"name":"progress","arguments":{"steps":3,"ms":1},"_meta":{"progressToken":`+token+`}}`)
				if m.text() != "done" || len(notes) != 3 {
					t.Fatalf("token %s: %s after %d notifications", token, m.raw, len(notes))
				}
				for i, n := range notes {
					var p struct {
						ProgressToken json.RawMessage `json:"progressToken"`
						Progress      int             `json:"progress"`
						Total         int             `json:"total"`
						Message       string          `json:"message"`
					}
					_ = json.Unmarshal(n.Params, &p)
					if n.Method != "notifications/progress" || string(p.ProgressToken) != token || p.Progress != i+1 || p.Total != 3 || p.Message == "" {
						t.Errorf("notification %d: %s", i, n.raw)
					}
				}
			}
		}},
		{"progress without a token sends no notification", func(t *testing.T, f *fake) {
			if m, notes := f.call("1", "progress", `{"steps":3}`); m.text() != "done" || len(notes) > 0 {
				t.Fatalf("%s after %v", m.raw, notes)
			}
		}},
		{"ask sampling, elicitation and roots", func(t *testing.T, f *fake) {
			for i, c := range []struct{ kind, method, param, answer string }{
				{"sampling", "sampling/createMessage", "messages", `{"role":"assistant","content":{"type":"text","text":"42"},"model":"m"}`},
				{"elicitation", "elicitation/create", "requestedSchema", `{"action":"accept","content":{"name":"Ada"}}`},
				{"roots", "roots/list", "", `{"roots":[{"uri":"file:///tmp"}]}`},
				{"elicitation_url", "elicitation/create", "elicitationId", `{"action":"accept"}`},
			} {
				f.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ask","arguments":{"kind":%q}}}`, i, c.kind))
				req := f.recv()
				if req.Method != c.method || string(req.ID) != fmt.Sprintf(`"srv-%d"`, i+1) {
					t.Fatalf("%s: server request %s", c.kind, req.raw)
				}
				if c.param != "" && !strings.Contains(string(req.Params), `"`+c.param+`"`) {
					t.Errorf("%s: params %s", c.kind, req.Params)
				}
				f.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, c.answer))
				m, _ := f.recvID(strconv.Itoa(i))
				wantJSON(t, c.kind+" answer", []byte(m.text()), c.answer)
			}
		}},
		{"ask with an error answer", func(t *testing.T, f *fake) {
			f.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"roots"}}}`)
			req := f.recv()
			f.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"no connected client"}}`, req.ID))
			m, _ := f.recvID("1")
			if !strings.Contains(m.text(), "no connected client") || m.field("isError") != true {
				t.Fatal(m.raw)
			}
		}},
		{"ask with steps sends progress after the client's answer", func(t *testing.T, f *fake) {
			f.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"roots","steps":2},"_meta":{"progressToken":"p"}}}`)
			req := f.recv()
			f.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"roots":[]}}`, req.ID))
			m, notes := f.recvID("1")
			if m.Result == nil || len(notes) != 2 || notes[0].Method != "notifications/progress" || !strings.Contains(notes[1].raw, `"progressToken":"p"`) {
				t.Fatalf("%s after %v", m.raw, notes)
			}
		}},
		{"ask with an unknown kind", func(t *testing.T, f *fake) {
			m, _ := f.call("1", "ask", `{"kind":"telepathy"}`)
			wantError(t, m, -32602)
		}},
		{"big", func(t *testing.T, f *fake) {
			if m, _ := f.call("1", "big", `{"bytes":300000}`); m.text() != strings.Repeat("x", 300000) {
				t.Fatalf("%d bytes", len(m.text()))
			}
		}},
		{"notify", func(t *testing.T, f *fake) {
			for _, kind := range []string{"tools", "resources", "prompts"} {
				m, notes := f.call(`"n"`, "notify", fmt.Sprintf(`{"kind":%q}`, kind))
				if m.text() != "notified" || len(notes) != 1 || notes[0].Method != "notifications/"+kind+"/list_changed" {
					t.Fatalf("%s: %s after %v", kind, m.raw, notes)
				}
			}
		}},
		{"notify updated reaches subscribers only", func(t *testing.T, f *fake) {
			if _, notes := f.call("1", "notify", `{"kind":"updated"}`); len(notes) > 0 {
				t.Fatalf("unsubscribed: %s", notes[0].raw)
			}
			f.request("2", "resources/subscribe", `{"uri":"fake://counter"}`)
			_, notes := f.call("3", "notify", `{"kind":"updated"}`)
			if len(notes) != 1 || notes[0].Method != "notifications/resources/updated" || string(notes[0].Params) != `{"uri":"fake://counter"}` {
				t.Fatalf("subscribed: %v", notes)
			}
		}},
		{"log honours logging/setLevel", func(t *testing.T, f *fake) {
			_, notes := f.call("1", "log", `{"level":"info","data":{"a":1}}`)
			if len(notes) != 1 || notes[0].Method != "notifications/message" {
				t.Fatalf("%v", notes)
			}
			wantJSON(t, "log params", notes[0].Params, `{"level":"info","logger":"fakemcp","data":{"a":1}}`)
			f.request("2", "logging/setLevel", `{"level":"error"}`)
			if _, notes := f.call("3", "log", `{"level":"info","data":"x"}`); len(notes) > 0 {
				t.Fatalf("below the level: %s", notes[0].raw)
			}
			if _, notes := f.call("4", "log", `{"level":"critical","data":"x"}`); len(notes) != 1 {
				t.Fatalf("above the level: %v", notes)
			}
		}},
		{"flood sends its tiny logs, then answers, and honours logging/setLevel", func(t *testing.T, f *fake) {
			m, notes := f.call("1", "flood", `{"steps":2500}`)
			if m.text() != "flooded 2500" || len(notes) != 2500 {
				t.Fatalf("%s after %d notifications, want flooded 2500 after 2500", m.raw, len(notes))
			}
			wantJSON(t, "a flood's log params", notes[2499].Params, `{"level":"info","data":0}`)
			f.request("2", "logging/setLevel", `{"level":"error"}`)
			if m, notes := f.call("3", "flood", `{"steps":10}`); m.text() != "flooded 0" || len(notes) > 0 {
				t.Fatalf("below the level: %s after %d notifications", m.raw, len(notes))
			}
		}},
		{"pid", func(t *testing.T, f *fake) {
			if m, _ := f.call("1", "pid", `{}`); m.text() != strconv.Itoa(f.cmd.Process.Pid) {
				t.Fatalf("%s, want %d", m.raw, f.cmd.Process.Pid)
			}
		}},
		{"resources/read counts tools/call", func(t *testing.T, f *fake) {
			f.call("1", "pid", `{}`)
			f.call("2", "pid", `{}`)
			if m, _ := f.request("3", "resources/read", `{"uri":"fake://counter"}`); !strings.Contains(m.raw, `"text":"2"`) {
				t.Fatal(m.raw)
			}
		}},
		{"unknown tool", func(t *testing.T, f *fake) {
			m, _ := f.call("1", "nope", `{}`)
			wantError(t, m, -32602)
		}},
		{"ill-typed arguments", func(t *testing.T, f *fake) {
			m, _ := f.call("1", "echo", `{"text":5}`)
			wantError(t, m, -32602)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, start(t))
		})
	}
}

// Under -era modern and -era both: server/discover, the per-request _meta
// version, MRTR instead of server-to-client requests, subscriptions/listen.
func TestEras(t *testing.T) {
	discoverResult := `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":` + capabilitiesJSON +
		`,"instructions":"A fake MCP server for tests.","ttlMs":0,"cacheScope":"public",` +
		`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fakemcp","version":"1.0.0"}}}`
	cases := []struct {
		name, era string
		run       func(t *testing.T, f *fake)
	}{
		{"discover", "modern", func(t *testing.T, f *fake) {
			m, _ := f.request(`"d"`, "server/discover", `{`+modernMeta+`}`)
			wantJSON(t, "discover", m.Result, discoverResult)
		}},
		{"initialize is refused, naming the version", "modern", func(t *testing.T, f *fake) {
			m, _ := f.request("1", "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
			wantError(t, m, -32601)
			wantJSON(t, "data", m.Error.Data, `{"supported":["2026-07-28"]}`)
		}},
		{"a request without the version is invalid", "modern", func(t *testing.T, f *fake) {
			m, _ := f.request("1", "tools/list", "")
			wantError(t, m, -32602)
			m, _ = f.request("2", "server/discover", `{}`)
			wantError(t, m, -32602)
		}},
		{"a request without client capabilities is invalid", "modern", func(t *testing.T, f *fake) {
			m, _ := f.request("1", "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`)
			wantError(t, m, -32602)
		}},
		{"an unknown log level is invalid", "modern", func(t *testing.T, f *fake) {
			m, _ := f.request("1", "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud"}}`)
			wantError(t, m, -32602)
		}},
		{"an unsupported version", "modern", func(t *testing.T, f *fake) {
			m, _ := f.request("1", "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}`)
			wantError(t, m, -32022)
			wantJSON(t, "data", m.Error.Data, `{"supported":["2026-07-28"],"requested":"2025-11-25"}`)
		}},
		{"echo records the version; results are complete", "modern", func(t *testing.T, f *fake) {
			m, _ := f.request("1", "tools/call", `{"name":"echo","arguments":{"text":"hi"},`+modernMeta+`}`)
			wantJSON(t, "echo", m.Result, `{"resultType":"complete","content":[{"type":"text","text":"hi"}],`+
				`"structuredContent":{"text":"hi","requestId":1,"protocolVersion":"2026-07-28"},`+
				`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fakemcp","version":"1.0.0"}}}`)
		}},
		{"list results are cacheable", "modern", func(t *testing.T, f *fake) {
			for _, method := range []string{"tools/list", "resources/list", "prompts/list"} {
				m, _ := f.request("1", method, `{`+modernMeta+`}`)
				if m.field("ttlMs") != 0.0 || m.field("cacheScope") != "public" || m.field("resultType") != "complete" {
					t.Errorf("%s: %s", method, m.raw)
				}
			}
		}},
		{"methods removed in 2026-07-28", "modern", func(t *testing.T, f *fake) {
			for _, method := range []string{"ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"} {
				m, _ := f.request("1", method, `{"level":"info","uri":"fake://counter",`+modernMeta+`}`)
				wantError(t, m, -32601)
			}
		}},
		{"ask is a multi round-trip request", "modern", func(t *testing.T, f *fake) {
			m, _ := f.request("1", "tools/call", `{"name":"ask","arguments":{"kind":"elicitation"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`)
			wantError(t, m, -32021)
			wantJSON(t, "data", m.Error.Data, `{"requiredCapabilities":{"elicitation":{}}}`)
			m, other := f.request("2", "tools/call", `{"name":"ask","arguments":{"kind":"elicitation"},`+modernMeta+`}`)
			if len(other) > 0 {
				t.Fatalf("a modern server sent %s", other[0].raw)
			}
			var r struct {
				ResultType    string `json:"resultType"`
				InputRequests map[string]struct {
					Method string `json:"method"`
				} `json:"inputRequests"`
				RequestState string `json:"requestState"`
			}
			_ = json.Unmarshal(m.Result, &r)
			if r.ResultType != "input_required" || len(r.InputRequests) != 1 || r.RequestState == "" {
				t.Fatalf("first round: %s", m.raw)
			}
			for key, req := range r.InputRequests {
				if req.Method != "elicitation/create" {
					t.Fatalf("input request %s", m.raw)
				}
				m, _ = f.request("3", "tools/call", fmt.Sprintf(`{"name":"ask","arguments":{"kind":"elicitation"},"inputResponses":{%q:{"action":"decline"}},"requestState":%q,%s}`,
					key, r.RequestState, modernMeta))
			}
			if m.field("resultType") != "complete" {
				t.Fatalf("retry: %s", m.raw)
			}
			wantJSON(t, "retry", []byte(m.text()), `{"action":"decline"}`)
			m, _ = f.request("4", "tools/call", fmt.Sprintf(`{"name":"ask","arguments":{"kind":"elicitation"},"inputResponses":{},"requestState":%q,%s}`,
				r.RequestState, modernMeta))
			if m.field("resultType") != "input_required" {
				t.Fatalf("a retry without the answer is asked again: %s", m.raw)
			}
		}},
		{"ask with again asks on every retry", "modern", func(t *testing.T, f *fake) {
			state := ""
			for i := range 3 {
				retry := ""
				if state != "" {
					key, _ := strings.CutPrefix(state, "ask:")
					retry = fmt.Sprintf(`"inputResponses":{%q:{"roots":[]}},"requestState":%q,`, key, state)
				}
				m, _ := f.request(strconv.Itoa(i), "tools/call", `{"name":"ask","arguments":{"kind":"roots","again":true},`+retry+
					`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}`)
				if m.field("resultType") != "input_required" {
					t.Fatalf("round %d: %s", i, m.raw)
				}
				state, _ = m.field("requestState").(string)
			}
		}},
		{"ask elicitation_url needs URL mode, and has no elicitationId", "modern", func(t *testing.T, f *fake) {
			m, _ := f.request("1", "tools/call", `{"name":"ask","arguments":{"kind":"elicitation_url"},`+modernMeta+`}`)
			wantError(t, m, -32021)
			wantJSON(t, "data", m.Error.Data, `{"requiredCapabilities":{"elicitation":{"url":{}}}}`)
			m, _ = f.request("2", "tools/call", `{"name":"ask","arguments":{"kind":"elicitation_url"},`+
				`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}}`)
			var r struct {
				InputRequests map[string]json.RawMessage `json:"inputRequests"`
			}
			_ = json.Unmarshal(m.Result, &r)
			if len(r.InputRequests) != 1 {
				t.Fatalf("with URL mode: %s", m.raw)
			}
			for _, q := range r.InputRequests {
				wantJSON(t, "input request", q, `{"method":"elicitation/create","params":{"mode":"url","message":"Sign in to fakemcp.","url":"https://auth.example/sign-in"}}`)
			}
		}},
		{"ask url: -32042 to a legacy call, input_required to a modern one, until the file exists", "both", func(t *testing.T, f *fake) {
			file := filepath.Join(t.TempDir(), "authorized")
			args := fmt.Sprintf(`{"kind":"url","file":%q}`, file)
			m, _ := f.request("1", "tools/call", `{"name":"ask","arguments":`+args+`}`)
			wantError(t, m, -32042)
			wantJSON(t, "data", m.Error.Data, `{"elicitations":[{"mode":"url","elicitationId":"url-1","message":"Authorize fakemcp to continue.","url":"https://auth.example/connect?id=url-1"}]}`)
			m, _ = f.request("2", "tools/call", `{"name":"ask","arguments":`+args+`,`+modernMeta+`}`)
			wantError(t, m, -32021)
			urlMeta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}`
			m, _ = f.request("3", "tools/call", `{"name":"ask","arguments":`+args+`,`+urlMeta+`}`)
			var r struct {
				ResultType    string                     `json:"resultType"`
				InputRequests map[string]json.RawMessage `json:"inputRequests"`
			}
			_ = json.Unmarshal(m.Result, &r)
			if r.ResultType != "input_required" || len(r.InputRequests) != 1 {
				t.Fatalf("modern: %s", m.raw)
			}
			wantJSON(t, "input request", r.InputRequests["url-3"], `{"method":"elicitation/create","params":{"mode":"url","message":"Authorize fakemcp to continue.","url":"https://auth.example/connect?id=url-3"}}`)
			if err := os.WriteFile(file, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if m, _ = f.request("4", "tools/call", `{"name":"ask","arguments":`+args+`}`); m.text() != "authorized" {
				t.Fatalf("once the file exists: %s", m.raw)
			}
		}},
		{"subscriptions/listen", "modern", func(t *testing.T, f *fake) {
			f.send(`{"jsonrpc":"2.0","id":"sub","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fake://counter"]},` + modernMeta + `}}`)
			ack := f.recv()
			if ack.Method != "notifications/subscriptions/acknowledged" {
				t.Fatalf("ack: %s", ack.raw)
			}
			wantJSON(t, "ack", ack.Params, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"sub"},"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fake://counter"]}}`)
			_, notes := f.request("1", "tools/call", `{"name":"notify","arguments":{"kind":"tools"},`+modernMeta+`}`)
			if len(notes) != 1 || notes[0].Method != "notifications/tools/list_changed" {
				t.Fatalf("tools: %v", notes)
			}
			wantJSON(t, "tagged", notes[0].Params, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"sub"}}`)
			_, notes = f.request("2", "tools/call", `{"name":"notify","arguments":{"kind":"updated"},`+modernMeta+`}`)
			if len(notes) != 1 {
				t.Fatalf("updated: %v", notes)
			}
			wantJSON(t, "updated", notes[0].Params, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"sub"},"uri":"fake://counter"}`)
			if _, notes = f.request("3", "tools/call", `{"name":"notify","arguments":{"kind":"prompts"},`+modernMeta+`}`); len(notes) > 0 {
				t.Fatalf("not asked for: %s", notes[0].raw)
			}
			f.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"sub"}}`)
			if _, notes = f.request("4", "tools/call", `{"name":"notify","arguments":{"kind":"tools"},`+modernMeta+`}`); len(notes) > 0 {
				t.Fatalf("after the cancellation: %s", notes[0].raw)
			}
		}},
		{"log only with a _meta log level", "modern", func(t *testing.T, f *fake) {
			if _, notes := f.request("1", "tools/call", `{"name":"log","arguments":{"level":"error","data":1},`+modernMeta+`}`); len(notes) > 0 {
				t.Fatalf("without a log level: %s", notes[0].raw)
			}
			withLevel := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"warning"}`
			if _, notes := f.request("2", "tools/call", `{"name":"log","arguments":{"level":"info","data":1},`+withLevel+`}`); len(notes) > 0 {
				t.Fatalf("below the level: %s", notes[0].raw)
			}
			if _, notes := f.request("3", "tools/call", `{"name":"log","arguments":{"level":"error","data":1},`+withLevel+`}`); len(notes) != 1 {
				t.Fatalf("above the level: %v", notes)
			}
		}},
		{"both: initialize and discover", "both", func(t *testing.T, f *fake) {
			m, _ := f.request("1", "initialize", `{"protocolVersion":"2025-06-18"}`)
			if m.field("protocolVersion") != "2025-06-18" {
				t.Fatal(m.raw)
			}
			m, _ = f.request("2", "server/discover", `{`+modernMeta+`}`)
			wantJSON(t, "discover", m.Result, discoverResult)
		}},
		{"both: the _meta version picks the era per request", "both", func(t *testing.T, f *fake) {
			if m, _ := f.request("1", "tools/list", ""); m.field("resultType") != nil {
				t.Fatalf("legacy request: %s", m.raw)
			}
			if m, _ := f.request("2", "ping", ""); m.Error != nil {
				t.Fatalf("legacy ping: %s", m.raw)
			}
			if m, _ := f.request("3", "tools/list", `{`+modernMeta+`}`); m.field("resultType") != "complete" {
				t.Fatalf("modern request: %s", m.raw)
			}
		}},
		{"both: list_changed to legacy clients and to subscriptions", "both", func(t *testing.T, f *fake) {
			f.request("1", "initialize", `{"protocolVersion":"2025-11-25"}`)
			f.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				`{"jsonrpc":"2.0","id":"sub","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+modernMeta+`}}`)
			if ack := f.recv(); ack.Method != "notifications/subscriptions/acknowledged" {
				t.Fatalf("ack: %s", ack.raw)
			}
			_, notes := f.call("2", "notify", `{"kind":"tools"}`)
			if len(notes) != 2 || notes[0].Params != nil || !strings.Contains(string(notes[1].Params), `subscriptionId":"sub"`) {
				t.Fatalf("%v", notes)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, start(t, "-era", c.era))
		})
	}
}

// Fault-injection flags, each in a fresh process.
func TestFlags(t *testing.T) {
	unixOnly := func(t *testing.T) {
		if runtime.GOOS == "windows" {
			t.Skip("needs POSIX signals and sleep(1)")
		}
	}
	alive := func(pid int) bool {
		p, err := os.FindProcess(pid)
		return err == nil && p.Signal(syscall.Signal(0)) == nil
	}
	readPID := func(t *testing.T, path string) int {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(string(b))
		if err != nil {
			t.Fatalf("pidfile %q: %v", b, err)
		}
		return pid
	}
	cases := []struct {
		name  string
		flags func(dir string) []string
		run   func(t *testing.T, f *fake, dir string)
	}{
		{"-log records every received line, raw", func(dir string) []string { return []string{"-log", filepath.Join(dir, "log")} }, func(t *testing.T, f *fake, dir string) {
			sent := []string{
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":42,"reason":"x"}}`,
				`{ "jsonrpc" : "2.0", "id" : 1.0, "method" : "ping" }`,
			}
			f.send(sent...)
			ids := map[string]bool{string(f.recv().ID): true, string(f.recv().ID): true}
			if !ids["1"] || !ids["1.0"] {
				t.Fatalf("answers %v", ids)
			}
			b, _ := os.ReadFile(filepath.Join(dir, "log"))
			if want := strings.Join(sent, "\n") + "\n"; string(b) != want {
				t.Fatalf("log file:\n%s\nwant:\n%s", b, want)
			}
			got, err := ReadLog(filepath.Join(dir, "log"))
			if err != nil || len(got) != 4 || got[1]["method"] != "notifications/initialized" ||
				got[2]["params"].(map[string]any)["requestId"] != 42.0 {
				t.Fatalf("ReadLog: %v %v", got, err)
			}
		}},
		{"-pidfile", func(dir string) []string { return []string{"-pidfile", filepath.Join(dir, "pid")} }, func(t *testing.T, f *fake, dir string) {
			f.request("1", "ping", "")
			if pid := readPID(t, filepath.Join(dir, "pid")); pid != f.cmd.Process.Pid {
				t.Fatalf("pidfile %d, want %d", pid, f.cmd.Process.Pid)
			}
		}},
		{"-delay", func(string) []string { return []string{"-delay", "150ms"} }, func(t *testing.T, f *fake, _ string) {
			begin := time.Now()
			f.request("1", "ping", "")
			if d := time.Since(begin); d < 150*time.Millisecond {
				t.Fatalf("answered after %s", d)
			}
		}},
		{"-crash-after", func(string) []string { return []string{"-crash-after", "2"} }, func(t *testing.T, f *fake, _ string) {
			if m, _ := f.call("1", "echo", `{"text":"one"}`); m.text() != "one" {
				t.Fatal(m.raw)
			}
			f.request("2", "ping", "")
			f.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"two"}}}`)
			if code := f.exitCode(); code != 3 {
				t.Fatalf("exit code %d", code)
			}
		}},
		{"-inline-echo answers echo as the call path does; other tools and -crash-after are unchanged", func(dir string) []string {
			return []string{"-inline-echo", "-crash-after", "6", "-log", filepath.Join(dir, "log")}
		}, func(t *testing.T, f *fake, dir string) {
			plain := start(t)
			for _, id := range []string{"1", `"one"`} {
				args := `{"text":"a \"quoted\" <tag> & é"}`
				got, _ := f.call(id, "echo", args)
				want, _ := plain.call(id, "echo", args)
				wantJSON(t, "inline echo "+id, []byte(got.raw), want.raw)
			}
			// A legacy server answers a call whose _meta names 2026-07-28 (as a
			// pool bridging a modern client sends it) under legacy rules: the same.
			modern := `{"name":"echo","arguments":{"text":"m"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`
			got, _ := f.request("7", "tools/call", modern)
			want, _ := plain.request("7", "tools/call", modern)
			wantJSON(t, "inline echo with a modern _meta", []byte(got.raw), want.raw)
			// A slow call still runs on its own: the echo after it is not held up.
			f.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":10000}}}`)
			if m, _ := f.call("3", "echo", `{"text":"after"}`); m.text() != "after" {
				t.Fatal(m.raw)
			}
			if got, err := ReadLog(filepath.Join(dir, "log")); err != nil || len(got) != 5 {
				t.Fatalf("log: %d lines, %v", len(got), err) // every line received, inline or not
			}
			f.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
			if code := f.exitCode(); code != 3 {
				t.Fatalf("exit code %d, want -crash-after's 3", code)
			}
		}},
		{"-inline-echo answers a burst in order, and what it answered before a crash goes out", func(string) []string {
			return []string{"-inline-echo", "-crash-after", "40"}
		}, func(t *testing.T, f *fake, _ string) {
			var burst strings.Builder // one write: the fake reads the lines together and holds their answers
			for i := 1; i <= 40; i++ {
				fmt.Fprintf(&burst, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"t%d"}}}`+"\n", i, i)
			}
			if _, err := io.WriteString(f.stdin, burst.String()); err != nil {
				t.Fatal(err)
			}
			for i := 1; i < 40; i++ {
				if m := f.recv(); string(m.ID) != strconv.Itoa(i) || m.text() != "t"+strconv.Itoa(i) {
					t.Fatalf("answer %d: %s", i, m.raw)
				}
			}
			if code := f.exitCode(); code != 3 {
				t.Fatalf("exit code %d, want -crash-after's 3", code)
			}
		}},
		{"-stop-reading-after", func(string) []string { return []string{"-stop-reading-after", "2"} }, func(t *testing.T, f *fake, _ string) {
			f.request("1", "ping", "")
			f.request("2", "ping", "")
			f.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
			f.stdin.Close()
			if !f.stillRunning(300 * time.Millisecond) {
				t.Fatal("exited")
			}
			select {
			case l := <-f.lines:
				t.Fatalf("answered after it stopped reading: %s", l)
			default:
			}
			f.kill()
		}},
		{"-garbage", func(string) []string { return []string{"-garbage"} }, func(t *testing.T, f *fake, _ string) {
			for range 2 {
				if l := f.line(); json.Valid([]byte(l)) {
					t.Fatalf("want garbage, got %s", l)
				}
			}
			if m, _ := f.request("1", "ping", ""); m.Error != nil {
				t.Fatal(m.raw)
			}
		}},
		{"-no-init", func(string) []string { return []string{"-no-init", "-era", "both"} }, func(t *testing.T, f *fake, _ string) {
			f.send(`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
				`{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{`+modernMeta+`}}`)
			if _, other := f.request(`"barrier"`, "tools/list", ""); len(other) > 0 {
				t.Fatalf("answered: %s", other[0].raw)
			}
			f.stdin.Close()
			for l := range f.lines {
				t.Errorf("answered: %s", l)
			}
		}},
		{"-grandchild", func(dir string) []string {
			return []string{"-grandchild", "-grandchild-pidfile", filepath.Join(dir, "gpid")}
		}, func(t *testing.T, f *fake, dir string) {
			unixOnly(t)
			f.request("1", "ping", "")
			gpid := readPID(t, filepath.Join(dir, "gpid"))
			if gpid == f.cmd.Process.Pid || !alive(gpid) {
				t.Fatalf("grandchild %d not running", gpid)
			}
			t.Cleanup(func() {
				if p, err := os.FindProcess(gpid); err == nil {
					_ = p.Kill()
				}
			})
		}},
		{"-ignore-sigterm", func(string) []string { return []string{"-ignore-sigterm"} }, func(t *testing.T, f *fake, _ string) {
			unixOnly(t)
			f.request("1", "ping", "")
			if err := f.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if !f.stillRunning(200 * time.Millisecond) {
				t.Fatal("SIGTERM ended it")
			}
			if m, _ := f.request("2", "ping", ""); m.Error != nil {
				t.Fatal(m.raw)
			}
			f.kill()
		}},
		{"SIGTERM ends it by default", func(string) []string { return nil }, func(t *testing.T, f *fake, _ string) {
			unixOnly(t)
			f.request("1", "ping", "")
			if err := f.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := f.exitCode(); code != -1 {
				t.Fatalf("exit code %d, want death by signal", code)
			}
		}},
		{"stdin EOF exits 0 by default", func(string) []string { return nil }, func(t *testing.T, f *fake, _ string) {
			f.request("1", "ping", "")
			f.stdin.Close()
			if code := f.exitCode(); code != 0 {
				t.Fatalf("exit code %d", code)
			}
		}},
		{"-exit-on-stdin-eof=false", func(string) []string { return []string{"-exit-on-stdin-eof=false"} }, func(t *testing.T, f *fake, _ string) {
			f.request("1", "ping", "")
			f.stdin.Close()
			if !f.stillRunning(200 * time.Millisecond) {
				t.Fatal("exited on stdin EOF")
			}
			f.kill()
		}},
		{"-startup-delay", func(string) []string { return []string{"-startup-delay", "100ms"} }, func(t *testing.T, f *fake, _ string) {
			// The delay runs from the fake's start, not from the request.
			f.request("1", "ping", "")
			if d := time.Since(f.started); d < 100*time.Millisecond {
				t.Fatalf("answered %s after the fake started", d)
			}
		}},
		{"-stderr and -exit-at-start", func(string) []string { return []string{"-stderr", "cannot open database", "-exit-at-start", "4"} }, func(t *testing.T, f *fake, _ string) {
			if code := f.exitCode(); code != 4 {
				t.Fatalf("exit code %d", code)
			}
			if !strings.Contains(f.stderr.String(), "cannot open database") {
				t.Fatalf("stderr %q", f.stderr)
			}
		}},
		{"-stderr-long comes before -stderr", func(string) []string {
			return []string{"-stderr-long", "100000", "-stderr", "cannot open database", "-exit-at-start", "4"}
		}, func(t *testing.T, f *fake, _ string) {
			f.exitCode()
			if want := strings.Repeat("z", 100000) + "\ncannot open database\n"; f.stderr.String() != want {
				t.Fatalf("stderr: %d bytes, want %d", len(f.stderr.String()), len(want))
			}
		}},
		{"-stderr-lines name the process, before -stderr", func(string) []string {
			return []string{"-stderr-lines", "2", "-stderr", "cannot open database", "-exit-at-start", "4"}
		}, func(t *testing.T, f *fake, _ string) {
			f.exitCode()
			pid := f.cmd.Process.Pid
			if want := fmt.Sprintf("stderr line 1 of 2, pid %d\nstderr line 2 of 2, pid %d\ncannot open database\n", pid, pid); f.stderr.String() != want {
				t.Fatalf("stderr %q, want %q", f.stderr, want)
			}
		}},
		{"-close-stdout-after-init", func(dir string) []string {
			return []string{"-close-stdout-after-init", "-log", filepath.Join(dir, "log")}
		}, func(t *testing.T, f *fake, dir string) {
			f.request("1", "initialize", `{"protocolVersion":"2025-11-25"}`)
			select {
			case l, ok := <-f.lines:
				if ok {
					t.Fatalf("wrote after initialize: %s", l)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("stdout still open 10s after initialize")
			}
			f.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
			eventually(t, "the ping read", func() bool {
				got, _ := ReadLog(filepath.Join(dir, "log"))
				return len(got) == 2
			})
			if !f.stillRunning(100 * time.Millisecond) {
				t.Fatal("exited")
			}
		}},
		{"-notify-on-listen and -refuse-subscribe", func(string) []string {
			return []string{"-era", "modern", "-notify-on-listen", "tools", "-refuse-subscribe", "fake://gone"}
		}, func(t *testing.T, f *fake, _ string) {
			listen := func(id, filter string) {
				f.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"subscriptions/listen","params":{"notifications":` + filter + `,` + modernMeta + `}}`)
			}
			// what is the method and tag of the next message.
			what := func() string {
				m := f.recv()
				var p struct {
					Meta map[string]json.RawMessage `json:"_meta"`
				}
				_ = json.Unmarshal(m.Params, &p)
				return m.Method + " " + string(p.Meta["io.modelcontextprotocol/subscriptionId"])
			}
			listen("a", `{"toolsListChanged":true}`)
			listen1 := []string{what(), what()}
			listen("b", `{"toolsListChanged":true}`)
			listen2 := []string{what(), what(), what(), what()}
			slices.Sort(listen2[2:]) // one change to two subscriptions, in either order
			got := strings.Join(append(listen1, listen2...), "; ")
			want := `notifications/subscriptions/acknowledged "a"; notifications/tools/list_changed "a"; ` +
				`notifications/tools/list_changed "a"; notifications/subscriptions/acknowledged "b"; ` +
				`notifications/tools/list_changed "a"; notifications/tools/list_changed "b"`
			if got != want {
				t.Fatalf("got %s\nwant %s", got, want)
			}
			listen("c", `{"resourceSubscriptions":["fake://gone"]}`)
			if m := f.recv(); m.Error == nil || string(m.ID) != `"c"` {
				t.Fatalf("a listen for a refused resource: %s", m.raw)
			}
		}},
		{"-subscribe-delay", func(string) []string {
			return []string{"-era", "modern", "-subscribe-delay", "200ms"}
		}, func(t *testing.T, f *fake, _ string) {
			sent := time.Now()
			f.listenTools("listen")
			if d := time.Since(sent); d < 200*time.Millisecond {
				t.Fatalf("acknowledged %s after the listen was sent", d)
			}
		}},
		{"-ack-listens", func(string) []string {
			return []string{"-era", "modern", "-ack-listens", "1"}
		}, func(t *testing.T, f *fake, _ string) {
			f.listenTools("the first listen")
			f.send(`{"jsonrpc":"2.0","id":"b","method":"subscriptions/listen","params":{"notifications":{"promptsListChanged":true},` + modernMeta + `}}`)
			eventually(t, "the second listen held", func() bool {
				return strings.Contains(f.stderr.String(), `holding subscriptions/listen "b"`)
			})
			if m, notes := f.request("1", "tools/call", `{"name":"notify","arguments":{"kind":"prompts"},`+modernMeta+`}`); m.Error != nil || len(notes) != 0 {
				t.Fatalf("notify prompts: %s after %d messages, want none: the held listen watches nothing", m.raw, len(notes))
			}
			f.stdin.Close()
			for l := range f.lines {
				t.Errorf("the held listen was sent: %s", l)
			}
		}},
		{"end_listens and retool", func(string) []string {
			return []string{"-era", "modern"}
		}, func(t *testing.T, f *fake, _ string) {
			f.listenTools("listen")
			m, notes := f.callModern("1", "retool", `{}`)
			if m.text() != "retooled" || len(notes) != 1 || notes[0].Method != "notifications/tools/list_changed" {
				t.Fatalf("retool: %s after %v", m.raw, notes)
			}
			if m, _ := f.request("2", "tools/list", `{`+modernMeta+`}`); strings.Contains(m.raw, "Hint") {
				t.Fatalf("tools/list after retool: %s", m.raw)
			}
			// The listen's answer comes before end_listens' own.
			if m, notes := f.callModern("3", "end_listens", `{}`); m.text() != "1" || len(notes) != 1 || string(notes[0].ID) != `"a"` || notes[0].Result == nil {
				t.Fatalf("end_listens: %s after %v", m.raw, notes)
			}
			if m, notes := f.callModern("4", "notify", `{"kind":"tools"}`); m.text() != "notified" || len(notes) != 0 {
				t.Fatalf("an ended listen still got %v (%s)", notes, m.raw)
			}
		}},
		{"end_listens cancelled", func(string) []string {
			return []string{"-era", "modern"}
		}, func(t *testing.T, f *fake, _ string) {
			f.listenTools("listen")
			// The listen is named in notifications/cancelled, unanswered.
			if m, notes := f.callModern("1", "end_listens", `{"kind":"cancelled"}`); m.text() != "1" || len(notes) != 1 ||
				notes[0].Method != "notifications/cancelled" || !strings.Contains(string(notes[0].Params), `"requestId":"a"`) {
				t.Fatalf("end_listens: %s after %v", m.raw, notes)
			}
			if m, notes := f.callModern("2", "notify", `{"kind":"tools"}`); m.text() != "notified" || len(notes) != 0 {
				t.Fatalf("an ended listen still got %v (%s)", notes, m.raw)
			}
		}},
		{"-end-listens", func(string) []string {
			return []string{"-era", "modern", "-end-listens"}
		}, func(t *testing.T, f *fake, _ string) {
			f.listenTools("first")
			if m := f.recv(); string(m.ID) != `"a"` || m.Result == nil {
				t.Fatalf("then: %s", m.raw)
			}
		}},
		{"a bad -era", func(string) []string { return []string{"-era", "future"} }, func(t *testing.T, f *fake, _ string) {
			if code := f.exitCode(); code != 2 {
				t.Fatalf("exit code %d", code)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			c.run(t, start(t, c.flags(dir)...), dir)
		})
	}
}

// Many concurrent answers, large and small, come out as whole lines.
func TestConcurrentAnswersNeverInterleave(t *testing.T) {
	f := start(t)
	const n = 60
	var lines []string
	want := map[string]string{}
	for i := range n {
		id := strconv.Itoa(i)
		switch i % 3 {
		case 0:
			lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"big","arguments":{"bytes":200000}}}`, id))
			want[id] = strings.Repeat("x", 200000)
		case 1:
			lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"echo","arguments":{"text":"e%d"}}}`, id, i))
			want[id] = fmt.Sprintf("e%d", i)
		case 2:
			lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"progress","arguments":{"steps":5},"_meta":{"progressToken":%d}}}`, id, i))
			want[id] = "done"
		}
	}
	f.send(lines...)
	progress := 0
	for len(want) > 0 {
		m := f.recv()
		if m.Method == "notifications/progress" {
			progress++
			continue
		}
		w, ok := want[string(m.ID)]
		if !ok || m.text() != w {
			t.Fatalf("unexpected answer %.200s", m.raw)
		}
		delete(want, string(m.ID))
	}
	if progress != 5*n/3 {
		t.Fatalf("%d progress notifications, want %d", progress, 5*n/3)
	}
}

func TestReadLog(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, content string
		want          []string // methods
		wantErr       bool
	}{
		{"empty", "", nil, false},
		{"lines", `{"method":"a"}` + "\n\n" + `{"method":"b","id":1}` + "\n", []string{"a", "b"}, false},
		{"a partial last line is left out", `{"method":"a"}` + "\n" + `{"meth`, []string{"a"}, false},
		{"not JSON", `{"method":"a"}` + "\nnope\n", nil, true},
		{"not an object", "[1]\n", nil, true},
		{"null", "null\n", nil, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strconv.Itoa(i))
			if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadLog(path)
			if (err != nil) != c.wantErr {
				t.Fatalf("error %v", err)
			}
			if c.wantErr {
				return
			}
			var methods []string
			for _, m := range got {
				methods = append(methods, m["method"].(string))
			}
			if !reflect.DeepEqual(methods, c.want) {
				t.Fatalf("got %v, want %v", methods, c.want)
			}
		})
	}
	if _, err := ReadLog(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatalf("missing file: %v", err)
	}
}
