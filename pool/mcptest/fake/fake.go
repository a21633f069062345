// Package fake is the stdio MCP server the tests run as a real child
// process (pool/mcptest/fakemcp) and `switchboard bench` runs as its
// load target (the hidden `switchboard fake-server`). It speaks newline-delimited JSON-RPC 2.0 on stdin and stdout,
// answers each request from its own goroutine (so slow calls finish out of
// order), counts side effects into files, crashes on demand, emits progress,
// asks its client questions, and logs to stderr. Flags inject faults; run it
// with -h for the list, and see tools/list for the tools.
//
// The era flag picks the protocol. legacy (the default) answers initialize
// and rejects server/discover. modern follows 2026-07-28: server/discover,
// every request names its version and client capabilities in _meta
// (missing: -32602; a version other than 2026-07-28: -32022), initialize, ping, logging/setLevel and
// resources/(un)subscribe are gone, ask answers input_required, and change
// notifications go to subscriptions/listen streams. both serves a request
// under modern rules when its _meta names a version, else under legacy ones.
//
// It writes nothing but JSON-RPC lines to stdout, except under -garbage,
// and exits 0 as soon as stdin closes, in-flight requests or not.
package fake

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// options are the command-line flags.
type options struct {
	era            string
	logPath        string
	pidFile        string
	delay          time.Duration
	crashAfter     int
	stopReadAfter  int
	garbage        bool
	noInit         bool
	grandchild     bool
	grandchildPID  string
	grandchildIn   bool
	refuseSub      string
	refuseWhile    string
	notifyOnListen string
	endListens     bool
	subscribeDelay time.Duration
	unansweredSubs int
	ackListens     int
	ignoreSIGTERM  bool
	exitOnStdinEOF bool
	startupDelay   time.Duration
	startWhile     string
	stderrLine     string
	stderrLong     int
	stderrLines    int
	closeStdout    bool
	exitAtStart    int
	askTimeout     time.Duration
	inlineEcho     bool
	rootsAfterInit time.Duration
	rootsOnce      bool
	logging        string
	rootsApply     time.Duration
	mcpHeader      bool
	discoverDelay  time.Duration
	discoverRefuse int
	tasks          bool
	tasksUnasked   bool
	rawCaps        string
	version        string
}

// Main runs the fake server with command-line args (without the program
// name) on this process's stdin and stdout; it exits the process when done.
func Main(args []string) {
	var o options
	fs := flag.NewFlagSet("fakemcp", flag.ExitOnError)
	fs.StringVar(&o.era, "era", "legacy", "protocol era: legacy (initialize), modern (server/discover, per-request _meta) or both")
	fs.StringVar(&o.logPath, "log", "", "append every received line to this `file`")
	fs.StringVar(&o.pidFile, "pidfile", "", "write the PID to this `file`")
	fs.DurationVar(&o.delay, "delay", 0, "wait this long before every response")
	fs.IntVar(&o.crashAfter, "crash-after", 0, "exit 3 on receiving the `N`-th tools/call, before answering it")
	fs.IntVar(&o.stopReadAfter, "stop-reading-after", 0, "stop reading stdin after `N` lines, but stay alive")
	fs.BoolVar(&o.garbage, "garbage", false, "write non-JSON lines to stdout at start")
	fs.BoolVar(&o.noInit, "no-init", false, "never answer initialize or server/discover")
	fs.BoolVar(&o.grandchild, "grandchild", false, "start a `sleep 1000` subprocess at start")
	fs.StringVar(&o.grandchildPID, "grandchild-pidfile", "", "write the grandchild's PID to this `file`")
	fs.BoolVar(&o.grandchildIn, "grandchild-stdin", false, "the -grandchild holds our stdin open (and never reads it), as a subprocess that inherits it does")
	fs.BoolVar(&o.ignoreSIGTERM, "ignore-sigterm", false, "ignore SIGTERM")
	fs.StringVar(&o.refuseSub, "refuse-subscribe", "", "answer resources/subscribe of this `uri`, or a subscriptions/listen asking for it, with an error, as a server does for a resource that does not exist")
	fs.StringVar(&o.refuseWhile, "refuse-while", "", "refuse (-refuse-subscribe) only while this `file` exists, as a server whose resource appears later does")
	fs.StringVar(&o.notifyOnListen, "notify-on-listen", "", "on each subscriptions/listen, send a `kind` change (as the notify tool does) to the subscriptions already open before acknowledging it, and to them and it after: a change made while a client replaces its subscription")
	fs.DurationVar(&o.subscribeDelay, "subscribe-delay", 0, "wait this long before taking a subscriptions/listen (acknowledging it) or a resources/subscribe (subscribing), as a server slow to start watching does")
	fs.IntVar(&o.unansweredSubs, "unanswered-subscribes", 0, "take the first `N` resources/subscribe at once, in arrival order, and never answer them, as a server that subscribes but is too slow to say so does (a cancel comes too late to undo them); answer the later ones; without -delay or -subscribe-delay")
	fs.IntVar(&o.ackListens, "ack-listens", -1, "acknowledge only the first `N` subscriptions/listen; hold the later ones open without a word (never acknowledged nor answered) until cancelled, as a server that never says it watches does; -1: all")
	fs.BoolVar(&o.endListens, "end-listens", false, "end every subscriptions/listen with a result right after acknowledging it, as a server that cannot hold a stream open does")
	fs.BoolVar(&o.exitOnStdinEOF, "exit-on-stdin-eof", true, "exit 0 when stdin closes")
	fs.DurationVar(&o.startupDelay, "startup-delay", 0, "wait this long before reading stdin")
	fs.StringVar(&o.startWhile, "start-while", "", "after -startup-delay, wait while this `file` exists before reading stdin, as a server busy starting does until a test lets it start")
	fs.DurationVar(&o.discoverDelay, "discover-delay", 0, "answer server/discover (a legacy server's Method not found included) this long after it came, other requests at once, as a server busy starting answers a probe after the initialize that followed it")
	fs.IntVar(&o.discoverRefuse, "discover-refusals", 0, "answer the first `N` server/discover with an internal error (-32603), after -discover-delay, as a server not ready for it yet does")
	fs.StringVar(&o.stderrLine, "stderr", "", "write this `line` to stderr at start")
	fs.IntVar(&o.stderrLong, "stderr-long", 0, "write a line of `N` bytes to stderr at start, before -stderr's, as a server that logs a whole payload does")
	fs.IntVar(&o.stderrLines, "stderr-lines", 0, "write `N` lines to stderr at start, in one write, after -stderr-long's and before -stderr's, each naming this process (\"stderr line I of N, pid P\"), as a server that logs a lot as it starts does: each child of a crash loop says something of its own")
	fs.BoolVar(&o.closeStdout, "close-stdout-after-init", false, "close stdout once initialize or server/discover is answered, and run on, reading stdin and answering nowhere, as a server that closes fd 1 or puts /dev/null in its place does")
	fs.IntVar(&o.exitAtStart, "exit-at-start", -1, "exit at once with this `code` (after -stderr)")
	fs.DurationVar(&o.askTimeout, "ask-timeout", 0, "the ask tool gives up waiting for its client after this long and answers \"no answer\"")
	fs.BoolVar(&o.inlineEcho, "inline-echo", false, "answer the echo tool on the reading goroutine, in arrival order, instead of in a goroutine of its own (the load tool's setting: no hand-off inside the server); legacy era without -delay only")
	fs.DurationVar(&o.rootsAfterInit, "roots-after-init", 0, "this long after notifications/initialized from a client that declared roots, and after each notifications/roots/list_changed, ask it roots/list and take its answer as the roots the roots tool reports, as server-filesystem does with the folders it serves; 0: never")
	fs.DurationVar(&o.rootsApply, "roots-apply-delay", 0, "take -roots-after-init's answer this long after it came, as server-filesystem takes its roots only once it has checked each folder on disk")
	fs.BoolVar(&o.rootsOnce, "roots-once", false, "ask -roots-after-init's roots/list only after notifications/initialized, not again after notifications/roots/list_changed, as a server that takes its roots once does")
	fs.StringVar(&o.logging, "logging", "declared", "declared: the logging capability; undeclared: none, though logging/setLevel works and the log tool logs; refused: none, logging/setLevel is Method not found and the log tool logs anyway, as servers that log without saying so do")
	fs.BoolVar(&o.tasks, "tasks", false, "offer 2025-11-25 tasks: a tools/call of echo or progress with a task in its params answers with the task and runs in the background (its progress under the call's token, then notifications/tasks/status), and tasks/list, tasks/get, tasks/result and tasks/cancel see every task, whoever made it, as a server that cannot tell its clients apart does; 2026-07-28 (its tasks extension): such a call whose _meta's clientCapabilities declare the extension answers with its task (resultType \"task\"), and tasks/get reads it, its result once completed")
	fs.BoolVar(&o.tasksUnasked, "tasks-unasked", false, "with -tasks, answer a call of echo or progress with a task even when it did not ask for one (no task member; 2026-07-28: no tasks extension declared), as a server that ignores what its client declared does")
	fs.StringVar(&o.rawCaps, "capabilities", "", "answer initialize and server/discover with these capabilities, this `JSON` object as written (its key order, escapes and <, >, & kept), in place of the fake's own, as a server whose SDK writes them in its own order does")
	fs.StringVar(&o.version, "protocol-version", "", "answer initialize with this legacy `revision` whatever the client asked, as a server built on an SDK of that revision does")
	fs.BoolVar(&o.mcpHeader, "mcp-header", false, "also list the sql tool, whose properties a 2026-07-28 client mirrors into Mcp-Param headers (x-mcp-header)")
	_ = fs.Parse(args) // ExitOnError: exits on a bad flag
	log.SetFlags(0)
	log.SetPrefix("fakemcp: ")
	if o.era != eraLegacy && o.era != eraModern && o.era != eraBoth {
		log.Printf("-era %q: want legacy, modern or both", o.era)
		os.Exit(2)
	}
	if o.logging != "declared" && o.logging != "undeclared" && o.logging != "refused" {
		log.Printf("-logging %q: want declared, undeclared or refused", o.logging)
		os.Exit(2)
	}
	if method, _ := changeOf(o.notifyOnListen); o.notifyOnListen != "" && method == "" {
		log.Printf("-notify-on-listen %q: want tools, resources, prompts or updated", o.notifyOnListen)
		os.Exit(2)
	}

	if o.stderrLong > 0 {
		fmt.Fprintln(os.Stderr, strings.Repeat("z", o.stderrLong))
	}
	if o.stderrLines > 0 {
		writeStderrLines(o.stderrLines)
	}
	if o.stderrLine != "" {
		fmt.Fprintln(os.Stderr, o.stderrLine)
	}
	if o.exitAtStart >= 0 {
		os.Exit(o.exitAtStart)
	}
	if o.ignoreSIGTERM {
		signal.Ignore(syscall.SIGTERM)
	}
	if o.pidFile != "" {
		writeFileAtomic(o.pidFile, strconv.Itoa(os.Getpid()))
	}
	if o.grandchild {
		startGrandchild(o.grandchildPID, o.grandchildIn)
	}
	s := newServer(o, os.Stdout)
	if o.logPath != "" {
		f, err := os.OpenFile(o.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			log.Print(err)
			os.Exit(2)
		}
		s.log = f
	}
	if o.garbage {
		s.out.write([]byte("this is not JSON\n"))
		s.out.write([]byte("{still not\n"))
	}
	time.Sleep(o.startupDelay)
	for o.startWhile != "" && exists(o.startWhile) {
		time.Sleep(10 * time.Millisecond)
	}
	log.Printf("ready: pid %d, era %s", os.Getpid(), o.era)
	s.serve(os.Stdin)
	if o.exitOnStdinEOF {
		os.Exit(0) // the stdio transport: a closed stdin means shut down
	}
	sleepForever()
}

