package ui

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// Tab names, also the titles' first words.
const (
	tabOverview = "Overview"
	tabSessions = "Sessions"
	tabInFlight = "In flight"
	tabBackends = "Backends"
	tabHistory  = "History"
	tabLeaks    = "Leaks"
)

// dashboard is the window with one tab per view. Everything in it belongs
// to the UI goroutine.
type dashboard struct {
	u   *UI
	win fyne.Window

	tabs   *container.AppTabs
	tabOf  map[string]*container.TabItem
	nameOf map[*container.TabItem]string
	counts map[string][2]int // the count and hung count each tab's title shows
	tabsW  float32           // the tab bar's width as laid out (0: not yet)
	banner *fyne.Container
	bannerText,
	status *widget.Label

	sessions, inflight, backends, leaks *table
	hangNote, backendDetail, leakNote   *widget.Label
	inflightDetail                      *widget.Label
	leakDetail                          *widget.Label
	killAll                             *widget.Button

	history   *historyView
	overview  *overviewView
	waterfall *waterfallView
}

func newDashboard(u *UI) *dashboard {
	d := &dashboard{u: u, tabOf: map[string]*container.TabItem{}, nameOf: map[*container.TabItem]string{}, counts: map[string][2]int{}}
	d.win = u.app.NewWindow("Switchboard")
	d.win.SetCloseIntercept(u.hideDashboard)

	d.sessions = newTable(sessionColumns, "No sessions yet. Point a client at `switchboard connect NAME`:\n"+
		"`switchboard setup claude-code` (or cursor, vscode, claude-desktop) does it for you.")

	d.inflight = newTable(inflightColumns, "Nothing in flight. Requests show here while a child works on them;\n"+
		"the Waterfall tab shows them over time.")
	d.inflight.onButton = func(_ column, r row) { d.confirmCancel(r) }
	d.inflightDetail = widget.NewLabel("Select a request to see what it waits for.")
	d.inflightDetail.Wrapping = fyne.TextWrapWord
	d.inflight.onSelect = func(r row) { d.inflightDetail.SetText(r.detail) }
	d.hangNote = widget.NewLabel("")
	d.hangNote.Wrapping = fyne.TextWrapWord

	d.backends = newTable(backendColumns, "No children running. A server's child starts with its first session:\n"+
		"run `switchboard connect NAME`, or use a client set up with `switchboard setup`.")
	d.backendDetail = widget.NewLabel("Select a backend to see its stderr.")
	d.backendDetail.Wrapping = fyne.TextWrapBreak
	d.backendDetail.TextStyle.Monospace = true
	d.backends.onButton = func(c column, r row) {
		switch c.button {
		case rowRestart: // this row's child only: the server's others run on
			d.confirmRestartChild(r)
		case "Kill":
			d.confirmKillChild(r)
		}
	}
	d.backends.onSelect = func(r row) {
		// The row's name whole (its cell may be cut), then its stderr.
		name := r.cells[0] + ", PID " + r.cells[2]
		if r.detail == "" {
			d.backendDetail.SetText(name + ": nothing on stderr.")
			return
		}
		d.backendDetail.SetText(name + "\n\n" + r.detail)
	}

	d.leaks = newTable(leakColumns, "Nothing to clean up.")
	d.leaks.onButton = func(_ column, r row) { d.confirmKillLeak(r) }
	d.leakDetail = widget.NewLabel("Select a process to see why it is a leak, and its command.")
	d.leakDetail.Wrapping = fyne.TextWrapWord
	d.leaks.onSelect = func(r row) { d.leakDetail.SetText(r.detail) }
	d.leakNote = widget.NewLabel("Looking for leaked backends…")
	d.leakNote.Wrapping = fyne.TextWrapWord
	d.killAll = widget.NewButton("Kill all", d.confirmKillAll)
	d.killAll.Importance = widget.DangerImportance
	d.killAll.Disable()

	d.history = newHistoryView(u)
	d.overview = newOverviewView(u)
	d.waterfall = newWaterfallView(u)

	inflightView := container.NewVSplit(d.inflight.view, container.NewVScroll(d.inflightDetail))
	inflightView.Offset = 0.8
	backendsView := container.NewVSplit(d.backends.view, container.NewVScroll(d.backendDetail))
	backendsView.Offset = 0.75
	leaksView := container.NewVSplit(d.leaks.view, container.NewVScroll(d.leakDetail))
	leaksView.Offset = 0.75
	d.tabs = container.NewAppTabs(
		d.tab(tabOverview, theme.HomeIcon(), d.overview.view),
		// The waterfall needs more room than a small window has: there it
		// scrolls rather than make the window grow (the plot's own wheel
		// and drag still zoom and pan it).
		d.tab(tabWaterfall, theme.ListIcon(), container.NewScroll(d.waterfall.view)),
		d.tab(tabSessions, theme.AccountIcon(), d.sessions.view),
		d.tab(tabInFlight, theme.HistoryIcon(), container.NewBorder(d.hangNote, nil, nil, nil, inflightView)),
		d.tab(tabBackends, theme.ComputerIcon(), backendsView),
		d.tab(tabHistory, theme.StorageIcon(), d.history.view),
		d.tab(tabLeaks, theme.WarningIcon(), container.NewBorder(
			container.NewBorder(nil, nil, nil, d.killAll, d.leakNote), nil, nil, nil, leaksView)),
	)
	d.tabs.OnSelected = func(t *container.TabItem) {
		d.retitle() // a compact tab bar names the selected tab in full
		u.wfShown.Store(t == d.tabOf[tabWaterfall] && u.dashOpen.Load())
		switch t {
		case d.tabOf[tabWaterfall]:
			d.waterfall.repaint()
			d.win.Canvas().Focus(d.waterfall.plot) // its keys work at once
		case d.tabOf[tabSessions]:
			d.sessions.refresh()
		case d.tabOf[tabInFlight]:
			d.inflight.refresh()
		case d.tabOf[tabBackends]:
			d.backends.refresh()
		case d.tabOf[tabLeaks]:
			d.leaks.refresh()
		case d.tabOf[tabHistory]:
			d.history.refreshIfStale()
		}
	}

	d.bannerText = widget.NewLabel("")
	d.bannerText.Wrapping = fyne.TextWrapWord
	d.bannerText.Importance = widget.DangerImportance
	d.bannerText.TextStyle.Bold = true
	bg := canvas.NewRectangle(withAlpha(theme.Color(theme.ColorNameError), 0x30))
	d.banner = container.NewStack(bg, d.bannerText)
	d.banner.Hide()
	d.status = widget.NewLabel("")
	d.status.Truncation = fyne.TextTruncateEllipsis

	content := container.NewBorder(d.banner, d.status, nil, nil, d.tabs)
	content.Layout = tabsLayout{content.Layout, d}
	d.win.SetContent(content)
	d.restore()
	d.shortcuts()
	return d
}

