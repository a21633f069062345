package loadgen

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/switchboard-mcp/switchboard/app/localsock"
)

// BenchOptions is `switchboard-bench`.
type BenchOptions struct {
	// Switchboard is the product binary whose pool is measured, and Fake
	// the command line of the fake MCP server both the pool and the
	// direct pipe drive. The latency paths run it with -inline-echo
	// appended (echo answered on its reading goroutine: no hand-off
	// inside the server); the throughput runs as it is.
	Switchboard string
	Fake        []string
	// PipeEcho is the command line of a process that echoes lines (the
	// floor), Relay one that relays to the command line appended to it.
	// Either may be empty: its latency path is then left out.
	PipeEcho []string
	Relay    []string
	// HTTPRelay is the command line of a process that serves MCP over
	// HTTP by relaying to the command line appended to it (RunHTTPRelay):
	// the HTTP comparison's floor. Empty: the comparison leaves it out.
	HTTPRelay []string
	Sessions  int           // concurrent sessions in the throughput runs
	InFlight  int           // requests each session keeps in flight
	Warmup    time.Duration // per throughput run, before measuring
	Duration  time.Duration // measured, per throughput run
	// Rounds of the latency paths, each path LatencyDuration long after
	// LatencyWarmup.
	Rounds          int
	LatencyDuration time.Duration
	LatencyWarmup   time.Duration
	// HTTPRounds of the HTTP comparison, alternating the in-process
	// server and the pool; its ratios are medians over rounds.
	HTTPRounds int
	// ThroughputRounds of direct, connect and http at Sessions x
	// InFlight; the ratios to direct are medians over rounds.
	ThroughputRounds int
	// LatencyOnly stops after the latency section.
	LatencyOnly bool
	Idle        int // idle sessions for the memory check; 0 skips it
	JSON        bool
	// CPUProfile and Trace, if set, are where the pool with history on
	// writes its CPU profile and its execution trace (SWITCHBOARD_CPUPROFILE
	// and SWITCHBOARD_TRACE of its serve); the pool with history off
	// writes its trace to Trace + ".history-off".
	CPUProfile string
	Trace      string
	// PoolEnv is added to both pools' environment (and so their
	// children's): GOMAXPROCS, GODEBUG and the like, for experiments.
	PoolEnv []string
	// History selects the history measurements.
	History HistoryOptions
	// HistoryOnly skips everything else.
	HistoryOnly bool
	// Stalled selects the stalled-readers measurement; StalledOnly skips
	// everything else.
	Stalled     StalledOptions
	StalledOnly bool
}

