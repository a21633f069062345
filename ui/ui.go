package ui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"

	"github.com/switchboard-mcp/switchboard/pool"
)

// Options tune a UI. The zero value (or nil) gives the defaults.
type Options struct {
	// Logger receives the UI's few logs; nil discards them.
	Logger *slog.Logger
	// MinRedraw is the shortest time between two redraws, however many
	// events arrive: they coalesce. Default 200 ms.
	MinRedraw time.Duration
	// Tick is how often ages tick when the pool is quiet. Default 1 s.
	Tick time.Duration
	// LeakPoll is how often leaked backends are looked for. Default 30 s.
	LeakPoll time.Duration
	// SamplePoll is how often the children's memory and CPU are sampled
	// while the dashboard is open. Default 2 s.
	SamplePoll time.Duration
	// StateFile keeps the dashboard's size, view and waterfall zoom
	// across runs; empty keeps nothing.
	StateFile string
	// WaterfallTick is how often a live waterfall that follows now is
	// redrawn while it is on screen, so that bars in flight grow.
	// Default 100 ms.
	WaterfallTick time.Duration

	// sample measures processes; nil means gopsutil. Tests replace it.
	sample func(pids []int, now time.Time) map[int]procStat
	// now is the waterfall's clock; nil means time.Now. Tests pin it.
	now func() time.Time
	// inline runs actions and queries on the calling goroutine: the fyne
	// test driver runs fyne.Do on the caller, so tests that read widgets
	// need everything on one goroutine.
	inline bool
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.MinRedraw <= 0 {
		r.MinRedraw = 200 * time.Millisecond
	}
	if r.Tick <= 0 {
		r.Tick = time.Second
	}
	if r.LeakPoll <= 0 {
		r.LeakPoll = 30 * time.Second
	}
	if r.SamplePoll <= 0 {
		r.SamplePoll = 2 * time.Second
	}
	if r.WaterfallTick <= 0 {
		r.WaterfallTick = 100 * time.Millisecond
	}
	if r.sample == nil {
		r.sample = newProcSampler().sample
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r
}

// UI is the tray menu and the dashboard of one running pool. Create it
// with New on the UI goroutine, Start its goroutines, and Wait for them
// after the context ends.
type UI struct {
	app  fyne.App
	ctrl Controller
	opts Options
	log  *slog.Logger

	redraw   chan struct{} // buffered to 1: redraw requests coalesce
	leaksNow chan struct{} // buffered to 1: look for leaks now
	pending  atomic.Pointer[frame]
	frames   atomic.Uint64
	dashOpen atomic.Bool
	wg       sync.WaitGroup
	ctx      context.Context // Start's; actions run under it

	// The waterfall: the loop publishes the live source, the UI goroutine
	// the job (view and size), and the painter draws frames from both.
	wfLive   atomic.Pointer[wfSource]
	wfJob    atomic.Pointer[paintJob]
	wfPaint  chan struct{}  // buffered to 1: paint requests coalesce
	wfReady  chan struct{}  // buffered to 1: a painted frame waits in wfHand
	wfHand   wfHandOff      // the frame on its way to the screen, and the one on it
	wfSpare  []*canvasImage // images to draw into; the painter's (the test goroutine's, inline)
	wfFrames atomic.Uint64
	wfShown  atomic.Bool // the waterfall is on screen

	// Written by the sampler and the leak poller, read by the loop.
	mu       sync.Mutex
	stats    map[int]procStat
	pids     []int
	leaks    []Leak
	leaksErr error

	// track follows the pool's events for the overview and the live
	// waterfall; owned by the loop's goroutine (a test's, without one).
	track *tracker

	// Owned by the UI goroutine.
	last *frame
	dash *dashboard
	tray *tray
}

// New returns the UI of the instance behind c. It shows nothing until
// StartTray or ShowDashboard.
func New(a fyne.App, c Controller, opts *Options) *UI {
	o := opts.withDefaults()
	useFixedFonts(a)
	u := &UI{
		app: a, ctrl: c, opts: o, log: o.Logger,
		redraw:   make(chan struct{}, 1),
		leaksNow: make(chan struct{}, 1),
		wfPaint:  make(chan struct{}, 1),
		wfReady:  make(chan struct{}, 1),
		stats:    map[int]procStat{},
		ctx:      context.Background(),
		track:    newTracker(time.Now()),
	}
	return u
}

// Start runs the event loop, the leak poller and the process sampler
// until ctx ends. Call it once, before the fyne app runs or after.
func (u *UI) Start(ctx context.Context) {
	u.ctx = ctx
	u.wg.Go(func() { u.loop(ctx) })
	u.wg.Go(func() { u.pollLeaks(ctx) })
	u.wg.Go(func() { u.sampleLoop(ctx) })
	u.wg.Go(func() { u.paintLoop(ctx) })
}

// Wait waits for the goroutines Start and the actions started.
func (u *UI) Wait() { u.wg.Wait() }

// Frames counts the frames applied to the widgets; it keeps growing while
// the UI is live.
func (u *UI) Frames() uint64 { return u.frames.Load() }

// WaterfallFrames counts the waterfall frames shown; it keeps growing
// while a live waterfall is on screen.
func (u *UI) WaterfallFrames() uint64 { return u.wfFrames.Load() }

// ShowWaterfall opens the dashboard on the live waterfall. Safe from any
// goroutine.
func (u *UI) ShowWaterfall() { fyne.Do(func() { u.showWaterfallAt("", wfKey{}) }) }

// ShowDashboard opens (or raises) the dashboard window. Safe from any
// goroutine.
func (u *UI) ShowDashboard() { fyne.Do(func() { u.showDashboard("") }) }

// requestRedraw asks the loop for a fresh frame; requests coalesce.
func (u *UI) requestRedraw() {
	select {
	case u.redraw <- struct{}{}:
	default:
	}
}

// frame is everything the widgets show, computed off the UI goroutine.
type frame struct {
	now      time.Time
	hang     time.Duration
	sum      summary
	servers  []string
	menu     []menuItem
	icon     trayState
	banner   string
	leakNote string
	// Table rows and the overview; empty while the dashboard is closed
	// (nobody looks).
	sessions, inflight, backends, leaks []row
	overview                            overview
	withRows                            bool
}

// frameFor computes the frame for snapshot s at now. It reads the
// controller's cheap getters and the sampler's and leak poller's latest
// results, and with rows the tracker's figures: the loop's goroutine only
// (or a test's, without one).
func (u *UI) frameFor(s pool.Snapshot, now time.Time, withRows bool) *frame {
	var figures func(server string) serverFigures
	if withRows {
		figures = func(server string) serverFigures { return u.track.figures(server, now) }
	}
	return u.frameWith(s, now, figures)
}

// frameWith is frameFor with each server's figures from figures; nil
// makes a frame without table rows.
func (u *UI) frameWith(s pool.Snapshot, now time.Time, figures func(server string) serverFigures) *frame {
	withRows := figures != nil
	u.mu.Lock()
	leaks, leaksErr, stats := u.leaks, u.leaksErr, u.stats
	u.mu.Unlock()
	hang := u.ctrl.HangThreshold()
	f := &frame{now: now, hang: hang, withRows: withRows}
	nleaks := len(leaks)
	if leaksErr != nil {
		nleaks = -1
	}
	f.sum = summarize(s, now, hang, nleaks)
	if leaksErr == nil {
		f.sum.Killable = len(provenLeaks(leaks))
	}
	f.sum.StartAtLogin = u.ctrl.StartAtLogin()
	f.menu = trayMenu(s, f.sum)
	f.icon = iconState(f.sum)
	for _, sv := range s.Servers {
		f.servers = append(f.servers, sv.Name)
	}
	if err := u.ctrl.ConfigError(); err != nil {
		f.banner = "Config error: " + err.Error() + "\nThe last good config stays in force until the file is fixed."
	}
	if n := u.ctrl.HistoryDropped(); n > 0 {
		if f.banner != "" {
			f.banner += "\n"
		}
		f.banner += fmt.Sprintf("History dropped %d events: the database could not keep up, so some requests are missing from History.", n)
	}
	switch {
	case errors.Is(leaksErr, ErrUnavailable):
		f.leakNote = "Leak detection is not available: " + unavailableReason(leaksErr)
	case leaksErr != nil:
		f.leakNote = "Could not look for leaks: " + leaksErr.Error()
	case len(leaks) == 0:
		f.leakNote = "No leaked backends: every MCP server process found belongs to a live pool."
	default:
		f.leakNote = leakNote(f.sum.Killable, f.sum.suspects())
	}
	if withRows {
		f.overview = overviewFor(s, now, hang, figures, stats)
		f.sessions = sessionRows(s, now)
		f.inflight = inflightRows(s, now, hang)
		f.backends = backendRows(s, now, stats)
		f.leaks = leakRows(leaks, now)
	}
	return f
}

// leakNote heads the Leaks tab: the proven leaks and the suspects,
// counted apart.
func leakNote(proven, suspects int) string {
	var out []string
	switch {
	case proven == 1:
		out = append(out, "1 leaked backend: an MCP server process nobody uses any more.")
	case proven > 1:
		out = append(out, fmt.Sprintf("%d leaked backends: MCP server processes nobody uses any more.", proven))
	}
	switch {
	case suspects == 1:
		out = append(out, "1 suspect: maybe a leaked backend, but Switchboard cannot prove it its own, so it lists it and never kills it.")
	case suspects > 1:
		out = append(out, fmt.Sprintf("%d suspects: maybe leaked backends, but Switchboard cannot prove them its own, so it lists them and never kills them.", suspects))
	}
	return strings.Join(out, " ")
}

// killableLeaks is what "Kill all" and the tray's "Kill leaked backends"
// kill: the proven leaks of the leak poller's latest look, never a
// suspect, none when the look failed. Any goroutine.
func (u *UI) killableLeaks() []Leak {
	u.mu.Lock()
	leaks, err := u.leaks, u.leaksErr
	u.mu.Unlock()
	if err != nil {
		return nil
	}
	return provenLeaks(leaks)
}

// provenLeaks is the leaks that may be killed: never a suspect.
func provenLeaks(leaks []Leak) []Leak {
	var out []Leak
	for _, l := range leaks {
		if l.Proven {
			out = append(out, l)
		}
	}
	return out
}

// post hands f to the UI goroutine. If the previous frame has not been
// applied yet, f replaces it: a slow UI goroutine sees the latest state,
// never a queue of stale ones.
func (u *UI) post(f *frame) {
	if u.pending.Swap(f) == nil {
		fyne.Do(func() {
			if f := u.pending.Swap(nil); f != nil {
				u.apply(f)
			}
		})
	}
}

// apply shows f. UI goroutine only.
func (u *UI) apply(f *frame) {
	u.last = f
	u.frames.Add(1)
	if u.tray != nil {
		u.tray.apply(u, f)
	}
	if u.dash != nil && f.withRows {
		u.dash.apply(f)
	}
}

// spawn runs fn off the UI goroutine, tracked for Wait.
func (u *UI) spawn(fn func()) {
	if u.opts.inline {
		fn()
		return
	}
	u.wg.Go(fn)
}

// queryTimeout bounds a read or an action the UI starts.
const queryTimeout = 30 * time.Second

// query runs fn off the UI goroutine with a context that ends after
// queryTimeout or when the UI stops. With a slot, a later query in the
// same slot cancels this one: an answer nobody will show stops reading.
// UI goroutine.
func (u *UI) query(slot *context.CancelFunc, fn func(ctx context.Context)) {
	ctx, cancel := context.WithTimeout(u.ctx, queryTimeout)
	if slot != nil {
		if *slot != nil {
			(*slot)()
		}
		*slot = cancel
	}
	u.spawn(func() {
		defer cancel()
		fn(ctx)
	})
}

// act runs a pool action off the UI goroutine; a failure is shown to the
// user and logged.
func (u *UI) act(what string, fn func(ctx context.Context) error) {
	u.query(nil, func(ctx context.Context) {
		if err := fn(ctx); err != nil {
			err = fmt.Errorf("%s: %w", what, err)
			u.log.Warn("action failed", "err", err)
			fyne.Do(func() { u.showError(err) })
		}
		u.requestRedraw()
	})
}

// showError tells the user an action failed: a dialog on the dashboard,
// else a notification. UI goroutine only.
func (u *UI) showError(err error) {
	if u.dash != nil && u.dashOpen.Load() {
		u.dash.showError(err)
		return
	}
	u.sendNotification(fyne.NewNotification("Switchboard", err.Error()))
}

// sendNotification shows n on the desktop, as desktopNote makes it safe.
func (u *UI) sendNotification(n *fyne.Notification) {
	u.app.SendNotification(desktopNote(runtime.GOOS, n))
}

// menuDo runs a tray menu action. UI goroutine only.
func (u *UI) menuDo(a menuAction) {
	switch a.Kind {
	case actDashboard:
		u.showDashboard("")
	case actWaterfall:
		if f := u.last; f != nil && f.sum.Hung > 0 {
			u.showWaterfallAt(f.sum.HungServer, f.sum.HungKey)
		} else {
			u.showWaterfallAt("", wfKey{})
		}
	case actRestart, actStop:
		// The tray has no dialogs of its own: the dashboard asks, as for
		// Kill leaked backends.
		u.showDashboard("")
		c := serverCardOf(u.ctrl.Snapshot(), a.Server, time.Now(), u.ctrl.HangThreshold())
		if a.Kind == actRestart {
			u.dash.confirmRestartServer(c, "Restart")
		} else {
			u.dash.confirmStop(c)
		}
	case actKillLeaks:
		u.showDashboard(tabLeaks)
		u.dash.confirmKillAll()
	case actOpenConfig:
		u.openConfig()
	case actHistory:
		u.showDashboard(tabHistory)
	case actStartAtLogin:
		on := !u.ctrl.StartAtLogin()
		u.act(fmt.Sprintf("start at login %v", on), func(context.Context) error { return u.ctrl.SetStartAtLogin(on) })
	case actAbout:
		u.showDashboard("")
		dialog.ShowInformation("About Switchboard", u.ctrl.About(), u.dash.win)
	case actRestartApp:
		u.act("restart Switchboard", func(context.Context) error { return u.ctrl.RestartApp() })
	case actQuit:
		u.ctrl.Quit()
	}
}

func (u *UI) openConfig() {
	p := u.ctrl.ConfigPath()
	if p == "" {
		return
	}
	if err := u.app.OpenURL(fileURL(runtime.GOOS, p)); err != nil {
		u.showError(fmt.Errorf("open %s: %w", p, err))
	}
}

// fileURL is the file: URL of the absolute path p on goos:
// file:///home/me/config.json, or on Windows file:///C:/Users/me/config.json
// (slashes, and one before the drive), which is what the shell's handler
// opens: the path as it is made file://C:%5CUsers%5Cme..., which it does not.
func fileURL(goos, p string) *url.URL {
	if goos == "windows" {
		p = strings.ReplaceAll(p, `\`, "/")
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return &url.URL{Scheme: "file", Path: p}
}

// showDashboard creates the window on first use, shows it and selects
// tab (unless empty). UI goroutine only.
func (u *UI) showDashboard(tab string) {
	if u.dash == nil {
		u.dash = newDashboard(u)
	}
	if !u.dashOpen.Swap(true) {
		// The loop skips the tables while nobody looks: draw them now,
		// from a fresh snapshot, so that the first frame shown is not
		// the one the window was closed on; the loop's next frame follows.
		u.apply(u.frameWith(u.ctrl.Snapshot(), time.Now(), u.dash.overview.figures))
		u.requestRedraw()
		select {
		case u.leaksNow <- struct{}{}:
		default:
		}
	} else if u.last != nil {
		if u.last.withRows {
			u.dash.apply(u.last)
		} else {
			u.dash.applySummary(u.last)
		}
	}
	if tab != "" {
		u.dash.selectTab(tab)
	}
	u.wfShown.Store(u.dash.tabs.Selected() == u.dash.tabOf[tabWaterfall])
	u.pokePainter() // a following waterfall shown again ticks again
	u.dash.win.Show()
	u.dash.win.RequestFocus()
}

// hideDashboard is the window's close button: the app keeps running in
// the tray.
func (u *UI) hideDashboard() {
	u.dash.save()
	u.dashOpen.Store(false)
	u.wfShown.Store(false)
	u.dash.win.Hide()
}
