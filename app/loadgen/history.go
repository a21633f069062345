package loadgen

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	_ "github.com/mattn/go-sqlite3" // the database/sql driver "sqlite3"
)

// HistoryOptions selects the history measurements of Bench: what
// recording every request costs the pool, and whether the database keeps
// up with it.
type HistoryOptions struct {
	// Runs is how many alternating pairs (history on, history off) are
	// measured at 1 x 1 and at Sessions x InFlight; 0 skips them.
	Runs int
	// Soak is the length of one Sessions x InFlight run on a fresh pool
	// whose history has no row cap: every answered request must be
	// recorded, none dropped, and the database's size per request is read
	// from it. 0 skips it.
	Soak time.Duration
	// CapRows is the history.maxRows of a fresh pool loaded at Sessions x
	// InFlight for CapLoad while its row count is sampled; 0 skips it.
	CapRows int
	CapLoad time.Duration
}

// HistoryReport is what the history measurements found.
type HistoryReport struct {
	// Shapes are the on/off pairs: at 1 x 1, then at Sessions x InFlight.
	Shapes []HistoryShape `json:"shapes,omitempty"`
	Soak   *HistorySoak   `json:"soak,omitempty"`
	Cap    *HistoryCap    `json:"cap,omitempty"`
}

// HistoryShape is one load shape measured on a pool with history on and
// on one with it off, in alternating runs (on first, then off first, ...).
type HistoryShape struct {
	Sessions int          `json:"sessions"`
	InFlight int          `json:"inFlight"`
	On       []ModeResult `json:"on"`
	Off      []ModeResult `json:"off"`
	// ThroughputRatios and P99Ratios are each pair's on / off.
	ThroughputRatios []float64 `json:"throughputRatios"`
	P99Ratios        []float64 `json:"p99Ratios"`
	// ThroughputRatio and P99Ratio are their medians.
	ThroughputRatio float64 `json:"throughputRatio"`
	P99Ratio        float64 `json:"p99Ratio"`
	// PoolCPUOnUs and PoolCPUOffUs are the medians of the pool process's
	// CPU time per answered request (warm-up included), on and off: what
	// history costs, less sensitive to a busy machine than the ratios.
	PoolCPUOnUs  float64 `json:"poolCpuOnUs"`
	PoolCPUOffUs float64 `json:"poolCpuOffUs"`
	// Misrouted, Hung and Errors add up every run of the shape.
	Misrouted uint64 `json:"misrouted"`
	Hung      uint64 `json:"hung"`
	Errors    uint64 `json:"errors"`
}

// HistorySoak is one long run with history on and no row cap.
type HistorySoak struct {
	Result
	Duration time.Duration `json:"durationNs"`
	// Result.Answered counts every answer the load got, warm-up and the
	// drain after the run included: every one is a request the pool
	// recorded.
	// Recorded is the rows of the load's calls the history holds after
	// the pool stopped.
	Recorded int64 `json:"recorded"`
	// Dropped is the pool's own count (status --json history.dropped),
	// read at the end of the run.
	Dropped uint64 `json:"dropped"`
	// DatabaseBytes is history.db and its -wal after the pool stopped;
	// BytesPerRequest is that over Recorded.
	DatabaseBytes   int64   `json:"databaseBytes"`
	BytesPerRequest float64 `json:"bytesPerRequest"`
}

// HistoryCap is a pool with a small history.maxRows under full load.
type HistoryCap struct {
	Result
	MaxRows int `json:"maxRows"`
	// MaxObservedRows is the largest row count read during the run and
	// after it (Samples reads, every 50 ms); OverCap is how far that is
	// above MaxRows, as a fraction (0.1 is 10% over).
	MaxObservedRows int64   `json:"maxObservedRows"`
	Samples         int     `json:"samples"`
	OverCap         float64 `json:"overCap"`
	DatabaseBytes   int64   `json:"databaseBytes"`
	Dropped         uint64  `json:"dropped"`
}

// benchHistory runs the history measurements.
func benchHistory(ctx context.Context, o BenchOptions) (*HistoryReport, error) {
	h := o.History
	r := &HistoryReport{}
	if h.Runs > 0 {
		profile := "" // the main pool writes it, unless there is none
		if o.HistoryOnly {
			profile = o.CPUProfile
		}
		on, err := startBenchPool(ctx, o.Switchboard, o.Fake, nil, false, poolEnv(o.PoolEnv, profile, ""))
		if err != nil {
			return nil, err
		}
		defer on.stop()
		off, err := startBenchPool(ctx, o.Switchboard, o.Fake, historyOff, false, o.PoolEnv)
		if err != nil {
			return nil, err
		}
		defer off.stop()
		for _, shape := range [][2]int{{1, 1}, {o.Sessions, o.InFlight}} {
			cfg := Config{Sessions: shape[0], InFlight: shape[1], Warmup: o.Warmup, Duration: o.Duration}
			s, err := alternate(ctx, h.Runs, cfg, on, off)
			if err != nil {
				return nil, err
			}
			r.Shapes = append(r.Shapes, s)
		}
		on.stop()
		off.stop()
	}
	if h.Soak > 0 {
		s, err := soak(ctx, o)
		if err != nil {
			return nil, err
		}
		r.Soak = s
	}
	if h.CapRows > 0 {
		c, err := rowCap(ctx, o)
		if err != nil {
			return nil, err
		}
		r.Cap = c
	}
	return r, nil
}

