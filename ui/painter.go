package ui

import (
	"context"
	"time"

	"fyne.io/fyne/v2"
)

// paintJob is what the painter draws next: a view of a source at a size.
type paintJob struct {
	hist  *wfSource // a history window; nil: the live source
	view  wfView
	w, h  int // pixels
	scale float32
	pal   wfPalette
}

// requestPaint asks for a frame of job. UI goroutine.
func (u *UI) requestPaint(job *paintJob) {
	u.wfJob.Store(job)
	if u.opts.inline {
		// Tests: the test goroutine is the UI goroutine and draws too.
		u.showFrame(u.paint(job, u.opts.now()))
		return
	}
	u.pokePainter()
}

func (u *UI) pokePainter() {
	select {
	case u.wfPaint <- struct{}{}:
	default:
	}
}

// liveSource is the live waterfall's latest source.
func (u *UI) liveSource() *wfSource { return u.wfLive.Load() }

// paint draws job at now, into a spare image when one is free: neither
// the frame on screen nor the one on its way there.
func (u *UI) paint(job *paintJob, now time.Time) *wfFrame {
	src := job.hist
	if src == nil {
		src = u.wfLive.Load()
	}
	var reuse *canvasImage
	shown, pending := u.wfOnScreen.Load(), u.wfPending.Load()
	for _, img := range u.wfSpare {
		if (shown == nil || shown.img != img) && (pending == nil || pending.img != img) {
			reuse = img
			break
		}
	}
	f := drawWaterfall(reuse, src, job.view, now, job.w, job.h, job.scale, job.pal)
	if f.img != reuse {
		// A new size, or every spare busy: keep the new image among the
		// spares (three: one shown, one on its way, one drawn into).
		u.wfSpare = append(u.wfSpare, f.img)
		if len(u.wfSpare) > 3 {
			u.wfSpare = u.wfSpare[1:]
		}
	}
	return f
}

// paintLoop is the painter: it draws the latest job when asked, and, while
// a live waterfall that follows now is on screen, every WaterfallTick, so
// that bars in flight grow and time moves. Frames reach the UI goroutine
// through the loop, like the tables' do: a slow UI goroutine sees the
// latest, never a queue. It exits when ctx ends.
func (u *UI) paintLoop(ctx context.Context) {
	tick := time.NewTicker(u.opts.WaterfallTick)
	defer tick.Stop()
	for {
		// The ticker is listened to only while a following live waterfall
		// is on screen: otherwise the painter sleeps until asked (every
		// change of job, view or tab pokes it).
		var ticks <-chan time.Time
		if job := u.wfJob.Load(); job != nil && job.hist == nil && job.view.Follow && u.wfShown.Load() {
			ticks = tick.C
		}
		select {
		case <-ctx.Done():
			return
		case <-u.wfPaint:
		case <-ticks:
		}
		job := u.wfJob.Load()
		if job == nil {
			continue
		}
		f := u.paint(job, u.opts.now())
		if u.wfPending.Swap(f) == nil {
			// The loop hands it to the UI goroutine: one goroutine posts
			// to fyne, as in tailscale's tray.
			select {
			case u.wfReady <- struct{}{}:
			default:
			}
		}
	}
}

// postFrame hands the painter's latest frame to the UI goroutine. The
// loop's goroutine only.
func (u *UI) postFrame() {
	fyne.Do(func() {
		if f := u.wfPending.Swap(nil); f != nil {
			u.showFrame(f)
		}
	})
}

// showFrame puts a painted frame on screen. UI goroutine.
func (u *UI) showFrame(f *wfFrame) {
	u.wfOnScreen.Store(f)
	u.wfFrames.Add(1)
	if u.dash != nil {
		u.dash.waterfall.apply(f)
	}
}

// showWaterfallAt opens the dashboard on the waterfall, at server's lanes
// and request k when given. UI goroutine.
func (u *UI) showWaterfallAt(server string, k wfKey) {
	u.showDashboard(tabWaterfall)
	if server != "" || k.PoolID != 0 {
		u.dash.waterfall.reveal(server, k)
	}
}
