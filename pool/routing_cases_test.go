package pool_test

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/txtar"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// The routing rules of doc.go, as cases on the wire: each
// testdata/routing/*.txtar file is one case run on a real pool, its
// clients on the stdio front door's socket, its child a real process
// started by the pool (this test binary, re-run as a puppet that relays
// its stdin and stdout to the test). The test plays the child's script.
//
// A case's sections:
//
//	-- setup --     the clients (client NAME [sampling]), and optionally
//	                timeout DURATION (the server's request timeout, for
//	                the steps: see below)
//	-- steps --     in order: NAME: LINE sends LINE as client NAME;
//	                child: LINE writes LINE as the child (LINE || LINE ...
//	                writes several with one write, an empty one a blank
//	                line: what one read of the child's output brings);
//	                wait NAME N waits
//	                until NAME (a client, or child) has received N lines;
//	                wait orphaned N until the pool counted N orphans;
//	                close NAME ends a client's connection and waits for its
//	                session to end
//	-- NAME.out --  what each client, and the child, received, in order
//	-- pool.out --  the pool's counters at the end
//
// Pool ids are numbers that vary from run to run, so what the child
// receives names them $1, $2, ... in the order it first sees them (as a
// request id, a cancellation's requestId, a progress token), and a client
// names the ids of the requests it is asked $q1, $q2, ...; steps use the
// same names. The child's handshake and each client's initialize happen
// before the steps and are not shown. After the steps every client is
// closed, in order, and a last request passes through the child's queue,
// so that everything the pool sent is shown. The case's timeout is the
// steps' only: the start and the last request run under the default, as
// a slow machine may take longer than a short timeout to start the child
// (a wait for its handshake is bounded by the request timeout too), and
// a case is about the steps.
//
// go test ./pool -run TestRouting -update writes the .out sections from
// what happened.

var update = flag.Bool("update", false, "rewrite the expected output of testdata/routing/*.txtar")

// puppetEnv, in a child's environment, makes this test binary a puppet:
// see runPuppet.
const puppetEnv = "SWITCHBOARD_TEST_PUPPET"

// runPuppet relays its stdin to the test's socket and the socket to its
// stdout, until its stdin ends: the pool's real child, whose script the
// test plays.
func runPuppet(sock string) int {
	conn, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "puppet:", err)
		return 2
	}
	go func() {
		_, _ = io.Copy(os.Stdout, conn)
		os.Exit(0) // the test is gone
	}()
	_, _ = io.Copy(conn, os.Stdin)
	return 0
}

func TestRouting(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "routing", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 12 {
		t.Fatalf("only %d routing cases", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			runRoutingCase(t, file)
		})
	}
}

// party is a client or the child: what it received, normalized.
type party struct {
	name   string
	mu     sync.Mutex
	lines  []string
	ids    map[string]string // pool id -> its name ($1 / $q1)
	names  map[string]string // its name -> pool id
	prefix string            // "$" for the child, "$q" for clients
	eof    chan struct{}     // closed when its input ended
}

func newParty(name, prefix string) *party {
	return &party{name: name, prefix: prefix, ids: map[string]string{}, names: map[string]string{}, eof: make(chan struct{})}
}

func (p *party) add(line string) {
	p.mu.Lock()
	p.lines = append(p.lines, line)
	p.mu.Unlock()
}

func (p *party) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lines)
}

func (p *party) transcript() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.lines) == 0 {
		return ""
	}
	return strings.Join(p.lines, "\n") + "\n"
}

// nameOf is the name of a pool id this party received, given in the
// order it first sees them.
func (p *party) nameOf(id string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, ok := p.ids[id]
	if !ok {
		n = p.prefix + strconv.Itoa(len(p.ids)+1)
		p.ids[id] = n
		p.names[n] = id
	}
	return n
}

