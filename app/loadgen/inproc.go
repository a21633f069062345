package loadgen

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// The HTTP baseline. The pool's HTTP front door is measured against a
// Streamable HTTP MCP server in the load tool's own process that answers
// the fake server's echo itself: no proxy, no child, the same net/http on
// both ends. Both are driven by the same clients in the same run, in both
// eras: a 2025-06-18 client (initialize, then each request POSTed with its
// Mcp-Session-Id) and a 2026-07-28 client (each request POSTed on its own
// with its _meta and the headers that mirror it, no session). The ratio
// of the two says what the pool costs an HTTP client beyond HTTP itself.

// modernVersion is the stateless revision the 2026-07-28 client speaks.
const modernVersion = "2026-07-28"

// InProcessHTTP is the baseline server, listening on a loopback port.
type InProcessHTTP struct {
	// URL is its MCP endpoint.
	URL  string
	door baselineDoor
	srv  *http.Server
	done chan struct{}
}

// baselineDoor is what both baselines (this server and the minimal relay,
// httprelay.go) do before a request's JSON-RPC: the bearer token, DELETE
// of a session, POST only, and the legacy sessions by Mcp-Session-Id.
// It is one type so that the two check the same things.
type baselineDoor struct {
	token string // wanted as a bearer token when not empty

	mu       sync.Mutex
	sessions map[string]bool
}

func newBaselineDoor(token string) baselineDoor {
	return baselineDoor{token: token, sessions: map[string]bool{}}
}

// admit reports whether r is a POST to serve; when not, it has answered
// it (unauthorized, a session ended, another method).
func (d *baselineDoor) admit(w http.ResponseWriter, r *http.Request) bool {
	if d.token != "" {
		got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if subtle.ConstantTimeCompare([]byte(got), []byte(d.token)) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return false
		}
	}
	switch r.Method {
	case http.MethodPost:
		return true
	case http.MethodDelete:
		d.mu.Lock()
		delete(d.sessions, r.Header.Get("Mcp-Session-Id"))
		d.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
	}
	return false
}

// open starts a legacy session and names it in w's Mcp-Session-Id.
func (d *baselineDoor) open(w http.ResponseWriter) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	sid := hex.EncodeToString(b[:])
	d.mu.Lock()
	d.sessions[sid] = true
	d.mu.Unlock()
	w.Header().Set("Mcp-Session-Id", sid)
}

// known reports whether r belongs to an open legacy session; when not,
// it has answered r with 404.
func (d *baselineDoor) known(w http.ResponseWriter, r *http.Request) bool {
	d.mu.Lock()
	ok := d.sessions[r.Header.Get("Mcp-Session-Id")]
	d.mu.Unlock()
	if !ok {
		http.Error(w, "unknown session", http.StatusNotFound)
	}
	return ok
}

// modernHeaders reports whether r's headers mirror a 2026-07-28
// request's method as they must; when not, it has answered r.
func modernHeaders(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Header.Get("MCP-Protocol-Version") != modernVersion || r.Header.Get("Mcp-Method") != method {
		http.Error(w, "header mismatch", http.StatusBadRequest)
		return false
	}
	return true
}

// StartInProcessHTTP starts the baseline server. It wants token as a
// bearer token when token is not empty, as the pool does.
func StartInProcessHTTP(token string) (*InProcessHTTP, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("in-process HTTP server: %w", err)
	}
	s := &InProcessHTTP{URL: "http://" + ln.Addr().String() + "/mcp/fake", door: newBaselineDoor(token), done: make(chan struct{})}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Close stops the server and waits for it.
func (s *InProcessHTTP) Close() {
	_ = s.srv.Close()
	<-s.done
}

// inprocRequest is the part of a request the baseline reads.
type inprocRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string `json:"name"`
		Arguments struct {
			Text string `json:"text"`
		} `json:"arguments"`
		Meta map[string]json.RawMessage `json:"_meta"`
	} `json:"params"`
}