// alternate measures cfg runs times on each pool, alternating which goes
// first, so that a machine that gets busier or quieter over the minutes
// weighs on both alike.
func alternate(ctx context.Context, runs int, cfg Config, on, off *benchPool) (HistoryShape, error) {
	s := HistoryShape{Sessions: cfg.Sessions, InFlight: cfg.InFlight}
	for i := range runs {
		order := []*benchPool{on, off}
		if i%2 == 1 {
			order = []*benchPool{off, on}
		}
		var got [2]ModeResult
		for _, p := range order {
			mode := "history on"
			if p == off {
				mode = "history off"
			}
			res, err := p.measure(func() (Result, error) { return runMode(ctx, mode, p.inspected(cfg), p.connect(serverFake, nil)) })
			if err != nil {
				return s, err
			}
			if p == on {
				got[0] = res
			} else {
				got[1] = res
			}
		}
		s.On, s.Off = append(s.On, got[0]), append(s.Off, got[1])
		s.ThroughputRatios = append(s.ThroughputRatios, ratio(got[0].PerSecond, got[1].PerSecond))
		s.P99Ratios = append(s.P99Ratios, ratio(got[0].P99, got[1].P99))
		for _, x := range got {
			s.Misrouted, s.Hung, s.Errors = s.Misrouted+x.Misrouted, s.Hung+x.Hung, s.Errors+x.Errors
		}
	}
	s.ThroughputRatio, s.P99Ratio = median(s.ThroughputRatios), median(s.P99Ratios)
	s.PoolCPUOnUs, s.PoolCPUOffUs = median(cpuPerRequest(s.On)), median(cpuPerRequest(s.Off))
	return s, nil
}

// soak loads a fresh pool whose history has no row cap for o.History.Soak
// and counts what its history recorded and dropped.
func soak(ctx context.Context, o BenchOptions) (*HistorySoak, error) {
	p, err := startBenchPool(ctx, o.Switchboard, o.Fake, map[string]any{"maxRows": 1 << 40}, false, o.PoolEnv)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	cfg := Config{Sessions: o.Sessions, InFlight: o.InFlight, Duration: o.History.Soak}
	res, err := runMode(ctx, "history soak", p.inspected(cfg), p.connect(serverFake, nil))
	if err != nil {
		return nil, err
	}
	s := &HistorySoak{Result: res, Duration: o.History.Soak}
	st, err := p.status(ctx)
	if err != nil {
		return nil, err
	}
	s.Dropped = st.History.Dropped
	db := p.stopKeepingHistory()
	if s.Recorded, err = countCalls(ctx, db); err != nil {
		return nil, err
	}
	s.DatabaseBytes = databaseBytes(db)
	if s.Recorded > 0 {
		s.BytesPerRequest = float64(s.DatabaseBytes) / float64(s.Recorded)
	}
	return s, nil
}

// rowCap loads a fresh pool with a small history.maxRows at full load and
// samples its row count meanwhile, as a reader beside the writer (the
// dashboard and the CLI read the same way).
func rowCap(ctx context.Context, o BenchOptions) (*HistoryCap, error) {
	h := o.History
	p, err := startBenchPool(ctx, o.Switchboard, o.Fake, map[string]any{"maxRows": h.CapRows}, false, o.PoolEnv)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	c := &HistoryCap{MaxRows: h.CapRows}
	db := filepath.Join(p.home, "history.db")
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var sampleErr error
	wg.Go(func() { c.MaxObservedRows, c.Samples, sampleErr = sampleRows(sampleCtx, db) })
	res, err := runMode(ctx, "history row cap", p.inspected(Config{Sessions: o.Sessions, InFlight: o.InFlight, Duration: h.CapLoad}), p.connect(serverFake, nil))
	if err == nil {
		var st benchStatus
		if st, err = p.status(ctx); err == nil {
			c.Dropped = st.History.Dropped
		}
	}
	stopSampling()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if sampleErr != nil {
		return nil, sampleErr
	}
	c.Result = res
	p.stopKeepingHistory()
	// After the stop: the last batch and the close are in too.
	n, err := countRows(ctx, db)
	if err != nil {
		return nil, err
	}
	c.MaxObservedRows = max(c.MaxObservedRows, n)
	c.Samples++
	c.DatabaseBytes = databaseBytes(db)
	c.OverCap = float64(c.MaxObservedRows)/float64(c.MaxRows) - 1
	return c, nil
}