// writeStderrLines writes -stderr-lines's n lines in one write: a child
// that exits right after it leaves them all in the pipe, unread.
func writeStderrLines(n int) {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "stderr line %d of %d, pid %d\n", i, n, os.Getpid())
	}
	_, _ = os.Stderr.WriteString(b.String())
}

// sleepForever blocks without tripping the runtime's deadlock detector,
// which select{} would when nothing else is running.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// writeFileAtomic writes through a rename so that a test polling the file
// never reads it half-written.
func writeFileAtomic(path, content string) {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		log.Print(err)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		log.Print(err)
	}
}

// startGrandchild starts `sleep 1000` in our process group, so that only a
// kill of the whole group reaches it, and reaps it if it dies first.
// With holdStdin it inherits our stdin, which sleep never reads.
func startGrandchild(pidFile string, holdStdin bool) {
	cmd := exec.Command("sleep", "1000")
	if holdStdin {
		cmd.Stdin = os.Stdin
	}
	if err := cmd.Start(); err != nil {
		log.Printf("grandchild: %v", err)
		return
	}
	if pidFile != "" {
		writeFileAtomic(pidFile, strconv.Itoa(cmd.Process.Pid))
	}
	go cmd.Wait()
}

// Protocol eras and versions.
const (
	eraLegacy = "legacy"
	eraModern = "modern"
	eraBoth   = "both"

	modernVersion = "2026-07-28"
	latestLegacy  = "2025-11-25"

	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
	metaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
	tasksExtension         = "io.modelcontextprotocol/tasks"
)

// JSON-RPC and MCP error codes.
const (
	codeParseError         = -32700
	codeInvalidRequest     = -32600
	codeMethodNotFound     = -32601
	codeInvalidParams      = -32602
	codeInternal           = -32603
	codeResourceNotFound   = -32002 // legacy; 2026-07-28 uses -32602
	codeMissingCapability  = -32021
	codeUnsupportedVersion = -32022
	codeURLElicitation     = -32042 // 2025-11-25 URLElicitationRequiredError; 2026-07-28 asks with input_required
)

// legacyVersions are the initialize-era revisions the fake echoes back.
var legacyVersions = map[string]bool{"2024-11-05": true, "2025-03-26": true, "2025-06-18": true, latestLegacy: true}

// modernVersions are the revisions accepted in a request's _meta.
var modernVersions = []string{modernVersion}

var (
	serverInfo   = map[string]any{"name": "fakemcp", "version": "1.0.0"}
	capabilities = map[string]any{
		"tools":     map[string]any{"listChanged": true},
		"resources": map[string]any{"subscribe": true, "listChanged": true},
		"prompts":   map[string]any{"listChanged": true},
		"logging":   map[string]any{},
	}
	instructions = "A fake MCP server for tests."
)

// counterURI is the one resource; reading it gives the number of tools/call
// requests this process has received.
const counterURI = "fake://counter"

// writer serialises whole lines onto stdout so they never interleave.
// Answers made on the reading goroutine (-inline-echo) are held and go
// out together when the reader has no complete line left to read, as a
// server that batches its output under load does: one write for a burst
// of answers, one for an answer on its own.
type writer struct {
	mu   sync.Mutex
	w    io.Writer
	held []byte // inline answers not yet written, in order
}

// write writes one line, newline included, in one piece, after what is
// held.
func (w *writer) write(line []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.held) == 0 {
		w.writeLocked(line)
		return
	}
	w.held = append(w.held, line...)
	w.flushLocked()
}

// flush writes what is held.
func (w *writer) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushLocked()
}

func (w *writer) flushLocked() {
	if len(w.held) == 0 {
		return
	}
	w.writeLocked(w.held)
	w.held = w.held[:0]
	if cap(w.held) > 1<<20 {
		w.held = nil // a burst's buffer is let go
	}
}

func (w *writer) writeLocked(b []byte) {
	if _, err := w.w.Write(b); err != nil {
		log.Printf("write stdout: %v", err)
		os.Exit(1)
	}
}

// mute closes stdout and sends what is written from now on nowhere.
func (w *writer) mute() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushLocked()
	if c, ok := w.w.(io.Closer); ok {
		if err := c.Close(); err != nil {
			log.Printf("close stdout: %v", err)
		}
	}
	w.w = io.Discard
	log.Printf("closed stdout (-close-stdout-after-init)")
}

// send encodes v as one line and writes it. HTML escaping is off so that
// ids and tokens go back byte for byte as they came.
func (w *writer) send(v any) {
	if line := encodeLine(v); line != nil {
		w.write(line)
	}
}

// hold encodes v as one line and holds it for the next flush.
func (w *writer) hold(v any) {
	if line := encodeLine(v); line != nil {
		w.mu.Lock()
		w.held = append(w.held, line...)
		w.mu.Unlock()
	}
}

// encodeLine is v as one JSON line, nil if it does not encode.
func encodeLine(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // Encode ends the line
		log.Printf("encode: %v", err)
		return nil
	}
	return b.Bytes()
}

