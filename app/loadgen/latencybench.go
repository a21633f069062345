package loadgen

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// The bench's latency section: every path to an echo, one session with
// one request in flight, run in alternating rounds so that a machine
// busy with something else for a while hits every path alike. Added
// latency is taken within a round (connect against the direct pipe of
// the same round), then summarised as the median and range over rounds.

// Latency targets of DESIGN.md: added by the pool at 1 x 1.
const (
	TargetAddedP50Us = 25
	TargetAddedP99Us = 150
)

// The latency paths, by mode name.
const (
	ModePipe       = "pipe"    // a Go process echoing lines: the floor
	ModeRelay      = "relay"   // the same, with a minimal Go relay process in between
	ModeDirect     = "direct"  // the fake MCP server over its own pipe
	ModeConnect    = "connect" // the fake server through the pool, via `switchboard connect`
	ModeConnectOff = "connect (history off)"
)

// latencyPath is one way to an echo, measured at 1 x 1.
type latencyPath struct {
	mode string
	cfg  LatencyConfig // Raw and Watch; the times come from the bench
	open Opener
}

// LatencyRow is one path over every round: the medians of its rounds'
// figures (requests are their sum), and the range of p50 and p99.
type LatencyRow struct {
	Result
	P50RangeUs          [2]float64 `json:"p50RangeUs"`
	P99RangeUs          [2]float64 `json:"p99RangeUs"`
	CPUPerRequestUs     float64    `json:"cpuUsPerRequest"`
	WakeupsPerRequest   float64    `json:"wakeupsPerRequest"`
	RunWaitPerRequestUs float64    `json:"runWaitUsPerRequest"`
	// PoolCPUPerRequestUs and PoolWakeupsPerRequest are the pool
	// process's own share (connect paths only).
	PoolCPUPerRequestUs   float64         `json:"poolCpuUsPerRequest,omitempty"`
	PoolWakeupsPerRequest float64         `json:"poolWakeupsPerRequest,omitempty"`
	Rounds                []LatencyResult `json:"rounds"`
}

// AddedLatency is what one path adds to another, taken within each
// round and summarised over the rounds.
type AddedLatency struct {
	Mode       string     `json:"mode"`
	Over       string     `json:"over"`
	P50Us      float64    `json:"p50Us"`
	P99Us      float64    `json:"p99Us"`
	P50RangeUs [2]float64 `json:"p50RangeUs"`
	P99RangeUs [2]float64 `json:"p99RangeUs"`
	// CPUPerRequestUs and WakeupsPerRequest are the same differences for
	// the processes behind each path.
	CPUPerRequestUs   float64 `json:"cpuUsPerRequest"`
	WakeupsPerRequest float64 `json:"wakeupsPerRequest"`
}

// LatencyReport is the latency section of a bench run.
type LatencyReport struct {
	Rounds int          `json:"rounds"`
	Rows   []LatencyRow `json:"paths"`
	// Added: relay over pipe (the floor for a process in the middle),
	// connect over direct (the pool), with history on and off.
	Added []AddedLatency `json:"added"`
	// AddedOverRelayP50 and AddedOverRelayP99 are the pool's added
	// latency over the minimal relay's, per round, median: 1 would be as
	// fast as a relay process can be.
	AddedOverRelayP50 float64 `json:"addedOverRelayP50"`
	AddedOverRelayP99 float64 `json:"addedOverRelayP99"`
}