// BenchReport is everything one `switchboard bench` run measured, against
// the in-process fake MCP server, in the same run.
type BenchReport struct {
	Machine string `json:"machine"`
	// Latency: one session, one request in flight, every path in
	// alternating rounds, with the floor of the same machine.
	Latency LatencyReport `json:"latency"`
	// AddedP50Us and AddedP99Us are the pool's latency (through
	// `switchboard connect`) less the direct pipe's, in the same round;
	// the median over rounds.
	AddedP50Us float64 `json:"addedP50Us"`
	AddedP99Us float64 `json:"addedP99Us"`
	// PipeP50Us and PipeP99Us are the floor: a pipe round trip between
	// two Go processes, in the same run.
	PipeP50Us float64 `json:"pipeP50Us"`
	PipeP99Us float64 `json:"pipeP99Us"`
	// Throughput: Sessions x InFlight, colliding ids.
	Throughput []ModeResult `json:"throughput,omitempty"`
	// ConnectRatio and HTTPRatio are the pool's requests/s over the direct
	// pipe's (64 sessions each on its own child): medians over rounds,
	// each round's in ConnectRatios and HTTPRatios. Throughput holds the
	// rows of the round whose connect ratio is the median.
	ConnectRatio  float64   `json:"connectRatio,omitempty"`
	HTTPRatio     float64   `json:"httpRatio,omitempty"`
	ConnectRatios []float64 `json:"connectRatios,omitempty"`
	HTTPRatios    []float64 `json:"httpRatios,omitempty"`
	// ConnectCPURatio and HTTPCPURatio are the CPU time a request cost
	// every process measured (Result.CPUUsPerRequest), the pool's path
	// over the direct pipe's: medians over the same rounds, each round's
	// in ConnectCPURatios and HTTPCPURatios. Below 1, the pool's path
	// costs the machine less per request than 64 children of its own.
	ConnectCPURatio  float64   `json:"connectCpuRatio,omitempty"`
	HTTPCPURatio     float64   `json:"httpCpuRatio,omitempty"`
	ConnectCPURatios []float64 `json:"connectCpuRatios,omitempty"`
	HTTPCPURatios    []float64 `json:"httpCpuRatios,omitempty"`
	// HistoryOffP99Us is the connect run's p99 with history recording
	// off; the connect row above has it on (the default).
	HistoryOffP99Us float64 `json:"historyOffP99Us,omitempty"`
	// HistoryOffLatencyP99Us is the same for one session, one in flight
	// (compare with the connect latency row).
	HistoryOffLatencyP99Us float64 `json:"historyOffLatencyP99Us"`
	// History is the history measurements: on against off, no drops, the
	// row cap, bytes per request.
	History *HistoryReport `json:"history,omitempty"`
	// ShimPSSBytes is one `switchboard connect` process's proportional set
	// size, ShimIdleCPU its CPU time over IdleWindow with nothing to relay.
	ShimPSSBytes uint64        `json:"shimPssBytes,omitempty"`
	ShimIdleCPU  time.Duration `json:"shimIdleCpuNs,omitempty"`
	// ShimsPSSBytes is the mean proportional set size of Shims idle
	// shims running at once, as a client with that many sessions runs
	// them: they share the binary's pages, which PSS divides among them.
	Shims         int           `json:"shims,omitempty"`
	ShimsPSSBytes uint64        `json:"shimsPssBytes,omitempty"`
	IdleWindow    time.Duration `json:"idleWindowNs,omitempty"`
	// IdleSessions sessions held open with nothing in flight cost the pool
	// IdleBytesPerSession each (RSS growth / sessions).
	IdleSessions        int     `json:"idleSessions,omitempty"`
	IdleBytesPerSession float64 `json:"idleBytesPerSession,omitempty"`
	// IdleGoroutinesPerSession is the growth of the pool's goroutine
	// count (status --json) per idle session.
	IdleGoroutinesPerSession float64  `json:"idleGoroutinesPerSession,omitempty"`
	Notes                    []string `json:"notes,omitempty"`
	// HTTP is the front door against an in-process HTTP server answering
	// the same tool, both eras (inproc.go).
	HTTP *HTTPComparison `json:"httpVsInProcess,omitempty"`
	// HTTPHistoryOff is the same on a pool with history off
	// (--http-only).
	HTTPHistoryOff *HTTPComparison `json:"httpVsInProcessHistoryOff,omitempty"`
	// Stalled is the others' throughput and p99 beside sessions that stop
	// reading while asking for large results, against the same others
	// alone.
	Stalled *StalledReport `json:"stalled,omitempty"`
}

// ModeResult is one throughput run and, for the pool's modes, what the
// pool process spent on it.
type ModeResult struct {
	Result
	PoolCPUSeconds float64 `json:"poolCpuSeconds,omitempty"`
	PoolRSSBytes   uint64  `json:"poolRssBytes,omitempty"`
	// PoolSyscallsPerRequest is the pool's read and write system calls
	// (ProcStat.Syscalls) per answer, warm-up included as in
	// PoolCPUSeconds.
	PoolSyscallsPerRequest float64 `json:"poolSyscallsPerRequest,omitempty"`
}

// poolCell is the throughput tables' pool column: what the pool process
// spent on a run.
func poolCell(x ModeResult) string {
	if x.PoolRSSBytes == 0 {
		return ""
	}
	return fmt.Sprintf("cpu %.2fs, %.2f syscalls/req, rss %.1f MiB", x.PoolCPUSeconds, x.PoolSyscallsPerRequest, float64(x.PoolRSSBytes)/(1<<20))
}