// server is the fake's state. The read loop alone owns log and lines; the
// fields under mu are shared with the request goroutines.
type server struct {
	o     options
	out   *writer
	log   *os.File
	calls atomic.Int64 // tools/call requests received
	asks  atomic.Int64 // server-to-client request ids handed out

	countMu sync.Mutex // serialises the count tools' append-and-count

	retooled atomic.Bool // the retool tool ran: no tool is annotated any more

	listens   atomic.Int64 // subscriptions/listen taken, for -ack-listens
	discovers atomic.Int64 // server/discover received, for -discover-refusals
	subsTaken atomic.Int64 // resources/subscribe taken, for -unanswered-subscribes

	mu          sync.Mutex
	inflight    map[string]*request             // raw id -> running request
	answers     map[string]chan json.RawMessage // raw id of our request -> the client's response
	subs        map[string]*subscription        // raw id of subscriptions/listen -> filter
	initialized bool                            // a legacy client sent notifications/initialized
	clientRoots bool                            // the legacy client declared roots in initialize
	roots       json.RawMessage                 // its answer to the roots/list of -roots-after-init; nil until then
	rootsAsk    int64                           // the ask (s.asks) roots answers
	minLevel    int                             // legacy logging/setLevel
	subscribed  map[string]bool                 // legacy resources/subscribe
	tasks       map[string]*task                // -tasks: every task, by id
}

func newServer(o options, stdout io.Writer) *server {
	return &server{o: o, out: &writer{w: stdout}, inflight: map[string]*request{},
		answers: map[string]chan json.RawMessage{}, subs: map[string]*subscription{}, subscribed: map[string]bool{},
		tasks: map[string]*task{}}
}

// envelope is any JSON-RPC message. A nil ID means absent; "null" is null.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// requestMeta is the part of params._meta the fake looks at.
type requestMeta struct {
	ProgressToken      json.RawMessage            `json:"progressToken"`
	ProtocolVersion    *string                    `json:"io.modelcontextprotocol/protocolVersion"`
	ClientCapabilities map[string]json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	LogLevel           string                     `json:"io.modelcontextprotocol/logLevel"`
}

// request is one client request being answered.
type request struct {
	id     json.RawMessage
	method string
	params json.RawMessage
	meta   requestMeta
	modern bool // served under 2026-07-28 rules
	ctx    context.Context
	cancel context.CancelFunc
}

// serve reads stdin until it ends, or forever under -stop-reading-after.
// Logging, counting and cancellation happen here, in arrival order; each
// request then runs in its own goroutine (under -inline-echo, an echo is
// answered here).
func (s *server) serve(in io.Reader) {
	r := bufio.NewReaderSize(in, 64<<10)
	lines := 0
	for {
		line, err := r.ReadBytes('\n')
		line = bytes.TrimSuffix(line, []byte("\n"))
		if len(bytes.TrimSpace(line)) > 0 {
			lines++
			s.receive(line)
			if !lineBuffered(r) {
				s.out.flush() // nothing more to answer before the next read waits
			}
			if s.o.stopReadAfter > 0 && lines >= s.o.stopReadAfter {
				log.Printf("stopped reading after %d lines", lines)
				s.out.flush()
				sleepForever()
			}
		}
		if err != nil {
			return
		}
	}
}

// lineBuffered reports whether r holds a whole line that a read would
// return without waiting.
func lineBuffered(r *bufio.Reader) bool {
	buf, _ := r.Peek(r.Buffered())
	return bytes.IndexByte(buf, '\n') >= 0
}

func (s *server) receive(line []byte) {
	if s.log != nil {
		if _, err := s.log.Write(append(line, '\n')); err != nil {
			log.Printf("log: %v", err)
		}
	}
	var m envelope
	if err := json.Unmarshal(line, &m); err != nil {
		if json.Valid(line) {
			s.out.send(errorResponse(json.RawMessage("null"), codeInvalidRequest, "Invalid Request: not a JSON-RPC object", nil))
		} else {
			s.out.send(errorResponse(json.RawMessage("null"), codeParseError, "Parse error", nil))
		}
		return
	}
	isResponse := m.Method == "" && m.ID != nil && (m.Result != nil || m.Error != nil)
	switch {
	case m.JSONRPC == "2.0" && isResponse:
		s.answered(m)
	case m.JSONRPC != "2.0" || m.Method == "" || string(m.ID) == "null":
		id := m.ID
		if id == nil {
			id = json.RawMessage("null")
		}
		s.out.send(errorResponse(id, codeInvalidRequest, "Invalid Request", nil))
	case m.ID == nil:
		s.notification(m)
	default:
		s.start(m)
	}
}

// answered delivers a client's response to the request of ours it answers.
func (s *server) answered(m envelope) {
	s.mu.Lock()
	ch := s.answers[string(m.ID)]
	delete(s.answers, string(m.ID))
	s.mu.Unlock()
	if ch == nil {
		log.Printf("response to unknown request %s", m.ID)
		return
	}
	if m.Error != nil {
		ch <- append(json.RawMessage(`{"error":`), append(m.Error, '}')...)
	} else {
		ch <- m.Result
	}
}

func (s *server) notification(m envelope) {
	switch m.Method {
	case "notifications/initialized":
		s.mu.Lock()
		s.initialized = true
		fetch := s.clientRoots && s.o.rootsAfterInit > 0
		s.mu.Unlock()
		if fetch {
			go s.fetchRoots()
		}
	case "notifications/roots/list_changed":
		s.mu.Lock()
		fetch := s.initialized && s.clientRoots && s.o.rootsAfterInit > 0 && !s.o.rootsOnce
		s.mu.Unlock()
		if fetch {
			go s.fetchRoots() // as server-filesystem does: it asks again
		}
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
			Reason    string          `json:"reason"`
		}
		_ = json.Unmarshal(m.Params, &p)
		s.mu.Lock()
		r := s.inflight[string(p.RequestID)]
		delete(s.subs, string(p.RequestID)) // now, not when listen wakes: the next line may notify
		s.mu.Unlock()
		if r == nil {
			log.Printf("cancelled %s: no such request in flight", p.RequestID)
			return
		}
		log.Printf("cancelled %s (%s): %q", p.RequestID, r.method, p.Reason)
		r.cancel()
	}
}

// start registers a request before its goroutine runs, so that a
// cancellation on the very next line finds it.
func (s *server) start(m envelope) {
	if m.Method == "tools/call" {
		if n := s.calls.Add(1); s.o.crashAfter > 0 && n == int64(s.o.crashAfter) {
			log.Printf("crashing on tools/call %d (-crash-after)", n)
			s.out.flush() // what was answered before it went out
			os.Exit(3)
		}
	}
	if s.inline(m) {
		return
	}
	r := &request{id: m.ID, method: m.Method, params: m.Params}
	if (m.Method == "resources/subscribe" || m.Method == "resources/unsubscribe") && s.o.subscribeDelay == 0 && s.o.delay == 0 {
		// Taken in arrival order, on the reading goroutine, as a server
		// that handles requests in order does: a change notified on the
		// next line finds the subscription. -subscribe-delay models one
		// that takes its time.
		r.ctx, r.cancel = context.WithCancel(context.Background())
		defer r.cancel()
		if m.Method == "resources/subscribe" && s.subsTaken.Add(1) <= int64(s.o.unansweredSubs) {
			log.Printf("taking resources/subscribe %s without answering it (-unanswered-subscribes)", m.ID)
			r.cancel() // taken below, never answered
		}
		s.handle(r)
		return
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	s.mu.Lock()
	s.inflight[string(r.id)] = r
	s.mu.Unlock()
	go func() {
		defer r.cancel()
		defer func() {
			s.mu.Lock()
			if s.inflight[string(r.id)] == r {
				delete(s.inflight, string(r.id))
			}
			s.mu.Unlock()
		}()
		s.handle(r)
	}()
}

// inline answers an echo call at once, on the reading goroutine, under
// -inline-echo: the request and its answer cross no goroutine inside the
// server, so a load measured against it measures what carries the bytes.
// The answer is held until the reader has no whole line left (serve).
// It reports false for anything else, which goes the usual way. Nothing
// can cancel an inline echo: it is answered before the next line is read.
func (s *server) inline(m envelope) bool {
	if !s.o.inlineEcho || s.o.delay > 0 || s.o.noInit || s.o.era != eraLegacy || m.Method != "tools/call" {
		return false
	}
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			Text string `json:"text"`
		} `json:"arguments"`
		Meta struct {
			ProtocolVersion string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	}
	// A legacy-era server serves every request under legacy rules, _meta
	// or not (handle); the echo tells which version the _meta named.
	if json.Unmarshal(m.Params, &p) != nil || p.Name != "echo" {
		return false
	}
	s.out.hold(echoAnswer{JSONRPC: "2.0", ID: m.ID, Result: echoResult{
		Content:           []textContent{{Type: "text", Text: p.Arguments.Text}},
		StructuredContent: echoStructured{Text: p.Arguments.Text, RequestID: m.ID, ProtocolVersion: p.Meta.ProtocolVersion}}})
	return true
}

