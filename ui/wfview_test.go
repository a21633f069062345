package ui

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestViewZoomPanFollow(t *testing.T) {
	live := wfView{To: t0, Span: 2 * time.Minute, Follow: true}
	type got struct {
		From, To time.Duration // from t0
		Span     time.Duration
		Follow   bool
	}
	of := func(v wfView) got { return got{v.from().Sub(t0), v.To.Sub(t0), v.Span, v.Follow} }
	for _, tc := range []struct {
		name string
		v    wfView
		want got
	}{
		{"zoom in at the right edge keeps following", live.zoom(0.5, 1),
			got{-time.Minute, 0, time.Minute, true}},
		{"zoom in at the middle: the middle stays, following stops", live.zoom(0.5, 0.5),
			got{-90 * time.Second, -30 * time.Second, time.Minute, false}},
		{"zoom out at the left edge", live.zoom(2, 0),
			got{-2 * time.Minute, 2 * time.Minute, 4 * time.Minute, false}},
		{"zoom is clamped at 5 ms", live.zoom(1e-9, 1),
			got{-5 * time.Millisecond, 0, 5 * time.Millisecond, true}},
		{"zoom is clamped at a week", live.zoom(1e9, 1),
			got{-7 * 24 * time.Hour, 0, 7 * 24 * time.Hour, true}},
		{"pan into the past stops following", live.pan(-0.25, t0),
			got{-150 * time.Second, -30 * time.Second, 2 * time.Minute, false}},
		{"pan back to now follows again", live.pan(-0.25, t0).pan(0.5, t0),
			got{-2 * time.Minute, 0, 2 * time.Minute, true}},
		{"pan without a limit goes on into the future", live.pan(0.5, time.Time{}),
			got{-time.Minute, time.Minute, 2 * time.Minute, false}},
		{"centre on a request", live.centre(t0.Add(-10*time.Minute), 0),
			got{-11 * time.Minute, -9 * time.Minute, 2 * time.Minute, false}},
		{"centre widens a narrow view", wfView{To: t0, Span: time.Second}.centre(t0, 20*time.Second),
			got{-10 * time.Second, 10 * time.Second, 20 * time.Second, false}},
		{"at moves a following view to now", live.at(t0.Add(time.Minute)),
			got{-time.Minute, time.Minute, 2 * time.Minute, true}},
		{"at leaves a fixed view", live.pan(-1, t0).at(t0.Add(time.Minute)),
			got{-4 * time.Minute, -2 * time.Minute, 2 * time.Minute, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, of(tc.v)); d != "" {
				t.Errorf("view (-want +got):\n%s", d)
			}
		})
	}
}

func TestTimeScale(t *testing.T) {
	sc := newScale(wfView{To: t0, Span: 10 * time.Second}, 1000)
	for _, tc := range []struct {
		at time.Time
		x  float64
	}{{t0, 1000}, {t0.Add(-10 * time.Second), 0}, {t0.Add(-5 * time.Second), 500}, {t0.Add(time.Second), 1100}} {
		if x := sc.x(tc.at); x != tc.x {
			t.Errorf("x(%v) = %v, want %v", tc.at.Sub(t0), x, tc.x)
		}
		if back := sc.t(tc.x); !back.Equal(tc.at) {
			t.Errorf("t(%v) = %v, want %v", tc.x, back.Sub(t0), tc.at.Sub(t0))
		}
	}
}

func TestTicks(t *testing.T) {
	labels := func(ts []tick) (major []string, minor int) {
		for _, tk := range ts {
			if tk.Major {
				major = append(major, tk.Label)
			} else {
				minor++
			}
		}
		return major, minor
	}
	for _, tc := range []struct {
		name      string
		v         wfView
		width     int
		wantMajor []string
		wantMinor int
	}{
		{"two minutes over 800 px: every 15 s", wfView{To: t0, Span: 2 * time.Minute}, 800,
			[]string{"09:25:00", "09:25:15", "09:25:30", "09:25:45", "09:26:00", "09:26:15", "09:26:30", "09:26:45"}, 16},
		{"one second over 1000 px: every 100 ms", wfView{To: t0.Add(500 * time.Millisecond), Span: time.Second}, 1000,
			[]string{"09:26:52.500", "09:26:52.600", "09:26:52.700", "09:26:52.800", "09:26:52.900", "09:26:53.000",
				"09:26:53.100", "09:26:53.200", "09:26:53.300", "09:26:53.400", "09:26:53.500"}, 40},
		{"a day over 600 px: every 6 hours", wfView{To: t0, Span: 24 * time.Hour}, 600,
			[]string{"Mar 13 12:00", "Mar 13 18:00", "Mar 14 00:00", "Mar 14 06:00"}, 16},
		{"no width", wfView{To: t0, Span: time.Minute}, 0, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			major, minor := labels(ticks(tc.v, tc.width, 90))
			if d := cmp.Diff(tc.wantMajor, major); d != "" {
				t.Errorf("labels (-want +got):\n%s", d)
			}
			if minor != tc.wantMinor {
				t.Errorf("%d grid lines, want %d", minor, tc.wantMinor)
			}
		})
	}
}
