//go:build !headless

package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"
	"github.com/go-gl/glfw/v3.4/glfw"

	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/flock"
	"github.com/switchboard-mcp/switchboard/app/mainthread"
	"github.com/switchboard-mcp/switchboard/app/version"
	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/store"
	"github.com/switchboard-mcp/switchboard/ui"
)

// AppID is the fyne application ID (preferences, notifications, the
// Wayland app_id that ties the dashboard to its desktop entry).
const AppID = version.AppID

// RunTray is `switchboard`: the tray app with the pool in-process. It runs
// the fyne app on the calling goroutine, which must be main's. If another
// instance already serves this SWITCHBOARD_HOME, it asks that one to show
// its dashboard and returns nil; a headless pool that a client started
// makes way instead, and this app takes its place with the dashboard
// open and that pool's environment (useEnviron); one run headless on
// purpose, or one with a server that would not start here, keeps running,
// and RunTray says so in a window as well as in its error. Quit in the
// tray menu, or ctx ending, shuts the pool and every child down before it
// returns.
func RunTray(ctx context.Context, opts Options, dashboard bool) error {
	hideOwnConsole()
	if err := needDisplay(); err != nil {
		// A tray app started where no window can open (an SSH session, a
		// service) still serves its clients: it runs the pool headless.
		fmt.Fprintf(os.Stderr, "switchboard: %v; running the pool without the tray, as `switchboard serve` does\n", err)
		opts.ExitWhenIdle = opts.HeadlessExitWhenIdle
		return Serve(ctx, opts)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	st, err := FetchStatus(pctx)
	cancel()
	var startLock *flock.Lock // held while this app takes a headless pool's place
	defer func() { startLock.Unlock() }()
	if err == nil {
		err := askForDashboard(ctx)
		if err == nil {
			fmt.Fprintf(os.Stderr, "switchboard is already running (pid %d); it is showing its dashboard\n", st.PID)
			return nil
		}
		if !errors.Is(err, control.ErrHeadless) {
			return fmt.Errorf("%w (pid %d), and it did not show its dashboard: %v", ErrAlreadyRunning, st.PID, err)
		}
		if werr := openWindowSystem(); werr != nil {
			return fmt.Errorf("%w (pid %d) without a dashboard, and this one cannot open the window system (%v)", ErrAlreadyRunning, st.PID, werr)
		}
		fmt.Fprintf(os.Stderr, "switchboard is already running (pid %d) without its dashboard; asking it to make way for the tray\n", st.PID)
		p, err := takePlace(ctx, true)
		switch {
		case errors.Is(err, errShown):
			// Another launch took the pool's place meanwhile (a double
			// click): its dashboard is what this one is for.
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			now, err := FetchStatus(pctx)
			cancel()
			if err == nil {
				fmt.Fprintf(os.Stderr, "switchboard is already running (pid %d); it is showing its dashboard\n", now.PID)
			}
			return nil
		case err != nil:
			why := err.Error()
			if errors.Is(err, control.ErrConflict) {
				why = strings.TrimPrefix(why, control.ErrConflict.Error()+": ")
			}
			if why == headlessOnPurpose {
				why += ". Its dashboard comes with the tray app: " +
					"stop that pool (systemctl --user stop switchboard, or end switchboard serve), then start Switchboard again; " +
					"meanwhile `switchboard status` shows what it runs"
			}
			err = fmt.Errorf("%w (pid %d) without its tray and dashboard: %s", ErrAlreadyRunning, st.PID, why)
			showError(ctx, err)
			return err
		}
		opts.lock, startLock = p.lock, p.start
		if len(p.env) > 0 {
			// The pool runs on as it did: its config's ${VAR}s and its
			// children see the environment the client started it with.
			if err := useEnviron(p.env); err != nil {
				fmt.Fprintf(os.Stderr, "switchboard: the environment of the pool that made way is not all set here: %v\n", err)
			}
		}
		fmt.Fprintf(os.Stderr, "switchboard: the headless pool a client started (pid %d) made way; running it here with the tray\n", st.PID)
		dashboard = true // what the user launched the app for
	}
	if err := openWindowSystem(); err != nil {
		fmt.Fprintf(os.Stderr, "switchboard: the window system cannot be opened (%v); running the pool without the tray, as `switchboard serve` does\n", err)
		opts.ExitWhenIdle = opts.HeadlessExitWhenIdle
		return Serve(ctx, opts)
	}

	if mainthread.IsMain() {
		// Children are forked by fyne's event loop, on the main thread, so
		// that an upgrade, exec'd from here, keeps them (mainthread).
		opts.startOn = func(start func()) {
			if fyne.CurrentApp() == nil {
				start() // before the app exists: inline (such a child would not outlive an upgrade)
				return
			}
			fyne.DoAndWait(start)
		}
	}
	inst, err := Start(opts)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()

	fa := newFyneApp()
	u := ui.New(fa, &trayController{inst: inst, quit: stop},
		&ui.Options{Logger: inst.log, StateFile: inst.Paths.DashboardFile()})
	inst.setDashboard(u.ShowDashboard)
	defer inst.setDashboard(nil)

	served := make(chan error, 1)
	ranOut := make(chan struct{}) // fa.Run returned
	go func() {
		err := inst.Run(ctx)
		// The pool is closed (Quit, a signal, or it could not start):
		// keep the dashboard's state and end the fyne app, which returns
		// fa.Run below. The driver's Quit, unlike the app's, is a no-op
		// when fyne already stopped (on a signal fyne quits by itself; a
		// late fyne.Do then runs inline, before RunTray can return).
		fyne.Do(func() {
			u.SaveState()
			fa.Driver().Quit()
		})
		served <- err
		exitUnlessStopped(ranOut, fyneStopWait, func() {
			inst.log.Warn("the window toolkit did not stop; exiting, the pool having stopped", "wait", fyneStopWait)
			if err != nil {
				fmt.Fprintln(os.Stderr, "switchboard:", err)
				os.Exit(1)
			}
			os.Exit(0)
		})
	}()
	if startLock != nil {
		// Clients that came meanwhile wait on the start lock: let them in
		// once this pool answers, so that none starts another.
		awaitControl(ctx, 5*time.Second)
		startLock.Unlock()
	}
	u.Start(ctx)
	if !u.StartTray() {
		dashboard = true // without a tray the window is the only way in
	}
	if dashboard {
		u.ShowDashboard()
	}
	fa.Run()
	close(ranOut)
	stop()
	err = <-served
	u.Wait()
	if err != nil {
		return err
	}
	return inst.ExecUpgrade()
}

// trayController is ui.Controller over a running instance: the UI acts
// through the same pool API the control socket and the CLI use.
type trayController struct {
	inst *Instance
	quit context.CancelFunc
}

var _ ui.Controller = (*trayController)(nil)

func (c *trayController) Subscribe(ctx context.Context, buffer int) (pool.Snapshot, <-chan pool.Event) {
	snap, events := c.inst.Pool.Subscribe(ctx, buffer)
	c.inst.explain(&snap)
	redactSnapshot(&snap)
	return snap, redactEvents(ctx, events)
}

func (c *trayController) Snapshot() pool.Snapshot     { return c.inst.snapshot() }
func (c *trayController) Restart(server string) error { return c.inst.Pool.Restart(server) }
func (c *trayController) Stop(server string) error    { return c.inst.Pool.Stop(server) }
func (c *trayController) Cancel(poolID uint64) error  { return c.inst.Pool.Cancel(poolID) }
func (c *trayController) KillChild(pid int) error     { return c.inst.Pool.KillChild(pid) }

// RestartBackend restarts one child slot, a Backends row's: the server's
// other children run on.
func (c *trayController) RestartBackend(id uint64) error { return c.inst.Pool.RestartBackend(id) }

// Leaks lists leaked backends with the same detector `switchboard leaks`
// uses.
func (c *trayController) Leaks(ctx context.Context) ([]ui.Leak, error) {
	ls, err := c.inst.Leaks(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ui.Leak, 0, len(ls))
	for _, l := range ls {
		out = append(out, ui.Leak{PID: l.PID, Server: l.Server, Command: strings.Join(l.Command, " "),
			StartedAt: l.StartedAt, RSSBytes: l.RSSBytes, Reason: l.Reason, Proven: l.Proven})
	}
	return out, nil
}

// KillLeak kills one leaked backend the way `switchboard kill PID` does:
// only what the detector proves to be a leak right now.
func (c *trayController) KillLeak(ctx context.Context, pid int) error {
	res, err := c.inst.Kill(ctx, control.KillRequest{PID: pid})
	if err != nil {
		return err
	}
	for _, r := range res {
		if err := r.Err(); err != nil {
			return err
		}
	}
	return nil
}

// historyStore is the open request history, or why there is none.
func (c *trayController) historyStore() (*store.Store, error) {
	h := c.inst.history
	switch {
	case h.requests() != nil:
		return h.requests(), nil
	case h.offReason() != "":
		return nil, fmt.Errorf("%w: %s", ui.ErrUnavailable, h.offReason())
	case h != nil && h.err != nil:
		return nil, fmt.Errorf("%w: %v", ui.ErrUnavailable, h.err)
	}
	return nil, fmt.Errorf("%w: %s", ui.ErrUnavailable, historyOffInConfig)
}

func (c *trayController) History(ctx context.Context, f ui.HistoryFilter) ([]ui.HistoryRow, error) {
	st, err := c.historyStore()
	if err != nil {
		return nil, err
	}
	rs, err := st.Requests(ctx, store.Filter{Server: f.Server, Session: f.Session, Status: f.Status,
		Method: f.Method, Since: f.Since, Limit: f.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]ui.HistoryRow, 0, len(rs))
	for _, r := range rs {
		out = append(out, historyRow(r))
	}
	return out, nil
}

// historyRow is a recorded request as the UI shows it.
func historyRow(r store.Request) ui.HistoryRow {
	d, _ := r.Duration()
	return ui.HistoryRow{ID: r.ID, Run: r.Run, PoolID: r.PoolID, Server: r.Server, Session: r.Session,
		Method: r.Method, Name: r.Name, Status: r.Status, ReceivedAt: r.Received, Duration: d, PID: r.PID,
		Error: r.Err, WrittenToChild: r.WrittenToChild(), WrittenAt: r.Written, AnsweredAt: r.Answered}
}

// Timeline is one request's life from the history, with its captured
// payloads; run 0 is this run's. An orphaned response (no pool id) is
// found by its row id.
func (c *trayController) Timeline(ctx context.Context, r ui.HistoryRow) (ui.RequestDetail, error) {
	st, err := c.historyStore()
	if err != nil {
		return ui.RequestDetail{}, err
	}
	run := r.Run
	if run == 0 {
		run = st.Run()
	}
	var tl store.Timeline
	if r.PoolID == 0 && r.ID != 0 {
		tl, err = st.TimelineOf(ctx, r.ID)
	} else {
		tl, err = st.Timeline(ctx, run, r.PoolID)
	}
	if err != nil {
		return ui.RequestDetail{}, err
	}
	out := make([]ui.TimelineEntry, 0, len(tl.Steps)+2)
	for _, s := range tl.Steps {
		out = append(out, ui.TimelineEntry{At: s.At, What: s.What})
	}
	if b := tl.Backend; b != nil {
		out = append(out, ui.TimelineEntry{What: fmt.Sprintf("child PID %d", b.PID), Detail: strings.Join(b.Command, " ")})
	}
	if tl.Run.ID != 0 {
		run := fmt.Sprintf("run %d (switchboard %s, PID %d)", tl.Run.ID, tl.Run.Version, tl.Run.PID)
		if tl.Run.Crashed {
			run += ", crashed"
		}
		out = append(out, ui.TimelineEntry{What: run})
	}
	return ui.RequestDetail{Steps: out, RequestPayload: tl.Request.RequestPayload, ResponsePayload: tl.Request.ResponsePayload}, nil
}

// windowLimit caps the requests one waterfall window loads.
const windowLimit = 50_000

// Window reads a span of the history for the waterfall after the fact.
func (c *trayController) Window(ctx context.Context, from, until time.Time) (ui.HistoryWindow, error) {
	st, err := c.historyStore()
	if err != nil {
		return ui.HistoryWindow{}, err
	}
	w, err := st.Window(ctx, from, until, windowLimit)
	if err != nil {
		return ui.HistoryWindow{}, err
	}
	out := ui.HistoryWindow{From: w.From, Until: w.Until, Truncated: w.Truncated,
		Requests: make([]ui.HistoryRow, 0, len(w.Requests))}
	for _, r := range w.Requests {
		out.Requests = append(out.Requests, historyRow(r))
	}
	for _, b := range w.Backends {
		out.Children = append(out.Children, ui.HistoryChild{Run: b.Run, Server: b.Server, Session: b.Session, PID: b.PID,
			Roots: b.Roots, Started: b.Started, Exited: b.Exited, ExitCode: b.ExitCode, ExitReason: b.ExitReason})
	}
	for _, s := range w.Sessions {
		out.Sessions = append(out.Sessions, ui.HistorySession{Run: s.Run, ID: s.ID, Server: s.Server, ClientName: s.ClientName,
			ClientVersion: s.ClientVersion, Transport: s.Transport, Connected: s.Connected, Disconnected: s.Disconnected})
	}
	for _, r := range w.Runs {
		out.Runs = append(out.Runs, ui.HistoryRun{ID: r.ID, Started: r.Started, Ended: r.Ended, LastSeen: r.LastSeen,
			Crashed: r.Crashed, Version: r.Version, PID: r.PID})
	}
	for _, r := range w.Reloads {
		out.Reloads = append(out.Reloads, ui.ConfigReload{At: r.At, Changes: r.Changes, Err: r.Err})
	}
	return out, nil
}

// ConfigReloads are the instance's latest config reloads.
func (c *trayController) ConfigReloads() []ui.ConfigReload {
	rs := redactReloads(c.inst.reloads.list())
	out := make([]ui.ConfigReload, len(rs))
	for i, r := range rs {
		out[i] = ui.ConfigReload{Seq: r.Seq, At: r.At, Changes: r.Changes, Err: r.Err}
	}
	return out
}

func (c *trayController) ConfigPath() string     { return c.inst.configPath }
func (c *trayController) ConfigError() error     { return redactedError(c.inst.ConfigError()) }
func (c *trayController) HistoryDropped() uint64 { return c.inst.history.status().Dropped }

// HistoryOn reports whether the history records requests now.
func (c *trayController) HistoryOn() bool { return c.inst.history.requests() != nil }

func (c *trayController) HangThreshold() time.Duration {
	c.inst.mu.Lock()
	defer c.inst.mu.Unlock()
	if c.inst.cfg == nil {
		return 30 * time.Second
	}
	return c.inst.cfg.Hang()
}

func (c *trayController) Quit() { c.quit() }

// RestartApp upgrades the app in place to the binary it was started from
// (the installed one, if a package replaced it meanwhile).
func (c *trayController) RestartApp() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	plan, why, err := c.inst.planUpgrade(ctx, exe)
	if err != nil {
		return err
	}
	stop, err := c.inst.acceptUpgrade(plan)
	if err != nil {
		return err
	}
	c.inst.log.Info("restarting in place from the tray", "binary", exe, "carryChildren", plan.carry, "why", why)
	stop()
	return nil
}