// Bench runs the load tool: the fake MCP server driven directly over its
// pipe and through a freshly started pool (`switchboard serve` in a
// private SWITCHBOARD_HOME, reached through `switchboard connect`), in
// the same run, and writes a table (or JSON) to out.
func Bench(ctx context.Context, o BenchOptions, out io.Writer) error {
	self, fake := o.Switchboard, o.Fake
	if self == "" || len(fake) == 0 {
		return errors.New("bench: which switchboard and which fake server?")
	}
	r := BenchReport{Machine: machine()}
	if raceBuilt(self) {
		r.Notes = append(r.Notes, self+" was built with -race: its figures are not the product's (build it without, e.g. GOFLAGS= make build)")
	}
	if !o.HistoryOnly && !o.StalledOnly {
		if err := benchConnect(ctx, o, &r); err != nil {
			return err
		}
	}
	if !o.LatencyOnly && !o.HistoryOnly && o.Stalled.Rounds > 0 {
		// Sessions that stop reading: the others must not slow down.
		s, err := benchStalled(ctx, o)
		if err != nil {
			return err
		}
		r.Stalled = s
	}
	if !o.LatencyOnly && !o.StalledOnly {
		// History: on against off, and whether the database keeps up.
		h, err := benchHistory(ctx, o)
		if err != nil {
			return err
		}
		r.History = h
	}
	return writeReport(out, o, r)
}

