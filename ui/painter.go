package ui

import (
	"context"
	"sync"
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
		f := u.paint(job, u.opts.now())
		u.wfHand.show(f)
		u.showFrame(f)
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
	shown, pending := u.wfHand.busy()
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
		if u.offerFrame(f) {
			// The loop hands it to the UI goroutine: one goroutine posts
			// to fyne, as in tailscale's tray.
			select {
			case u.wfReady <- struct{}{}:
			default:
			}
		}
	}
}

// wfHandOff is where painted frames pass from the painter to the UI
// goroutine: the frame on its way and the frame on screen, under one lock.
// A frame the UI goroutine takes moves from one to the other in one step,
// so the painter sees it in one place or the other, never in neither, and
// never draws into the image fyne shows.
type wfHandOff struct {
	mu       sync.Mutex
	pending  *wfFrame // painted, not yet taken by the UI goroutine
	onScreen *wfFrame // the frame the UI goroutine shows
}

// offer puts f on its way, in place of a frame still waiting; it reports
// whether none was. The painter's goroutine.
func (h *wfHandOff) offer(f *wfFrame) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	first := h.pending == nil
	h.pending = f
	return first
}

// take moves the frame on its way on screen and returns it; nil when none
// waits. UI goroutine.
func (h *wfHandOff) take() *wfFrame {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.pending
	if f != nil {
		h.pending, h.onScreen = nil, f
	}
	return f
}

// show puts f on screen without its going through pending: a frame the UI
// goroutine painted itself (inline, in tests). UI goroutine.
func (h *wfHandOff) show(f *wfFrame) {
	h.mu.Lock()
	h.onScreen = f
	h.mu.Unlock()
}

// busy is the frames whose images nobody may draw into: the one on screen
// and the one on its way there. Only take moves a frame from one to the
// other, and only the painter adds one, so what the painter reads stays
// busy while it draws.
func (h *wfHandOff) busy() (onScreen, pending *wfFrame) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.onScreen, h.pending
}

// offerFrame puts f on its way to the UI goroutine, in place of a frame
// still waiting; it reports whether none was. The painter's goroutine.
func (u *UI) offerFrame(f *wfFrame) bool { return u.wfHand.offer(f) }

// frameOnScreen is the frame the UI goroutine shows.
func (u *UI) frameOnScreen() *wfFrame {
	f, _ := u.wfHand.busy()
	return f
}

// postFrame hands the painter's latest frame to the UI goroutine. The
// loop's goroutine only.
func (u *UI) postFrame() {
	fyne.Do(func() {
		if f := u.wfHand.take(); f != nil {
			u.showFrame(f)
		}
	})
}

// showFrame shows a painted frame, which take (or show) put on screen.
// UI goroutine.
func (u *UI) showFrame(f *wfFrame) {
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
