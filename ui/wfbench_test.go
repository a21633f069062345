package ui

import (
	"fmt"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"github.com/switchboard-mcp/switchboard/pool"
)

// busySource is n requests in a view of span ending at t0: sessions on
// four servers, each with 8 in flight, the rest ended over the span, with
// a child crash per server and a reload as markers.
func busySource(n, sessions int, span time.Duration) *wfSource {
	src := &wfSource{live: true, Since: t0.Add(-span)}
	const inflight = 8
	servers := []string{"notes", "files", "browser", "memory"}
	for i, srv := range servers {
		src.Lanes = append(src.Lanes, wfLane{Server: srv, Title: srv, Sub: "PID " + fmt.Sprint(4000+i), Rows: 1})
		for j := range sessions / len(servers) {
			id := fmt.Sprintf("s%d", i*sessions/len(servers)+j)
			src.Lanes = append(src.Lanes, wfLane{Server: srv, Session: id, Title: "claude-code 2.1.3", Sub: id + " · stdio", Rows: maxLaneRows})
		}
		src.Children = append(src.Children, wfChild{Server: srv, PID: 4000 + i, Started: t0.Add(-time.Hour)})
		src.Markers = append(src.Markers, wfMarker{At: t0.Add(-span / 3), Kind: markChildCrash, Server: srv, PID: 4000 + i, Title: "crash"})
	}
	src.Markers = append(src.Markers, wfMarker{At: t0.Add(-span / 2), Kind: markReload, Title: "config reloaded"})
	statuses := []string{pool.StatusOK, pool.StatusOK, pool.StatusOK, pool.StatusOK, pool.StatusError, pool.StatusCancelled}
	id := uint64(0)
	for s := range sessions {
		srv := servers[s/(sessions/len(servers))]
		sess := fmt.Sprintf("s%d", s)
		for k := range inflight {
			id++
			at := t0.Add(-time.Duration(k+1) * span / 20)
			src.Open = append(src.Open, wfReq{PoolID: id, Server: srv, Session: sess, Method: "tools/call", Name: "sleep",
				Received: at, Written: at.Add(time.Millisecond), Status: statusInFlight, PID: 4000})
		}
	}
	done := n - len(src.Open)
	for i := range done {
		id++
		s := i % sessions
		srv := servers[s/(sessions/len(servers))]
		at := t0.Add(-span + time.Duration(i)*span/time.Duration(done))
		took := time.Duration(5+(i*37)%400) * time.Millisecond
		src.Done.add(wfReq{PoolID: id, Server: srv, Session: fmt.Sprintf("s%d", s), Method: "tools/call", Name: "echo",
			Received: at, Written: at.Add(50 * time.Microsecond), Answered: at.Add(took), Status: statuses[i%len(statuses)], PID: 4000})
	}
	return src
}

// TestBusySourceHasTenThousandInView: the benchmark's premise, at both
// sizes: every one of the 10,000 requests is drawn.
func TestBusySourceHasTenThousandInView(t *testing.T) {
	src := busySource(10_000, 16, 2*time.Minute)
	for _, sz := range []struct {
		w, h  int
		scale float32
	}{{1600, 900, 1}, {3200, 1800, 2}} {
		f := drawWaterfall(nil, src, wfView{To: t0, Span: 2 * time.Minute, Hang: 30 * time.Second}, t0, sz.w, sz.h, sz.scale, wfPalette{})
		if f.Drawn != 10_000 || f.ContentH > sz.h {
			t.Errorf("%dx%d: %d bars drawn, lanes %d px high; want 10,000 in view", sz.w, sz.h, f.Drawn, f.ContentH)
		}
	}
}

// BenchmarkWaterfallFrame draws a frame with 10,000 requests in view (16
// sessions x 8 in flight and the rest ended within the view), as the
// painter does, off the UI goroutine, into the image of its previous
// frame. The target is 16 ms per frame. The 64-session case has more
// lanes than fit: only the visible ones are drawn.
func BenchmarkWaterfallFrame(b *testing.B) {
	for _, tc := range []struct {
		name     string
		sessions int
		w, h     int
		scale    float32
	}{
		{"10k-in-view-1600x900", 16, 1600, 900, 1},
		{"10k-in-view-3200x1800-hidpi", 16, 3200, 1800, 2},
		{"10k-64-sessions-1600x900", 64, 1600, 900, 1},
	} {
		b.Run(tc.name, func(b *testing.B) {
			src := busySource(10_000, tc.sessions, 2*time.Minute)
			v := wfView{To: t0, Span: 2 * time.Minute, Hang: 30 * time.Second}
			reuse := drawWaterfall(nil, src, v, t0, tc.w, tc.h, tc.scale, wfPalette{}).img
			var drawn int
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				drawn = drawWaterfall(reuse, src, v, t0, tc.w, tc.h, tc.scale, wfPalette{}).Drawn
			}
			b.ReportMetric(float64(drawn), "bars/frame")
			// CPU time, beside the wall time: on a shared machine the wall
			// time includes waiting for a core.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/frame")
		})
	}
}

// BenchmarkWaterfallShow is the UI goroutine's share of a frame: the
// image handed to fyne, the lane names and the axis placed.
func BenchmarkWaterfallShow(b *testing.B) {
	src := busySource(10_000, 16, 2*time.Minute)
	u := New(test.NewTempApp(b), newFake(pool.Snapshot{}), &Options{inline: true, now: func() time.Time { return t0 }})
	u.showDashboard(tabWaterfall)
	u.dash.win.Resize(fyne.NewSize(1600, 1000))
	u.wfLive.Store(src)
	w := u.dash.waterfall
	f := drawWaterfall(nil, src, wfView{To: t0, Span: 2 * time.Minute}, t0, w.pxW, w.pxH, 1, palette())
	b.ReportAllocs()
	for b.Loop() {
		u.showFrame(f)
	}
}