// StartAtLogin reads the login item; the file or registry value is tiny.
func (c *trayController) StartAtLogin() bool {
	st, err := Autostart("status")
	return err == nil && st.Enabled
}

func (c *trayController) SetStartAtLogin(on bool) error {
	action := "off"
	if on {
		action = "on"
	}
	_, err := Autostart(action)
	return err
}

func (c *trayController) About() string { return version.Get().String() }

// newFyneApp is the app's fyne side, once the user's cache folder exists:
// fyne makes only its own folder inside it, and on a home that has none
// yet (a new account, a fresh container) it wrote "Fyne error: Failed to
// create fyne cache space" to stderr at every start and kept no cache.
func newFyneApp() fyne.App {
	if dir, err := os.UserCacheDir(); err == nil {
		_ = os.MkdirAll(dir, 0o700) // else fyne says why, as before
	}
	fa := fyneapp.NewWithID(AppID)
	fa.SetIcon(ui.AppIcon)
	noStopHook(fa)
	return fa
}

// showError shows err in a window of its own until the user closes it or
// ctx ends: launched from a menu, the app has no terminal for its stderr,
// and would end without a sign.
func showError(ctx context.Context, err error) {
	fa := newFyneApp()
	w := fa.NewWindow("Switchboard is already running")
	msg := widget.NewLabel(strings.ToUpper(err.Error()[:1]) + err.Error()[1:] + ".")
	msg.Wrapping = fyne.TextWrapWord
	w.SetContent(container.NewBorder(nil, container.NewCenter(widget.NewButton("OK", w.Close)), nil, nil, msg))
	w.Resize(fyne.NewSize(560, 240))
	stop := context.AfterFunc(ctx, func() { fyne.Do(w.Close) })
	defer stop()
	w.ShowAndRun()
}