// echoAnswer is the echo tool's answer as the call path builds it (same
// members), in types that encode without maps.
type echoAnswer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  echoResult      `json:"result"`
}

type echoResult struct {
	Content           []textContent  `json:"content"`
	StructuredContent echoStructured `json:"structuredContent"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type echoStructured struct {
	ProtocolVersion string          `json:"protocolVersion,omitempty"`
	RequestID       json.RawMessage `json:"requestId"`
	Text            string          `json:"text"`
}

// handle answers one request. The era decides which methods exist and
// whether _meta must name the protocol version.
func (s *server) handle(r *request) {
	if s.o.noInit && (r.method == "initialize" || r.method == "server/discover") {
		return
	}
	if r.method == "server/discover" && s.o.discoverDelay > 0 {
		select {
		case <-time.After(s.o.discoverDelay):
		case <-r.ctx.Done():
			return
		}
	}
	if r.method == "server/discover" && s.discovers.Add(1) <= int64(s.o.discoverRefuse) {
		s.fail(r, codeInternal, "Internal error: not ready to answer server/discover yet", nil)
		return
	}
	if len(r.params) > 0 && string(r.params) != "null" {
		var p struct {
			Meta requestMeta `json:"_meta"`
		}
		if err := json.Unmarshal(r.params, &p); err != nil {
			s.fail(r, codeInvalidParams, "Invalid params: "+err.Error(), nil)
			return
		}
		r.meta = p.Meta
	}
	if r.method == "initialize" {
		s.initialize(r)
		return
	}
	if s.o.era != eraLegacy {
		modernOnly := r.method == "server/discover" || r.method == "subscriptions/listen"
		r.modern = s.o.era == eraModern || r.meta.ProtocolVersion != nil || modernOnly
	}
	if r.modern {
		switch {
		case r.meta.ProtocolVersion == nil:
			s.fail(r, codeInvalidParams, "Invalid params: _meta lacks "+metaProtocolVersion, nil)
			return
		case *r.meta.ProtocolVersion != modernVersion:
			s.fail(r, codeUnsupportedVersion, "Unsupported protocol version",
				map[string]any{"supported": modernVersions, "requested": *r.meta.ProtocolVersion})
			return
		case r.meta.ClientCapabilities == nil:
			s.fail(r, codeInvalidParams, "Invalid params: _meta lacks "+metaClientCapabilities, nil)
			return
		case r.meta.LogLevel != "" && levelRank(r.meta.LogLevel) < 0:
			s.fail(r, codeInvalidParams, "Invalid params: unknown log level "+strconv.Quote(r.meta.LogLevel), nil)
			return
		}
	}
	switch r.method {
	case "server/discover":
		if !r.modern {
			s.fail(r, codeMethodNotFound, "Method not found", nil)
			return
		}
		s.reply(r, map[string]any{"supportedVersions": modernVersions, "capabilities": s.declared(),
			"instructions": instructions, "ttlMs": 0, "cacheScope": "public"})
		if s.o.closeStdout {
			s.out.mute()
		}
	case "subscriptions/listen":
		s.listen(r)
	case "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe":
		if r.modern { // removed in 2026-07-28
			s.fail(r, codeMethodNotFound, "Method not found", nil)
			return
		}
		s.legacyOnly(r)
	case "tools/list":
		s.reply(r, s.cacheable(r, map[string]any{"tools": s.tools()}))
	case "resources/list":
		s.reply(r, s.cacheable(r, map[string]any{"resources": []any{
			map[string]any{"uri": counterURI, "name": "counter", "mimeType": "text/plain"}}}))
	case "resources/read":
		s.readResource(r)
	case "prompts/list":
		s.reply(r, s.cacheable(r, map[string]any{"prompts": []any{}}))
	case "tools/call":
		s.call(r)
	case "tasks/list", "tasks/get", "tasks/result", "tasks/cancel":
		if !s.o.tasks {
			s.fail(r, codeMethodNotFound, "Method not found", nil)
			return
		}
		s.taskRequest(r)
	default:
		s.fail(r, codeMethodNotFound, "Method not found", nil)
	}
}

// initialize answers the legacy handshake, echoing a known version and
// offering the newest legacy one otherwise.
func (s *server) initialize(r *request) {
	if s.o.era == eraModern {
		s.fail(r, codeMethodNotFound, "Method not found: this server speaks only "+modernVersion,
			map[string]any{"supported": modernVersions})
		return
	}
	var p struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(r.params, &p)
	_, roots := p.Capabilities["roots"]
	s.mu.Lock()
	s.clientRoots = roots
	s.mu.Unlock()
	v := p.ProtocolVersion
	if !legacyVersions[v] {
		v = latestLegacy
	}
	if s.o.version != "" {
		v = s.o.version
	}
	s.reply(r, map[string]any{"protocolVersion": v, "capabilities": s.declared(),
		"serverInfo": serverInfo, "instructions": instructions})
	if s.o.closeStdout {
		s.out.mute()
	}
}

// declared are the capabilities the handshake answers with: -capabilities
// as written, else the fake's own.
func (s *server) declared() any {
	if s.o.rawCaps != "" {
		return json.RawMessage(s.o.rawCaps)
	}
	return s.capabilities()
}

// capabilities are the server's, logging only when -logging says so,
// tasks (2025-11-25's, and 2026-07-28's extension) only under -tasks.
func (s *server) capabilities() map[string]any {
	logs := s.o.logging == "" || s.o.logging == "declared"
	if logs && !s.o.tasks {
		return capabilities
	}
	out := make(map[string]any, len(capabilities)+1)
	for k, v := range capabilities {
		if k != "logging" || logs {
			out[k] = v
		}
	}
	if s.o.tasks {
		out["tasks"] = map[string]any{"list": map[string]any{}, "cancel": map[string]any{},
			"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
		out["extensions"] = map[string]any{tasksExtension: map[string]any{}}
	}
	return out
}

// logLevels are the syslog severities of MCP logging, lowest first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

func levelRank(level string) int {
	for i, l := range logLevels {
		if l == level {
			return i
		}
	}
	return -1
}

// legacyOnly answers the methods 2026-07-28 removed.
func (s *server) legacyOnly(r *request) {
	var p struct {
		Level string `json:"level"`
		URI   string `json:"uri"`
	}
	_ = json.Unmarshal(r.params, &p)
	switch r.method {
	case "logging/setLevel":
		if s.o.logging == "refused" {
			s.fail(r, codeMethodNotFound, "Method not found", nil)
			return
		}
		n := levelRank(p.Level)
		if n < 0 {
			s.fail(r, codeInvalidParams, "Invalid params: unknown level "+strconv.Quote(p.Level), nil)
			return
		}
		s.mu.Lock()
		s.minLevel = n
		s.mu.Unlock()
	case "resources/subscribe", "resources/unsubscribe":
		if r.method == "resources/subscribe" && s.o.subscribeDelay > 0 && !sleepFor(r.ctx, s.o.subscribeDelay) {
			return
		}
		if r.method == "resources/subscribe" && p.URI == s.o.refuseSub && p.URI != "" && s.refusing() {
			s.fail(r, codeInvalidParams, "Resource not found: "+p.URI, nil)
			return
		}
		s.mu.Lock()
		if r.method == "resources/subscribe" {
			s.subscribed[p.URI] = true
		} else {
			delete(s.subscribed, p.URI)
		}
		s.mu.Unlock()
	}
	s.reply(r, map[string]any{})
}

// cacheable adds the fields 2026-07-28 requires on list and read results.
func (s *server) cacheable(r *request, result map[string]any) map[string]any {
	if r.modern {
		result["ttlMs"] = 0
		result["cacheScope"] = "public"
	}
	return result
}

func (s *server) readResource(r *request) {
	var p struct {
		URI string `json:"uri"`
	}
	_ = json.Unmarshal(r.params, &p)
	if p.URI != counterURI {
		code := codeResourceNotFound
		if r.modern {
			code = codeInvalidParams
		}
		s.fail(r, code, "Resource not found", map[string]any{"uri": p.URI})
		return
	}
	s.reply(r, s.cacheable(r, map[string]any{"contents": []any{map[string]any{
		"uri": counterURI, "mimeType": "text/plain", "text": strconv.FormatInt(s.calls.Load(), 10)}}}))
}

// subscription is one open subscriptions/listen stream (2026-07-28).
type subscription struct {
	id     json.RawMessage
	filter subscriptionFilter
	r      *request // the listen, answered when the server ends it (endListensLocked)
}

type subscriptionFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

func (f subscriptionFilter) wants(method, uri string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return f.ToolsListChanged
	case "notifications/prompts/list_changed":
		return f.PromptsListChanged
	case "notifications/resources/list_changed":
		return f.ResourcesListChanged
	case "notifications/resources/updated":
		for _, u := range f.ResourceSubscriptions {
			if u == uri {
				return true
			}
		}
	}
	return false
}

// listen acknowledges a subscription, then holds it open until the client
// cancels it; a cancelled request gets no response.
func (s *server) listen(r *request) {
	var p struct {
		Notifications subscriptionFilter `json:"notifications"`
	}
	if err := json.Unmarshal(r.params, &p); err != nil {
		s.fail(r, codeInvalidParams, "Invalid params: "+err.Error(), nil)
		return
	}
	if uri := s.o.refuseSub; uri != "" && slices.Contains(p.Notifications.ResourceSubscriptions, uri) && s.refusing() {
		s.fail(r, codeInvalidParams, "Resource not found: "+uri, map[string]any{"uri": uri})
		log.Printf("refused subscriptions/listen %s: it asks for %s (-refuse-subscribe)", r.id, uri)
		return
	}
	if s.o.subscribeDelay > 0 && !sleepFor(r.ctx, s.o.subscribeDelay) {
		return
	}
	if n := s.listens.Add(1); s.o.ackListens >= 0 && n > int64(s.o.ackListens) {
		log.Printf("holding subscriptions/listen %s without a word (-ack-listens %d)", r.id, s.o.ackListens)
		<-r.ctx.Done()
		return
	}
	sub := &subscription{id: r.id, filter: p.Notifications, r: r}
	method, uri := changeOf(s.o.notifyOnListen)
	s.mu.Lock()
	if method != "" { // -notify-on-listen: to the subscriptions open until now
		s.broadcastLocked(method, uri)
	}
	s.out.send(notification("notifications/subscriptions/acknowledged", map[string]any{
		"_meta": map[string]any{metaSubscriptionID: r.id}, "notifications": sub.filter}))
	s.subs[string(r.id)] = sub
	if method != "" { // and to them and this one
		s.broadcastLocked(method, uri)
	}
	if s.o.endListens {
		s.endListenLocked(sub, false)
	}
	s.mu.Unlock()
	<-r.ctx.Done()
	s.mu.Lock()
	delete(s.subs, string(r.id))
	s.mu.Unlock()
}

// endListensLocked ends every open subscription from the server's side,
// and reports how many it ended; cancelled: with notifications/cancelled
// rather than a result.
func (s *server) endListensLocked(cancelled bool) int {
	n := len(s.subs)
	for _, sub := range s.subs {
		s.endListenLocked(sub, cancelled)
	}
	return n
}

// endListenLocked ends a subscription from the server's side: its listen
// is answered with a result (the stream ends), or, cancelled, named by
// notifications/cancelled (on stdio, how a 2026-07-28 server tears a
// listen down: basic/patterns/cancellation), and forgotten.
func (s *server) endListenLocked(sub *subscription, cancelled bool) {
	delete(s.subs, string(sub.id))
	if cancelled {
		s.out.send(notification("notifications/cancelled", map[string]any{"requestId": sub.id, "reason": "the server ended the subscription"}))
	} else {
		s.reply(sub.r, map[string]any{})
	}
	sub.r.cancel() // its listen goroutine returns
}

// tools is what tools/list returns now: after retool, without the
// annotations.
func (s *server) tools() []map[string]any {
	all := tools
	if s.o.mcpHeader {
		all = append(slices.Clip(tools), sqlTool)
	}
	if !s.retooled.Load() {
		return all
	}
	out := make([]map[string]any, len(all))
	for i, t := range all {
		out[i] = map[string]any{}
		for k, v := range t {
			if k != "annotations" {
				out[i][k] = v
			}
		}
	}
	return out
}

// changeOf is the change notification of a notify kind (tools,
// resources, prompts, updated) and its resource; "" for another kind.
func changeOf(kind string) (method, uri string) {
	method = map[string]string{"tools": "notifications/tools/list_changed", "resources": "notifications/resources/list_changed",
		"prompts": "notifications/prompts/list_changed", "updated": "notifications/resources/updated"}[kind]
	if kind == "updated" {
		uri = counterURI
	}
	return method, uri
}

// broadcast sends a change notification to legacy clients (untagged) and
// to each modern subscription that asked for it (tagged with its id).
func (s *server) broadcast(method, uri string) {
	s.mu.Lock()
	defer s.mu.Unlock() // held across the sends: a subscription is acknowledged first
	s.broadcastLocked(method, uri)
}

func (s *server) broadcastLocked(method, uri string) {
	params := map[string]any{}
	if uri != "" {
		params["uri"] = uri
	}
	legacy := s.o.era == eraLegacy || s.initialized
	if legacy && (method != "notifications/resources/updated" || s.subscribed[uri]) {
		if len(params) == 0 {
			s.out.send(map[string]any{"jsonrpc": "2.0", "method": method})
		} else {
			s.out.send(notification(method, params))
		}
	}
	for _, sub := range s.subs {
		if sub.filter.wants(method, uri) {
			tagged := map[string]any{"_meta": map[string]any{metaSubscriptionID: sub.id}}
			for k, v := range params {
				tagged[k] = v
			}
			s.out.send(notification(method, tagged))
		}
	}
}

// tools is what tools/list returns, in a fixed order.
var tools = []map[string]any{
	tool("echo", "Answer text, and the request id as received in structuredContent", props{"text": "string"}, nil),
	tool("sleep_echo", "Sleep ms, then answer text", props{"ms": "integer", "text": "string"}, nil),
	tool("sleep", "Sleep ms, then answer \"slept ms\"; stops, without answering, when cancelled unless ignoreCancel", props{"ms": "integer", "ignoreCancel": "boolean"}, nil),
	tool("count", "Append a line (text, default the request id) to file after ms; answer the line count", props{"file": "string", "text": "string", "ms": "integer"}, nil),
	tool("idem_count", "count, annotated idempotent", props{"file": "string", "text": "string", "ms": "integer"}, map[string]any{"idempotentHint": true}),
	tool("ro_count", "count, annotated read-only", props{"file": "string", "text": "string", "ms": "integer"}, map[string]any{"readOnlyHint": true}),
	tool("crash", "Exit at once with code (default 3), without answering", props{"code": "integer"}, nil),
	tool("progress", "Send steps progress notifications, ms apart, then answer \"done\"", props{"steps": "integer", "ms": "integer"}, nil),
	tool("ro_progress", "progress, annotated read-only", props{"steps": "integer", "ms": "integer"}, map[string]any{"readOnlyHint": true}),
	tool("ask", "Ask the client (sampling, elicitation, elicitation_url: an elicitation in URL mode, or roots; legacy: with questionToken as the question's progressToken) and answer with its result as JSON text; legacy: steps progress notifications after the answer; 2026-07-28: steps progress notifications on every round, from 1, and again asks again on every retry, answered or not; kind url: until file exists, ask the client to visit a URL (legacy: error -32042, after asking the first question if any; modern: input_required), then answer \"authorized\"; legacy elicitation_url with complete: notifications/elicitation/complete for it between the client's answer and the result",
		props{"kind": "string", "steps": "integer", "again": "boolean", "file": "string", "first": "string", "complete": "boolean", "questionToken": "string"}, nil),
	tool("big", "Answer a text of bytes 'x' characters", props{"bytes": "integer"}, nil),
	tool("notify", "Send notifications/<kind>/list_changed (tools, resources, prompts), or resources/updated (updated)", props{"kind": "string"}, nil),
	tool("log", "Send notifications/message with level and data", props{"level": "string", "data": ""}, nil),
	tool("flood", "Send steps notifications/message of a few bytes each (level, default info; data 0), written in large batches, as a server stuck in a logging loop does; answer \"flooded N\" with how many were sent (0 below the client's level)", props{"steps": "integer", "level": "string"}, nil),
	tool("pid", "Answer the server's process id", props{}, nil),
	tool("end_listens", "End every open subscriptions/listen with a result, as a server closing its streams does, or (kind cancelled) with notifications/cancelled naming it, as a 2026-07-28 server tears one down on stdio; answer how many", props{"kind": "string"}, nil),
	tool("roots", "Answer the roots the server took from its client after notifications/initialized (-roots-after-init), as the JSON of the client's answer, or \"none\" until then", props{}, nil),
	tool("retool", "Drop every tool's annotations (none is read-only or idempotent from now on) and send notifications/tools/list_changed", props{}, nil),
}

// sqlTool is -mcp-header's tool: region, limit, dry_run and target.zone
// are mirrored into Mcp-Param headers (x-mcp-header), query is not.
var sqlTool = map[string]any{"name": "sql", "description": "Answer the arguments as received, as JSON text",
	"inputSchema": map[string]any{"type": "object", "required": []string{"region", "query"}, "properties": map[string]any{
		"region":  map[string]any{"type": "string", "x-mcp-header": "Region"},
		"query":   map[string]any{"type": "string"},
		"limit":   map[string]any{"type": "integer", "x-mcp-header": "Limit"},
		"dry_run": map[string]any{"type": "boolean", "x-mcp-header": "Dry-Run"},
		"target": map[string]any{"type": "object", "properties": map[string]any{
			"zone": map[string]any{"type": "string", "x-mcp-header": "Zone"}}},
	}}}

// props maps argument names to JSON Schema types ("" for any).
type props map[string]string

func tool(name, desc string, p props, annotations map[string]any) map[string]any {
	properties := map[string]any{}
	for k, typ := range p {
		if typ == "" {
			properties[k] = map[string]any{}
		} else {
			properties[k] = map[string]any{"type": typ}
		}
	}
	t := map[string]any{"name": name, "description": desc,
		"inputSchema": map[string]any{"type": "object", "properties": properties}}
	if annotations != nil {
		t["annotations"] = annotations
	}
	return t
}

// args are every tool's arguments; each tool reads its own.
type args struct {
	Text         string          `json:"text"`
	Ms           int             `json:"ms"`
	IgnoreCancel bool            `json:"ignoreCancel"`
	File         string          `json:"file"`
	Code         *int            `json:"code"`
	Steps        int             `json:"steps"`
	Kind         string          `json:"kind"`
	Again        bool            `json:"again"`
	First        string          `json:"first"`
	Complete     bool            `json:"complete"`
	Bytes        int             `json:"bytes"`
	Level        string          `json:"level"`
	Data         json.RawMessage `json:"data"`
	// Params, set, are ask's question's params as written (their key
	// order, escapes and <, >, & kept), in place of its kind's own.
	Params json.RawMessage `json:"params"`
	// QuestionToken, set, is the progressToken of ask's question to
	// the client (its params' _meta), for progress the client sends
	// while it answers.
	QuestionToken string `json:"questionToken"`
}

func (s *server) call(r *request) {
	var p struct {
		Name           string                     `json:"name"`
		Arguments      json.RawMessage            `json:"arguments"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
		RequestState   string                     `json:"requestState"`
		Task           json.RawMessage            `json:"task"`
	}
	var a args
	err := json.Unmarshal(r.params, &p)
	if err == nil && len(p.Arguments) > 0 {
		err = json.Unmarshal(p.Arguments, &a)
	}
	if err != nil {
		s.fail(r, codeInvalidParams, "Invalid params: "+err.Error(), nil)
		return
	}
	if s.o.tasks && (p.Name == "echo" || p.Name == "progress") && s.wantsTask(r, p.Task) {
		s.startTask(r, p.Name, a)
		return
	}
	switch p.Name {
	case "echo":
		sc := map[string]any{"text": a.Text, "requestId": r.id}
		if r.meta.ProtocolVersion != nil {
			sc["protocolVersion"] = *r.meta.ProtocolVersion
		}
		res := text(a.Text)
		res["structuredContent"] = sc
		s.reply(r, res)
	case "sleep_echo":
		if sleep(r.ctx, a.Ms) {
			s.reply(r, text(a.Text))
		}
	case "sleep":
		if a.IgnoreCancel {
			r.ctx = context.WithoutCancel(r.ctx)
		}
		if sleep(r.ctx, a.Ms) {
			s.reply(r, text(fmt.Sprintf("slept %d", a.Ms)))
		}
	case "count", "idem_count", "ro_count":
		s.count(r, a)
	case "crash":
		code := 3
		if a.Code != nil {
			code = *a.Code
		}
		log.Printf("crashing with code %d (crash tool)", code)
		os.Exit(code)
	case "progress", "ro_progress":
		for i := 1; i <= a.Steps; i++ {
			if r.meta.ProgressToken != nil {
				s.out.send(notification("notifications/progress", map[string]any{"progressToken": r.meta.ProgressToken,
					"progress": i, "total": a.Steps, "message": fmt.Sprintf("step %d of %d", i, a.Steps)}))
			}
			if !sleep(r.ctx, a.Ms) {
				return
			}
		}
		s.reply(r, text("done"))
	case "ask":
		if a.Kind == "url" {
			s.askURL(r, a)
		} else if r.modern {
			s.askInline(r, a, p.InputResponses, p.RequestState)
		} else {
			s.ask(r, a)
		}
	case "big":
		if a.Bytes < 0 {
			s.fail(r, codeInvalidParams, "Invalid params: bytes < 0", nil)
			return
		}
		s.reply(r, text(strings.Repeat("x", a.Bytes)))
	case "notify":
		method, uri := changeOf(a.Kind)
		if method == "" {
			s.fail(r, codeInvalidParams, "Invalid params: kind must be tools, resources, prompts or updated", nil)
			return
		}
		s.broadcast(method, uri)
		s.reply(r, text("notified"))
	case "log":
		s.logMessage(r, a)
		s.reply(r, text("logged"))
	case "flood":
		s.reply(r, text(fmt.Sprintf("flooded %d", s.flood(r, a))))
	case "pid":
		s.reply(r, text(strconv.Itoa(os.Getpid())))
	case "end_listens":
		if a.Kind != "" && a.Kind != "cancelled" {
			s.fail(r, codeInvalidParams, "Invalid params: kind must be cancelled, or none", nil)
			return
		}
		s.mu.Lock()
		n := s.endListensLocked(a.Kind == "cancelled") // each ended before this call is answered
		s.mu.Unlock()
		s.reply(r, text(strconv.Itoa(n)))
	case "roots":
		s.mu.Lock()
		roots := s.roots
		s.mu.Unlock()
		if roots == nil {
			roots = json.RawMessage("none")
		}
		s.reply(r, text(string(roots)))
	case "sql":
		s.reply(r, text(string(p.Arguments)))
	case "retool":
		s.retooled.Store(true)
		s.broadcast("notifications/tools/list_changed", "")
		s.reply(r, text("retooled"))
	default:
		s.fail(r, codeInvalidParams, "Unknown tool: "+p.Name, nil)
	}
}