// benchConnect measures latency, throughput, the shim and idle sessions,
// on a pool with history on (the default) and, for latency and throughput,
// on one with it off.
func benchConnect(ctx context.Context, o BenchOptions, r *BenchReport) error {
	self, fake := o.Switchboard, o.Fake
	inline := append(slices.Clone(fake), "-inline-echo")
	direct := ProcessOpener(fake, nil, nil)
	many := Config{Sessions: o.Sessions, InFlight: o.InFlight, Warmup: o.Warmup, Duration: o.Duration}

	// Both pools run through the latency rounds; history is on by
	// default, so the pool with it off is the variant.
	quietTrace := ""
	if o.Trace != "" {
		quietTrace = o.Trace + ".history-off"
	}
	quiet, err := startBenchPool(ctx, self, fake, historyOff, false, poolEnv(o.PoolEnv, "", quietTrace))
	if err != nil {
		return err
	}
	defer quiet.stop()
	pool, err := startBenchPool(ctx, self, fake, nil, !o.LatencyOnly, poolEnv(o.PoolEnv, o.CPUProfile, o.Trace))
	if err != nil {
		return err
	}
	defer pool.stop()

	// Latency: one session, one request at a time, every path per round.
	var paths []latencyPath
	if len(o.PipeEcho) > 0 {
		paths = append(paths, latencyPath{mode: ModePipe, cfg: LatencyConfig{Raw: true}, open: ProcessOpener(o.PipeEcho, nil, nil)})
		if len(o.Relay) > 0 {
			relay := append(slices.Clone(o.Relay), o.PipeEcho...)
			paths = append(paths, latencyPath{mode: ModeRelay, cfg: LatencyConfig{Raw: true}, open: ProcessOpener(relay, nil, nil)})
		}
	}
	paths = append(paths,
		latencyPath{mode: ModeDirect, open: ProcessOpener(inline, nil, nil)},
		latencyPath{mode: ModeConnect, cfg: LatencyConfig{Watch: []int{pool.cmd.Process.Pid}}, open: pool.connect(serverInline, nil)},
		latencyPath{mode: ModeConnectOff, cfg: LatencyConfig{Watch: []int{quiet.cmd.Process.Pid}}, open: quiet.connect(serverInline, nil)})
	rounds := max(o.Rounds, 1)
	r.Latency, err = runLatency(ctx, paths, LatencyConfig{Warmup: o.LatencyWarmup, Duration: o.LatencyDuration}, rounds)
	if err != nil {
		return err
	}
	if a, ok := r.Latency.added(ModeConnect); ok {
		r.AddedP50Us, r.AddedP99Us = a.P50Us, a.P99Us
	}
	if p, ok := r.Latency.row(ModePipe); ok {
		r.PipeP50Us, r.PipeP99Us = p.P50, p.P99
	}
	if off, ok := r.Latency.row(ModeConnectOff); ok {
		r.HistoryOffLatencyP99Us = off.P99
	}
	if o.LatencyOnly {
		return nil
	}

	// History off at N x K, then that pool is done.
	off, err := runMode(ctx, "connect (history off)", quiet.watched(many), quiet.connect(serverFake, nil))
	if err != nil {
		return err
	}
	quiet.stop()
	r.HistoryOffP99Us = off.P99

	// Throughput: N x K with colliding ids, in rounds of direct, connect
	// and http back to back (one run of each moved by a third from run to
	// run on a small VM); the ratios are medians over rounds.
	var tput []throughputRound
	for range max(o.ThroughputRounds, 1) {
		td, err := runMode(ctx, "direct", many, direct)
		if err != nil {
			return err
		}
		tc, err := pool.measure(func() (Result, error) {
			return runMode(ctx, "connect", pool.watched(many), pool.connect(serverFake, nil))
		})
		if err != nil {
			return err
		}
		th, err := pool.measure(func() (Result, error) {
			return runMode(ctx, "http", pool.watched(many), HTTPOpener(pool.url, pool.token))
		})
		if err != nil {
			return err
		}
		tput = append(tput, throughputRound{rows: []ModeResult{{Result: td}, tc, th},
			connect: ratioOf(tc.Result, td), http: ratioOf(th.Result, td)})
		r.ConnectCPURatios = append(r.ConnectCPURatios, cpuRatioOf(tc.Result, td))
		r.HTTPCPURatios = append(r.HTTPCPURatios, cpuRatioOf(th.Result, td))
	}
	median := medianBy(tput, func(x throughputRound) float64 { return x.connect })
	r.Throughput, r.ConnectRatio = median.rows, median.connect
	for _, x := range tput {
		r.ConnectRatios, r.HTTPRatios = append(r.ConnectRatios, x.connect), append(r.HTTPRatios, x.http)
	}
	r.HTTPRatio = medianBy(r.HTTPRatios, identity)
	r.ConnectCPURatio, r.HTTPCPURatio = medianBy(r.ConnectCPURatios, identity), medianBy(r.HTTPCPURatios, identity)
	if r.HTTP, err = pool.compareHTTP(ctx, many, o.HTTPRounds, httpRelayArgv(o)); err != nil {
		return err
	}

	// One shim, alone and idle: its memory and CPU.
	r.IdleWindow = 2 * time.Second
	if err := pool.idleShim(ctx, r); err != nil {
		r.Notes = append(r.Notes, "shim: "+err.Error())
	}

	// Idle sessions: the pool's memory per session.
	if o.Idle > 0 {
		per, goroutines, err := pool.idleSessions(ctx, o.Idle)
		if err != nil {
			r.Notes = append(r.Notes, "idle sessions: "+err.Error())
		} else {
			r.IdleSessions, r.IdleBytesPerSession, r.IdleGoroutinesPerSession = o.Idle, per, goroutines
		}
	}
	pool.stop()
	return nil
}

// writeReport writes r as JSON or as the table.
func writeReport(out io.Writer, o BenchOptions, r BenchReport) error {
	if o.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	writeBenchTable(out, o, r)
	return nil
}

func runMode(ctx context.Context, mode string, cfg Config, open Opener) (Result, error) {
	res, err := Run(ctx, cfg, open)
	if err != nil {
		return res, fmt.Errorf("bench %s: %w", mode, err)
	}
	res.Mode = mode
	return res, nil
}

// benchPool is a `switchboard serve` the bench started, with its own home.
type benchPool struct {
	self, home string
	url        string // the HTTP front door's URL for the fake server
	inlineURL  string // and for the fake that answers echo inline (compareHTTP)
	token      string // its bearer token
	cmd        *exec.Cmd
	done       chan error
	once       sync.Once // ends the process
	cleared    sync.Once // removes the home, unless kept
	// kept is set when a run on this pool left a request unanswered or
	// misrouted: stop then leaves its home, with the pool's log and
	// history, for the reader to find out why.
	kept   atomic.Bool
	hangs  atomic.Int32 // runs inspectHang looked at
	stderr *tailBuffer  // the end of the pool's log
}

