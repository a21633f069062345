package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"
)

// StalledOptions selects the stalled-readers measurement of Bench:
// DESIGN.md's "4 of 16 sessions that stop reading while asking for large
// results (the other 12 must not slow down)". Every session goes through
// `switchboard connect` to the same server, so the stalled sessions' large
// answers come out of the same child as the others' small ones.
type StalledOptions struct {
	// Rounds is how many alternating pairs (the others alone, the others
	// beside the stalled sessions) are measured; 0 skips the measurement.
	Rounds int
	// Stalled sessions each ask Calls times for a result of ResultBytes
	// bytes (the fake server's big tool), paced over the run, and read
	// nothing until the others' run is over; Others sessions keep one
	// echo each in flight meanwhile. A third run puts as many sessions
	// asking the same beside the others, reading as they go.
	Stalled, Others    int
	Calls, ResultBytes int
}

// StalledReport is what the stalled-readers measurement found: the
// others' runs beside the stalled sessions against their runs alone, in
// alternating order (alone first, then beside first, ...).
type StalledReport struct {
	Stalled         int `json:"stalledSessions"`
	Others          int `json:"otherSessions"`
	Rounds          int `json:"rounds"`
	CallsPerStalled int `json:"callsPerStalledSession"`
	ResultBytes     int `json:"resultBytes"`
	// Alone and Beside are the others' runs, one of each per round;
	// Reading are their runs beside as many sessions asking for the same
	// results that do read them: what making and carrying the results
	// costs the others on this machine, without anything stalled.
	Alone   []ModeResult `json:"alone"`
	Beside  []ModeResult `json:"beside"`
	Reading []ModeResult `json:"besideReading"`
	// ThroughputRatios and P99Ratios are each round's beside / alone;
	// ThroughputRatio and P99Ratio their medians. ReadingThroughputRatio
	// and ReadingP99Ratio are the medians of reading / alone.
	ThroughputRatios       []float64 `json:"throughputRatios"`
	P99Ratios              []float64 `json:"p99Ratios"`
	ThroughputRatio        float64   `json:"throughputRatio"`
	P99Ratio               float64   `json:"p99Ratio"`
	ReadingThroughputRatio float64   `json:"readingThroughputRatio"`
	ReadingP99Ratio        float64   `json:"readingP99Ratio"`
	// Misrouted, Hung and Errors add up the others' runs, alone and
	// beside either.
	Misrouted uint64 `json:"misrouted"`
	Hung      uint64 `json:"hung"`
	Errors    uint64 `json:"errors"`
	// UnreadBytes is, per round, what the stalled sessions together had
	// left unread when the others' run ended: every byte they read
	// afterwards, when they read again; UnreadBytesPerSession is the
	// median over rounds, per stalled session.
	UnreadBytes           []int64 `json:"unreadBytes"`
	UnreadBytesPerSession float64 `json:"unreadBytesPerSession"`
	// StalledForeign counts answers a stalled (or reading) session read that were not
	// its own (an id it never sent, or another session's result size),
	// StalledLost its calls never answered once it read again (within
	// 30 s), StalledEnded the stalled sessions whose stream ended before
	// they had every answer (the pool evicted them, their run having
	// outlived evictSlowClientsAfter, or the 30 s ran out), and Evicted
	// the evictions the pool counted over all the runs.
	StalledForeign uint64 `json:"stalledForeign"`
	StalledLost    uint64 `json:"stalledLost"`
	StalledEnded   int    `json:"stalledEnded"`
	Evicted        uint64 `json:"evicted"`
}

// stalledDrainWait bounds how long the stalled sessions, reading again,
// wait for the rest of their answers.
const stalledDrainWait = 30 * time.Second

// benchStalled measures o.Stalled on a fresh pool with the product's
// defaults (history on, evictSlowClientsAfter 30 s).
func benchStalled(ctx context.Context, o BenchOptions) (*StalledReport, error) {
	so := o.Stalled
	p, err := startBenchPool(ctx, o.Switchboard, o.Fake, nil, false, o.PoolEnv)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	before, err := p.evictions(ctx)
	if err != nil {
		return nil, err
	}
	r := &StalledReport{Stalled: so.Stalled, Others: so.Others, Rounds: so.Rounds, CallsPerStalled: so.Calls, ResultBytes: so.ResultBytes}
	cfg := Config{Sessions: so.Others, InFlight: 1, Warmup: o.Warmup, Duration: o.Duration}
	var readingTput, readingP99 []float64
	for i := range so.Rounds {
		// Each round takes the three runs in another order, so that a
		// machine that gets busier or quieter weighs on all alike.
		var got [3]ModeResult
		for k := range 3 {
			mode := (i + k) % 3
			if got[mode], err = p.stalledMode(ctx, mode, so, cfg, r); err != nil {
				return nil, err
			}
		}
		alone, beside, reading := got[0], got[1], got[2]
		r.Alone, r.Beside, r.Reading = append(r.Alone, alone), append(r.Beside, beside), append(r.Reading, reading)
		r.ThroughputRatios = append(r.ThroughputRatios, ratio(beside.PerSecond, alone.PerSecond))
		r.P99Ratios = append(r.P99Ratios, ratio(beside.P99, alone.P99))
		readingTput, readingP99 = append(readingTput, ratio(reading.PerSecond, alone.PerSecond)), append(readingP99, ratio(reading.P99, alone.P99))
		for _, x := range got {
			r.Misrouted, r.Hung, r.Errors = r.Misrouted+x.Misrouted, r.Hung+x.Hung, r.Errors+x.Errors
		}
	}
	r.ThroughputRatio, r.P99Ratio = median(r.ThroughputRatios), median(r.P99Ratios)
	r.ReadingThroughputRatio, r.ReadingP99Ratio = median(readingTput), median(readingP99)
	unread := make([]float64, len(r.UnreadBytes))
	for i, b := range r.UnreadBytes {
		unread[i] = float64(b) / float64(max(so.Stalled, 1))
	}
	r.UnreadBytesPerSession = median(unread)
	after, err := p.evictions(ctx)
	if err != nil {
		return nil, err
	}
	r.Evicted = after - before
	if r.StalledForeign+r.StalledLost > 0 {
		p.kept.Store(true)
	}
	return r, nil
}

