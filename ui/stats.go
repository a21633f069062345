package ui

import (
	"math"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// This file keeps each server's rolling figures for the overview: calls,
// errors and latency over the last statWindow, in statSlot buckets, so
// that p50 and p99 come from merged histograms and the sparklines from the
// buckets themselves. It is owned by the event loop's goroutine.

const (
	// statWindow is how far back the overview's figures look.
	statWindow = 15 * time.Minute
	// statSlot is the span of one bucket, and of one sparkline point.
	statSlot  = 15 * time.Second
	statSlots = int(statWindow / statSlot)
)

// A latency histogram has histPerOctave buckets per doubling from 1 µs,
// so a quantile read from it is within 4.5% of the true value, up to about
// 19 hours.
const (
	histPerOctave = 8
	histBuckets   = 36 * histPerOctave
)

type latencyHist [histBuckets]uint32

// histIndex is the bucket of a duration.
func histIndex(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us <= 1 {
		return 0
	}
	return min(int(math.Log2(us)*histPerOctave), histBuckets-1)
}

// histValue is a bucket's representative duration: its geometric middle.
func histValue(i int) time.Duration {
	return time.Duration(math.Exp2((float64(i)+0.5)/histPerOctave) * float64(time.Microsecond))
}

// quantile reads the q-quantile (0 < q <= 1) of n samples in h.
func (h *latencyHist) quantile(q float64, n int) time.Duration {
	if n <= 0 {
		return 0
	}
	rank := max(int(math.Ceil(q*float64(n))), 1)
	seen := 0
	for i, c := range h {
		seen += int(c)
		if seen >= rank {
			return histValue(i)
		}
	}
	return histValue(histBuckets - 1)
}

// statBucket is one slot of a server's figures.
type statBucket struct {
	start     time.Time // the slot's start; zero when unused
	calls     int       // requests that ended in the slot
	timed     int       // ... whose duration is known (in hist)
	errors    int       // ... with an error, a failure or a timeout
	cancelled int
	hist      *latencyHist // nil until a call ends in the slot
	// The requests in flight: when the slot began, and the most at once.
	startInFlight, maxInFlight int
}

// serverStats are one server's rolling figures.
type serverStats struct {
	slots    [statSlots]statBucket
	inFlight int
}

// slotIndex is where the slot starting at st lives in the ring.
func slotIndex(st time.Time) int {
	n := st.UnixNano() / int64(statSlot)
	return int((n%int64(statSlots) + int64(statSlots)) % int64(statSlots))
}

// bucket is the slot for t, recycled if it held an older slot; nil when
// t is older than the slot now there (an event from before the window).
func (s *serverStats) bucket(t time.Time) *statBucket {
	st := t.Truncate(statSlot)
	b := &s.slots[slotIndex(st)]
	switch {
	case b.start.Equal(st):
		return b
	case !b.start.IsZero() && st.Before(b.start):
		return nil
	}
	h := b.hist
	if h != nil {
		*h = latencyHist{}
	}
	*b = statBucket{start: st, hist: h, startInFlight: s.inFlight, maxInFlight: s.inFlight}
	return b
}

// started counts a request now in flight.
func (s *serverStats) started(t time.Time) {
	b := s.bucket(t) // before the count grows: the slot began without it
	s.inFlight++
	if b != nil {
		b.maxInFlight = max(b.maxInFlight, s.inFlight)
	}
}

// ended counts a request that ended at t after d (negative: unknown),
// with status; wasOpen says whether started counted it (a request seen
// only when it ended was not).
func (s *serverStats) ended(t time.Time, d time.Duration, status string, wasOpen bool) {
	b := s.bucket(t) // before the count drops: the slot began with it
	if wasOpen {
		s.inFlight = max(s.inFlight-1, 0)
	}
	if b == nil {
		return
	}
	b.calls++
	switch status {
	case pool.StatusError, pool.StatusFailed, pool.StatusTimeout:
		b.errors++
	case pool.StatusCancelled:
		b.cancelled++
	}
	if d < 0 {
		return
	}
	if b.hist == nil {
		b.hist = &latencyHist{}
	}
	b.hist[histIndex(d)]++
	b.timed++
}

// serverFigures is what the overview shows of a server's last minutes.
type serverFigures struct {
	Window    time.Duration // how far back they look: about statWindow, or less just after start
	Calls     int
	Errors    int
	Cancelled int
	P50, P99  time.Duration // zero without calls
	// Spark is one point per slot, oldest first, the last one the slot
	// now runs in: statSlots of them, fewer before a window has passed.
	Spark []sparkPoint
}

// PerMinute is the call rate over the window.
func (f serverFigures) PerMinute() float64 {
	if f.Window <= 0 {
		return 0
	}
	return float64(f.Calls) / f.Window.Minutes()
}

// sparkPoint is one slot of a sparkline.
type sparkPoint struct {
	Calls    int
	P50      time.Duration // zero without calls: a gap in the line
	InFlight int           // the most in flight at once
}

// figures sums up the window ending at now; since is when counting began
// (the window is shorter right after start).
func (s *serverStats) figures(now, since time.Time) serverFigures {
	first := now.Truncate(statSlot).Add(-time.Duration(statSlots-1) * statSlot)
	// The window is the slots' span: the last one runs until now.
	f := serverFigures{Window: now.Sub(first), Spark: make([]sparkPoint, statSlots)}
	if age := now.Sub(since); age < f.Window {
		f.Window = max(age, time.Second)
	}
	var all latencyHist
	timed := 0
	// Backwards, so that a slot nothing happened in shows what was in
	// flight then: the count the next slot started with, or now's.
	inFlight := s.inFlight
	for i := statSlots - 1; i >= 0; i-- {
		st := first.Add(time.Duration(i) * statSlot)
		b := &s.slots[slotIndex(st)]
		p := &f.Spark[i]
		if !b.start.Equal(st) {
			p.InFlight = inFlight
			continue
		}
		p.Calls, p.InFlight = b.calls, b.maxInFlight
		inFlight = b.startInFlight
		f.Calls += b.calls
		f.Errors += b.errors
		f.Cancelled += b.cancelled
		if b.hist != nil && b.timed > 0 {
			p.P50 = b.hist.quantile(0.5, b.timed)
			timed += b.timed
			for j, c := range b.hist {
				all[j] += c
			}
		}
	}
	if timed > 0 {
		f.P50 = all.quantile(0.5, timed)
		f.P99 = all.quantile(0.99, timed)
	}
	// Before a whole window has passed, the sparklines cover what has.
	if since.After(first) {
		skip := min(int(since.Truncate(statSlot).Sub(first)/statSlot), statSlots-1)
		f.Spark = f.Spark[skip:]
	}
	return f
}