// shortcuts: Ctrl+1 to Ctrl+7 pick a tab (Cmd on macOS), Ctrl+Tab and
// Ctrl+PageDown the next, Ctrl+Shift+Tab and Ctrl+PageUp the previous,
// Ctrl+W closes the window (the app stays in the tray).
func (d *dashboard) shortcuts() {
	c := d.win.Canvas()
	mod := fyne.KeyModifierShortcutDefault
	for i := range d.tabs.Items {
		key := fyne.KeyName(strconv.Itoa(i + 1))
		c.AddShortcut(&desktop.CustomShortcut{KeyName: key, Modifier: mod}, func(fyne.Shortcut) { d.selectIndex(i) })
	}
	next := func(fyne.Shortcut) { d.selectIndex(d.tabs.SelectedIndex() + 1) }
	prev := func(fyne.Shortcut) { d.selectIndex(d.tabs.SelectedIndex() - 1) }
	c.AddShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyTab, Modifier: fyne.KeyModifierControl}, next)
	c.AddShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyPageDown, Modifier: fyne.KeyModifierControl}, next)
	c.AddShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyTab, Modifier: fyne.KeyModifierControl | fyne.KeyModifierShift}, prev)
	c.AddShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyPageUp, Modifier: fyne.KeyModifierControl}, prev)
	c.AddShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyW, Modifier: mod}, func(fyne.Shortcut) { d.u.hideDashboard() })
}

