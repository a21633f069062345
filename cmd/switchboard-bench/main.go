// Command switchboard-bench is Switchboard's load tool: the fake MCP
// server driven over a direct pipe and through a fresh pool of the
// switchboard binary next to it (or --switchboard), in one run, so that
// every figure is a ratio measured on the same machine at the same time.
// It is a program of its own so that the product binary links no test
// server; `make bench` builds and runs it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/switchboard-mcp/switchboard/app/loadgen"
	"github.com/switchboard-mcp/switchboard/pool/mcptest/fake"
)

type cli struct {
	Run        runCmd        `cmd:"" default:"withargs" help:"Measure (the default)."`
	FakeServer fakeServerCmd `cmd:"" name:"fake-server" hidden:"" help:"The fake MCP server the load drives (stdio)."`
	PipeEcho   pipeEchoCmd   `cmd:"" name:"pipe-echo" hidden:"" help:"Echo every line of stdin to stdout (the floor's far end)."`
	Relay      relayCmd      `cmd:"" name:"relay" hidden:"" help:"Relay stdin and stdout to a command, one goroutine per direction (the floor's middle)."`
	HTTPRelay  httpRelayCmd  `cmd:"" name:"http-relay" hidden:"" help:"Serve MCP over HTTP on a loopback port by relaying to a command, and print the URL (the HTTP comparison's floor)."`
}

type runCmd struct {
	Switchboard string        `name:"switchboard" type:"path" help:"The switchboard binary to measure (default: the one next to this program)."`
	Sessions    int           `default:"64" help:"Concurrent sessions in the throughput runs."`
	InFlight    int           `name:"inflight" default:"8" help:"Requests each session keeps in flight."`
	Duration    time.Duration `default:"4s" help:"Measured time per throughput run."`
	Warmup      time.Duration `default:"1s" help:"Unmeasured time before each throughput run."`
	LatencyOnly bool          `name:"latency-only" help:"Measure only latency at 1 session x 1 in flight: the floor (pipe, relay), direct, and the pool with history on and off."`
	Rounds      int           `default:"5" help:"Alternating rounds of the latency paths; figures are medians over rounds."`
	LatencyDur  time.Duration `name:"latency-duration" default:"1s" help:"Measured time per latency path and round."`
	LatencyWarm time.Duration `name:"latency-warmup" default:"200ms" help:"Unmeasured time before each latency run."`
	Idle        int           `default:"1000" help:"Idle sessions for the memory-per-session check (0 skips it)."`
	JSON        bool          `name:"json" help:"Print the report as JSON."`
	Profile     string        `name:"cpuprofile" type:"path" help:"Write the pool's CPU profile (history on) to this file, for go tool pprof."`
	Trace       string        `name:"trace" type:"path" help:"Write the pool's execution trace (history on) to this file, and the history-off pool's to FILE.history-off, for go tool trace."`
	PoolEnv     []string      `name:"pool-env" sep:"none" placeholder:"KEY=VALUE" help:"Add to the pools' environment (and their children's), e.g. GOMAXPROCS=1; repeatable."`
	HTTPOnly    bool          `name:"http-only" help:"Only the HTTP front door against the in-process HTTP server, both eras."`
	HTTPRounds  int           `name:"http-rounds" default:"5" help:"Alternating rounds of the HTTP comparison; its ratios are medians over rounds."`
	TputRounds  int           `name:"throughput-rounds" default:"3" help:"Rounds of direct, connect and http at sessions x inflight; the ratios to direct are medians over rounds."`
	HistoryRuns int           `name:"history-runs" default:"5" help:"Alternating history on/off runs at 1x1 and at sessions x inflight, for the medians (0 skips them)."`
	Soak        time.Duration `default:"60s" help:"A sessions x inflight run on a pool without a history row cap: records dropped, bytes of database per request (0 skips it)."`
	CapRows     int           `name:"cap-rows" default:"20000" help:"history.maxRows of a pool loaded at sessions x inflight while its row count is sampled (0 skips it)."`
	CapLoad     time.Duration `name:"cap-load" default:"15s" help:"How long the row-cap pool is loaded."`
	HistoryOnly bool          `name:"history-only" help:"Run only the history measurements."`
	StallRounds int           `name:"stalled-rounds" default:"3" help:"Alternating rounds of 12 sessions at 1 in flight alone and beside 4 that ask for large results and stop reading, for the medians (0 skips them)."`
	StallCalls  int           `name:"stalled-calls" default:"8" help:"Calls each stalled session makes, paced over warmup and duration."`
	StallBytes  int           `name:"stalled-bytes" default:"1048576" help:"Bytes of each stalled session's results."`
	StalledOnly bool          `name:"stalled-only" help:"Run only the stalled-readers measurement."`
}