// sleep waits ms milliseconds and reports false if ctx ended first.
func sleep(ctx context.Context, ms int) bool {
	return sleepFor(ctx, time.Duration(ms)*time.Millisecond)
}

func sleepFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// count is the non-idempotent side effect: one line appended per call that
// ran, however the call ended afterwards.
func (s *server) count(r *request, a args) {
	if a.File == "" {
		s.fail(r, codeInvalidParams, "Invalid params: file is required", nil)
		return
	}
	if !sleep(r.ctx, a.Ms) {
		return
	}
	line := a.Text
	if line == "" {
		line = string(r.id)
	}
	s.countMu.Lock()
	n, err := appendLine(a.File, line)
	s.countMu.Unlock()
	if err != nil {
		s.fail(r, codeInternal, err.Error(), nil)
		return
	}
	s.reply(r, text(strconv.Itoa(n)))
}

func appendLine(path, line string) (int, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile(path)
	return bytes.Count(b, []byte("\n")), err
}

// askKinds maps the ask tool's kind to the client method and the client
// capability it needs (elicitation_url: in URL mode too).
var askKinds = map[string]struct{ method, capability string }{
	"sampling":        {"sampling/createMessage", "sampling"},
	"elicitation":     {"elicitation/create", "elicitation"},
	"elicitation_url": {"elicitation/create", "elicitation"},
	"roots":           {"roots/list", "roots"},
}