// evictions reads how many sessions the pool has evicted since it
// started (status --json).
func (p *benchPool) evictions(ctx context.Context) (uint64, error) {
	st, err := p.status(ctx)
	return st.Counters.Evicted, err
}

// The stalled-readers measurement's three runs of the others.
const (
	stalledAlone = iota
	stalledBeside
	stalledReading
)

// stalledMode runs the others (cfg) alone, beside stalled sessions, or
// beside sessions that ask for the same results and read them.
func (p *benchPool) stalledMode(ctx context.Context, mode int, so StalledOptions, cfg Config, r *StalledReport) (ModeResult, error) {
	if mode == stalledAlone {
		return p.measure(func() (Result, error) {
			return runMode(ctx, fmt.Sprintf("%d alone", cfg.Sessions), p.watched(cfg), p.connect(serverFake, nil))
		})
	}
	return p.besideAsking(ctx, so, cfg, r, mode == stalledReading)
}

// besideAsking runs cfg with so.Stalled sessions beside it that ask for
// large results and, unless reading, read nothing until cfg's run is
// over; then they read everything they were sent, which r counts.
func (p *benchPool) besideAsking(ctx context.Context, so StalledOptions, cfg Config, r *StalledReport, reading bool) (ModeResult, error) {
	held, err := Hold(ctx, so.Stalled, p.connect(serverFake, nil))
	if err != nil {
		return ModeResult{}, fmt.Errorf("bench stalled: %w", err)
	}
	closeHeld := sync.OnceFunc(held.Close) // Close twice would wait on an exited process
	defer closeHeld()
	stalled := make([]*stalledSession, len(held.sessions))
	askCtx, stopAsking := context.WithCancel(ctx)
	defer stopAsking()
	var asking sync.WaitGroup
	start, span := time.Now(), cfg.Warmup+cfg.Duration
	for i, s := range held.sessions {
		st := &stalledSession{s: s, size: so.ResultBytes + i, pending: map[string]bool{}}
		for k := range so.Calls {
			st.pending[requestID(k+1)] = true
		}
		stalled[i] = st
		asking.Go(func() { st.ask(askCtx, so.Calls, start, span) })
	}
	drained := make(chan struct{})
	if reading {
		go func() {
			defer close(drained)
			drainAll(stalled, span+stalledDrainWait)
		}()
	}
	label := fmt.Sprintf("%d beside %d stalled", cfg.Sessions, so.Stalled)
	if reading {
		label = fmt.Sprintf("%d beside %d reading", cfg.Sessions, so.Stalled)
	}
	res, err := p.measure(func() (Result, error) {
		return runMode(ctx, label, p.watched(cfg), p.connect(serverFake, nil))
	})
	stopAsking() // a run cut short leaves calls unsent, not a goroutine
	asking.Wait()
	if err != nil {
		closeHeld() // ends a drain waiting for calls never sent
		if reading {
			<-drained
		}
		return res, err
	}
	if reading {
		<-drained
	} else {
		drainAll(stalled, stalledDrainWait)
	}
	var unread int64
	for _, st := range stalled {
		unread += st.read
		r.StalledForeign += st.foreign
		r.StalledLost += uint64(len(st.pending) - st.unsent)
		if st.ended {
			r.StalledEnded++
		}
	}
	if !reading {
		r.UnreadBytes = append(r.UnreadBytes, unread)
	}
	return res, nil
}

// stalledSession is a session that asks for large results and does not
// read them until drain: every result it asks for is size bytes long, a
// size no other stalled session asks for, so that an answer meant for
// another shows.
type stalledSession struct {
	s       *session
	size    int
	pending map[string]bool // ids to be sent or sent, not answered yet
	read    int64           // bytes read by drain
	foreign uint64
	ended   bool // drain: the stream ended before every answer came
	unsent  int  // ask: calls it did not send, the stream having ended or the run stopped
}