func (c *runCmd) Run(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	sb := c.Switchboard
	if sb == "" {
		sb = filepath.Join(filepath.Dir(self), "switchboard")
	}
	if _, err := os.Stat(sb); err != nil {
		return fmt.Errorf("the switchboard binary to measure: %w (build it with make build, or give --switchboard)", err)
	}
	bench := loadgen.Bench
	if c.HTTPOnly {
		bench = loadgen.BenchHTTP
	}
	// "--": the fake's flags (the bench adds -inline-echo for the
	// latency paths) are not this program's.
	return bench(ctx, loadgen.BenchOptions{Switchboard: sb, Fake: []string{self, "fake-server", "--"},
		PipeEcho: []string{self, "pipe-echo"}, Relay: []string{self, "relay"}, HTTPRelay: []string{self, "http-relay"},
		Sessions: c.Sessions, InFlight: c.InFlight, Duration: c.Duration, Warmup: c.Warmup,
		Rounds: c.Rounds, LatencyDuration: c.LatencyDur, LatencyWarmup: c.LatencyWarm, LatencyOnly: c.LatencyOnly,
		HTTPRounds: c.HTTPRounds, ThroughputRounds: c.TputRounds, Idle: c.Idle, JSON: c.JSON, CPUProfile: c.Profile, Trace: c.Trace, PoolEnv: c.PoolEnv, HistoryOnly: c.HistoryOnly,
		Stalled:     loadgen.StalledOptions{Rounds: c.StallRounds, Stalled: 4, Others: 12, Calls: c.StallCalls, ResultBytes: c.StallBytes},
		StalledOnly: c.StalledOnly,
		History:     loadgen.HistoryOptions{Runs: c.HistoryRuns, Soak: c.Soak, CapRows: c.CapRows, CapLoad: c.CapLoad}}, os.Stdout)
}

type pipeEchoCmd struct{}

func (pipeEchoCmd) Run() error { return loadgen.PipeEcho(os.Stdin, os.Stdout) }

type relayCmd struct {
	Argv []string `arg:"" passthrough:"" help:"The command to relay to."`
}

func (c *relayCmd) Run() error { return loadgen.Relay(withoutDashes(c.Argv), os.Stdin, os.Stdout) }

type httpRelayCmd struct {
	Argv []string `arg:"" passthrough:"" help:"The command to relay to."`
}

func (c *httpRelayCmd) Run(ctx context.Context) error {
	return loadgen.RunHTTPRelay(ctx, withoutDashes(c.Argv), os.Getenv(loadgen.RelayTokenEnv), os.Stdout)
}

type fakeServerCmd struct {
	Args []string `arg:"" optional:"" passthrough:"" help:"The fake server's flags (-h lists them)."`
}

func (c *fakeServerCmd) Run() error {
	fake.Main(withoutDashes(c.Args))
	return nil
}

// withoutDashes drops the "--" that keeps a passed-through command's
// flags from being read as this program's.
func withoutDashes(args []string) []string {
	if len(args) > 0 && args[0] == "--" {
		return args[1:]
	}
	return args
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var c cli
	k := kong.Parse(&c, kong.Name("switchboard-bench"),
		kong.Description("Load-test a Switchboard pool against a direct pipe to the same fake MCP server, in one run."),
		kong.UsageOnError(), kong.BindTo(ctx, (*context.Context)(nil)))
	if err := k.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "switchboard-bench: %v\n", err)
		os.Exit(1)
	}
}