// normalize names the pool ids in a line this party received: the id of
// a request, the requestId of a cancellation, a request's progress token.
// Answers keep their ids: those are the receiver's own.
func (p *party) normalize(line []byte) string {
	m, err := jsonrpc.Parse(line)
	if err != nil {
		return string(line)
	}
	var spans []jsonrpc.Span
	if m.Kind == jsonrpc.KindRequest {
		spans = append(spans, m.ID)
	}
	if m.Params.Present() && line[m.Params.Start] == '{' {
		params := m.Params.Of(line)
		abs := func(s jsonrpc.Span) jsonrpc.Span {
			return jsonrpc.Span{Start: m.Params.Start + s.Start, End: m.Params.Start + s.End}
		}
		if m.Method == "notifications/cancelled" {
			spans = append(spans, abs(jsonrpc.Member(params, "requestId")))
		}
		if meta := jsonrpc.Member(params, "_meta"); m.Kind == jsonrpc.KindRequest && meta.Present() && params[meta.Start] == '{' {
			if tok := jsonrpc.Member(meta.Of(params), "progressToken"); tok.Present() {
				spans = append(spans, abs(jsonrpc.Span{Start: meta.Start + tok.Start, End: meta.Start + tok.End}))
			}
		}
	}
	spans = slices.DeleteFunc(spans, func(s jsonrpc.Span) bool {
		_, pool := jsonrpc.ParseUint(s.Of(line))
		return !s.Present() || !pool
	})
	slices.SortFunc(spans, func(a, b jsonrpc.Span) int { return a.Start - b.Start })
	names := make([]string, len(spans))
	for i, s := range spans { // named left to right, as they are read
		names[i] = p.nameOf(string(s.Of(line)))
	}
	out := line
	for i := len(spans) - 1; i >= 0; i-- { // replaced right to left, so that the spans stay true
		out = jsonrpc.Splice(nil, out, spans[i], []byte(names[i]))
	}
	return string(out)
}

var nameRef = regexp.MustCompile(`\$q?[0-9]+`)

// resolve puts the pool ids back in place of their names in a step's line.
func (p *party) resolve(t *testing.T, line string) string {
	t.Helper()
	return nameRef.ReplaceAllStringFunc(line, func(n string) string {
		p.mu.Lock()
		defer p.mu.Unlock()
		id, ok := p.names[n]
		if !ok {
			t.Fatalf("%s has not seen %s yet: %s", p.name, n, line)
		}
		return id
	})
}

// routingCase is a case's world: the pool, its clients, the child.
type routingCase struct {
	t       *testing.T
	tp      *testPool
	clients map[string]*client
	order   []string
	parties map[string]*party
	child   *party
	childW  chan net.Conn
	barrier chan struct{}
	cfg     pool.ServerConfig // the server as started and as the barrier finds it: the default request timeout

	connMu sync.Mutex // the child's connection, set once it started; writes
	conn   net.Conn
}

