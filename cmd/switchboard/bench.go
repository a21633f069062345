package main

import (
	"context"
	"os"
	"time"

	"github.com/switchboard-mcp/switchboard/app"
	"github.com/switchboard-mcp/switchboard/pool/mcptest/fake"
)

type benchCmd struct {
	Sessions int           `default:"64" help:"Concurrent sessions in the throughput runs."`
	InFlight int           `name:"inflight" default:"8" help:"Requests each session keeps in flight."`
	Duration time.Duration `default:"4s" help:"Measured time per run."`
	Warmup   time.Duration `default:"1s" help:"Unmeasured time before each run."`
	Idle     int           `default:"1000" help:"Idle sessions for the memory-per-session check (0 skips it)."`
	JSON     bool          `name:"json" help:"Print the report as JSON."`
	Profile  string        `name:"cpuprofile" type:"path" help:"Write the pool's CPU profile (history on) to this file, for go tool pprof."`
}

func (c *benchCmd) Run(ctx context.Context) error {
	return app.Bench(ctx, app.BenchOptions{Sessions: c.Sessions, InFlight: c.InFlight, Duration: c.Duration,
		Warmup: c.Warmup, Idle: c.Idle, JSON: c.JSON, CPUProfile: c.Profile}, os.Stdout)
}

type fakeServerCmd struct {
	Args []string `arg:"" optional:"" passthrough:"" help:"The fake server's flags (-h lists them)."`
}

func (c *fakeServerCmd) Run() error {
	fake.Main(c.Args)
	return nil
}