// runLatency runs every path once per round, rotating which goes first.
func runLatency(ctx context.Context, paths []latencyPath, cfg LatencyConfig, rounds int) (LatencyReport, error) {
	rep := LatencyReport{Rounds: rounds}
	byMode := make([][]LatencyResult, len(paths))
	for r := range rounds {
		for k := range paths {
			i := (k + r) % len(paths)
			c := cfg
			c.Raw, c.Watch = paths[i].cfg.Raw, paths[i].cfg.Watch
			res, err := Latency(ctx, c, paths[i].open)
			if err != nil {
				return rep, fmt.Errorf("bench latency %s: %w", paths[i].mode, err)
			}
			res.Mode = paths[i].mode
			byMode[i] = append(byMode[i], res)
		}
	}
	index := map[string]int{}
	for i, p := range paths {
		index[p.mode] = i
		rep.Rows = append(rep.Rows, summarise(p.mode, byMode[i]))
	}
	added := func(mode, over string) ([]float64, []float64) {
		a, b := byMode[index[mode]], byMode[index[over]]
		p50, p99 := make([]float64, len(a)), make([]float64, len(a))
		for r := range a {
			p50[r], p99[r] = a[r].P50-b[r].P50, a[r].P99-b[r].P99
		}
		return p50, p99
	}
	for _, pair := range [][2]string{{ModeRelay, ModePipe}, {ModeConnect, ModeDirect}, {ModeConnectOff, ModeDirect}} {
		if _, ok := index[pair[0]]; !ok {
			continue
		}
		if _, ok := index[pair[1]]; !ok {
			continue
		}
		p50, p99 := added(pair[0], pair[1])
		a, b := rep.Rows[index[pair[0]]], rep.Rows[index[pair[1]]]
		rep.Added = append(rep.Added, AddedLatency{Mode: pair[0], Over: pair[1],
			P50Us: median(p50), P99Us: median(p99), P50RangeUs: span(p50), P99RangeUs: span(p99),
			CPUPerRequestUs: a.CPUPerRequestUs - b.CPUPerRequestUs, WakeupsPerRequest: a.WakeupsPerRequest - b.WakeupsPerRequest})
	}
	if _, ok := index[ModeRelay]; ok {
		if _, ok := index[ModeConnect]; ok {
			relay50, relay99 := added(ModeRelay, ModePipe)
			pool50, pool99 := added(ModeConnect, ModeDirect)
			r50, r99 := make([]float64, rounds), make([]float64, rounds)
			for r := range rounds {
				r50[r], r99[r] = ratio(pool50[r], relay50[r]), ratio(pool99[r], relay99[r])
			}
			rep.AddedOverRelayP50, rep.AddedOverRelayP99 = median(r50), median(r99)
		}
	}
	return rep, nil
}

// summarise makes one path's row from its rounds.
func summarise(mode string, rounds []LatencyResult) LatencyRow {
	row := LatencyRow{Result: Result{Mode: mode, Sessions: 1, InFlight: 1}, Rounds: rounds}
	col := func(f func(LatencyResult) float64) []float64 {
		v := make([]float64, len(rounds))
		for i, r := range rounds {
			v[i] = f(r)
		}
		return v
	}
	for _, r := range rounds {
		row.Requests += r.Requests
		row.Misrouted += r.Misrouted
		row.Hung += r.Hung
		row.Errors += r.Errors
	}
	p50, p99 := col(func(r LatencyResult) float64 { return r.P50 }), col(func(r LatencyResult) float64 { return r.P99 })
	row.P50, row.P99 = median(p50), median(p99)
	row.P50RangeUs, row.P99RangeUs = span(p50), span(p99)
	row.P90 = median(col(func(r LatencyResult) float64 { return r.P90 }))
	row.Max = slices.Max(col(func(r LatencyResult) float64 { return r.Max }))
	row.PerSecond = median(col(func(r LatencyResult) float64 { return r.PerSecond }))
	row.CPUPerRequestUs = median(col(func(r LatencyResult) float64 { return r.CPUPerRequestUs }))
	row.WakeupsPerRequest = median(col(func(r LatencyResult) float64 { return r.WakeupsPerRequest }))
	row.RunWaitPerRequestUs = median(col(func(r LatencyResult) float64 { return r.RunWaitPerRequestUs }))
	row.PoolCPUPerRequestUs = median(col(func(r LatencyResult) float64 { return r.WatchedCPUPerRequestUs }))
	row.PoolWakeupsPerRequest = median(col(func(r LatencyResult) float64 { return r.WatchedWakeupsPerRequest }))
	return row
}

