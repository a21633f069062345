package ui

import (
	"context"
	"fmt"
	"image/color"
	"math"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

const tabWaterfall = "Waterfall"

// Choices of the waterfall's source: live, or a window of the history.
const modeLive = "Live"

var historyChoices = []struct {
	label string
	d     time.Duration
}{{"History: last 15 minutes", 15 * time.Minute}, {"History: last hour", time.Hour},
	{"History: last 6 hours", 6 * time.Hour}, {"History: last 24 hours", 24 * time.Hour}}

// beforeCrash is the window "the two minutes before" a crash marker opens:
// from two minutes before it to a little after.
const (
	beforeCrash = 2 * time.Minute
	afterCrash  = 15 * time.Second
)

// waterfallView is the Waterfall tab: requests as bars per session,
// grouped by server, live or over a window of the history, with the
// selected request's timeline and payload below. Its fields belong to the
// UI goroutine; frames are drawn by the painter and handed over.
type waterfallView struct {
	u    *UI
	view fyne.CanvasObject
	plot *wfPlot

	v       wfView
	hist    *wfSource // the history window shown; nil while live
	histSeq int       // the latest window asked for; older answers are dropped
	// histRead and selRead cancel the history read in progress, for the
	// window and for the selected request's timeline.
	histRead, selRead context.CancelFunc
	pxW, pxH          int // the plot's size in pixels
	scale             float32
	frame             *wfFrame
	sel               wfReq // the selected request (PoolID 0: none)
	selSeq            int

	mode      *widget.Select
	modes     []string
	followBtn *widget.Button
	rangeLbl  *widget.Label
	note      *widget.Label
	details   *wfDetails
	loading   bool
}

func newWaterfallView(u *UI) *waterfallView {
	w := &waterfallView{u: u, scale: 1, v: wfView{To: u.opts.now(), Span: defaultSpan, Follow: true}}
	w.plot = newWFPlot(w)
	w.modes = []string{modeLive}
	for _, c := range historyChoices {
		w.modes = append(w.modes, c.label)
	}
	w.mode = widget.NewSelect(w.modes, w.modeChosen)
	w.mode.SetSelected(modeLive)
	w.followBtn = widget.NewButtonWithIcon("Follow now", theme.MediaPlayIcon(), w.toggleFollow)
	zoomIn := widget.NewButtonWithIcon("", theme.ZoomInIcon(), func() { w.zoomBy(0.5, w.zoomAnchor()) })
	zoomOut := widget.NewButtonWithIcon("", theme.ZoomOutIcon(), func() { w.zoomBy(2, w.zoomAnchor()) })
	back := widget.NewButtonWithIcon("", theme.NavigateBackIcon(), func() { w.panBy(-0.5) })
	fwd := widget.NewButtonWithIcon("", theme.NavigateNextIcon(), func() { w.panBy(0.5) })
	lastCrash := widget.NewButtonWithIcon("Last crash", theme.WarningIcon(), w.openLastCrash)
	w.rangeLbl = widget.NewLabel("")
	w.rangeLbl.TextStyle.Monospace = true
	w.note = widget.NewLabel("")
	w.note.Wrapping = fyne.TextWrapWord // beside the legend, a long note takes two lines rather than be cut
	w.note.Alignment = fyne.TextAlignTrailing
	bar := container.NewHBox(container.NewGridWrap(fyne.NewSize(230, w.mode.MinSize().Height), w.mode), w.followBtn,
		back, zoomOut, zoomIn, fwd, lastCrash, w.rangeLbl)
	w.details = newWFDetails(u)
	split := container.NewVSplit(w.plot, w.details.view)
	split.Offset = 0.62
	w.view = container.NewBorder(container.NewVBox(bar, container.NewBorder(nil, nil, legend(), nil, w.note)), nil, nil, nil, split)
	w.showFollow()
	return w
}

// legend names the colours.
func legend() fyne.CanvasObject {
	items := []struct {
		c    color.RGBA
		text string
	}{{colOK, "ok"}, {colError, "error"}, {colFailed, "failed"}, {colTimeout, "timeout"}, {colCancelled, "cancelled"},
		{colInFlight, "in flight"}, {colHung, "hung"}, {colAbandoned, "abandoned"},
		{colStart, "child started"}, {colCrash, "crash"}, {colReload, "config reload"}}
	box := container.NewHBox()
	for _, it := range items {
		sw := canvas.NewRectangle(it.c)
		sw.CornerRadius = 2
		t := canvas.NewText(it.text, theme.Color(theme.ColorNamePlaceHolder))
		t.TextSize = 11
		box.Add(container.NewHBox(container.NewCenter(container.NewGridWrap(fyne.NewSquareSize(10), sw)), t))
	}
	return container.New(layout.NewCustomPaddedLayout(0, 2, 8, 8), box)
}

// palette is the theme's colours for the painter. UI goroutine.
func palette() wfPalette {
	bg := rgba(theme.Color(theme.ColorNameBackground))
	fg := rgba(theme.Color(theme.ColorNameForeground))
	return wfPalette{
		Background: bg,
		Stripe:     mix(fg, bg, 0x0a),
		Header:     rgba(theme.Color(theme.ColorNameHeaderBackground)),
		Grid:       mix(fg, bg, 0x10),
		GridMajor:  mix(fg, bg, 0x28),
		Text:       mix(fg, bg, 0x90),
		Now:        rgba(theme.Color(theme.ColorNamePrimary)),
		Selection:  fg,
	}
}

// plotResized learns the plot's size from its layout.
func (w *waterfallView) plotResized(width, height float32) {
	scale := float32(1)
	if c := fyne.CurrentApp().Driver().CanvasForObject(w.plot); c != nil {
		scale = c.Scale()
	}
	pw, ph := int(width*scale), int(height*scale)
	if pw == w.pxW && ph == w.pxH && scale == w.scale {
		return
	}
	w.pxW, w.pxH, w.scale = pw, ph, scale
	w.repaint()
}

// repaint asks for a frame of the current view.
func (w *waterfallView) repaint() {
	if w.pxW <= 0 || w.pxH <= 0 {
		return
	}
	v := w.v
	v.Hang = 30 * time.Second
	if w.u.last != nil {
		v.Hang = w.u.last.hang
	}
	w.u.requestPaint(&paintJob{hist: w.hist, view: v, w: w.pxW, h: w.pxH, scale: w.scale, pal: palette()})
}

// apply shows a frame the painter drew.
func (w *waterfallView) apply(f *wfFrame) {
	w.frame = f
	w.plot.setFrame(f)
	from, to := f.view.from(), f.view.To
	setText(w.rangeLbl, fmt.Sprintf("%s – %s  %s", clockLabel(from, time.Second), clockLabel(to, time.Second), spanLabel(f.view.Span)))
	var note []string
	note = append(note, fmt.Sprintf("%s in view", plural(f.Drawn, "request")))
	if f.src != nil {
		if f.src.Truncated {
			note = append(note, "the window holds more than were loaded: narrow it")
		}
		if f.src.live && f.src.Trimmed && from.Before(f.src.Since) {
			where := " are in History"
			if f.src.NoHistory {
				where = " are not kept (the history is off)"
			}
			note = append(note, "requests that ended before "+clockLabel(f.src.Since, time.Second)+where)
		}
	}
	setText(w.note, strings.Join(note, " · "))
	w.followSelected(f)
}

// followSelected keeps the details of a selected request in flight true
// as frames come: its time so far, then, once it ended, how it ended and
// its recorded timeline.
func (w *waterfallView) followSelected(f *wfFrame) {
	if w.sel.PoolID == 0 || !w.sel.open() || f.src == nil {
		return
	}
	r, ok := f.src.find(w.sel.key())
	switch {
	case !ok:
	case r.open():
		w.details.showSummary(r, f.now)
	default:
		w.selectReq(r)
	}
}

// setView changes the view and repaints; a history view panned or zoomed
// out of its window reads the history it now shows.
func (w *waterfallView) setView(v wfView) {
	w.v = v
	w.showFollow()
	w.repaint()
	w.extendWindow()
}

// extendWindow reads a wider window of the history when the view has left
// the one loaded: what is in view, and half a view either side, up to
// now. One read at a time; the view stays where the user put it.
func (w *waterfallView) extendWindow() {
	h := w.hist
	if h == nil || w.loading || h.Note != "" {
		return
	}
	from, to := w.v.from(), w.v.To
	now := w.u.opts.now()
	slack := w.v.Span / 20
	if !from.Before(h.Since.Add(-slack)) && (!to.After(h.Until.Add(slack)) || !h.Until.Before(now)) {
		return
	}
	nfrom, nto := from.Add(-w.v.Span/2), to.Add(w.v.Span/2)
	if nto.After(now) {
		nto = now
	}
	if nto.Sub(nfrom) > maxSpan {
		return
	}
	w.histSeq++
	seq := w.histSeq
	w.loading = true
	setText(w.note, "Reading more of the history…")
	u := w.u
	u.query(&w.histRead, func(ctx context.Context) {
		hw, err := u.ctrl.Window(ctx, nfrom, nto)
		fyne.Do(func() {
			if seq != w.histSeq {
				return
			}
			w.loading = false
			if err != nil {
				setText(w.note, "Could not read more of the history: "+err.Error())
				return
			}
			w.hist = historySource(hw, nto)
			w.repaint()
		})
	})
}

func (w *waterfallView) showFollow() {
	imp := widget.MediumImportance
	if w.v.Follow {
		imp = widget.HighImportance
	}
	if w.followBtn.Importance != imp {
		w.followBtn.Importance = imp
		w.followBtn.Refresh()
	}
}

// now is the view at this moment: a following view's right edge moves.
func (w *waterfallView) current() wfView { return w.v.at(w.nowTime()) }

func (w *waterfallView) nowTime() time.Time {
	if w.hist != nil {
		return w.hist.Until
	}
	return w.u.opts.now()
}

// zoomAnchor is where the buttons and keys zoom: the right edge while
// following, else the middle.
func (w *waterfallView) zoomAnchor() float64 {
	if w.v.Follow {
		return 1
	}
	return 0.5
}

func (w *waterfallView) zoomBy(factor, frac float64) { w.setView(w.current().zoom(factor, frac)) }

func (w *waterfallView) panBy(frac float64) {
	limit := w.u.opts.now()
	if w.hist != nil {
		limit = time.Time{}
	}
	w.setView(w.current().pan(frac, limit))
}

func (w *waterfallView) toggleFollow() { w.follow(!w.v.Follow) }

// follow turns following now on or off; on, it returns to the live
// requests.
func (w *waterfallView) follow(on bool) {
	if on && w.hist != nil {
		w.mode.SetSelected(modeLive) // back to live: modeChosen follows
		return
	}
	v := w.current()
	v.Follow = on
	if on {
		v.To = w.u.opts.now()
	}
	w.setView(v)
}

// scrollLanes scrolls the lanes by d logical pixels.
func (w *waterfallView) scrollLanes(d float32) {
	v := w.v
	v.Scroll = max(v.Scroll+int(d*w.scale), 0)
	if w.frame != nil {
		v.Scroll = min(v.Scroll, w.frame.maxScroll())
	}
	if v.Scroll != w.v.Scroll {
		w.setView(v)
	}
}

// modeChosen switches between live and a window of the history.
func (w *waterfallView) modeChosen(choice string) {
	if w.followBtn == nil || w.details == nil {
		return // the Select fired while the view is being built
	}
	if choice == modeLive {
		w.hist = nil
		w.histSeq++
		if w.histRead != nil {
			w.histRead() // its answer would be dropped
		}
		w.loading = false
		v := w.v
		v.Follow, v.To = true, w.u.opts.now()
		v.Span = min(v.Span, liveRetain)
		w.setView(v)
		return
	}
	now := w.u.opts.now()
	for _, c := range historyChoices {
		if c.label == choice {
			w.loadWindow(now.Add(-c.d), now, choice)
			return
		}
	}
	// A window made by a marker: it is loaded already or loading.
}

// loadWindow reads [from, until] from the history off the UI goroutine
// and shows it.
func (w *waterfallView) loadWindow(from, until time.Time, label string) {
	w.loadWindowThen(from, until, label, nil)
}

// loadWindowThen is loadWindow, then runs then (on the UI goroutine)
// once the window is shown.
func (w *waterfallView) loadWindowThen(from, until time.Time, label string, then func()) {
	w.histSeq++
	seq := w.histSeq
	w.loading = true
	setText(w.note, "Reading "+label+" from the history…")
	u := w.u
	u.query(&w.histRead, func(ctx context.Context) {
		hw, err := u.ctrl.Window(ctx, from, until)
		var src *wfSource
		if err != nil {
			src = &wfSource{Since: from, Until: until}
			switch {
			case isUnavailable(err):
				src.Note = "History is not available: " + unavailableReason(err)
			default:
				src.Note = "Could not read the history: " + err.Error()
			}
		} else {
			src = historySource(hw, until)
		}
		fyne.Do(func() {
			if seq != w.histSeq {
				return
			}
			w.loading = false
			w.hist = src
			w.setView(wfView{To: until, Span: until.Sub(from), Hang: w.v.Hang, Selected: w.v.Selected})
			if then != nil {
				then()
			}
		})
	})
}

// openAround shows a recorded request in the waterfall, from the history:
// a minute before it to half a minute after it ended, selected. An
// orphaned answer (no pool id) has no bar to select: its server's lanes
// are shown, with nothing selected.
func (w *waterfallView) openAround(r HistoryRow) {
	end := r.AnsweredAt
	if end.IsZero() {
		end = r.ReceivedAt.Add(r.Duration)
	}
	if end.Before(r.ReceivedAt.Add(time.Second)) {
		end = r.ReceivedAt.Add(time.Second)
	}
	what := strings.TrimSpace(r.Method + " " + r.Name)
	if r.PoolID == 0 {
		what = "an orphaned answer"
	}
	label := fmt.Sprintf("Around %s at %s", what, clockLabel(r.ReceivedAt, time.Second))
	w.addMode(label)
	w.mode.SetSelected(label)
	k := wfKey{Run: r.Run, PoolID: r.PoolID}
	w.loadWindowThen(r.ReceivedAt.Add(-time.Minute), end.Add(30*time.Second), label, func() {
		if k.PoolID == 0 {
			w.selectReq(wfReq{})
			w.reveal(r.Server, wfKey{})
			return
		}
		w.reveal(r.Server, k) // selected, its lane in view
	})
}

// markerTapped opens the two minutes before a crash; any other marker
// shows its details.
func (w *waterfallView) markerTapped(m wfMarker) {
	if m.Kind.crash() {
		w.openBefore(m)
		return
	}
	w.details.showMarker(m)
}

// openLastCrash shows the two minutes before the latest crash: a child's
// or Switchboard's, in what is shown, else in the last day of history.
func (w *waterfallView) openLastCrash() {
	src := w.hist
	if src == nil {
		src = w.u.liveSource()
	}
	if m, ok := lastCrash(src); ok {
		w.openBefore(m)
		return
	}
	now := w.u.opts.now()
	setText(w.note, "Looking for the last crash in the history…")
	u := w.u
	u.query(nil, func(ctx context.Context) {
		hw, err := u.ctrl.Window(ctx, now.Add(-24*time.Hour), now)
		fyne.Do(func() {
			var m wfMarker
			ok := false
			if err == nil {
				m, ok = lastCrash(historySource(hw, now))
			}
			switch {
			case ok:
				w.openBefore(m)
			case err != nil && isUnavailable(err):
				setText(w.note, "No crash to show: history is not available ("+unavailableReason(err)+")")
			case err != nil:
				setText(w.note, "Could not read the history: "+err.Error())
			default:
				setText(w.note, "No crash in the last 24 hours.")
			}
		})
	})
}

// lastCrash is src's latest crash marker.
func lastCrash(src *wfSource) (wfMarker, bool) {
	if src == nil {
		return wfMarker{}, false
	}
	var last wfMarker
	found := false
	for _, m := range src.Markers {
		if m.Kind.crash() && (!found || !m.At.Before(last.At)) {
			last, found = m, true
		}
	}
	return last, found
}

// openBefore shows the two minutes before a marker from the history.
func (w *waterfallView) openBefore(m wfMarker) {
	label := fmt.Sprintf("2 minutes before %s", clockLabel(m.At, time.Second))
	if m.PID != 0 {
		label += fmt.Sprintf(" (PID %d)", m.PID)
	}
	w.addMode(label)
	w.mode.SetSelected(label)
	w.loadWindow(m.At.Add(-beforeCrash), m.At.Add(afterCrash), label)
	w.details.showMarker(m)
}

// addMode offers a window made by a marker in the mode list (the latest
// few).
func (w *waterfallView) addMode(label string) {
	for _, m := range w.modes {
		if m == label {
			return
		}
	}
	fixed := 1 + len(historyChoices)
	extra := append([]string{label}, w.modes[fixed:]...)
	if len(extra) > 4 {
		extra = extra[:4]
	}
	w.modes = append(w.modes[:fixed:fixed], extra...)
	w.mode.SetOptions(w.modes)
}

// selectReq shows r's timeline (PoolID 0: clears the selection).
func (w *waterfallView) selectReq(r wfReq) {
	w.sel = r
	v := w.v
	v.Selected = r.key()
	w.setView(v)
	w.selSeq++
	if r.PoolID == 0 {
		w.details.clear()
		return
	}
	w.details.showRequest(r, w.nowTime())
	seq := w.selSeq
	u := w.u
	row := HistoryRow{Run: r.Run, PoolID: r.PoolID, Server: r.Server, Session: r.Session}
	u.query(&w.selRead, func(ctx context.Context) {
		d, err := u.ctrl.Timeline(ctx, row)
		fyne.Do(func() {
			if seq == w.selSeq {
				w.details.showRecorded(d, err)
			}
		})
	})
}

// reveal shows a request (or, with a zero key, a server's lanes): the
// view centres on it unless it is in view already, scrolls to its lane,
// and selects it. A live request in flight is shown following now, from
// just before it started: what it has waited through, at a glance.
func (w *waterfallView) reveal(server string, k wfKey) {
	src := w.u.liveSource()
	if w.hist != nil {
		src = w.hist
	}
	v := w.current()
	var run int64
	session := ""
	if r, ok := src.find(k); ok && k.PoolID != 0 {
		age := w.nowTime().Sub(r.Received)
		if r.open() && w.hist == nil {
			v.Follow, v.To = true, w.nowTime()
			v.Span = min(max(age+age/4, 10*time.Second), maxSpan)
		} else if r.Received.Before(v.from()) || r.Received.After(v.To) {
			v = v.centre(r.Received, 2*r.end(w.nowTime()).Sub(r.Received))
		}
		server, run, session = r.Server, r.Run, r.Session
		w.v = v
		w.selectReq(r)
	}
	if server != "" && src != nil {
		v = w.v
		v.Scroll = w.laneScroll(src.Lanes, server, run, session)
		w.setView(v)
	}
}

// laneScroll is the scroll that shows server's lanes from its header;
// when the session's lane (run and session; none: "") would then be
// below the plot, the scroll that puts that lane at the top. Lanes are
// measured as the painter lays them out.
func (w *waterfallView) laneScroll(lanes []wfLane, server string, run int64, session string) int {
	px := func(logical int) int { return int(math.Round(float64(float32(logical) * w.scale))) }
	y, header, top, bottom := 0, -1, -1, 0
	for _, l := range lanes {
		h := px(laneHeight(l))
		switch {
		case l.Server != server:
		case l.Session == "" && header < 0:
			header = y
		case session != "" && l.Session == session && l.Run == run:
			top, bottom = y, y+h
		}
		y += h
	}
	switch {
	case top < 0:
		return max(header, 0)
	case header >= 0 && header <= top && bottom-header <= w.pxH-px(wfAxisHeight):
		return header
	}
	return top
}

// wfDetails is the pane under the waterfall: the selected request's
// timeline and payloads, or a marker's details.
type wfDetails struct {
	view     fyne.CanvasObject
	title    *widget.Label
	summary  *widget.Label
	steps    *widget.List
	rows     []TimelineEntry
	request  *widget.Label
	response *widget.Label
}

func newWFDetails(u *UI) *wfDetails {
	d := &wfDetails{}
	d.title = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	d.title.Truncation = fyne.TextTruncateEllipsis
	d.summary = widget.NewLabel("")
	d.summary.Wrapping = fyne.TextWrapWord
	d.steps = newTimelineList(func() []TimelineEntry { return d.rows }, "            ")
	payload := func() *widget.Label {
		l := widget.NewLabel("")
		l.TextStyle.Monospace = true
		l.Wrapping = fyne.TextWrapBreak
		l.Selectable = true
		return l
	}
	d.request, d.response = payload(), payload()
	payloads := container.NewAppTabs(
		container.NewTabItem("Request", container.NewVScroll(d.request)),
		container.NewTabItem("Response", container.NewVScroll(d.response)))
	left := container.NewBorder(container.NewVBox(d.title, d.summary), nil, nil, nil, d.steps)
	split := container.NewHSplit(left, payloads)
	split.Offset = 0.55
	d.view = split
	d.clear()
	return d
}

// newTimelineList lists the steps of a timeline, one line each; a step
// without a time shows noTime in its place.
func newTimelineList(steps func() []TimelineEntry, noTime string) *widget.List {
	return widget.NewList(func() int { return len(steps()) },
		func() fyne.CanvasObject {
			l := widget.NewLabel("")
			l.Truncation = fyne.TextTruncateEllipsis
			return l
		},
		func(i widget.ListItemID, o fyne.CanvasObject) {
			if s := steps(); i < len(s) {
				o.(*widget.Label).SetText(timelineText(s[i], noTime))
			}
		})
}

// timelineText is one step of a timeline.
func timelineText(s TimelineEntry, noTime string) string {
	at := noTime
	if !s.At.IsZero() {
		at = s.At.In(displayZone).Format("15:04:05.000")
	}
	text := at + "  " + s.What
	if s.Detail != "" {
		text += "  " + s.Detail
	}
	return text
}

func (d *wfDetails) clear() {
	d.title.SetText("Select a bar to see its request")
	d.summary.SetText("Its timeline shows where the time went (in the pool, at the child) and how it ended; " +
		"a crash marker opens the two minutes before it.\n" +
		"Wheel: zoom. Shift+wheel or drag: pan. Keys: W/S zoom, A/D pan, F follow now, C last crash, L live, arrows, Esc.")
	d.rows = nil
	d.steps.Refresh()
	d.request.SetText("")
	d.response.SetText("")
}

// showRequest shows what the waterfall knows of r at once; the recorded
// timeline follows.
func (d *wfDetails) showRequest(r wfReq, now time.Time) {
	d.showSummary(r, now)
	d.rows = []TimelineEntry{{At: r.Received, What: "received"}}
	if !r.Written.IsZero() {
		d.rows = append(d.rows, TimelineEntry{At: r.Written, What: "written to the child", Detail: "PID " + pidText(r.PID)})
	}
	if !r.Answered.IsZero() {
		d.rows = append(d.rows, TimelineEntry{At: r.Answered, What: r.Status})
	}
	d.steps.Refresh()
	d.request.SetText("Loading…")
	d.response.SetText("")
}

// showSummary shows r's title and summary at now.
func (d *wfDetails) showSummary(r wfReq, now time.Time) {
	setText(d.title, r.what()+" — "+requestStatus(r.Status))
	sum := r.timing(now) + ".\n" + fmt.Sprintf("Server %s, session %s, child PID %s, pool id %d", r.Server, r.Session, pidText(r.PID), r.PoolID)
	if r.Run != 0 {
		sum += fmt.Sprintf(", run %d", r.Run)
	}
	if r.Err != "" {
		sum += ".\n" + r.Err
	}
	setText(d.summary, sum)
}

// showRecorded shows the recorded timeline and payloads of the selected
// request.
func (d *wfDetails) showRecorded(rd RequestDetail, err error) {
	switch {
	case err != nil && isUnavailable(err):
		d.request.SetText("No payloads: " + unavailableReason(err))
		d.response.SetText("")
		return
	case err != nil:
		d.request.SetText("Not in the history yet: " + err.Error())
		d.response.SetText("")
		return
	}
	if len(rd.Steps) > 0 {
		d.rows = rd.Steps
		d.steps.Refresh()
	}
	if rd.RequestPayload == "" && rd.ResponsePayload == "" {
		d.request.SetText("Payloads are not captured. Set \"capturePayloads\": true under \"history\" in the config to keep " +
			"a bounded prefix of each request and answer here, with secrets redacted.")
		d.response.SetText("")
		return
	}
	d.request.SetText(rd.RequestPayload)
	d.response.SetText(rd.ResponsePayload)
}

// showMarker shows a marker's details.
func (d *wfDetails) showMarker(m wfMarker) {
	d.title.SetText(m.Title)
	sum := m.At.In(displayZone).Format("2006-01-02 15:04:05.000")
	if m.Kind.crash() {
		sum += "\nThe two minutes before it are shown from the history."
	}
	d.summary.SetText(sum)
	d.rows = nil
	for _, line := range strings.Split(m.Detail, "\n") {
		if line != "" {
			d.rows = append(d.rows, TimelineEntry{What: line})
		}
	}
	d.steps.Refresh()
	d.request.SetText("")
	d.response.SetText("")
}