// askParams are the params of the question kind; an elicitation in URL
// mode carries elicitationID when not "" (2025-11-25 requires one,
// 2026-07-28 removed it).
func askParams(kind, elicitationID string) map[string]any {
	switch kind {
	case "elicitation_url":
		p := map[string]any{"mode": "url", "message": "Sign in to fakemcp.", "url": "https://auth.example/sign-in"}
		if elicitationID != "" {
			p["elicitationId"] = elicitationID
		}
		return p
	case "sampling":
		return map[string]any{"maxTokens": 16, "messages": []any{map[string]any{"role": "user",
			"content": map[string]any{"type": "text", "text": "What is six times seven?"}}}}
	case "elicitation":
		return map[string]any{"message": "What is your name?", "requestedSchema": map[string]any{"type": "object",
			"properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []string{"name"}}}
	}
	return nil
}

// ask sends a legacy server-to-client request with a string id ("srv-N")
// and answers with the client's result, or its error, as JSON text. With
// a.Steps, progress notifications (under the request's token, if any) go
// between the client's answer and the result: a call that goes on after
// its question.
func (s *server) ask(r *request, a args) {
	kind := a.Kind
	if _, ok := askKinds[kind]; !ok {
		s.fail(r, codeInvalidParams, "Invalid params: kind must be sampling, elicitation, elicitation_url or roots", nil)
		return
	}
	answer, answered, ok, key := s.question(r, kind, a.QuestionToken, a.Params)
	switch {
	case !ok:
	case !answered:
		s.reply(r, text("no answer"))
	default:
		if a.Complete && kind == "elicitation_url" { // the user finished at the URL (2025-11-25)
			s.out.send(notification("notifications/elicitation/complete", map[string]any{"elicitationId": key}))
		}
		for i := 1; i <= a.Steps && r.meta.ProgressToken != nil; i++ {
			s.out.send(notification("notifications/progress", map[string]any{"progressToken": r.meta.ProgressToken,
				"progress": i, "total": a.Steps, "message": fmt.Sprintf("step %d of %d", i, a.Steps)}))
		}
		res := text(string(answer))
		if bytes.HasPrefix(answer, []byte(`{"error":`)) {
			res["isError"] = true
		}
		s.reply(r, res)
	}
}

// question asks the client kind (one of askKinds) with a legacy
// server-to-client request and waits for its result, or its error as
// {"error":...}. answered is false when -ask-timeout ran out first; ok is
// false when r was cancelled meanwhile (it gets no answer). key is the
// request's id, and a URL-mode elicitation's elicitationId. params, if
// not nil, are the request's params as written, in place of kind's.
func (s *server) question(r *request, kind, token string, params json.RawMessage) (answer json.RawMessage, answered, ok bool, key string) {
	key = fmt.Sprintf("srv-%d", s.asks.Add(1))
	id, _ := json.Marshal(key)
	ch := make(chan json.RawMessage, 1)
	s.mu.Lock()
	s.answers[string(id)] = ch
	s.mu.Unlock()
	msg := map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": askKinds[kind].method}
	if p := askParams(kind, key); p != nil {
		msg["params"] = p
	}
	if params != nil {
		msg["params"] = params
	}
	if token != "" {
		p, _ := msg["params"].(map[string]any)
		if p == nil {
			p = map[string]any{}
		}
		p["_meta"] = map[string]any{"progressToken": token}
		msg["params"] = p
	}
	s.out.send(msg)
	select {
	case answer := <-ch:
		return answer, true, true, key
	case <-r.ctx.Done():
		s.mu.Lock()
		delete(s.answers, string(id))
		s.mu.Unlock()
		return nil, false, false, key
	case <-askTimeout(s.o.askTimeout):
		s.mu.Lock()
		delete(s.answers, string(id))
		s.mu.Unlock()
		return nil, false, true, key
	}
}

// fetchRoots asks the client roots/list -roots-after-init after it was
// initialized (or told its roots changed) and keeps the answer for the
// roots tool, as a server that serves its client's folders does; an
// answer to an older ask that comes after a newer one's is not kept. It
// waits for the answer for as long as the process lives.
func (s *server) fetchRoots() {
	time.Sleep(s.o.rootsAfterInit)
	n := s.asks.Add(1)
	id, _ := json.Marshal(fmt.Sprintf("srv-%d", n))
	ch := make(chan json.RawMessage, 1)
	s.mu.Lock()
	s.answers[string(id)] = ch
	s.mu.Unlock()
	s.out.send(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": "roots/list"})
	answer := <-ch
	time.Sleep(s.o.rootsApply)
	s.mu.Lock()
	if n > s.rootsAsk {
		s.roots, s.rootsAsk = answer, n
	}
	s.mu.Unlock()
}

// askTimeout is -ask-timeout's timer; without the flag, it never fires.
func askTimeout(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return nil
	}
	return time.After(d)
}

// askInline is ask under 2026-07-28: the question goes back as an
// input_required result, and the client's retry carries the answer. With
// a.Again it never takes the answer: every retry is asked again, as a
// server that loops does.
func (s *server) askInline(r *request, a args, responses map[string]json.RawMessage, state string) {
	kind := a.Kind
	k, ok := askKinds[kind]
	if !ok {
		s.fail(r, codeInvalidParams, "Invalid params: kind must be sampling, elicitation, elicitation_url or roots", nil)
		return
	}
	if _, ok := r.meta.ClientCapabilities[k.capability]; !ok {
		s.fail(r, codeMissingCapability, "Missing required client capability",
			map[string]any{"requiredCapabilities": map[string]any{k.capability: map[string]any{}}})
		return
	}
	if kind == "elicitation_url" && !declaresURL(r.meta.ClientCapabilities) {
		s.fail(r, codeMissingCapability, "Missing required client capability",
			map[string]any{"requiredCapabilities": map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}})
		return
	}
	for i := 1; i <= a.Steps && r.meta.ProgressToken != nil; i++ { // every round starts again from 1
		s.out.send(notification("notifications/progress", map[string]any{"progressToken": r.meta.ProgressToken,
			"progress": i, "total": a.Steps, "message": fmt.Sprintf("step %d of %d", i, a.Steps)}))
	}
	if key, ok := strings.CutPrefix(state, "ask:"); ok && !a.Again {
		if answer, ok := responses[key]; ok {
			s.reply(r, text(string(answer)))
			return
		} // no answer: ask again, as the spec prefers to an error
	}
	key := fmt.Sprintf("srv-%d", s.asks.Add(1))
	req := map[string]any{"method": k.method}
	if p := askParams(kind, ""); p != nil {
		req["params"] = p
	}
	s.reply(r, map[string]any{"resultType": "input_required", "inputRequests": map[string]any{key: req},
		"requestState": "ask:" + key})
}

// askURL gates the call on an interaction out of band, as a server that
// needs a third party's authorization does: until file exists (the
// stand-in for the user finishing at the URL), a legacy call is refused
// with URLElicitationRequiredError (-32042, 2025-11-25) and a modern one
// gets input_required with an elicitation/create in URL mode (2026-07-28,
// which has no elicitationId). Either way the client's retry is a new call.
// With first, a legacy call asks the client that question before it looks
// (answered or not: -ask-timeout).
func (s *server) askURL(r *request, a args) {
	if _, ok := askKinds[a.First]; a.File == "" || (a.First != "" && !ok) {
		s.fail(r, codeInvalidParams, "Invalid params: file is required, first is sampling, elicitation or roots", nil)
		return
	}
	if a.First != "" && !r.modern {
		if _, _, ok, _ := s.question(r, a.First, "", nil); !ok {
			return
		}
	}
	if _, err := os.Stat(a.File); err == nil {
		s.reply(r, text("authorized"))
		return
	}
	id := fmt.Sprintf("url-%d", s.asks.Add(1))
	el := map[string]any{"mode": "url", "message": "Authorize fakemcp to continue.", "url": "https://auth.example/connect?id=" + id}
	if !r.modern {
		el["elicitationId"] = id
		s.fail(r, codeURLElicitation, "This request requires more information.", map[string]any{"elicitations": []any{el}})
		return
	}
	if !declaresURL(r.meta.ClientCapabilities) {
		s.fail(r, codeMissingCapability, "Missing required client capability",
			map[string]any{"requiredCapabilities": map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}})
		return
	}
	s.reply(r, map[string]any{"resultType": "input_required",
		"inputRequests": map[string]any{id: map[string]any{"method": "elicitation/create", "params": el}}})
}

