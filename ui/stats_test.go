package ui

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
)

func TestHistogramQuantiles(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []time.Duration
		q       float64
		want    time.Duration
	}{
		{"one sample", []time.Duration{3 * time.Millisecond}, 0.5, 3 * time.Millisecond},
		{"uniform p50", uniform(time.Millisecond, 1000), 0.5, 500 * time.Millisecond},
		{"uniform p99", uniform(time.Millisecond, 1000), 0.99, 990 * time.Millisecond},
		{"sub-microsecond", []time.Duration{200 * time.Nanosecond}, 0.5, time.Microsecond},
		{"a slow tail", append(repeat(2*time.Millisecond, 990), repeat(30*time.Second, 10)...), 0.99, 2 * time.Millisecond},
		{"past the tail", append(repeat(2*time.Millisecond, 989), repeat(30*time.Second, 11)...), 0.99, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h latencyHist
			for _, d := range tc.samples {
				h[histIndex(d)]++
			}
			got := h.quantile(tc.q, len(tc.samples))
			if rel := math.Abs(float64(got-tc.want)) / float64(tc.want); rel > 0.045 {
				t.Errorf("quantile(%v) = %v, want %v within 4.5%% (off by %.1f%%)", tc.q, got, tc.want, rel*100)
			}
		})
	}
}

func uniform(step time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i+1) * step
	}
	return out
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// TestServerFigures: what the overview shows of a server after a history
// of requests starting and ending, at a given moment.
func TestServerFigures(t *testing.T) {
	type call struct {
		start, end time.Duration // from t0; status empty: still in flight
		status     string
	}
	// The window runs from the first slot's start to now: 14m53s at t0.
	fullWindow := t0.Sub(t0.Truncate(statSlot).Add(-time.Duration(statSlots-1) * statSlot))
	slot := func(d time.Duration) int { // the sparkline point of a moment
		return statSlots - 1 - int((t0.Truncate(statSlot).Sub(t0.Add(d).Truncate(statSlot)))/statSlot)
	}
	for _, tc := range []struct {
		name  string
		since time.Duration // when counting began, from t0
		calls []call
		want  serverFigures
		// spark checks a few points: index -> point
		spark map[int]sparkPoint
	}{
		{
			name: "nothing", since: -time.Hour,
			want: serverFigures{Window: fullWindow},
		},
		{
			name: "just started: the window is the uptime", since: -2 * time.Minute,
			calls: []call{{-90 * time.Second, -89 * time.Second, pool.StatusOK}},
			want:  serverFigures{Window: 2 * time.Minute, Calls: 1, P50: time.Second, P99: time.Second},
		},
		{
			name: "errors, failures and timeouts count as errors; cancelled apart", since: -time.Hour,
			calls: []call{
				{-10 * time.Minute, -10*time.Minute + 4*time.Millisecond, pool.StatusOK},
				{-9 * time.Minute, -9*time.Minute + 4*time.Millisecond, pool.StatusError},
				{-8 * time.Minute, -8*time.Minute + 4*time.Millisecond, pool.StatusFailed},
				{-7 * time.Minute, -7*time.Minute + 120*time.Second, pool.StatusTimeout},
				{-3 * time.Minute, -3*time.Minute + 4*time.Millisecond, pool.StatusCancelled},
			},
			want: serverFigures{Window: fullWindow, Calls: 5, Errors: 3, Cancelled: 1, P50: 4 * time.Millisecond, P99: 120 * time.Second},
		},
		{
			name: "older than the window is forgotten", since: -time.Hour,
			calls: []call{
				{-20 * time.Minute, -16 * time.Minute, pool.StatusOK},
				{-5 * time.Second, -4 * time.Second, pool.StatusOK},
			},
			want: serverFigures{Window: fullWindow, Calls: 1, P50: time.Second, P99: time.Second},
		},
		{
			name: "in flight shows in every slot it spans", since: -time.Hour,
			calls: []call{
				{-10 * time.Minute, -1, ""},
				{-10 * time.Minute, -10*time.Minute + time.Second, pool.StatusOK},
			},
			want: serverFigures{Window: fullWindow, Calls: 1, P50: time.Second, P99: time.Second},
			spark: map[int]sparkPoint{
				slot(-12 * time.Minute): {InFlight: 0},
				slot(-10 * time.Minute): {Calls: 1, P50: time.Second, InFlight: 2},
				slot(-5 * time.Minute):  {InFlight: 1},
				statSlots - 1:           {InFlight: 1},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &serverStats{}
			type ev struct {
				at    time.Duration
				start bool
				c     call
			}
			var evs []ev
			for _, c := range tc.calls {
				evs = append(evs, ev{c.start, true, c})
				if c.status != "" {
					evs = append(evs, ev{c.end, false, c})
				}
			}
			// In time order, as events arrive.
			for i := range evs {
				for j := i + 1; j < len(evs); j++ {
					if evs[j].at < evs[i].at {
						evs[i], evs[j] = evs[j], evs[i]
					}
				}
			}
			for _, e := range evs {
				if e.start {
					s.started(t0.Add(e.at))
				} else {
					s.ended(t0.Add(e.at), e.c.end-e.c.start, e.c.status, true)
				}
			}
			got := s.figures(t0, t0.Add(tc.since))
			wantPoints := statSlots
			if tc.since > -statWindow {
				wantPoints = int(t0.Truncate(statSlot).Sub(t0.Add(tc.since).Truncate(statSlot))/statSlot) + 1
			}
			if len(got.Spark) != wantPoints {
				t.Fatalf("%d sparkline points, want %d", len(got.Spark), wantPoints)
			}
			for i, want := range tc.spark {
				if p := got.Spark[i]; p.Calls != want.Calls || p.InFlight != want.InFlight || !near(p.P50, want.P50) {
					t.Errorf("spark[%d] = %+v, want %+v", i, p, want)
				}
			}
			got.Spark = nil
			if !near(got.P50, tc.want.P50) || !near(got.P99, tc.want.P99) {
				t.Errorf("p50, p99 = %v, %v, want %v, %v", got.P50, got.P99, tc.want.P50, tc.want.P99)
			}
			got.P50, got.P99 = tc.want.P50, tc.want.P99
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("figures (-want +got):\n%s", d)
			}
		})
	}
}

// near is within a histogram bucket's precision.
func near(got, want time.Duration) bool {
	if want == 0 {
		return got == 0
	}
	return math.Abs(float64(got-want))/float64(want) <= 0.045
}

func TestPerMinute(t *testing.T) {
	for _, tc := range []struct {
		f    serverFigures
		want float64
	}{
		{serverFigures{Window: statWindow, Calls: 150}, 10},
		{serverFigures{Window: 30 * time.Second, Calls: 3}, 6},
		{serverFigures{}, 0},
	} {
		if got := tc.f.PerMinute(); got != tc.want {
			t.Errorf("%+v: %v calls/min, want %v", tc.f, got, tc.want)
		}
	}
}
