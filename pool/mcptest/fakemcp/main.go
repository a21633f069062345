// Command fakemcp is a small stdio MCP server for tests: it answers out of
// order, counts side effects into files, crashes on demand, emits progress
// and asks its client questions. Flags inject faults.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var (
	era            = flag.String("era", "legacy", "legacy, modern or both")
	logPath        = flag.String("log", "", "append every received line to this file")
	pidFile        = flag.String("pidfile", "", "write the PID here")
	delay          = flag.Duration("delay", 0, "delay before every response")
	crashAfter     = flag.Int("crash-after", 0, "exit 3 on receiving the N-th tools/call")
	stopReadAfter  = flag.Int("stop-reading-after", 0, "stop reading stdin after N lines")
	garbage        = flag.Bool("garbage", false, "write non-JSON lines to stdout at start")
	noInit         = flag.Bool("no-init", false, "never answer initialize or server/discover")
	grandchild     = flag.Bool("grandchild", false, "start a `sleep 1000` child")
	grandchildPID  = flag.String("grandchild-pidfile", "", "write the grandchild's PID here")
	ignoreSIGTERM  = flag.Bool("ignore-sigterm", false, "ignore SIGTERM")
	startupDelay   = flag.Duration("startup-delay", 0, "wait before reading stdin")
	stderrAtStart  = flag.String("stderr", "", "write this line to stderr at start")
	crashAtStartup = flag.Int("exit-at-start", -1, "exit with this code at once")
)

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

type server struct {
	outMu sync.Mutex
	out   *bufio.Writer

	logMu sync.Mutex
	log   *os.File

	mu      sync.Mutex
	cancels map[string]chan struct{} // request id -> closed on notifications/cancelled
	asks    map[string]chan json.RawMessage
	calls   int
	nextAsk atomic.Int64
	countMu sync.Mutex
}

func main() {
	flag.Parse()
	if *stderrAtStart != "" {
		fmt.Fprintln(os.Stderr, *stderrAtStart)
	}
	if *crashAtStartup >= 0 {
		os.Exit(*crashAtStartup)
	}
	if *ignoreSIGTERM {
		signal.Ignore(syscall.SIGTERM)
	}
	if *pidFile != "" {
		_ = os.WriteFile(*pidFile, []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
	if *grandchild {
		cmd := exec.Command("sleep", "1000")
		if err := cmd.Start(); err == nil && *grandchildPID != "" {
			_ = os.WriteFile(*grandchildPID, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
		}
	}
	s := &server{out: bufio.NewWriterSize(os.Stdout, 1<<16), cancels: map[string]chan struct{}{}, asks: map[string]chan json.RawMessage{}}
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakemcp:", err)
			os.Exit(2)
		}
		s.log = f
	}
	if *garbage {
		s.writeRaw("this is not JSON")
		s.writeRaw("{still not")
	}
	time.Sleep(*startupDelay)
	fmt.Fprintln(os.Stderr, "fakemcp ready")
	in := bufio.NewReaderSize(os.Stdin, 1<<16)
	lines := 0
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			lines++
			s.handle(line)
			if *stopReadAfter > 0 && lines >= *stopReadAfter {
				select {} // alive but deaf
			}
		}
		if err != nil {
			os.Exit(0) // stdin closed: the MCP stdio rule says exit
		}
	}
}

func (s *server) writeRaw(line string) {
	s.outMu.Lock()
	s.out.WriteString(line)
	s.out.WriteByte('\n')
	s.out.Flush()
	s.outMu.Unlock()
}

func (s *server) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	s.writeRaw(string(b))
}