func (s *InProcessHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.door.admit(w, r) {
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req inprocRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	modern := req.Params.Meta["io.modelcontextprotocol/protocolVersion"] != nil
	switch {
	case req.ID == nil: // a notification
		w.WriteHeader(http.StatusAccepted)
		return
	case req.Method == "initialize" && !modern:
		s.door.open(w)
	case modern:
		if !modernHeaders(w, r, req.Method) {
			return
		}
	default:
		if !s.door.known(w, r) {
			return
		}
	}
	resp := map[string]any{"jsonrpc": "2.0", "id": req.ID}
	switch req.Method {
	case "initialize":
		resp["result"] = map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]any{"name": "inproc", "version": "1"}}
	case "server/discover":
		resp["result"] = map[string]any{"resultType": "complete", "supportedVersions": []string{modernVersion},
			"capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "inproc", "version": "1"}}
	case "tools/call":
		if req.Params.Name != "echo" {
			resp["error"] = map[string]any{"code": -32602, "message": "unknown tool " + req.Params.Name}
			break
		}
		text := req.Params.Arguments.Text
		result := map[string]any{"content": []map[string]any{{"type": "text", "text": text}},
			"structuredContent": map[string]any{"text": text, "requestId": req.ID}}
		if modern {
			result["resultType"] = "complete"
		}
		resp["result"] = result
	default:
		resp["error"] = map[string]any{"code": -32601, "message": "method not found: " + req.Method}
	}
	out, _ := json.Marshal(resp)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// HTTPStatelessOpener opens each session as a 2026-07-28 client of url:
// no initialize and no session; every request is POSTed on its own with
// its _meta (protocol version, capabilities, client info) and the
// headers that mirror it. The driver's initialize becomes the
// server/discover such a client starts with, and its
// notifications/initialized is not sent.
func HTTPStatelessOpener(url, token string) Opener {
	return httpOpener(url, token, func(hs *httpStream) io.Writer { return &statelessStream{hs} })
}

// statelessMeta is what each 2026-07-28 request carries in params._meta.
const statelessMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + modernVersion +
	`","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"switchboard-bench","version":"1"}}`

// statelessStream turns the driver's request lines into stateless POSTs
// (an httpStream that never has a session).
type statelessStream struct{ *httpStream }

// Write takes whole lines (the driver writes one message per call).
func (st *statelessStream) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimSpace(p), []byte("\n")) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			return 0, fmt.Errorf("stateless client: %w", err)
		}
		var body []byte
		switch {
		case m.Method == "initialize":
			m.Method = "server/discover"
			body = []byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"method":"server/discover","params":{` + statelessMeta + `}}`)
		case m.ID == nil:
			continue // notifications/initialized: a stateless client has no handshake to finish
		default:
			var ok bool
			if body, ok = withMeta(line); !ok {
				return 0, errors.New("stateless client: a request without params")
			}
		}
		method, name, handshake := m.Method, m.Params.Name, m.Method == "server/discover"
		st.wg.Go(func() {
			answer, failed := st.post(body, method, name)
			if handshake && (answer == nil || failed) {
				st.noHandshake()
				return
			}
			st.deliver(answer)
		})
	}
	return len(p), nil
}

// withMeta inserts the request's _meta at the start of its params.
func withMeta(line []byte) ([]byte, bool) {
	const key = `"params":{`
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return nil, false
	}
	at := i + len(key)
	out := make([]byte, 0, len(line)+len(statelessMeta)+1)
	out = append(out, line[:at]...)
	out = append(out, statelessMeta...)
	if line[at] != '}' {
		out = append(out, ',')
	}
	return append(out, line[at:]...), true
}

// post sends one request with the headers that mirror its _meta.
func (st *statelessStream) post(body []byte, method, name string) ([]byte, bool) {
	extra := []header{{"MCP-Protocol-Version", modernVersion}, {"Mcp-Method", method}}
	if name != "" {
		extra = append(extra, header{"Mcp-Name", name})
	}
	return st.httpStream.post(body, extra...)
}

// HTTPComparison is the pool's HTTP front door against the in-process
// server, at Sessions x InFlight, for each era, measured in one run.
type HTTPComparison struct {
	Legacy    HTTPPair `json:"legacy"`    // 2025-06-18 sessions
	Stateless HTTPPair `json:"stateless"` // 2026-07-28 stateless requests
}

// HTTPPair is one era's runs: the pool's requests/s over the in-process
// server's, per round (RoundRatios) and their median (Ratio), with the
// two runs of the round whose ratio is the median. One run of each is
// too noisy to read on a small machine: the same pair gave 59% and 116%
// on two runs.
type HTTPPair struct {
	InProcess   Result     `json:"inProcess"`
	Pool        ModeResult `json:"pool"`
	Ratio       float64    `json:"ratio"`
	RoundRatios []float64  `json:"roundRatios"`
	// CPURatio is the CPU time a request cost through the pool over the
	// in-process server's (every process measured, the load tool's
	// included, which is the in-process server's too): the median over
	// rounds, each round's in RoundCPURatios.
	CPURatio       float64   `json:"cpuRatio,omitempty"`
	RoundCPURatios []float64 `json:"roundCpuRatios,omitempty"`
	// Relay is the same clients against a minimal HTTP relay to the same
	// child (httprelay.go), in the same round: what a plain proxy with a
	// child gets here. RelayRatio is its requests/s over the in-process
	// server's, PoolVsRelay the pool's over its: medians over rounds,
	// each round's in RoundRelayRatios and RoundPoolVsRelay. Absent when
	// the bench has no relay command.
	Relay            *Result   `json:"relay,omitempty"`
	RelayRatio       float64   `json:"relayRatio,omitempty"`
	PoolVsRelay      float64   `json:"poolVsRelay,omitempty"`
	RoundRelayRatios []float64 `json:"roundRelayRatios,omitempty"`
	RoundPoolVsRelay []float64 `json:"roundPoolVsRelay,omitempty"`
}

// compareHTTP runs both eras against the in-process server and the pool,
// rounds times, alternating: each round runs each era's two back to back.
// The pool's server is the fake that answers echo on the goroutine that
// read it (-inline-echo), as the in-process server answers on the one
// that read the POST: both do the same work per call, so the ratio is
// what the pool and its pipe cost, not a goroutine per call in the fake.
//
// With relay (the command line of a relay process and of its child, the
// same fake), each round runs the clients against it too, between the
// two.
func (p *benchPool) compareHTTP(ctx context.Context, cfg Config, rounds int, relay []string) (*HTTPComparison, error) {
	base, err := StartInProcessHTTP(p.token)
	if err != nil {
		return nil, err
	}
	defer base.Close()
	var rp *relayProcess
	if len(relay) > 0 {
		if rp, err = startRelayProcess(ctx, relay, p.token); err != nil {
			return nil, err
		}
		defer rp.stop()
	}
	type era struct {
		pair   *HTTPPair
		name   string
		opener func(url, token string) Opener
		runs   []HTTPPair
	}
	var c HTTPComparison
	eras := []*era{
		{pair: &c.Legacy, name: "http", opener: HTTPOpener},
		{pair: &c.Stateless, name: "http stateless", opener: HTTPStatelessOpener},
	}
	for range max(rounds, 1) {
		for _, e := range eras {
			var run HTTPPair
			if run.InProcess, err = runMode(ctx, e.name+" (in-process server)", cfg, e.opener(base.URL, p.token)); err != nil {
				return nil, err
			}
			if rp != nil {
				relayed, err := runMode(ctx, e.name+" (minimal relay)", rp.watched(cfg), e.opener(rp.url, p.token))
				if err != nil {
					return nil, err
				}
				run.Relay = &relayed
			}
			if run.Pool, err = p.measure(func() (Result, error) {
				return runMode(ctx, e.name, p.watched(cfg), e.opener(p.inlineURL, p.token))
			}); err != nil {
				return nil, err
			}
			run.Ratio, run.CPURatio = ratioOf(run.Pool.Result, run.InProcess), cpuRatioOf(run.Pool.Result, run.InProcess)
			if run.Relay != nil {
				run.RelayRatio, run.PoolVsRelay = ratioOf(*run.Relay, run.InProcess), ratioOf(run.Pool.Result, *run.Relay)
			}
			e.runs = append(e.runs, run)
		}
	}
	for _, e := range eras {
		*e.pair = medianPair(e.runs)
	}
	return &c, nil
}

// medianPair is the round whose ratio is the median of runs' (the lower
// middle one for an even count), with every round's ratio.
func medianPair(runs []HTTPPair) HTTPPair {
	m := medianBy(runs, func(p HTTPPair) float64 { return p.Ratio })
	for _, r := range runs {
		m.RoundRatios = append(m.RoundRatios, r.Ratio)
		m.RoundCPURatios = append(m.RoundCPURatios, r.CPURatio)
	}
	m.CPURatio = medianBy(m.RoundCPURatios, identity)
	if m.Relay != nil {
		for _, r := range runs {
			m.RoundRelayRatios = append(m.RoundRelayRatios, r.RelayRatio)
			m.RoundPoolVsRelay = append(m.RoundPoolVsRelay, r.PoolVsRelay)
		}
		m.RelayRatio, m.PoolVsRelay = medianBy(m.RoundRelayRatios, identity), medianBy(m.RoundPoolVsRelay, identity)
	}
	return m
}

// BenchHTTP is the load tool's HTTP part alone (`switchboard-bench
// --http-only`): each era against the in-process server, on a fresh pool
// with history on (the default), then on one with history off, which
// shows what recording costs apart from routing.
func BenchHTTP(ctx context.Context, o BenchOptions, out io.Writer) error {
	if o.Switchboard == "" || len(o.Fake) == 0 {
		return errors.New("bench: which switchboard and which fake server?")
	}
	many := Config{Sessions: o.Sessions, InFlight: o.InFlight, Warmup: o.Warmup, Duration: o.Duration}
	r := BenchReport{Machine: machine()}
	for _, off := range []bool{false, true} {
		env := poolEnv(o.PoolEnv, o.CPUProfile, "")
		var history map[string]any
		if off {
			history = historyOff
		}
		pool, err := startBenchPool(ctx, o.Switchboard, o.Fake, history, true, env)
		if err != nil {
			return err
		}
		c, err := pool.compareHTTP(ctx, many, o.HTTPRounds, httpRelayArgv(o))
		pool.stop()
		if err != nil {
			return err
		}
		if off {
			r.HTTPHistoryOff = c
		} else {
			r.HTTP = c
		}
		o.CPUProfile = "" // the history-on pool's, as in Bench
	}
	if o.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(out, "machine: %s\n\n", r.Machine)
	writeHTTPTable(out, o, r.HTTP, "")
	writeHTTPTable(out, o, r.HTTPHistoryOff, " (history off)")
	return nil
}

// writeHTTPTable prints the comparison, one row per run.
func writeHTTPTable(out io.Writer, o BenchOptions, c *HTTPComparison, pool string) {
	if c == nil {
		return
	}
	fmt.Fprintf(out, "HTTP front door%s vs an in-process HTTP server answering the same tool, %d sessions x %d in flight:\n",
		pool, o.Sessions, o.InFlight)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "mode\trequests\treq/s\tp50 µs\tp90 µs\tp99 µs\tmax µs\t"+cpuHeader+"\tmisrouted\thung\terrors\tpool\t\n")
	var rows []ModeResult
	for _, p := range []HTTPPair{c.Legacy, c.Stateless} {
		rows = append(rows, ModeResult{Result: p.InProcess})
		if p.Relay != nil {
			rows = append(rows, ModeResult{Result: *p.Relay})
		}
		rows = append(rows, p.Pool)
	}
	for _, x := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%d\t%d\t%d\t%s\t\n", x.Mode, x.Requests, x.PerSecond,
			x.P50, x.P90, x.P99, x.Max, cpuCells(x.Result), x.Misrouted, x.Hung, x.Errors, poolCell(x))
	}
	tw.Flush()
	fmt.Fprintf(out, "HTTP through the pool vs in-process: legacy sessions %s, stateless 2026-07-28 %s",
		spread(c.Legacy.Ratio, c.Legacy.RoundRatios), spread(c.Stateless.Ratio, c.Stateless.RoundRatios))
	if n := len(c.Legacy.RoundRatios); n > 1 {
		fmt.Fprintf(out, " (medians of %d alternating rounds [min–max]; the rows are the median round's)", n)
	}
	fmt.Fprintln(out)
	if c.Legacy.Relay != nil {
		fmt.Fprintf(out, "a minimal relay to the same child vs in-process: legacy sessions %s, stateless %s; the pool vs that relay: legacy sessions %s, stateless %s\n",
			spread(c.Legacy.RelayRatio, c.Legacy.RoundRelayRatios), spread(c.Stateless.RelayRatio, c.Stateless.RoundRelayRatios),
			spread(c.Legacy.PoolVsRelay, c.Legacy.RoundPoolVsRelay), spread(c.Stateless.PoolVsRelay, c.Stateless.RoundPoolVsRelay))
	}
	if c.Legacy.CPURatio > 0 {
		fmt.Fprintf(out, "CPU per request vs in-process: legacy sessions %s, stateless %s (every process measured, the load tool's included)\n",
			timesSpread(c.Legacy.CPURatio, c.Legacy.RoundCPURatios), timesSpread(c.Stateless.CPURatio, c.Stateless.RoundCPURatios))
	}
	fmt.Fprintln(out)
}