// declaresURL reports whether client capabilities declare elicitation in
// URL mode.
func declaresURL(caps map[string]json.RawMessage) bool {
	var elicitation map[string]json.RawMessage
	_ = json.Unmarshal(caps["elicitation"], &elicitation)
	_, ok := elicitation["url"]
	return ok
}

// logMessage sends notifications/message if the client asked for the
// level: legacy through logging/setLevel (default: everything), modern
// only through the request's _meta log level.
func (s *server) logMessage(r *request, a args) {
	if !s.logs(r, a.Level) {
		return
	}
	data := a.Data
	if data == nil {
		data = json.RawMessage("null")
	}
	s.out.send(notification("notifications/message", map[string]any{"level": a.Level, "logger": "fakemcp", "data": data}))
}

// logs reports whether r's client takes a log message at level: a
// 2026-07-28 request's only when its _meta asks for logs.
func (s *server) logs(r *request, level string) bool {
	floor := 0
	if r.modern {
		if r.meta.LogLevel == "" {
			return false
		}
		floor = levelRank(r.meta.LogLevel)
	} else {
		s.mu.Lock()
		floor = s.minLevel
		s.mu.Unlock()
	}
	return levelRank(level) >= floor
}

// flood is the flood tool: a.Steps tiny notifications/message, the same
// line each, written a thousand at a time; it returns how many it sent.
func (s *server) flood(r *request, a args) int {
	level := a.Level
	if level == "" {
		level = "info"
	}
	if a.Steps <= 0 || !s.logs(r, level) {
		return 0
	}
	line := encodeLine(notification("notifications/message", map[string]any{"level": level, "data": 0}))
	const per = 1000
	batch := bytes.Repeat(line, per)
	for left := a.Steps; left > 0; left -= per {
		s.out.write(batch[:min(left, per)*len(line)])
	}
	return a.Steps
}