func (s *server) result(id json.RawMessage, result any) {
	if *delay > 0 {
		time.Sleep(*delay)
	}
	s.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func (s *server) fail(id json.RawMessage, code int, msg string) {
	s.send(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
}

func (s *server) handle(line []byte) {
	if s.log != nil {
		s.logMu.Lock()
		s.log.Write(append([]byte(strings.TrimRight(string(line), "\r\n")), '\n'))
		s.logMu.Unlock()
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		s.fail(json.RawMessage("null"), -32700, "parse error")
		return
	}
	switch {
	case m.Method == "" && m.ID != nil: // a client's answer to our request
		s.mu.Lock()
		ch := s.asks[string(m.ID)]
		delete(s.asks, string(m.ID))
		s.mu.Unlock()
		if ch != nil {
			if m.Error != nil {
				ch <- m.Error
			} else {
				ch <- m.Result
			}
		}
	case m.ID == nil:
		if m.Method == "notifications/cancelled" {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			_ = json.Unmarshal(m.Params, &p)
			s.mu.Lock()
			if ch := s.cancels[string(p.RequestID)]; ch != nil {
				close(ch)
				delete(s.cancels, string(p.RequestID))
			}
			s.mu.Unlock()
		}
	default:
		if m.Method == "tools/call" {
			s.mu.Lock()
			s.calls++
			n := s.calls
			s.mu.Unlock()
			if *crashAfter > 0 && n >= *crashAfter {
				os.Exit(3)
			}
		}
		cancel := make(chan struct{})
		s.mu.Lock()
		s.cancels[string(m.ID)] = cancel
		s.mu.Unlock()
		go func() {
			s.request(m, cancel)
			s.mu.Lock()
			delete(s.cancels, string(m.ID))
			s.mu.Unlock()
		}()
	}
}

var tools = []map[string]any{
	tool("echo", "Echo text back", nil),
	tool("sleep_echo", "Sleep ms, then echo text", nil),
	tool("sleep", "Sleep ms", nil),
	tool("count", "Append a line to file (a side effect)", nil),
	tool("idem_count", "Like count, declared idempotent", map[string]any{"idempotentHint": true}),
	tool("ro_count", "Like count, declared read-only", map[string]any{"readOnlyHint": true}),
	tool("crash", "Exit at once", nil),
	tool("progress", "Emit progress", nil),
	tool("ask", "Ask the client (sampling, elicitation, roots)", nil),
	tool("big", "Return bytes of text", nil),
	tool("notify", "Emit a list_changed notification", nil),
	tool("log", "Emit a log message", nil),
	tool("pid", "Return the PID", nil),
}

func tool(name, desc string, ann map[string]any) map[string]any {
	t := map[string]any{"name": name, "description": desc, "inputSchema": map[string]any{"type": "object"}}
	if ann != nil {
		t["annotations"] = ann
	}
	return t
}

var legacyVersions = map[string]bool{"2024-11-05": true, "2025-03-26": true, "2025-06-18": true, "2025-11-25": true}

var capabilities = map[string]any{
	"tools":     map[string]any{"listChanged": true},
	"resources": map[string]any{"subscribe": true, "listChanged": true},
	"prompts":   map[string]any{"listChanged": true},
	"logging":   map[string]any{},
}

func (s *server) request(m message, cancel chan struct{}) {
	switch m.Method {
	case "initialize":
		if *noInit || *era == "modern" {
			if *era == "modern" {
				s.fail(m.ID, -32601, "Method not found")
			}
			return
		}
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(m.Params, &p)
		v := p.ProtocolVersion
		if !legacyVersions[v] {
			v = "2025-11-25"
		}
		s.result(m.ID, map[string]any{"protocolVersion": v, "capabilities": capabilities,
			"serverInfo": map[string]any{"name": "fakemcp", "version": "1.0.0"}, "instructions": "A fake server for tests."})
	case "server/discover":
		if *noInit {
			return
		}
		if *era == "legacy" {
			s.fail(m.ID, -32601, "Method not found")
			return
		}
		s.result(m.ID, map[string]any{"resultType": "complete", "supportedVersions": []string{"2026-07-28"},
			"capabilities": capabilities, "instructions": "A fake server for tests.",
			"_meta": map[string]any{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "fakemcp", "version": "1.0.0"}}})
	case "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe":
		s.result(m.ID, map[string]any{})
	case "tools/list":
		s.result(m.ID, map[string]any{"tools": tools})
	case "resources/list":
		s.result(m.ID, map[string]any{"resources": []any{map[string]any{"uri": "fake://counter", "name": "counter"}}})
	case "resources/read":
		s.result(m.ID, map[string]any{"contents": []any{map[string]any{"uri": "fake://counter", "text": "0"}}})
	case "prompts/list":
		s.result(m.ID, map[string]any{"prompts": []any{}})
	case "tools/call":
		s.call(m, cancel)
	default:
		s.fail(m.ID, -32601, "Method not found: "+m.Method)
	}
}

type callParams struct {
	Name      string `json:"name"`
	Arguments struct {
		Text         string `json:"text"`
		Ms           int    `json:"ms"`
		File         string `json:"file"`
		Code         int    `json:"code"`
		Steps        int    `json:"steps"`
		Kind         string `json:"kind"`
		Bytes        int    `json:"bytes"`
		Level        string `json:"level"`
		Data         any    `json:"data"`
		IgnoreCancel bool   `json:"ignoreCancel"`
	} `json:"arguments"`
	Meta struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	} `json:"_meta"`
}