// noStopHook takes fyne's own stop hook away. fyne (v2.8.1) queues it as
// its loop ends, to save fyne's preferences, which Switchboard does not
// use (the dashboard keeps its state in a file of its own, saved before
// the loop is asked to end); and the hook's hand-off to the main thread
// races the loop closing its queue: "send on closed channel", a panic
// after the pool had shut down cleanly, seen at Quit under Wine, or a
// hand-off never run, which WaitForEvents then waits on forever. With no
// hook, nothing is queued at the end. A later fyne without the method
// keeps its hook.
func noStopHook(a fyne.App) {
	if l, ok := a.Lifecycle().(interface{ SetOnStoppedHookExecuted(func()) }); ok {
		l.SetOnStoppedHookExecuted(nil)
	}
}

// openWindowSystem opens the window system as fyne will and closes it
// again, and says why it cannot: a DISPLAY left over from a closed SSH
// session, an X server that went away, a Windows session without a
// desktop. fyne logs that failure and panics at its first window, after
// the pool has started its children. Not on macOS, where a login always
// has a window server and the toolkit is best started once.
func openWindowSystem() (err error) {
	if runtime.GOOS == "darwin" {
		return nil
	}
	if err := glfw.Init(); err != nil {
		return err
	}
	// A platform error (on Windows, no helper window) is logged rather
	// than returned, and leaves GLFW uninitialised: the first call that
	// needs it panics, before any C code runs.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("it did not initialise, see the error above: %v", r)
		}
	}()
	glfw.GetTime()
	glfw.Terminate()
	return nil
}
