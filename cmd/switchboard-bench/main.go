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
	HTTPOnly    bool          `name:"http-only" help:"Only the HTTP front door against the in-process HTTP server, both eras."`
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
	return bench(ctx, loadgen.BenchOptions{Switchboard: sb, Fake: []string{self, "fake-server"},
		Sessions: c.Sessions, InFlight: c.InFlight, Duration: c.Duration, Warmup: c.Warmup, Idle: c.Idle,
		JSON: c.JSON, CPUProfile: c.Profile}, os.Stdout)
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