func text(s string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}}
}

func (s *server) call(m message, cancel chan struct{}) {
	var p callParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		s.fail(m.ID, -32602, err.Error())
		return
	}
	a := p.Arguments
	sleep := func() bool {
		if a.IgnoreCancel {
			time.Sleep(time.Duration(a.Ms) * time.Millisecond)
			return true
		}
		select {
		case <-time.After(time.Duration(a.Ms) * time.Millisecond):
			return true
		case <-cancel:
			return false // MCP: a cancelled request gets no answer
		}
	}
	switch p.Name {
	case "echo":
		r := text(a.Text)
		r["structuredContent"] = map[string]any{"text": a.Text, "requestId": m.ID}
		s.result(m.ID, r)
	case "sleep_echo":
		if sleep() {
			s.result(m.ID, text(a.Text))
		}
	case "sleep":
		if sleep() {
			s.result(m.ID, text(fmt.Sprintf("slept %d", a.Ms)))
		}
	case "count", "idem_count", "ro_count":
		if !sleep() {
			return
		}
		s.countMu.Lock()
		f, err := os.OpenFile(a.File, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			fmt.Fprintln(f, a.Text)
			f.Close()
		}
		b, _ := os.ReadFile(a.File)
		s.countMu.Unlock()
		if err != nil {
			s.fail(m.ID, -32603, err.Error())
			return
		}
		s.result(m.ID, text(strconv.Itoa(strings.Count(string(b), "\n"))))
	case "crash":
		code := a.Code
		if code == 0 {
			code = 3
		}
		os.Exit(code)
	case "progress":
		for i := 1; i <= a.Steps; i++ {
			if p.Meta.ProgressToken != nil {
				s.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{
					"progressToken": p.Meta.ProgressToken, "progress": i, "total": a.Steps, "message": fmt.Sprintf("step %d", i)}})
			}
			time.Sleep(time.Duration(a.Ms) * time.Millisecond)
		}
		s.result(m.ID, text("done"))
	case "ask":
		method := map[string]string{"sampling": "sampling/createMessage", "elicitation": "elicitation/create", "roots": "roots/list"}[a.Kind]
		if method == "" {
			s.fail(m.ID, -32602, "kind must be sampling, elicitation or roots")
			return
		}
		id := fmt.Sprintf(`"srv-%d"`, s.nextAsk.Add(1))
		ch := make(chan json.RawMessage, 1)
		s.mu.Lock()
		s.asks[id] = ch
		s.mu.Unlock()
		params := map[string]any{}
		switch a.Kind {
		case "sampling":
			params = map[string]any{"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "question"}}}, "maxTokens": 10}
		case "elicitation":
			params = map[string]any{"message": "name?", "requestedSchema": map[string]any{"type": "object"}}
		}
		s.send(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": params})
		select {
		case answer := <-ch:
			s.result(m.ID, text(string(answer)))
		case <-cancel:
		}
	case "big":
		s.result(m.ID, text(strings.Repeat("x", a.Bytes)))
	case "notify":
		s.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/" + a.Kind + "/list_changed"})
		s.result(m.ID, text("notified"))
	case "log":
		s.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": a.Level, "data": a.Data}})
		s.result(m.ID, text("logged"))
	case "pid":
		s.result(m.ID, text(strconv.Itoa(os.Getpid())))
	default:
		s.result(m.ID, map[string]any{"isError": true, "content": []any{map[string]any{"type": "text", "text": "unknown tool " + p.Name}}})
	}
}