// median of v (the mean of the middle two for an even count); 0 if empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func span(v []float64) [2]float64 {
	if len(v) == 0 {
		return [2]float64{}
	}
	return [2]float64{slices.Min(v), slices.Max(v)}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// row looks up a path's row by mode.
func (r LatencyReport) row(mode string) (LatencyRow, bool) {
	for _, x := range r.Rows {
		if x.Mode == mode {
			return x, true
		}
	}
	return LatencyRow{}, false
}

func (r LatencyReport) added(mode string) (AddedLatency, bool) {
	for _, a := range r.Added {
		if a.Mode == mode {
			return a, true
		}
	}
	return AddedLatency{}, false
}

// writeLatencyTable prints the latency section.
func writeLatencyTable(out io.Writer, r LatencyReport) {
	fmt.Fprintf(out, "latency, 1 session x 1 in flight (one goroutine writes each request and reads its answer);\n"+
		"medians of %d alternating rounds [min–max]; cpu, wake-ups and run-wait are per request, for the processes behind the client:\n", r.Rounds)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "mode\trequests\tp50 µs\t\tp90 µs\tp99 µs\t\tmax µs\tcpu µs\twake-ups\trun-wait µs\tpool: cpu µs\twake-ups\tmisrouted\thung\terrors\t\n")
	for _, x := range r.Rows {
		pool := "\t"
		if x.PoolWakeupsPerRequest > 0 {
			pool = fmt.Sprintf("%.1f\t%.1f", x.PoolCPUPerRequestUs, x.PoolWakeupsPerRequest)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t%.0f\t%.0f\t%s\t%.0f\t%.1f\t%.1f\t%.1f\t%s\t%d\t%d\t%d\t\n", x.Mode, x.Requests,
			x.P50, rangeOf(x.P50RangeUs, 1), x.P90, x.P99, rangeOf(x.P99RangeUs, 0), x.Max,
			x.CPUPerRequestUs, x.WakeupsPerRequest, x.RunWaitPerRequestUs, pool, x.Misrouted, x.Hung, x.Errors)
	}
	tw.Flush()
	for _, a := range r.Added {
		fmt.Fprintf(out, "added by %s over %s: p50 %.1f µs %s, p99 %.0f µs %s; cpu %+.1f µs, wake-ups %+.1f per request\n",
			a.Mode, a.Over, a.P50Us, rangeOf(a.P50RangeUs, 1), a.P99Us, rangeOf(a.P99RangeUs, 0), a.CPUPerRequestUs, a.WakeupsPerRequest)
	}
	if pipe, ok := r.row(ModePipe); ok {
		if a, ok := r.added(ModeConnect); ok {
			fmt.Fprintf(out, "floor: a pipe round trip between two Go processes is %.1f µs p50, %.0f µs p99; ", pipe.P50, pipe.P99)
			if r.AddedOverRelayP50 > 0 {
				fmt.Fprintf(out, "the pool adds %.1fx (p50) and %.1fx (p99) what a minimal relay process adds\n", r.AddedOverRelayP50, r.AddedOverRelayP99)
			} else {
				fmt.Fprintln(out)
			}
			fmt.Fprintf(out, "target for the pool: added p50 ≤ %d µs (%s), p99 ≤ %d µs (%s)\n",
				TargetAddedP50Us, metOrNot(a.P50Us <= TargetAddedP50Us), TargetAddedP99Us, metOrNot(a.P99Us <= TargetAddedP99Us))
		}
	}
}

func rangeOf(r [2]float64, decimals int) string {
	return fmt.Sprintf("[%.*f–%.*f]", decimals, r[0], decimals, r[1])
}

func metOrNot(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}
