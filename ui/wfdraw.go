package ui

import (
	"cmp"
	"image"
	"image/color"
	"math"
	"slices"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// This file draws a waterfall frame: bars, lanes, grid and markers into
// one image, in Go, off the UI goroutine. Ten thousand requests would be
// ten thousand fyne objects to lay out and paint; here they are rectangles
// copied into a pixel buffer. Text (lane names, the time axis) is left to
// fyne: the frame says where it goes.

// wfPalette is the colours a frame is drawn with: the theme's, taken on
// the UI goroutine, and the outcome colours, which read on dark and light.
type wfPalette struct {
	Background, Stripe, Header, Grid, GridMajor, Text, Now color.RGBA
	Selection                                              color.RGBA
}

// Outcome colours.
var (
	colOK        = color.RGBA{0x37, 0xb2, 0x4d, 0xff}
	colError     = color.RGBA{0xf5, 0x9f, 0x00, 0xff}
	colFailed    = color.RGBA{0xf7, 0x67, 0x07, 0xff}
	colTimeout   = color.RGBA{0xd6, 0x33, 0x6c, 0xff}
	colCancelled = color.RGBA{0x86, 0x8e, 0x96, 0xff}
	colOrphaned  = color.RGBA{0xae, 0x3e, 0xc9, 0xff}
	colUnseen    = color.RGBA{0x5c, 0x5f, 0x66, 0xff}
	colAbandoned = color.RGBA{0xc9, 0x2a, 0x2a, 0xff}
	colInFlight  = color.RGBA{0x33, 0x9a, 0xf0, 0xff}
	colHung      = color.RGBA{0xff, 0x3b, 0x30, 0xff}

	colStart  = color.RGBA{0x40, 0xc0, 0x57, 0xff}
	colStop   = color.RGBA{0x86, 0x8e, 0x96, 0xff}
	colCrash  = color.RGBA{0xff, 0x4d, 0x4f, 0xff}
	colReload = color.RGBA{0x4d, 0xab, 0xf7, 0xff}
	colApp    = color.RGBA{0xb1, 0x97, 0xfc, 0xff}
	colChild  = color.RGBA{0x63, 0xe6, 0xbe, 0xff}
)

// statusColor is a bar's colour; an open request is blue until it has
// waited hang, then red.
func statusColor(r *wfReq, now time.Time, hang time.Duration) color.RGBA {
	switch r.Status {
	case pool.StatusOK:
		return colOK
	case pool.StatusError:
		return colError
	case pool.StatusFailed:
		return colFailed
	case pool.StatusTimeout:
		return colTimeout
	case pool.StatusCancelled:
		return colCancelled
	case pool.StatusOrphaned:
		return colOrphaned
	case statusAbandoned:
		return colAbandoned
	case statusInFlight:
		if hang > 0 && now.Sub(r.Received) >= hang {
			return colHung
		}
		return colInFlight
	}
	return colUnseen
}

// markerColor is a marker's line.
func markerColor(k markerKind) color.RGBA {
	switch k {
	case markChildStart:
		return colStart
	case markChildCrash, markAppCrash:
		return colCrash
	case markReload:
		return colReload
	case markReloadFailed:
		return colTimeout
	case markAppStart, markAppStop:
		return colApp
	case markGap:
		return colUnseen
	}
	return colStop
}

// Lane geometry, in logical pixels (times the canvas scale).
const (
	wfAxisHeight   = 26
	wfHeaderHeight = 24
	wfLanePad      = 6
)

// rowHeight is the height of one row of a lane with rows rows.
func rowHeight(rows int) int {
	switch {
	case rows <= 1:
		return 14
	case rows == 2:
		return 10
	case rows == 3:
		return 8
	}
	return 6
}

// laneHeight is a lane's height, logical pixels.
func laneHeight(l wfLane) int {
	if l.Session == "" {
		return wfHeaderHeight
	}
	return wfLanePad + l.Rows*rowHeight(l.Rows)
}

// wfFrame is one drawn waterfall: the image and what the widget puts
// over it and hit-tests against. Immutable once built.
type wfFrame struct {
	img   *canvasImage
	src   *wfSource
	view  wfView // as drawn: To is where now was, when following
	now   time.Time
	scale float32
	// W and H are the plot's size in pixels; the image is W x H.
	W, H int
	// ContentH is the height of every lane together (pixels, axis
	// included): how far the view can scroll.
	ContentH int
	Labels   []wfLabel
	Ticks    []wfTickLabel
	Hits     []wfHit
	Marks    []wfMarkHit
	// Drawn counts the bars drawn.
	Drawn int
	// Empty is what to show when there is nothing to draw.
	Empty string
}

// wfLabel is a lane's name, at Y (pixels from the top of the plot, the
// lane's middle).
type wfLabel struct {
	Y    int
	Lane wfLane
}

// wfTickLabel is a time axis label at X pixels.
type wfTickLabel struct {
	X    int
	Text string
}

// wfHit is where a bar was drawn, for the pointer: the request is
// src.Open[Index] when Open, else src.Done[Index].
type wfHit struct {
	X0, X1, Y0, Y1 int32
	Index          int32
	Open           bool
}

// wfMarkHit is where a marker was drawn.
type wfMarkHit struct {
	X, Y0, Y1 int32
	Marker    wfMarker
}

// req returns the request a hit names.
func (f *wfFrame) req(h wfHit) *wfReq {
	if h.Open {
		return &f.src.Open[h.Index]
	}
	return f.src.Done.At(int(h.Index))
}

// barAt is the bar under (x, y) in image pixels, the nearest within a
// few pixels when none is; ok is false when there is none.
func (f *wfFrame) barAt(x, y int) (wfHit, bool) {
	slop := int32(3 * f.scale)
	best, bestD := wfHit{}, int32(math.MaxInt32)
	for _, h := range f.Hits {
		if int32(y) < h.Y0 || int32(y) >= h.Y1 {
			continue
		}
		d := int32(0)
		switch {
		case int32(x) < h.X0:
			d = h.X0 - int32(x)
		case int32(x) >= h.X1:
			d = int32(x) - h.X1 + 1
		}
		if d <= slop && d < bestD {
			best, bestD = h, d
		}
	}
	return best, bestD != math.MaxInt32
}

// markAt is the marker under x (and y, within its lanes or the axis).
func (f *wfFrame) markAt(x, y int) (wfMarker, bool) {
	slop := int32(4 * f.scale)
	for i := len(f.Marks) - 1; i >= 0; i-- {
		m := f.Marks[i]
		axis := int32(y) < int32(wfAxisHeight*f.scale)
		if (axis || (int32(y) >= m.Y0 && int32(y) < m.Y1)) && abs32(int32(x)-m.X) <= slop {
			return m.Marker, true
		}
	}
	return wfMarker{}, false
}

func abs32(v int32) int32 {
	if v < 0 {
		return -v
	}
	return v
}

// laneSpan is where a lane sits in the image.
type laneSpan struct{ y0, y1 int }

// drawWaterfall draws src as v shows it at now, into a w x h pixel plot
// at scale, reusing reuse's pixels when it is that size (nil: a new
// image). Pure: everything it needs is in its arguments.
func drawWaterfall(reuse *canvasImage, src *wfSource, v wfView, now time.Time, w, h int, scale float32, pal wfPalette) *wfFrame {
	v = v.at(now)
	f := &wfFrame{src: src, view: v, now: now, scale: scale, W: max(w, 1), H: max(h, 1)}
	if reuse != nil && reuse.Bounds().Dx() == f.W && reuse.Bounds().Dy() == f.H {
		f.img = reuse // every row is painted below
	} else {
		f.img = &canvasImage{RGBA: image.NewRGBA(image.Rect(0, 0, f.W, f.H))}
	}
	px := func(logical int) int { return int(math.Round(float64(float32(logical) * scale))) }
	axisH := px(wfAxisHeight)
	sc := newScale(v, f.W)
	from, to := v.from(), v.To

	// Lanes: where each sits, scrolled.
	lanes := []wfLane(nil)
	if src != nil {
		lanes = src.Lanes
	}
	spans := make([]laneSpan, len(lanes))
	y := axisH - v.Scroll
	laneIdx := make(map[laneKey]int, len(lanes))
	headerIdx := map[string]int{}
	for i, l := range lanes {
		hgt := px(laneHeight(l))
		spans[i] = laneSpan{y, y + hgt}
		y += hgt
		if l.Session == "" {
			headerIdx[l.Server] = i
		} else {
			laneIdx[laneKey{l.Run, l.Session}] = i
		}
	}
	f.ContentH = y + v.Scroll
	visible := func(i int) bool { return spans[i].y1 > axisH && spans[i].y0 < f.H }

	// Backgrounds, each row painted once (a frame's largest cost is
	// filling its pixels): header lanes tinted, session lanes striped.
	bgTo := axisH
	for i, l := range lanes {
		if !visible(i) {
			continue
		}
		s := spans[i]
		y0 := max(s.y0, axisH)
		f.img.fill(0, bgTo, f.W, y0, pal.Background)
		switch {
		case l.Session == "":
			f.img.fill(0, y0, f.W, s.y1, pal.Header)
		case i%2 == 0:
			f.img.fill(0, y0, f.W, s.y1, pal.Stripe)
		default:
			f.img.fill(0, y0, f.W, s.y1, pal.Background)
		}
		bgTo = max(bgTo, min(s.y1, f.H))
		f.Labels = append(f.Labels, wfLabel{Y: (s.y0 + s.y1) / 2, Lane: l})
	}
	f.img.fill(0, 0, f.W, axisH, pal.Background)
	f.img.fill(0, bgTo, f.W, f.H, pal.Background)

	// The grid and the time axis.
	for _, tk := range ticks(v, f.W, 110*float64(scale)) {
		x := int(sc.x(tk.At))
		c := pal.Grid
		if tk.Major {
			c = pal.GridMajor
			f.Ticks = append(f.Ticks, wfTickLabel{X: x, Text: tk.Label})
			f.img.fill(x, axisH-px(6), x+max(px(1), 1), axisH, pal.Text)
		}
		f.img.fill(x, axisH, x+max(px(1), 1), f.H, c)
	}
	f.img.fill(0, axisH-max(px(1), 1), f.W, axisH, pal.GridMajor)

	if src == nil || len(lanes) == 0 {
		f.Empty = "No requests yet. Connect a client with `switchboard connect NAME` and its calls appear here as bars."
		if src != nil && src.Note != "" {
			f.Empty = src.Note
		}
		return f
	}

	// The children's lives, in their servers' header lanes.
	for _, c := range src.Children {
		i, ok := headerIdx[c.Server]
		if !ok || !visible(i) {
			continue
		}
		end := c.Exited
		if end.IsZero() {
			end = now
		}
		if end.Before(from) || c.Started.After(to) {
			continue
		}
		x0, x1 := clampX(sc.x(c.Started), f.W), clampX(sc.x(end), f.W)
		s := spans[i]
		mid := (s.y0 + s.y1) / 2
		f.img.fill(x0, mid-px(2), max(x1, x0+1), mid+px(2), mix(colChild, pal.Header, 0x90))
	}

	// The bars: visible ones, by lane, in the order they started, each in
	// the first row of its lane that is free.
	// Pointer-free, so that sorting ten thousand of them is cheap.
	type vis struct {
		at   int64 // received, Unix ns
		id   uint64
		idx  int32
		open bool
	}
	var bars []vis
	consider := func(i int, r *wfReq, open bool) {
		if r.Received.After(to) || r.end(now).Before(from) {
			return
		}
		bars = append(bars, vis{at: r.Received.UnixNano(), id: r.PoolID, idx: int32(i), open: open})
	}
	src.Done.each(func(i int, r *wfReq) { consider(i, r, false) })
	for i := range src.Open {
		consider(i, &src.Open[i], true)
	}
	slices.SortFunc(bars, func(a, b vis) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	rowFree := make([][]int, len(lanes)) // per lane, per row: the first free x
	for i, l := range lanes {
		rowFree[i] = make([]int, l.Rows)
		for j := range rowFree[i] {
			rowFree[i][j] = math.MinInt
		}
	}
	gap := max(px(1), 1)
	var sel *wfHit
	lastKey, lastLane := laneKey{}, -1
	for bi := range bars {
		b := &bars[bi]
		var r *wfReq
		if b.open {
			r = &src.Open[b.idx]
		} else {
			r = src.Done.At(int(b.idx))
		}
		li := lastLane
		if k := (laneKey{r.Run, r.Session}); k != lastKey || li < 0 {
			var ok bool
			if li, ok = laneIdx[k]; !ok {
				li = -1
			}
			lastKey, lastLane = k, li
		}
		if li < 0 || !visible(li) {
			continue
		}
		l := lanes[li]
		x0 := clampX(sc.x(r.Received), f.W)
		x1 := clampX(sc.x(r.end(now)), f.W)
		x1 = max(x1, x0+1)
		// The first free row, else the one free soonest.
		row, soonest := -1, 0
		for j, free := range rowFree[li] {
			if free <= x0 {
				row = j
				break
			}
			if free < rowFree[li][soonest] {
				soonest = j
			}
		}
		if row < 0 {
			row = soonest
		}
		rowFree[li][row] = x1 + gap
		rh := px(rowHeight(l.Rows))
		y0 := spans[li].y0 + px(wfLanePad/2) + row*rh
		y1 := y0 + rh - gap
		if l.Rows == 1 {
			y1 = y0 + rh
		}
		if y1 <= axisH || y0 >= f.H {
			continue
		}
		y0 = max(y0, axisH)
		c := statusColor(r, now, v.Hang)
		queued := mix(c, pal.Background, 0x70)
		switch {
		case r.Written.IsZero():
			// Never reached a child: all of it waited in the pool.
			f.img.fill(x0, y0, x1, y1, queued)
		default:
			xw := min(max(clampX(sc.x(r.Written), f.W), x0), x1)
			f.img.fill(x0, y0, xw, y1, queued)
			f.img.fill(xw, y0, x1, y1, c)
		}
		if r.Status == statusAbandoned {
			hatch(f.img, x0, y0, x1, y1, mix(pal.Background, c, 0x90), px(6))
		}
		if b.open && x1-x0 > 2*px(2) {
			// The growing edge of a request in flight.
			f.img.fill(x1-px(2), y0, x1, y1, mix(color.RGBA{0xff, 0xff, 0xff, 0xff}, c, 0x90))
		}
		hit := wfHit{X0: int32(x0), X1: int32(x1), Y0: int32(y0), Y1: int32(y1), Index: b.idx, Open: b.open}
		f.Hits = append(f.Hits, hit)
		if r.key() == v.Selected && v.Selected.PoolID != 0 {
			sel = &f.Hits[len(f.Hits)-1]
		}
		f.Drawn++
	}
	if sel != nil {
		t := max(px(2), 1)
		s := *sel
		x0, x1, y0, y1 := int(s.X0)-t, int(s.X1)+t, int(s.Y0)-t, int(s.Y1)+t
		f.img.fill(x0, y0, x1, y0+t, pal.Selection)
		f.img.fill(x0, y1-t, x1, y1, pal.Selection)
		f.img.fill(x0, y0, x0+t, y1, pal.Selection)
		f.img.fill(x1-t, y0, x1, y1, pal.Selection)
	}

	// Markers over the lanes they concern, with a tick in the axis.
	for _, m := range src.Markers {
		if m.At.Before(from) || m.At.After(to) {
			continue
		}
		x := int(sc.x(m.At))
		y0, y1 := axisH, min(f.ContentH-v.Scroll, f.H)
		if m.Server != "" {
			i, ok := headerIdx[m.Server]
			if !ok {
				continue
			}
			y0 = max(spans[i].y0, axisH)
			y1 = y0
			for j := i; j < len(lanes) && lanes[j].Server == m.Server && (j == i || lanes[j].Session != ""); j++ {
				y1 = spans[j].y1
			}
			y1 = min(y1, f.H)
		}
		c := markerColor(m.Kind)
		width, dash := max(px(1), 1), 0
		switch m.Kind {
		case markChildCrash, markAppCrash:
			width = max(px(2), 2)
		case markReload, markReloadFailed, markChildStop, markAppStop, markGap:
			dash = px(3)
		}
		if y1 > y0 {
			f.img.vline(x-width/2, y0, y1, width, c, dash)
		}
		// A flag in the axis: a crash's is bigger.
		fw := px(4)
		if m.Kind.crash() {
			fw = px(6)
		}
		for dy := range fw {
			f.img.fill(x-fw+dy, axisH-px(2)-fw+dy, x+fw-dy, axisH-px(2)-fw+dy+1, c)
		}
		f.Marks = append(f.Marks, wfMarkHit{X: int32(x), Y0: int32(y0), Y1: int32(y1), Marker: m})
	}

	// Now, when it is in view.
	if !now.Before(from) && !now.After(to) {
		x := min(int(sc.x(now)), f.W-max(px(1), 1))
		f.img.vline(x, axisH, f.H, max(px(1), 1), pal.Now, px(2))
	}

	// A scroll bar when the lanes do not fit.
	if view := f.H - axisH; f.ContentH-axisH > view && view > 0 {
		total := f.ContentH - axisH
		y0 := axisH + v.Scroll*view/total
		y1 := axisH + (v.Scroll+view)*view/total
		f.img.fill(f.W-px(4), y0, f.W-px(1), max(y1, y0+px(12)), pal.GridMajor)
	}
	return f
}

// laneKey finds a session's lane: its run (history) and id.
type laneKey struct {
	run     int64
	session string
}

// clampX keeps an x coordinate near the image, so that far-off times do
// not overflow.
func clampX(x float64, w int) int {
	return int(math.Max(math.Min(x, float64(w+8)), -8))
}

// hatch draws diagonal stripes over a rectangle: an abandoned bar.
func hatch(img *canvasImage, x0, y0, x1, y1 int, c color.RGBA, period int) {
	period = max(period, 4)
	b := img.Bounds()
	x0, y0, x1, y1 = max(x0, b.Min.X), max(y0, b.Min.Y), min(x1, b.Max.X), min(y1, b.Max.Y)
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			if (x+y)%period < period/2 {
				img.SetRGBA(x, y, c)
			}
		}
	}
}

// maxScroll is how far the lanes can scroll in a frame of height h.
func (f *wfFrame) maxScroll() int {
	return max(f.ContentH-f.H, 0)
}