// selectIndex selects the i-th tab, wrapping around.
func (d *dashboard) selectIndex(i int) {
	n := len(d.tabs.Items)
	d.tabs.SelectIndex(((i % n) + n) % n)
}

func (d *dashboard) tab(name string, icon fyne.Resource, content fyne.CanvasObject) *container.TabItem {
	t := container.NewTabItemWithIcon(name, icon, content)
	d.tabOf[name] = t
	d.nameOf[t] = name
	return t
}

// minCap is a layout that asks for at most max, whatever its content
// asks: what does not fit is cut rather than make the window grow.
type minCap struct{ max fyne.Size }

func (l minCap) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	layout.NewStackLayout().Layout(objs, size)
}

func (l minCap) MinSize(objs []fyne.CanvasObject) fyne.Size {
	m := layout.NewStackLayout().MinSize(objs)
	return fyne.NewSize(min(m.Width, l.max.Width), min(m.Height, l.max.Height))
}

// tabsLayout is the window's layout (border, with the tabs full width):
// it makes the tabs' titles compact when the window is too narrow for
// them whole, where the toolkit would fold the tabs that do not fit into
// a menu, the selected one with them.
type tabsLayout struct {
	border fyne.Layout
	d      *dashboard
}

func (l tabsLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	if size.Width != l.d.tabsW {
		l.d.tabsW = size.Width
		l.d.retitle()
	}
	l.border.Layout(objs, size)
}

func (l tabsLayout) MinSize(objs []fyne.CanvasObject) fyne.Size { return l.border.MinSize(objs) }

// tabTitle is a tab's title: its name and counts, "In flight (12, 1
// hung)", "Leaks (3, 1 suspect)"; compact, its counts only, "12, 1 hung",
// or nothing (the tab shows its icon). The second count, of the first's
// rows, is the hung requests, or for Leaks the suspects.
func tabTitle(name string, n, hung int, compact bool) string {
	counts := ""
	switch {
	case hung > 0 && name == tabLeaks:
		counts = fmt.Sprintf("%d, %s", n, plural(hung, "suspect"))
	case hung > 0:
		counts = fmt.Sprintf("%d, %d hung", n, hung)
	case n > 0:
		counts = strconv.Itoa(n)
	}
	switch {
	case compact:
		return counts
	case counts != "":
		return name + " (" + counts + ")"
	}
	return name
}

// tabWidth is how wide the tab bar draws a tab titled title.
func tabWidth(title string) float32 {
	w := theme.IconInlineSize() + 2*theme.InnerPadding() + theme.Padding()
	if title != "" {
		w += theme.Padding() + fyne.MeasureText(title, theme.TextSize(), fyne.TextStyle{Bold: true}).Width + theme.InnerPadding()
	}
	return w
}

// retitle sets the tabs' titles from their counts: whole when they fit
// the tab bar, else compact but for the selected tab's. It redraws the
// tab bar only when a title changed.
func (d *dashboard) retitle() {
	var whole float32
	for _, t := range d.tabs.Items {
		c := d.counts[d.nameOf[t]]
		whole += tabWidth(tabTitle(d.nameOf[t], c[0], c[1], false))
	}
	compact := d.tabsW > 0 && whole > d.tabsW
	changed := false
	for _, t := range d.tabs.Items {
		name := d.nameOf[t]
		c := d.counts[name]
		if title := tabTitle(name, c[0], c[1], compact && t != d.tabs.Selected()); t.Text != title {
			t.Text = title
			changed = true
		}
	}
	if changed {
		d.tabs.Refresh()
	}
}

