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
}

type runCmd struct {
	Switchboard string        `name:"switchboard" type:"path" help:"The switchboard binary to measure (default: the one next to this program)."`
	Sessions    int           `default:"64" help:"Concurrent sessions in the throughput runs."`
	InFlight    int           `name:"inflight" default:"8" help:"Requests each session keeps in flight."`
	Duration    time.Duration `default:"4s" help:"Measured time per run."`
	Warmup      time.Duration `default:"1s" help:"Unmeasured time before each run."`
	Idle        int           `default:"1000" help:"Idle sessions for the memory-per-session check (0 skips it)."`
	JSON        bool          `name:"json" help:"Print the report as JSON."`
	Profile     string        `name:"cpuprofile" type:"path" help:"Write the pool's CPU profile (history on) to this file, for go tool pprof."`

	HistoryRuns int           `name:"history-runs" default:"5" help:"Alternating history on/off runs at 1x1 and at sessions x inflight, for the medians (0 skips them)."`
	Soak        time.Duration `default:"60s" help:"A sessions x inflight run on a pool without a history row cap: records dropped, bytes of database per request (0 skips it)."`
	CapRows     int           `name:"cap-rows" default:"20000" help:"history.maxRows of a pool loaded at sessions x inflight while its row count is sampled (0 skips it)."`
	CapLoad     time.Duration `name:"cap-load" default:"15s" help:"How long the row-cap pool is loaded."`
	HistoryOnly bool          `name:"history-only" help:"Run only the history measurements."`
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
	return loadgen.Bench(ctx, loadgen.BenchOptions{Switchboard: sb, Fake: []string{self, "fake-server"},
		Sessions: c.Sessions, InFlight: c.InFlight, Duration: c.Duration, Warmup: c.Warmup, Idle: c.Idle,
		JSON: c.JSON, CPUProfile: c.Profile, HistoryOnly: c.HistoryOnly,
		History: loadgen.HistoryOptions{Runs: c.HistoryRuns, Soak: c.Soak, CapRows: c.CapRows, CapLoad: c.CapLoad}}, os.Stdout)
}

type fakeServerCmd struct {
	Args []string `arg:"" optional:"" passthrough:"" help:"The fake server's flags (-h lists them)."`
}

func (c *fakeServerCmd) Run() error {
	fake.Main(c.Args)
	return nil
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