// ask sends calls calls of the big tool, paced evenly over span from
// start, until ctx ends. It leaves pending to drain, which may run
// meanwhile.
func (st *stalledSession) ask(ctx context.Context, calls int, start time.Time, span time.Duration) {
	var buf []byte
	for k := range calls {
		wait := time.NewTimer(time.Until(start.Add(span * time.Duration(k) / time.Duration(calls))))
		select {
		case <-ctx.Done():
			wait.Stop()
			st.unsent = calls - k
			return
		case <-wait.C:
		}
		id := requestID(k + 1)
		buf = append(buf[:0], `{"jsonrpc":"2.0","id":`...)
		buf = append(buf, id...)
		buf = append(buf, `,"method":"tools/call","params":{"name":"big","arguments":{"bytes":`...)
		buf = strconv.AppendInt(buf, int64(st.size), 10)
		buf = append(buf, "}}}\n"...)
		if _, err := st.s.st.W.Write(buf); err != nil {
			st.unsent = calls - k // the pool let the session go
			return
		}
	}
}

// drainAll has every stalled session read until it has all its answers,
// its stream ends, or wait has passed (then its output is closed, which
// ends its read).
func drainAll(stalled []*stalledSession, wait time.Duration) []*stalledSession {
	var wg sync.WaitGroup
	for _, st := range stalled {
		done := make(chan struct{})
		wg.Go(func() {
			defer close(done)
			st.drain()
		})
		wg.Go(func() {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-done:
			case <-t.C:
				if c, ok := st.s.st.R.(io.Closer); ok {
					_ = c.Close()
				}
			}
		})
	}
	wg.Wait()
	return stalled
}

// drain reads answers until none is pending or the stream ends.
func (st *stalledSession) drain() {
	for len(st.pending) > 0 {
		line, err := st.s.r.ReadBytes('\n')
		st.read += int64(len(line))
		if err != nil {
			st.ended = true
			return
		}
		var m answer
		if err := json.Unmarshal(line, &m); err != nil {
			st.foreign++
			continue
		}
		if m.Method != "" || m.ID == nil {
			continue // a notification
		}
		if !st.pending[string(m.ID)] || m.Error != nil || len(m.Result.Content) == 0 || len(m.Result.Content[0].Text) != st.size {
			st.foreign++
			continue
		}
		delete(st.pending, string(m.ID))
	}
}

func writeStalledTable(out io.Writer, s *StalledReport) {
	if s == nil {
		return
	}
	fmt.Fprintf(out, "%d sessions at 1 in flight, alone / beside %d stalled sessions (each asking %d × %.1f MiB, reading nothing) / beside %d asking the same and reading, %d rounds in rotating order:\n",
		s.Others, s.Stalled, s.CallsPerStalled, float64(s.ResultBytes)/(1<<20), s.Stalled, len(s.Alone))
	for i := range s.Alone {
		a, b, c := s.Alone[i], s.Beside[i], s.Reading[i]
		fmt.Fprintf(out, "  round %d: req/s %.0f / %.0f (%.2f) / %.0f, p99 %.0f / %.0f (%.2f) / %.0f µs, max %.0f / %.0f / %.0f µs, cpu %.1f / %.1f / %.1f µs/req; %.1f MiB left unread\n", i+1,
			a.PerSecond, b.PerSecond, s.ThroughputRatios[i], c.PerSecond, a.P99, b.P99, s.P99Ratios[i], c.P99, a.Max, b.Max, c.Max,
			a.CPUUsPerRequest(), b.CPUUsPerRequest(), c.CPUUsPerRequest(), float64(s.UnreadBytes[i])/(1<<20))
	}
	if len(s.Alone) > 0 {
		fmt.Fprintf(out, "  median beside / alone: throughput %.2f (range %.2f–%.2f), p99 %.2f (range %.2f–%.2f); target: throughput ≥ 0.90, p99 ≤ 1.10\n",
			s.ThroughputRatio, slices.Min(s.ThroughputRatios), slices.Max(s.ThroughputRatios),
			s.P99Ratio, slices.Min(s.P99Ratios), slices.Max(s.P99Ratios))
		fmt.Fprintf(out, "  median beside the reading ones / alone: throughput %.2f, p99 %.2f (what making and carrying the results costs, nothing stalled)\n",
			s.ReadingThroughputRatio, s.ReadingP99Ratio)
	}
	fmt.Fprintf(out, "  the %d: misrouted %d, hung %d, errors %d; the stalled: %.1f MiB unread each (median); the stalled and the reading: foreign %d, lost %d, ended early %d (pool evictions: %d)\n\n",
		s.Others, s.Misrouted, s.Hung, s.Errors, s.UnreadBytesPerSession/(1<<20), s.StalledForeign, s.StalledLost, s.StalledEnded, s.Evicted)
}