func withAlpha(c color.Color, a uint8) color.Color {
	r, g, b, _ := c.RGBA()
	return color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: a}
}

func (d *dashboard) selectTab(name string) {
	if t := d.tabOf[name]; t != nil {
		d.tabs.Select(t)
	}
	if name == tabHistory {
		d.history.refreshIfStale()
	}
}

// applySummary shows the parts of f that need no table rows.
func (d *dashboard) applySummary(f *frame) {
	if f.banner == "" {
		d.banner.Hide()
	} else {
		setText(d.bannerText, f.banner)
		d.banner.Show()
	}
	setText(d.status, f.sum.String())
	setText(d.leakNote, f.leakNote)
	d.history.setServers(f.servers)
}

// apply shows f.
func (d *dashboard) apply(f *frame) {
	d.applySummary(f)
	d.overview.apply(f.overview)
	d.setTitle(tabSessions, len(f.sessions), 0)
	d.setTitle(tabInFlight, len(f.inflight), f.sum.Hung)
	d.setTitle(tabBackends, len(f.backends), 0)
	d.setTitle(tabLeaks, len(f.leaks), f.sum.suspects())
	d.sessions.setRows(f.sessions)
	d.inflight.setRows(f.inflight)
	d.backends.setRows(f.backends)
	d.leaks.setRows(f.leaks)
	killAll := "Kill all"
	if n := f.sum.Killable; n > 0 {
		killAll = fmt.Sprintf("Kill all (%d)", n)
		d.killAll.Enable()
	} else {
		d.killAll.Disable()
	}
	if d.killAll.Text != killAll {
		d.killAll.SetText(killAll)
	}
	note := fmt.Sprintf("Requests waiting longer than %s are highlighted. Cancel answers the client with an error and sends notifications/cancelled to the child.", formatAge(f.hang))
	if f.sum.Hung > 0 {
		note = fmt.Sprintf("%d hung (past %s). ", f.sum.Hung, formatAge(f.hang)) + note
	}
	setText(d.hangNote, note)
}

// setText changes a label only when its text changed: a label refresh
// shapes its text again.
func setText(l *widget.Label, s string) {
	if l.Text != s {
		l.SetText(s)
	}
}

// setTitle puts a count in a tab's title ("In flight (12, 1 hung)") and
// redraws the tab bar only when it changed.
func (d *dashboard) setTitle(name string, n, hung int) {
	if c := [2]int{n, hung}; d.counts[name] != c {
		d.counts[name] = c
		d.retitle()
	}
}

// confirmKillAll asks before killing every proven leak the leak poller
// found last: what the Kill all button and the tray's item count, whether
// or not the dashboard was open to show them. The app kills a PID only if
// it still proves it a leak.
func (d *dashboard) confirmKillAll() {
	targets := d.u.killableLeaks()
	if len(targets) == 0 {
		dialog.ShowInformation("No leaked backends", "There is nothing to kill.", d.win)
		return
	}
	var lines []string
	for i, r := range targets {
		if i == 8 {
			lines = append(lines, fmt.Sprintf("… and %d more", len(targets)-i))
			break
		}
		lines = append(lines, fmt.Sprintf("PID %d  %s", r.PID, r.Server))
	}
	msg := fmt.Sprintf("Kill %s?\n\n%s", plural(len(targets), "leaked backend"), strings.Join(lines, "\n"))
	dialog.ShowConfirm("Kill leaked backends", msg, func(ok bool) {
		if !ok {
			return
		}
		d.u.act("kill leaked backends", func(ctx context.Context) error {
			defer d.u.pollLeaksNow()
			var errs []string
			for _, r := range targets {
				if err := d.u.ctrl.KillLeak(ctx, r.PID); err != nil {
					errs = append(errs, fmt.Sprintf("PID %d: %v", r.PID, err))
				}
			}
			if len(errs) > 0 {
				return fmt.Errorf("%s", strings.Join(errs, "; "))
			}
			return nil
		})
	}, d.win)
}