func runRoutingCase(t *testing.T, file string) {
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	for _, f := range ar.Files {
		sections[f.Name] = string(f.Data)
	}
	rc := &routingCase{t: t, clients: map[string]*client{}, parties: map[string]*party{},
		child: newParty("child", "$"), childW: make(chan net.Conn, 1), barrier: make(chan struct{}, 1)}
	rc.parties["child"] = rc.child

	dir := shortTempDir(t)
	sock := filepath.Join(dir, "child.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			rc.childW <- conn
		}
	}()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := pool.ServerConfig{Name: "srv", Command: self, Env: map[string]string{puppetEnv: sock}}
	type clientDecl struct {
		name string
		caps string
	}
	var decls []clientDecl
	var timeout time.Duration
	for _, line := range lines(sections["setup"]) {
		f := strings.Fields(line)
		switch {
		case f[0] == "timeout" && len(f) == 2:
			if timeout, err = time.ParseDuration(f[1]); err != nil {
				t.Fatal(err)
			}
		case f[0] == "client" && len(f) >= 2:
			caps := "{}"
			if slices.Contains(f[2:], "sampling") {
				caps = `{"sampling":{}}`
			}
			decls = append(decls, clientDecl{f[1], caps})
		default:
			t.Fatalf("setup: %q", line)
		}
	}
	rc.cfg = cfg
	rc.tp = newTestPool(t, nil, cfg)

	for i, d := range decls {
		c := rc.tp.dial(t, "srv")
		if i == 0 {
			go rc.playChild() // the first initialize starts the child
		}
		c.initialize(d.name, d.caps)
		pt := newParty(d.name, "$q")
		rc.clients[d.name], rc.parties[d.name] = c, pt
		rc.order = append(rc.order, d.name)
		go func() {
			defer close(pt.eof)
			for m := range c.in {
				pt.add(pt.normalize([]byte(m.raw)))
			}
		}()
	}
	if timeout != 0 {
		// The child has started and answered its handshake: the case's
		// timeout, a setting a reload changes on the running child,
		// bounds the steps' requests, not the start.
		cfg.RequestTimeout = timeout
		rc.apply(cfg)
	}
	for _, step := range lines(sections["steps"]) {
		rc.step(step)
	}
	rc.finish()

	got := map[string]string{"pool.out": rc.counters()}
	for name, pt := range rc.parties {
		got[name+".out"] = pt.transcript()
	}
	if *update {
		var files []txtar.File
		for _, f := range ar.Files {
			if !strings.HasSuffix(f.Name, ".out") {
				files = append(files, f)
			}
		}
		for _, name := range append(append([]string{}, rc.order...), "child") {
			files = append(files, txtar.File{Name: name + ".out", Data: []byte(got[name+".out"])})
		}
		files = append(files, txtar.File{Name: "pool.out", Data: []byte(got["pool.out"])})
		ar.Files = files
		if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for name, text := range got {
		want, ok := sections[name]
		if !ok {
			t.Errorf("no %s section (run with -update)", name)
			continue
		}
		if d := cmp.Diff(want, text); d != "" {
			t.Errorf("%s (-want +got):\n%s", name, d)
		}
	}
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// playChild answers the child's handshake, records everything else the
// child receives, and answers the final barrier request.
func (rc *routingCase) playChild() {
	var conn net.Conn
	select {
	case conn = <-rc.childW:
	case <-time.After(15 * time.Second):
		rc.t.Error("the child never started")
		close(rc.child.eof)
		return
	}
	rc.connMu.Lock()
	rc.conn = conn
	rc.connMu.Unlock()
	defer close(rc.child.eof)
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		line = bytes.TrimSpace(line)
		m, err := jsonrpc.Parse(line)
		if err != nil {
			rc.child.add(string(line))
			continue
		}
		switch m.Method {
		case "server/discover":
			rc.write(string(jsonrpc.AppendErrorResponse(nil, m.IDBytes(), &jsonrpc.Error{Code: -32601, Message: "Method not found"})))
		case "initialize":
			rc.write(string(jsonrpc.AppendResponse(nil, m.IDBytes(), []byte(`{"protocolVersion":"2025-11-25",`+
				`"capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"logging":{}},`+
				`"serverInfo":{"name":"puppet","version":"1"}}`))))
		case "notifications/initialized":
		case "test/barrier":
			rc.write(string(jsonrpc.AppendResponse(nil, m.IDBytes(), []byte(`{}`))))
			rc.barrier <- struct{}{}
		default:
			rc.child.add(rc.child.normalize(line))
		}
	}
}

// write writes a line as the child.
func (rc *routingCase) write(line string) {
	rc.connMu.Lock()
	defer rc.connMu.Unlock()
	if _, err := io.WriteString(rc.conn, line+"\n"); err != nil {
		rc.t.Errorf("the child's write: %v", err)
	}
}

func (rc *routingCase) started() bool {
	rc.connMu.Lock()
	defer rc.connMu.Unlock()
	return rc.conn != nil
}

