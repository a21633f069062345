package ui

import (
	"image"
	"image/color"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// wfGutter is the width of the lane names left of the bars.
const wfGutter = 230

// wfPlot is the waterfall's drawing: lane names in a gutter, and the
// frame's image beside them with the time axis over it. It shows frames
// drawn elsewhere; its input handlers change the view of its
// waterfallView. UI goroutine only.
type wfPlot struct {
	widget.BaseWidget
	w       *waterfallView
	frame   *wfFrame
	img     *canvas.Image
	gutter  *canvas.Rectangle
	axisBG  *canvas.Rectangle
	titles  []*canvas.Text
	subs    []*canvas.Text
	tickTxt []*canvas.Text
	empty   *widget.Label
	tip     *widget.Label
	tipBG   *canvas.Rectangle
	focus   *canvas.Rectangle
	focused bool
	dragged bool
}

func newWFPlot(w *waterfallView) *wfPlot {
	p := &wfPlot{w: w}
	p.img = canvas.NewImageFromImage(image.NewRGBA(image.Rect(0, 0, 1, 1)))
	p.img.FillMode = canvas.ImageFillStretch
	p.img.ScaleMode = canvas.ImageScalePixels
	p.gutter = canvas.NewRectangle(theme.Color(theme.ColorNameHeaderBackground))
	p.axisBG = canvas.NewRectangle(theme.Color(theme.ColorNameHeaderBackground))
	p.empty = widget.NewLabelWithStyle("", fyne.TextAlignCenter, fyne.TextStyle{Italic: true})
	p.empty.Wrapping = fyne.TextWrapWord
	p.empty.Hide()
	p.tip = widget.NewLabel("")
	p.tip.TextStyle.Monospace = true
	p.tipBG = canvas.NewRectangle(theme.Color(theme.ColorNameOverlayBackground))
	p.tipBG.StrokeColor = theme.Color(theme.ColorNameSeparator)
	p.tipBG.StrokeWidth = 1
	p.tipBG.CornerRadius = 4
	p.tip.Hide()
	p.tipBG.Hide()
	p.focus = canvas.NewRectangle(color.Transparent)
	p.focus.StrokeWidth = 2
	p.ExtendBaseWidget(p)
	return p
}

// CreateRenderer lays the parts out by hand: their places come from the
// frame.
func (p *wfPlot) CreateRenderer() fyne.WidgetRenderer { return &wfPlotRenderer{p: p} }

type wfPlotRenderer struct{ p *wfPlot }

func (r *wfPlotRenderer) Destroy() {}

func (r *wfPlotRenderer) MinSize() fyne.Size { return fyne.NewSize(wfGutter+200, 120) }

func (r *wfPlotRenderer) Objects() []fyne.CanvasObject {
	p := r.p
	objs := []fyne.CanvasObject{p.img, p.gutter, p.axisBG}
	for _, t := range p.titles {
		objs = append(objs, t)
	}
	for _, t := range p.subs {
		objs = append(objs, t)
	}
	for _, t := range p.tickTxt {
		objs = append(objs, t)
	}
	return append(objs, p.empty, p.focus, p.tipBG, p.tip)
}

func (r *wfPlotRenderer) Refresh() {
	r.Layout(r.p.Size())
	canvas.Refresh(r.p)
}

// Layout places the image right of the gutter and the frame's labels
// where the frame says, and tells the waterfall the plot's size.
func (r *wfPlotRenderer) Layout(size fyne.Size) {
	p := r.p
	plotW := max(size.Width-wfGutter, 1)
	axisH := float32(wfAxisHeight)
	p.gutter.Move(fyne.NewPos(0, 0))
	p.gutter.Resize(fyne.NewSize(wfGutter, size.Height))
	p.axisBG.Move(fyne.NewPos(0, 0))
	p.axisBG.Resize(fyne.NewSize(wfGutter, axisH))
	p.img.Move(fyne.NewPos(wfGutter, 0))
	p.img.Resize(fyne.NewSize(plotW, size.Height))
	p.focus.Move(fyne.NewPos(1, 1))
	p.focus.Resize(fyne.NewSize(size.Width-2, size.Height-2))
	p.w.plotResized(plotW, size.Height)
	p.layoutFrame(size)
}

// layoutFrame places the lane names and the axis labels of the frame.
func (p *wfPlot) layoutFrame(size fyne.Size) {
	f := p.frame
	fg := theme.Color(theme.ColorNameForeground)
	dim := theme.Color(theme.ColorNamePlaceHolder)
	n, nt := 0, 0
	if f != nil {
		scale := f.scale
		axisH := float32(wfAxisHeight)
		for _, l := range f.Labels {
			y := float32(l.Y) / scale
			if y < axisH+4 || y > size.Height {
				continue
			}
			for len(p.titles) <= n {
				t := canvas.NewText("", fg)
				s := canvas.NewText("", dim)
				p.titles, p.subs = append(p.titles, t), append(p.subs, s)
			}
			title, sub := p.titles[n], p.subs[n]
			n++
			header := l.Lane.Session == ""
			title.TextSize, sub.TextSize = 12, 11
			title.TextStyle = fyne.TextStyle{Bold: header}
			x := float32(22)
			if header {
				title.TextSize, x = 13, 8
			}
			c := fg
			if l.Lane.Closed {
				c = dim
			}
			subW := fyne.MeasureText(l.Lane.Sub, sub.TextSize, sub.TextStyle).Width
			room := wfGutter - x - subW - 16
			setCanvasText(title, fitText(l.Lane.Title, title.TextSize, title.TextStyle, room), c)
			setCanvasText(sub, l.Lane.Sub, dim)
			th := title.MinSize().Height
			title.Move(fyne.NewPos(x, y-th/2))
			title.Resize(title.MinSize())
			sub.Move(fyne.NewPos(wfGutter-8-subW, y-sub.MinSize().Height/2))
			sub.Resize(sub.MinSize())
			title.Show()
			sub.Show()
		}
		for _, tk := range f.Ticks {
			x := wfGutter + float32(tk.X)/scale + 4
			if x > size.Width-60 {
				continue
			}
			for len(p.tickTxt) <= nt {
				p.tickTxt = append(p.tickTxt, canvas.NewText("", dim))
			}
			t := p.tickTxt[nt]
			nt++
			t.TextSize = 11
			setCanvasText(t, tk.Text, dim)
			t.Move(fyne.NewPos(x, 4))
			t.Resize(t.MinSize())
			t.Show()
		}
		if f.Empty != "" {
			p.empty.SetText(f.Empty)
			p.empty.Move(fyne.NewPos(wfGutter+16, axisH+24))
			p.empty.Resize(fyne.NewSize(max(size.Width-wfGutter-32, 100), p.empty.MinSize().Height*3))
			p.empty.Show()
		} else {
			p.empty.Hide()
		}
	}
	for i := n; i < len(p.titles); i++ {
		p.titles[i].Hide()
		p.subs[i].Hide()
	}
	for i := nt; i < len(p.tickTxt); i++ {
		p.tickTxt[i].Hide()
	}
	if p.focused {
		p.focus.StrokeColor = theme.Color(theme.ColorNameFocus)
	} else {
		p.focus.StrokeColor = color.Transparent
	}
}

// fitText cuts s with an ellipsis to fit width.
func fitText(s string, size float32, style fyne.TextStyle, width float32) string {
	if fyne.MeasureText(s, size, style).Width <= width {
		return s
	}
	r := []rune(s)
	for len(r) > 1 {
		r = r[:len(r)-1]
		if t := string(r) + "…"; fyne.MeasureText(t, size, style).Width <= width {
			return t
		}
	}
	return "…"
}

// setFrame shows a frame the painter drew.
func (p *wfPlot) setFrame(f *wfFrame) {
	p.frame = f
	p.img.Image = f.img.RGBA
	p.img.Refresh()
	p.gutter.FillColor = theme.Color(theme.ColorNameHeaderBackground)
	p.axisBG.FillColor = p.gutter.FillColor
	p.layoutFrame(p.Size())
	canvas.Refresh(p)
}

// toImage is where a position in the plot falls in the frame's image,
// and whether it is right of the gutter.
func (p *wfPlot) toImage(pos fyne.Position) (x, y int, ok bool) {
	if p.frame == nil || pos.X < wfGutter {
		return 0, 0, false
	}
	s := p.frame.scale
	return int((pos.X - wfGutter) * s), int(pos.Y * s), true
}

// Tapped selects the bar under the pointer, or acts on a marker.
func (p *wfPlot) Tapped(ev *fyne.PointEvent) {
	p.requestFocus()
	if p.dragged {
		p.dragged = false
		return
	}
	x, y, ok := p.toImage(ev.Position)
	if !ok {
		return
	}
	if m, ok := p.frame.markAt(x, y); ok {
		p.w.markerTapped(m)
		return
	}
	if h, ok := p.frame.barAt(x, y); ok {
		p.w.selectReq(*p.frame.req(h))
		return
	}
	p.w.selectReq(wfReq{})
}

func (p *wfPlot) requestFocus() {
	if c := fyne.CurrentApp().Driver().CanvasForObject(p); c != nil {
		c.Focus(p)
	}
}

// Scrolled zooms around the pointer; over the lane names, or with Shift,
// it scrolls the lanes or pans.
func (p *wfPlot) Scrolled(ev *fyne.ScrollEvent) {
	mods := fyne.KeyModifier(0)
	if d, ok := fyne.CurrentApp().Driver().(desktop.Driver); ok {
		mods = d.CurrentKeyModifiers()
	}
	dx, dy := ev.Scrolled.DX, ev.Scrolled.DY
	switch {
	case ev.Position.X < wfGutter:
		p.w.scrollLanes(-dy)
	case mods&fyne.KeyModifierShift != 0 || (dx != 0 && dy == 0):
		d := dx
		if d == 0 {
			d = dy
		}
		p.w.panBy(float64(-d) / float64(max(p.Size().Width-wfGutter, 1)))
	case dy != 0:
		frac := float64(ev.Position.X-wfGutter) / float64(max(p.Size().Width-wfGutter, 1))
		factor := 0.8
		if dy < 0 {
			factor = 1 / 0.8
		}
		p.w.zoomBy(factor, frac)
	}
}

// Dragged pans the time by the drag and scrolls the lanes.
func (p *wfPlot) Dragged(ev *fyne.DragEvent) {
	p.dragged = true
	if ev.Dragged.DX != 0 {
		p.w.panBy(-float64(ev.Dragged.DX) / float64(max(p.Size().Width-wfGutter, 1)))
	}
	if ev.Dragged.DY != 0 {
		p.w.scrollLanes(-ev.Dragged.DY)
	}
}

// DragEnd ends a drag.
func (p *wfPlot) DragEnd() {}

// MouseIn starts hovering.
func (p *wfPlot) MouseIn(ev *desktop.MouseEvent) { p.MouseMoved(ev) }

// MouseMoved shows what is under the pointer: a marker's details (a
// crashed child's stderr tail), or a bar's request.
func (p *wfPlot) MouseMoved(ev *desktop.MouseEvent) {
	x, y, ok := p.toImage(ev.Position)
	text := ""
	if ok {
		if m, ok := p.frame.markAt(x, y); ok {
			text = markerTip(m)
		} else if h, ok := p.frame.barAt(x, y); ok {
			text = barTip(p.frame.req(h), p.frame.now)
		}
	}
	p.showTip(text, ev.Position)
}

// MouseOut hides the tip.
func (p *wfPlot) MouseOut() { p.showTip("", fyne.Position{}) }

// showTip shows text near pos, inside the plot; empty hides it.
func (p *wfPlot) showTip(text string, pos fyne.Position) {
	if text == "" {
		if p.tip.Visible() {
			p.tip.Hide()
			p.tipBG.Hide()
			canvas.Refresh(p)
		}
		return
	}
	if p.tip.Text != text {
		p.tip.SetText(text)
	}
	sz := p.tip.MinSize()
	size := p.Size()
	x := min(pos.X+14, size.Width-sz.Width-4)
	y := pos.Y + 18
	if y+sz.Height > size.Height {
		y = max(pos.Y-sz.Height-8, 0)
	}
	p.tip.Move(fyne.NewPos(x, y))
	p.tip.Resize(sz)
	p.tipBG.Move(fyne.NewPos(x, y))
	p.tipBG.Resize(sz)
	p.tipBG.FillColor = theme.Color(theme.ColorNameOverlayBackground)
	p.tip.Show()
	p.tipBG.Show()
	canvas.Refresh(p)
}

// FocusGained shows the focus ring.
func (p *wfPlot) FocusGained() { p.focused = true; p.Refresh() }

// FocusLost hides it.
func (p *wfPlot) FocusLost() { p.focused = false; p.Refresh() }

// TypedRune: W/S zoom, A/D pan, F follows now, + and - zoom, C opens
// the two minutes before the last crash, L goes back to live.
func (p *wfPlot) TypedRune(r rune) {
	switch r {
	case 'w', 'W', '+', '=':
		p.w.zoomBy(0.7, p.w.zoomAnchor())
	case 's', 'S', '-', '_':
		p.w.zoomBy(1/0.7, p.w.zoomAnchor())
	case 'a', 'A':
		p.w.panBy(-0.2)
	case 'd', 'D':
		p.w.panBy(0.2)
	case 'f', 'F':
		p.w.toggleFollow()
	case 'c', 'C':
		p.w.openLastCrash()
	case 'l', 'L':
		p.w.follow(true)
	}
}

// TypedKey: arrows pan and scroll, Home/End jump, Escape clears the
// selection, Enter opens the selected request's details.
func (p *wfPlot) TypedKey(ev *fyne.KeyEvent) {
	switch ev.Name {
	case fyne.KeyLeft:
		p.w.panBy(-0.1)
	case fyne.KeyRight:
		p.w.panBy(0.1)
	case fyne.KeyUp:
		p.w.scrollLanes(-40)
	case fyne.KeyDown:
		p.w.scrollLanes(40)
	case fyne.KeyPageUp:
		p.w.scrollLanes(-p.Size().Height * 0.8)
	case fyne.KeyPageDown:
		p.w.scrollLanes(p.Size().Height * 0.8)
	case fyne.KeyEnd:
		p.w.follow(true)
	case fyne.KeyHome:
		p.w.scrollLanes(-1e9)
	case fyne.KeyEscape:
		p.w.selectReq(wfReq{})
	}
}

// markerTip is a marker's hover text: what happened, and the stderr tail
// or changes behind it.
func markerTip(m wfMarker) string {
	lines := []string{m.At.In(displayZone).Format("15:04:05.000") + "  " + m.Title}
	if m.Detail != "" {
		detail := strings.Split(m.Detail, "\n")
		if len(detail) > 14 {
			detail = append(detail[:13], "…")
		}
		for _, d := range detail {
			lines = append(lines, "  "+truncate(d, 100))
		}
	}
	if m.Kind.crash() {
		lines = append(lines, "", "Click: the two minutes before, from history")
	}
	return strings.Join(lines, "\n")
}

// barTip is a bar's hover text.
func barTip(r *wfReq, now time.Time) string {
	return r.what() + "  ·  " + requestStatus(r.Status) + "\n" + r.timing(now) + "\n" +
		r.Server + " · session " + r.Session + " · child PID " + pidText(r.PID)
}