func (d *dashboard) showError(err error) { dialog.ShowError(err, d.win) }

// pollLeaksNow asks the leak poller to look again (after a kill).
func (u *UI) pollLeaksNow() {
	select {
	case u.leaksNow <- struct{}{}:
	default:
	}
}

// historyView is the History tab: filters, the matching requests, and the
// timeline of the selected one. Queries run off the UI goroutine.
type historyView struct {
	u    *UI
	view fyne.CanvasObject

	server, status, since *widget.Select
	session, method       *widget.Entry
	note                  *widget.Label
	results               *table
	timeline              *widget.List
	steps                 []TimelineEntry
	selected              HistoryRow
	inWaterfall           *widget.Button
	servers               []string
	loadedAt              time.Time
	seq                   int                // the latest query; older answers are dropped
	searching             context.CancelFunc // cancels the query in progress
	stepsSeq              int                // the latest timeline asked for or cleared; older answers are dropped
	loadingSteps          context.CancelFunc // cancels the timeline read in progress
}

const (
	anyServer = "All servers"
	anyStatus = "Any status"
)

var sinceChoices = []struct {
	label string
	d     time.Duration
}{{"Last 15 minutes", 15 * time.Minute}, {"Last hour", time.Hour}, {"Last 24 hours", 24 * time.Hour},
	{"Last 7 days", 7 * 24 * time.Hour}, {"Any time", 0}}

func newHistoryView(u *UI) *historyView {
	h := &historyView{u: u}
	h.server = widget.NewSelect([]string{anyServer}, func(string) { h.query() })
	h.server.SetSelected(anyServer)
	h.status = widget.NewSelect([]string{anyStatus, "ok", "error", "timeout", "cancelled", "failed", "orphaned", "abandoned", "in-flight"},
		func(string) { h.query() })
	h.status.SetSelected(anyStatus)
	var labels []string
	for _, c := range sinceChoices {
		labels = append(labels, c.label)
	}
	h.since = widget.NewSelect(labels, func(string) { h.query() })
	h.since.SetSelected(sinceChoices[1].label)
	h.session = widget.NewEntry()
	h.session.SetPlaceHolder("session")
	h.session.OnSubmitted = func(string) { h.query() }
	h.method = widget.NewEntry()
	h.method.SetPlaceHolder("method")
	h.method.OnSubmitted = func(string) { h.query() }
	search := widget.NewButtonWithIcon("Search", theme.SearchIcon(), h.query)
	h.note = widget.NewLabel("")
	h.note.Truncation = fyne.TextTruncateEllipsis
	h.results = newTable(historyColumns, "No requests match. Widen the time range or clear the filters.")
	h.results.onSelect = h.showTimeline
	h.timeline = newTimelineList(func() []TimelineEntry { return h.steps }, "—")
	// In a narrow window the filters narrow too (their text cut) rather
	// than make the window grow.
	filters := container.New(minCap{fyne.NewSize(400, math.MaxFloat32)},
		container.NewGridWithColumns(6, h.server, h.session, h.status, h.method, h.since, search))
	h.inWaterfall = widget.NewButtonWithIcon("Show in the waterfall", theme.ListIcon(), func() {
		u.showDashboard(tabWaterfall)
		u.dash.waterfall.openAround(h.selected)
	})
	h.inWaterfall.Disable()
	split := container.NewVSplit(h.results.view, container.NewBorder(
		container.NewBorder(nil, nil, nil, h.inWaterfall,
			widget.NewLabelWithStyle("Timeline of the selected request", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})),
		nil, nil, nil, h.timeline))
	split.Offset = 0.6
	h.view = container.NewBorder(container.NewVBox(filters, h.note), nil, nil, nil, split)
	return h
}