// sampleRows reads the row count of the history at path every 50 ms
// until ctx ends, and returns the largest.
func sampleRows(ctx context.Context, path string) (most int64, samples int, err error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return most, samples, nil
		case <-tick.C:
		}
		n, err := countRows(ctx, path)
		switch {
		case errors.Is(err, context.Canceled):
			return most, samples, nil
		case err != nil:
			return most, samples, err
		}
		most, samples = max(most, n), samples+1
	}
}

// countRows is how many requests the history at path holds: its
// requests table (or view), read-only, so that any schema version reads
// (the bench measures other builds too).
func countRows(ctx context.Context, path string) (int64, error) {
	return countWhere(ctx, path, "")
}

// countCalls is countRows without the clients' initializes the history
// holds (one that waited for its child to start is recorded): the rows
// of the load's calls.
func countCalls(ctx context.Context, path string) (int64, error) {
	return countWhere(ctx, path, ` WHERE method != 'initialize'`)
}

func countWhere(ctx context.Context, path, where string) (int64, error) {
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM requests`+where).Scan(&n); err != nil {
		return 0, fmt.Errorf("bench: count the history's requests: %w", err)
	}
	return n, nil
}

// databaseBytes is the size of the database at path with its WAL.
func databaseBytes(path string) int64 {
	var n int64
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(path + suffix); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// benchStatus is the part of `status --json` the bench reads.
type benchStatus struct {
	Goroutines int `json:"goroutines"`
	Counters   struct {
		Evicted uint64 `json:"evicted"`
	} `json:"counters"`
	History struct {
		Dropped uint64 `json:"dropped"`
	} `json:"history"`
}

// status reads the pool's `status --json`.
func (p *benchPool) status(ctx context.Context) (benchStatus, error) {
	cmd := exec.CommandContext(ctx, p.self, "status", "--json")
	cmd.Env = append(os.Environ(), "SWITCHBOARD_HOME="+p.home)
	var st benchStatus
	out, err := cmd.Output()
	if err != nil {
		return st, fmt.Errorf("bench: status: %w", err)
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return st, fmt.Errorf("bench: status: %w", err)
	}
	return st, nil
}

// cpuPerRequest is each run's pool CPU time per answered request, in µs.
func cpuPerRequest(rs []ModeResult) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = 1e6 * r.PoolCPUSeconds / float64(max(r.Answered, 1))
	}
	return out
}

func writeHistoryTable(out io.Writer, h *HistoryReport) {
	if h == nil {
		return
	}
	for _, s := range h.Shapes {
		fmt.Fprintf(out, "history on / off, %d x %d, %d alternating runs each:\n", s.Sessions, s.InFlight, len(s.On))
		for i := range s.On {
			fmt.Fprintf(out, "  run %d: req/s %.0f / %.0f (%.2f), p99 %.0f / %.0f µs (%.2f)\n", i+1,
				s.On[i].PerSecond, s.Off[i].PerSecond, s.ThroughputRatios[i], s.On[i].P99, s.Off[i].P99, s.P99Ratios[i])
		}
		fmt.Fprintf(out, "  median: throughput %.2f (range %.2f–%.2f), p99 %.2f (range %.2f–%.2f); misrouted %d, hung %d, errors %d\n",
			s.ThroughputRatio, slices.Min(s.ThroughputRatios), slices.Max(s.ThroughputRatios),
			s.P99Ratio, slices.Min(s.P99Ratios), slices.Max(s.P99Ratios), s.Misrouted, s.Hung, s.Errors)
		fmt.Fprintf(out, "  pool CPU per request, median: %.1f µs on, %.1f µs off\n", s.PoolCPUOnUs, s.PoolCPUOffUs)
	}
	if s := h.Soak; s != nil {
		fmt.Fprintf(out, "history soak, %d x %d for %v: %d answered (%.0f req/s), %d recorded, %d dropped; %.1f MiB of database, %.0f bytes per request\n",
			s.Sessions, s.InFlight, s.Duration, s.Answered, s.PerSecond, s.Recorded, s.Dropped,
			float64(s.DatabaseBytes)/(1<<20), s.BytesPerRequest)
	}
	if c := h.Cap; c != nil {
		fmt.Fprintf(out, "history row cap %d, %d x %d: %d requests answered (%.0f req/s); at most %d rows in %d reads (%+.1f%%), %.1f MiB of database, %d dropped\n",
			c.MaxRows, c.Sessions, c.InFlight, c.Answered, c.PerSecond, c.MaxObservedRows, c.Samples, 100*c.OverCap,
			float64(c.DatabaseBytes)/(1<<20), c.Dropped)
	}
}