// medianBy is the element of xs (not empty) whose key is the median, the
// lower middle one for an even count.
func medianBy[T any](xs []T, key func(T) float64) T {
	sorted := slices.SortedFunc(slices.Values(xs), func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	return sorted[(len(sorted)-1)/2]
}

// cpuHeader and cpuCells are the throughput tables' CPU columns: what a
// request cost every process measured, and the load tool's part of it.
const cpuHeader = "cpu µs/req\tload tool"

func cpuCells(x Result) string {
	if x.CPUUsPerRequest() <= 0 {
		return "\t"
	}
	return fmt.Sprintf("%.1f\t%.1f", x.CPUUsPerRequest(), x.LoadCPUUsPerRequest)
}

// timesSpread is a ratio as a factor, with the range of rounds when there
// were several.
func timesSpread(ratio float64, rounds []float64) string {
	if len(rounds) < 2 {
		return fmt.Sprintf("%.2f×", ratio)
	}
	return fmt.Sprintf("%.2f× [%.2f–%.2f]", ratio, slices.Min(rounds), slices.Max(rounds))
}

// spread is ratio as a percentage, with the range of rounds when there
// were several.
func spread(ratio float64, rounds []float64) string {
	if len(rounds) < 2 {
		return fmt.Sprintf("%.0f%%", 100*ratio)
	}
	return fmt.Sprintf("%.0f%% [%.0f–%.0f%%]", 100*ratio, 100*slices.Min(rounds), 100*slices.Max(rounds))
}