// setServers offers the configured servers in the server filter.
func (h *historyView) setServers(names []string) {
	if slices.Equal(h.servers, names) {
		return
	}
	h.servers = append([]string(nil), names...)
	h.server.SetOptions(append([]string{anyServer}, names...))
}

func isUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// unavailableReason is an ErrUnavailable error's message without the
// "not available: " its wrapping adds.
func unavailableReason(err error) string {
	return strings.TrimPrefix(err.Error(), ErrUnavailable.Error()+": ")
}

// historyLimit is how many requests the History tab shows at most, the
// latest. It asks for one more, to know whether more match.
const historyLimit = 1000

// filter reads the filter widgets.
func (h *historyView) filter(now time.Time) HistoryFilter {
	f := HistoryFilter{Session: strings.TrimSpace(h.session.Text), Method: strings.TrimSpace(h.method.Text), Limit: historyLimit + 1}
	if s := h.server.Selected; s != anyServer {
		f.Server = s
	}
	if s := h.status.Selected; s != anyStatus {
		f.Status = s
	}
	for _, c := range sinceChoices {
		if c.label == h.since.Selected && c.d > 0 {
			f.Since = now.Add(-c.d)
		}
	}
	return f
}

// refreshIfStale queries again when the tab is shown and the last answer
// is older than a few seconds.
func (h *historyView) refreshIfStale() {
	if time.Since(h.loadedAt) > 5*time.Second {
		h.query()
	}
}

// query runs the filter off the UI goroutine and shows the answer.
func (h *historyView) query() {
	if h.results == nil {
		return // a Select fired while the view is being built
	}
	f := h.filter(time.Now())
	h.seq++
	seq := h.seq
	h.loadedAt = time.Now()
	h.note.SetText("Searching…")
	u := h.u
	u.query(&h.searching, func(ctx context.Context) {
		rows, err := u.ctrl.History(ctx, f)
		fyne.Do(func() {
			if seq != h.seq {
				return
			}
			h.show(rows, err)
		})
	})
}

// show puts a query's answer on screen.
func (h *historyView) show(rows []HistoryRow, err error) {
	switch {
	case err == nil && len(rows) > historyLimit:
		rows = rows[:historyLimit]
		h.note.SetText(fmt.Sprintf("The latest %d requests (more match: narrow the filter). Select one to see its timeline.", historyLimit))
	case err == nil:
		h.note.SetText(fmt.Sprintf("%s. Select one to see its timeline.", plural(len(rows), "request")))
	case isUnavailable(err):
		h.note.SetText("History is not available: " + unavailableReason(err))
	default:
		h.note.SetText("History query failed: " + err.Error())
	}
	h.results.setRows(historyRows(rows))
	h.inWaterfall.Disable()
	h.setSteps(nil)
}

// setSteps shows steps as the timeline, and drops the answer of a
// timeline read still on its way: what is shown now is newer.
func (h *historyView) setSteps(steps []TimelineEntry) {
	h.stepsSeq++
	if h.loadingSteps != nil {
		h.loadingSteps()
		h.loadingSteps = nil
	}
	h.steps = steps
	h.timeline.Refresh()
}

// showTimeline loads the selected request's timeline. Only the latest
// selection's answer is shown: a later selection or search cancels the
// read and drops its answer.
func (h *historyView) showTimeline(r row) {
	u := h.u
	hr := r.hist
	h.selected = hr
	h.inWaterfall.Enable()
	h.stepsSeq++
	seq := h.stepsSeq
	u.query(&h.loadingSteps, func(ctx context.Context) {
		d, err := u.ctrl.Timeline(ctx, hr)
		if err != nil {
			d.Steps = []TimelineEntry{{At: time.Now(), What: "timeline not available", Detail: err.Error()}}
		}
		fyne.Do(func() {
			if seq != h.stepsSeq {
				return
			}
			h.loadingSteps = nil
			h.steps = d.Steps
			h.timeline.Refresh()
		})
	})
}