// poolEnv is a bench pool's environment: base, and where it writes its CPU
// profile and execution trace when those are set.
func poolEnv(base []string, profile, trace string) []string {
	env := slices.Clone(base)
	if profile != "" {
		env = append(env, "SWITCHBOARD_CPUPROFILE="+profile)
	}
	if trace != "" {
		env = append(env, "SWITCHBOARD_TRACE="+trace)
	}
	return env
}

// historyOff is the config's "history" object that turns recording off.
var historyOff = map[string]any{"disabled": true}

// startBenchPool starts a pool in a home of its own whose config's
// "history" object is history (nil: the defaults, recording on), with the
// HTTP front door on a free loopback port when withHTTP is set.
func startBenchPool(ctx context.Context, self string, fake []string, history map[string]any, withHTTP bool, env []string) (*benchPool, error) {
	// A short path: Unix socket addresses hold about 100 bytes.
	home, err := os.MkdirTemp("", "sbbench")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	inline := append(slices.Clone(fake[1:]), "-inline-echo")
	cfg := map[string]any{"mcpServers": map[string]any{
		serverFake:   map[string]any{"command": fake[0], "args": fake[1:]},
		serverInline: map[string]any{"command": fake[0], "args": inline},
	}}
	if history != nil {
		cfg["history"] = history
	}
	// The pool measured is the binary the bench started: one built anew
	// meanwhile (in the same place) must not upgrade it in the middle of
	// a run.
	cfg["autostart"] = map[string]any{"followInstall": false}
	data, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(home, "config.json"), data, 0o600); err != nil {
		os.RemoveAll(home)
		return nil, fmt.Errorf("bench: %w", err)
	}
	p := &benchPool{self: self, home: home, done: make(chan error, 1)}
	args := []string{"serve"}
	if withHTTP {
		addr, err := freeLoopbackAddr()
		if err != nil {
			os.RemoveAll(home)
			return nil, fmt.Errorf("bench: %w", err)
		}
		p.url = "http://" + addr + "/mcp/" + serverFake
		p.inlineURL = "http://" + addr + "/mcp/" + serverInline
		args = append(args, "--http", addr)
	}
	p.cmd = exec.CommandContext(ctx, self, args...)
	p.cmd.Env = append(append(os.Environ(), "SWITCHBOARD_HOME="+home), env...)
	stderr := &tailBuffer{max: 64 << 10}
	p.cmd.Stderr, p.stderr = stderr, stderr
	if err := p.cmd.Start(); err != nil {
		os.RemoveAll(home)
		return nil, fmt.Errorf("bench: start the pool: %w", err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	sock := filepath.Join(home, "run", "pool.sock")
	for deadline := time.Now().Add(15 * time.Second); ; {
		if c, err := localsock.DialTimeout(sock, time.Second); err == nil {
			c.Close()
			if !withHTTP {
				return p, nil
			}
			tok, err := os.ReadFile(filepath.Join(home, "http-token"))
			if err != nil {
				p.stop()
				return nil, fmt.Errorf("bench: the pool's HTTP token: %w", err)
			}
			p.token = strings.TrimSpace(string(tok))
			return p, nil
		}
		select {
		case err := <-p.done:
			p.done <- err
			p.stop()
			return nil, fmt.Errorf("bench: the pool exited at start: %v\n%s", err, stderr.bytes())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, errors.New("bench: the pool did not open its socket within 15s")
		}
	}
}

// tailBuffer keeps the last max bytes written to it: a pool's stderr,
// for the error when it does not start.
type tailBuffer struct {
	max int
	mu  sync.Mutex
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.b...)
}