func text(s string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}}
}

func notification(method string, params any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
}

func errorResponse(id json.RawMessage, code int, message string, data any) map[string]any {
	e := map[string]any{"code": code, "message": message}
	if data != nil {
		e["data"] = data
	}
	return map[string]any{"jsonrpc": "2.0", "id": id, "error": e}
}

// wait applies -delay and reports whether the request may still be
// answered: a cancelled request gets no response.
func (s *server) wait(r *request) bool {
	if s.o.delay > 0 && !sleepFor(r.ctx, s.o.delay) {
		return false
	}
	return r.ctx.Err() == nil
}

// reply sends a result. Modern results carry resultType and serverInfo.
func (s *server) reply(r *request, result map[string]any) {
	if !s.wait(r) {
		return
	}
	if r.modern {
		if _, ok := result["resultType"]; !ok {
			result["resultType"] = "complete"
		}
		result["_meta"] = map[string]any{metaServerInfo: serverInfo}
	}
	s.out.send(map[string]any{"jsonrpc": "2.0", "id": r.id, "result": result})
}

func (s *server) fail(r *request, code int, message string, data any) {
	if !s.wait(r) {
		return
	}
	s.out.send(errorResponse(r.id, code, message, data))
}

// refusing reports whether -refuse-subscribe applies now: always, or
// while the -refuse-while file exists.
func (s *server) refusing() bool {
	if s.o.refuseWhile == "" {
		return true
	}
	_, err := os.Stat(s.o.refuseWhile)
	return err == nil
}

// exists reports whether path names a file.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// wantsTask reports whether a call may be answered with a task: a legacy
// one that is task-augmented, a 2026-07-28 one whose client declared the
// tasks extension on it (the server decides; this one always does), any
// under -tasks-unasked.
func (s *server) wantsTask(r *request, task json.RawMessage) bool {
	switch {
	case s.o.tasksUnasked:
		return true
	case r.modern:
		var ext map[string]json.RawMessage
		_ = json.Unmarshal(r.meta.ClientCapabilities["extensions"], &ext)
		return ext[tasksExtension] != nil
	}
	return task != nil
}

// task is one -tasks task (2025-11-25). Its fields are guarded by the
// server's mu; done is closed when it reaches a terminal status.
type task struct {
	id, status, created string
	result              map[string]any
	done                chan struct{}
}

// view is the task as tasks/get, tasks/list and notifications/tasks/status
// show it.
func (t *task) view() map[string]any {
	return map[string]any{"taskId": t.id, "status": t.status, "createdAt": t.created,
		"lastUpdatedAt": time.Now().UTC().Format(time.RFC3339Nano), "ttl": 60000, "pollInterval": 100}
}

// modernView is the task as the 2026-07-28 tasks extension shows it: a
// CreateTaskResult's members (its resultType set by the caller), and for
// tasks/get its result once completed.
func (t *task) modernView() map[string]any {
	v := map[string]any{"taskId": t.id, "status": t.status, "createdAt": t.created,
		"lastUpdatedAt": time.Now().UTC().Format(time.RFC3339Nano), "ttlMs": 60000, "pollIntervalMs": 100}
	if t.status == "completed" {
		v["result"] = t.result
	}
	return v
}

// startTask answers a task-augmented call with its task, then runs the
// tool in the background: echo's text, or progress's steps under the
// call's token (which stays valid for the task's life), and says when
// it is done.
func (s *server) startTask(r *request, name string, a args) {
	t := &task{id: fmt.Sprintf("task-%d", s.asks.Add(1)), status: "working",
		created: time.Now().UTC().Format(time.RFC3339Nano), done: make(chan struct{})}
	s.mu.Lock()
	s.tasks[t.id] = t
	created := map[string]any{"task": t.view()}
	if r.modern {
		created = t.modernView()
		created["resultType"] = "task"
	}
	s.mu.Unlock()
	s.reply(r, created)
	go func() {
		result := text(a.Text)
		if name == "progress" {
			for i := 1; i <= a.Steps; i++ {
				if !sleep(context.Background(), a.Ms) {
					return
				}
				if r.meta.ProgressToken != nil {
					s.out.send(notification("notifications/progress", map[string]any{"progressToken": r.meta.ProgressToken,
						"progress": i, "total": a.Steps}))
				}
			}
			result = text("done")
		}
		s.mu.Lock()
		if t.status != "working" { // cancelled meanwhile
			s.mu.Unlock()
			return
		}
		t.status, t.result = "completed", result
		status := t.view()
		close(t.done)
		s.mu.Unlock()
		if !r.modern { // 2026-07-28 tells a task's status only on a listen's stream
			s.out.send(notification("notifications/tasks/status", status))
		}
	}()
}

// taskRequest answers tasks/list, tasks/get, tasks/result and
// tasks/cancel, for any task, whoever made it.
func (s *server) taskRequest(r *request) {
	var p struct {
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(r.params, &p)
	s.mu.Lock()
	if r.method == "tasks/list" {
		all := make([]any, 0, len(s.tasks))
		for _, t := range s.tasks {
			all = append(all, t.view())
		}
		s.mu.Unlock()
		s.reply(r, map[string]any{"tasks": all})
		return
	}
	t := s.tasks[p.TaskID]
	if t == nil {
		s.mu.Unlock()
		s.fail(r, codeInvalidParams, "Failed to retrieve task: Task not found", nil)
		return
	}
	switch r.method {
	case "tasks/get":
		v := t.view()
		if r.modern {
			v = t.modernView()
		}
		s.mu.Unlock()
		s.reply(r, v)
	case "tasks/cancel":
		if t.status != "working" {
			s.mu.Unlock()
			s.fail(r, codeInvalidParams, "Cannot cancel a task in status "+t.status, nil)
			return
		}
		t.status = "cancelled"
		close(t.done)
		v := t.view()
		s.mu.Unlock()
		s.reply(r, v)
	case "tasks/result":
		s.mu.Unlock()
		select {
		case <-t.done:
		case <-r.ctx.Done():
			return
		}
		s.mu.Lock()
		res := map[string]any{"_meta": map[string]any{"io.modelcontextprotocol/related-task": map[string]any{"taskId": t.id}}}
		for k, v := range t.result {
			res[k] = v
		}
		s.mu.Unlock()
		s.reply(r, res)
	}
}