// step runs one step of the case.
func (rc *routingCase) step(step string) {
	t := rc.t
	t.Helper()
	if who, line, ok := strings.Cut(step, ": "); ok && !strings.Contains(who, " ") {
		if who == "child" {
			eventually(t, "the child to start", rc.started)
			parts := strings.Split(line, " ||")
			for i, part := range parts {
				if part = strings.TrimSpace(part); part != "" {
					parts[i] = rc.child.resolve(t, part)
				} else {
					parts[i] = ""
				}
			}
			rc.write(strings.Join(parts, "\n"))
			return
		}
		c, pt := rc.clients[who], rc.parties[who]
		if c == nil {
			t.Fatalf("step %q: no client %s", step, who)
		}
		c.send(pt.resolve(t, line))
		return
	}
	f := strings.Fields(step)
	switch {
	case len(f) == 3 && f[0] == "wait" && f[1] == "orphaned":
		n, _ := strconv.ParseUint(f[2], 10, 64)
		eventually(t, step, func() bool { return rc.tp.Snapshot().Counters.Orphaned >= n })
	case len(f) == 3 && f[0] == "wait":
		pt := rc.parties[f[1]]
		n, err := strconv.Atoi(f[2])
		if pt == nil || err != nil {
			t.Fatalf("step %q", step)
		}
		eventually(t, step, func() bool { return pt.count() >= n })
	case len(f) == 2 && f[0] == "close":
		rc.close(f[1])
	default:
		t.Fatalf("step %q", step)
	}
}

// close ends a client's connection and waits until its session ended
// (what the pool does at its end, it has done).
func (rc *routingCase) close(name string) {
	c := rc.clients[name]
	if c == nil {
		return
	}
	delete(rc.clients, name)
	sessions := func() int { return len(rc.tp.Snapshot().Sessions) }
	before := sessions()
	c.close()
	eventually(rc.t, name+"'s session to end", func() bool { return sessions() < before })
	<-rc.parties[name].eof
}

// apply makes cfg the pool's config.
func (rc *routingCase) apply(cfg pool.ServerConfig) {
	rc.t.Helper()
	if err := rc.tp.Apply([]pool.ServerConfig{cfg}); err != nil {
		rc.t.Fatalf("apply: %v", err)
	}
}

// finish closes the clients still open, in order, then passes a barrier
// request through the child's queue, so that everything queued for the
// child before it has reached the child, then stops the pool. The
// barrier runs under the default request timeout: it is the test's, not
// the case's.
func (rc *routingCase) finish() {
	t := rc.t
	for _, name := range rc.order {
		rc.close(name)
	}
	rc.apply(rc.cfg)
	b := rc.tp.dial(t, "srv")
	b.initialize("barrier", "")
	b.send(`{"jsonrpc":"2.0","id":"barrier","method":"test/barrier"}`)
	if m, _ := b.recvID(`"barrier"`); m.Error != nil {
		t.Fatalf("barrier: %s", m.raw)
	}
	select {
	case <-rc.barrier:
	case <-time.After(15 * time.Second):
		t.Fatal("the barrier did not reach the child")
	}
	b.close()
	eventually(t, "the barrier's session to end", func() bool { return len(rc.tp.Snapshot().Sessions) == 0 })
}

// counters are the pool's counters that are not zero, one a line, and
// then, once the pool stopped and the child's input ended, nothing more.
func (rc *routingCase) counters() string {
	c := rc.tp.Snapshot().Counters
	rc.tp.Close()
	select {
	case <-rc.child.eof:
	case <-time.After(15 * time.Second):
		rc.t.Error("the child's input did not end with the pool")
	}
	var b strings.Builder
	for _, kv := range []struct {
		name string
		n    uint64
	}{{"requests", c.Requests - 1}, {"errors", c.Errors}, {"timeouts", c.Timeouts}, {"cancelled", c.Cancelled},
		{"orphaned", c.Orphaned}, {"evicted", c.Evicted}, {"parseErrors", c.ParseErrors}} {
		if kv.n != 0 {
			fmt.Fprintf(&b, "%s %d\n", kv.name, kv.n)
		}
	}
	return b.String()
}