// freeLoopbackAddr finds a free loopback port for the pool's HTTP front
// door (the pool is a separate process, so it cannot be handed a
// listener).
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// The bench pool's two servers: the fake as it is, for the throughput
// runs, and with -inline-echo, for the latency paths.
const (
	serverFake   = "fake"
	serverInline = "fake-inline"
)

// connect opens sessions through `switchboard connect server`.
func (p *benchPool) connect(server string, pids chan<- int) Opener {
	return ProcessOpener([]string{p.self, "connect", server}, []string{"SWITCHBOARD_HOME=" + p.home}, pids)
}

// watched is cfg counting the CPU time of this pool and its children,
// and reading the pool's state if a request hangs (inspected).
func (p *benchPool) watched(cfg Config) Config {
	cfg.Watch = []int{p.cmd.Process.Pid}
	return p.inspected(cfg)
}

// inspected is cfg that, when a run leaves requests unanswered, keeps
// this pool's home and writes the pool's status and goroutine stacks
// into it while the requests still hang.
func (p *benchPool) inspected(cfg Config) Config {
	cfg.OnHang = p.inspectHang
	return cfg
}

// inspectHang writes the hung sessions as the load tool saw them, and
// `status --json` and `stacks` of the pool, to hang-N-client.json,
// hang-N-status.json and hang-N-stacks.txt in its home, and keeps the
// home.
func (p *benchPool) inspectHang(hung []HungSession) {
	p.kept.Store(true)
	n := p.hangs.Add(1)
	client, _ := json.MarshalIndent(hung, "", "  ")
	_ = os.WriteFile(filepath.Join(p.home, fmt.Sprintf("hang-%d-client.json", n)), append(client, '\n'), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, f := range []struct{ args, name string }{{"status --json", "status.json"}, {"stacks", "stacks.txt"}} {
		cmd := exec.CommandContext(ctx, p.self, strings.Fields(f.args)...)
		cmd.Env = append(os.Environ(), "SWITCHBOARD_HOME="+p.home)
		out, err := cmd.CombinedOutput()
		if err != nil {
			out = append(out, "\nswitchboard "+f.args+": "+err.Error()+"\n"...)
		}
		_ = os.WriteFile(filepath.Join(p.home, fmt.Sprintf("hang-%d-%s", n, f.name)), out, 0o600)
	}
}

// measure runs f and adds the pool process's CPU time and final RSS.
func (p *benchPool) measure(f func() (Result, error)) (ModeResult, error) {
	before := ReadProc(p.cmd.Process.Pid)
	res, err := f()
	after := ReadProc(p.cmd.Process.Pid)
	if res.Hung > 0 || res.Misrouted > 0 {
		p.kept.Store(true)
	}
	return ModeResult{Result: res, PoolCPUSeconds: (after.CPU - before.CPU).Seconds(), PoolRSSBytes: after.RSS,
		PoolSyscallsPerRequest: float64(after.Syscalls-before.Syscalls) / float64(max(res.Answered, 1))}, err
}

// benchShims is how many idle shims idleShim runs at once after the one
// alone: a client with that many sessions open.
const benchShims = 10

// idleShim opens one session, lets it sit idle, and reads its shim's
// PSS and CPU time; then it opens benchShims-1 more and reads their mean
// PSS.
func (p *benchPool) idleShim(ctx context.Context, r *BenchReport) error {
	st, err := p.pingedShim(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	pid := st.PID
	before := ReadProc(pid)
	select {
	case <-time.After(r.IdleWindow):
	case <-ctx.Done():
		return ctx.Err()
	}
	after := ReadProc(pid)
	r.ShimPSSBytes, r.ShimIdleCPU = after.PSS, after.CPU-before.CPU
	if after.PSS == 0 {
		return errors.New("no PSS reading (/proc/PID/smaps_rollup)")
	}
	pids := []int{pid}
	for range benchShims - 1 {
		st, err := p.pingedShim(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		pids = append(pids, st.PID)
	}
	var sum uint64
	for _, pid := range pids {
		sum += ReadProc(pid).PSS
	}
	r.Shims, r.ShimsPSSBytes = len(pids), sum/uint64(len(pids))
	return nil
}

// pingedShim opens a session through a shim and has one ping answered,
// so that its relay has done its work once.
func (p *benchPool) pingedShim(ctx context.Context) (*Stream, error) {
	st, err := p.connect(serverFake, nil)(ctx, 0)
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(st.W, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"); err != nil {
		st.Close()
		return nil, err
	}
	if _, err := st.R.Read(make([]byte, 4096)); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// idleSessions opens n sessions straight on the pool socket (what a shim
// does, without n processes), each initialized, and returns the pool's
// RSS growth and goroutine growth per session.
func (p *benchPool) idleSessions(ctx context.Context, n int) (bytes, goroutines float64, err error) {
	pid := p.cmd.Process.Pid
	open := func(ctx context.Context, _ int) (*Stream, error) {
		c, err := localsock.Dial(ctx, filepath.Join(p.home, "run", "pool.sock"))
		if err != nil {
			return nil, err
		}
		br := bufio.NewReader(c)
		if _, err := io.WriteString(c, `{"server":"`+serverFake+`"}`+"\n"); err != nil {
			c.Close()
			return nil, err
		}
		if _, err := br.ReadBytes('\n'); err != nil { // the welcome
			c.Close()
			return nil, err
		}
		return &Stream{W: c, R: br, Close: c.Close}, nil
	}
	gBefore, err := p.goroutines(ctx)
	if err != nil {
		return 0, 0, err
	}
	before := ReadProc(pid).RSS
	conns, err := Hold(ctx, n, open)
	if err != nil {
		return 0, 0, err
	}
	defer conns.Close()
	after := ReadProc(pid).RSS
	gAfter, err := p.goroutines(ctx)
	if err != nil {
		return 0, 0, err
	}
	return (float64(after) - float64(before)) / float64(n), float64(gAfter-gBefore) / float64(n), nil
}

// goroutines reads the pool's goroutine count from `status --json`.
func (p *benchPool) goroutines(ctx context.Context) (int, error) {
	st, err := p.status(ctx)
	return st.Goroutines, err
}

// stop ends the pool (SIGTERM, as a user would) and removes its home.
// Calls after the first do nothing.
func (p *benchPool) stop() {
	p.once.Do(p.end)
	p.cleared.Do(func() {
		if p.kept.Load() {
			log := filepath.Join(p.home, "pool-stderr.log")
			_ = os.WriteFile(log, p.stderr.bytes(), 0o600)
			fmt.Fprintf(os.Stderr, "switchboard-bench: a run on the pool in %s left requests hung or misrouted; the end of its log (%s), its history (SWITCHBOARD_HOME=%s switchboard history --json) and, for each run that hung, what the load tool saw and the pool's status and stacks at that moment (hang-N-client.json, hang-N-status.json, hang-N-stacks.txt) are kept\n", p.home, log, p.home)
			return
		}
		os.RemoveAll(p.home)
	})
}

// stopKeepingHistory ends the pool like stop, but leaves its home (and
// so its history) for the caller to read until stop; it returns the
// history database's path.
func (p *benchPool) stopKeepingHistory() string {
	p.once.Do(p.end)
	return filepath.Join(p.home, "history.db")
}

// end stops the pool process: SIGTERM, so that its history closes the
// run and flushes what is queued; SIGKILL after 30 s.
func (p *benchPool) end() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// raceBuilt reports whether the binary at path was built with the race
// detector, which makes every figure of it slower several times over.
func raceBuilt(path string) bool {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

// machine names the CPU and core count, for the report.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d cores, %s", model, runtime.NumCPU(), runtime.Version())
}

func writeBenchTable(out io.Writer, o BenchOptions, r BenchReport) {
	fmt.Fprintf(out, "machine: %s\n\n", r.Machine)
	if !o.HistoryOnly && !o.StalledOnly {
		writeConnectTable(out, o, r)
	}
	writeStalledTable(out, r.Stalled)
	if r.History != nil {
		writeHistoryTable(out, r.History)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
}

// writeConnectTable writes the latency, throughput, shim and idle-session
// sections.
func writeConnectTable(out io.Writer, o BenchOptions, r BenchReport) {
	writeLatencyTable(out, r.Latency)
	if o.LatencyOnly {
		return
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, x Result, extra string) {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%d\t%d\t%d\t%s\t\n", label, x.Requests, x.PerSecond,
			x.P50, x.P90, x.P99, x.Max, cpuCells(x), x.Misrouted, x.Hung, x.Errors, extra)
	}
	header := "mode\trequests\treq/s\tp50 µs\tp90 µs\tp99 µs\tmax µs\t" + cpuHeader + "\tmisrouted\thung\terrors\tpool\t\n"
	fmt.Fprintf(out, "throughput, %d sessions x %d in flight, colliding ids:\n", o.Sessions, o.InFlight)
	fmt.Fprint(tw, header)
	for _, x := range r.Throughput {
		row(x.Mode, x.Result, poolCell(x))
	}
	tw.Flush()
	fmt.Fprintf(out, "throughput vs direct: connect %s, http %s", spread(r.ConnectRatio, r.ConnectRatios), spread(r.HTTPRatio, r.HTTPRatios))
	if n := len(r.ConnectRatios); n > 1 {
		fmt.Fprintf(out, " (medians of %d rounds [min–max]; the rows are the median connect round's)", n)
	}
	fmt.Fprintln(out)
	if r.ConnectCPURatio > 0 {
		fmt.Fprintf(out, "CPU per request vs direct: connect %s, http %s (every process measured, the load tool's included)\n",
			timesSpread(r.ConnectCPURatio, r.ConnectCPURatios), timesSpread(r.HTTPCPURatio, r.HTTPCPURatios))
	}
	writeHTTPTable(out, o, r.HTTP, "")
	var on float64
	for _, x := range r.Throughput {
		if x.Mode == "connect" {
			on = x.P99
		}
	}
	fmt.Fprintf(out, "history on / off, p99 at %d x %d: %.0f / %.0f µs (%+.0f%%)\n", o.Sessions, o.InFlight, on, r.HistoryOffP99Us, pct(on, r.HistoryOffP99Us))
	if c, ok := r.Latency.row(ModeConnect); ok && r.HistoryOffLatencyP99Us > 0 {
		fmt.Fprintf(out, "history on / off, p99 at 1 x 1: %.0f / %.0f µs (%+.0f%%)\n", c.P99, r.HistoryOffLatencyP99Us, pct(c.P99, r.HistoryOffLatencyP99Us))
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "one connect shim: PSS %.2f MiB, CPU %v over %v idle", float64(r.ShimPSSBytes)/(1<<20), r.ShimIdleCPU, r.IdleWindow)
	if r.Shims > 0 {
		fmt.Fprintf(out, "; %d idle shims at once: PSS %.2f MiB each", r.Shims, float64(r.ShimsPSSBytes)/(1<<20))
	}
	fmt.Fprintln(out)
	if r.IdleSessions > 0 {
		fmt.Fprintf(out, "%d idle sessions: %.1f KiB of pool memory and %.2f goroutines each\n", r.IdleSessions, r.IdleBytesPerSession/1024, r.IdleGoroutinesPerSession)
	}
	fmt.Fprintln(out)
}

// pct is how much larger a is than b, in percent.
func pct(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * (a - b) / b
}

// throughputRound is one round of the throughput runs: direct, connect
// and http, and the pool's ratios to direct.
type throughputRound struct {
	rows          []ModeResult
	connect, http float64
}

// ratioOf is a's requests/s over b's, 0 when b did none.
func ratioOf(a, b Result) float64 {
	if b.PerSecond <= 0 {
		return 0
	}
	return a.PerSecond / b.PerSecond
}

// cpuRatioOf is the CPU time a request cost in a over b's, 0 when either
// was not measured.
func cpuRatioOf(a, b Result) float64 {
	if a.CPUUsPerRequest() <= 0 || b.CPUUsPerRequest() <= 0 {
		return 0
	}
	return a.CPUUsPerRequest() / b.CPUUsPerRequest()
}

func identity(x float64) float64 { return x }
