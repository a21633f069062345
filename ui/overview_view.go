package ui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// cardSize is one server card in the overview's grid: two fit side by
// side in the dashboard's default width.
var cardSize = fyne.NewSize(478, 250)

// cardPad is a card's inner margin, left and right.
const cardPad = 12

// overviewView is the Overview tab: a header line and one card per
// server. Its fields belong to the UI goroutine.
type overviewView struct {
	u      *UI
	view   fyne.CanvasObject
	header *cutLine
	sub    *cutLine
	grid   *fyne.Container
	cards  []*cardView
	empty  *fyne.Container
	shown  overview
}

func newOverviewView(u *UI) *overviewView {
	o := &overviewView{u: u}
	o.header = newCutLine(18, true)
	o.sub = newCutLine(12, false)
	o.grid = container.NewGridWrap(cardSize)
	openCfg := widget.NewButtonWithIcon("Open config file", theme.DocumentIcon(), u.openConfig)
	msg := widget.NewLabelWithStyle("No servers configured. Add one to the mcpServers object of the config file:\n"+
		"it starts as soon as you save, and each client reaches it with `switchboard connect NAME`.",
		fyne.TextAlignCenter, fyne.TextStyle{Italic: true})
	o.empty = container.NewCenter(container.NewVBox(msg, container.NewCenter(openCfg)))
	o.empty.Hide()
	top := container.New(layout.NewCustomPaddedLayout(8, 4, 12, 12), container.NewVBox(o.header.view, o.sub.view))
	o.view = container.NewBorder(top, nil, nil, nil,
		container.NewStack(container.NewVScroll(container.New(layout.NewCustomPaddedLayout(4, 8, 8, 8), o.grid)), o.empty))
	return o
}

// apply shows ov.
func (o *overviewView) apply(ov overview) {
	o.shown = ov
	o.header.set(ov.Header, theme.Color(theme.ColorNameForeground))
	o.sub.set(ov.Sub, theme.Color(theme.ColorNamePlaceHolder))
	for len(o.cards) < len(ov.Cards) {
		o.cards = append(o.cards, newCardView(o.u))
	}
	if len(o.grid.Objects) != len(ov.Cards) {
		objs := make([]fyne.CanvasObject, len(ov.Cards))
		for i := range ov.Cards {
			objs[i] = o.cards[i].box
		}
		o.grid.Objects = objs
		o.grid.Refresh()
	}
	for i, c := range ov.Cards {
		o.cards[i].apply(c)
	}
	if len(ov.Cards) == 0 {
		o.empty.Show()
	} else {
		o.empty.Hide()
	}
}

// cutLine is a line of text cut to its width, with an ellipsis: it asks
// for no width, so that a long header never widens the window (what
// matters most comes first in it).
type cutLine struct {
	text  *canvas.Text
	view  *fyne.Container
	full  string
	width float32 // as laid out; 0: not yet
}

func newCutLine(size float32, bold bool) *cutLine {
	l := &cutLine{text: canvas.NewText("", theme.Color(theme.ColorNameForeground))}
	l.text.TextSize, l.text.TextStyle.Bold = size, bold
	l.view = container.New(l, l.text)
	return l
}

// set shows s in colour c, cut to the width.
func (l *cutLine) set(s string, c color.Color) {
	l.full = s
	shown := s
	if l.width > 0 {
		shown = fitText(s, l.text.TextSize, l.text.TextStyle, l.width)
	}
	setCanvasText(l.text, shown, c)
}

// Layout cuts the text to the new width.
func (l *cutLine) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	if size.Width != l.width {
		l.width = size.Width
		l.set(l.full, l.text.Color)
	}
	objs[0].Resize(size)
}

// MinSize is the text's height, and no width.
func (l *cutLine) MinSize([]fyne.CanvasObject) fyne.Size {
	return fyne.NewSize(0, fyne.MeasureText("Mg", l.text.TextSize, l.text.TextStyle).Height)
}

// figures are server's rolling figures as last shown: what a frame made
// off the loop's goroutine, which owns the tracker, shows until the
// loop's next frame.
func (o *overviewView) figures(server string) serverFigures {
	for _, c := range o.shown.Cards {
		if c.Name == server {
			return c.Figures
		}
	}
	return serverFigures{}
}

// cardView is one server's card.
type cardView struct {
	card     serverCard // as shown: what its Restart asks about
	box      *fyne.Container
	bg       *canvas.Rectangle
	name     *canvas.Text
	dot      *canvas.Circle
	state    *canvas.Text
	share    *canvas.Text
	sessions *canvas.Text
	activity *canvas.Text
	children [maxChildLines]*canvas.Text
	values   [6]*canvas.Text
	captions [6]*canvas.Text
	latency  *sparkline
	inflight *sparkline
	latCap   *canvas.Text
	inCap    *canvas.Text
	restart  *widget.Button
	// The head's parts beside the name, which the name is cut to fit
	// between.
	badges, buttons *fyne.Container
}

func newCardView(u *UI) *cardView {
	c := &cardView{}
	text := func(size float32, bold bool) *canvas.Text {
		t := canvas.NewText("", theme.Color(theme.ColorNameForeground))
		t.TextSize, t.TextStyle.Bold = size, bold
		return t
	}
	c.bg = canvas.NewRectangle(theme.Color(theme.ColorNameInputBackground))
	c.bg.CornerRadius = 8
	c.bg.StrokeWidth = 1
	c.name = text(17, true)
	c.dot = canvas.NewCircle(color.Transparent)
	c.state = text(12, true)
	c.share = text(11, false)
	c.sessions = text(13, false)
	c.activity = text(13, true)
	for i := range c.children {
		c.children[i] = text(12, false)
		c.children[i].TextStyle.Monospace = true
	}
	stats := make([]fyne.CanvasObject, len(c.values))
	for i := range c.values {
		c.values[i], c.captions[i] = text(15, true), text(10, false)
		stats[i] = container.NewVBox(c.values[i], c.captions[i])
	}
	c.latency = newSparkline(sparkLatency, theme.ColorNamePrimary)
	c.inflight = newSparkline(sparkInFlight, theme.ColorNameForeground)
	c.latCap, c.inCap = text(10, false), text(10, false)
	c.latCap.Text, c.inCap.Text = "latency p50, 15 s buckets", "most in flight at once"
	c.restart = widget.NewButtonWithIcon(cardRestart, theme.ViewRefreshIcon(), func() {
		u.dash.confirmRestartServer(c.card, c.restart.Text)
	})
	waterfall := widget.NewButtonWithIcon("Waterfall", theme.ListIcon(), func() { u.showWaterfallAt(c.card.Name, wfKey{}) })
	c.restart.Importance, waterfall.Importance = widget.LowImportance, widget.LowImportance
	dot := container.New(layout.NewCustomPaddedLayout(0, 0, 4, 0), container.NewGridWrap(fyne.NewSquareSize(9), c.dot))
	c.badges = container.NewHBox(container.NewCenter(dot), container.NewCenter(c.state), container.NewCenter(c.share))
	c.buttons = container.NewHBox(waterfall, c.restart)
	head := container.NewBorder(nil, nil, container.NewHBox(c.name, c.badges), c.buttons)
	lines := container.NewVBox()
	for _, t := range c.children {
		lines.Add(t)
	}
	body := container.NewVBox(
		head,
		container.NewBorder(nil, nil, c.sessions, c.activity),
		lines,
		container.NewGridWithColumns(len(stats), stats...),
		container.NewGridWithColumns(2,
			container.NewBorder(c.latCap, nil, nil, nil, c.latency),
			container.NewBorder(c.inCap, nil, nil, nil, c.inflight)),
	)
	c.box = container.NewStack(c.bg, container.New(layout.NewCustomPaddedLayout(6, 8, cardPad, cardPad), body))
	return c
}

// The overview card's Restart: the server's, every child of it.
const (
	cardRestart    = "Restart"
	cardRestartAll = "Restart all"
)

// stateColor is the badge of a state.
func stateColor(state string) fyne.ThemeColorName {
	switch stateLevel(state) {
	case levelHung:
		return theme.ColorNameError
	case levelWarn:
		return theme.ColorNameWarning
	}
	switch state {
	case "ready":
		return theme.ColorNameSuccess
	}
	return theme.ColorNameDisabled
}

func setCanvasText(t *canvas.Text, s string, c color.Color) {
	if t.Text != s || t.Color != c {
		t.Text, t.Color = s, c
		t.Refresh()
	}
}

func (c *cardView) apply(sc serverCard) {
	c.card = sc
	fg := theme.Color(theme.ColorNameForeground)
	dim := theme.Color(theme.ColorNamePlaceHolder)
	border := theme.Color(theme.ColorNameSeparator)
	if sc.Level == levelHung {
		border = theme.Color(theme.ColorNameError)
	}
	if c.bg.StrokeColor != border || c.bg.FillColor != theme.Color(theme.ColorNameInputBackground) {
		c.bg.StrokeColor, c.bg.FillColor = border, theme.Color(theme.ColorNameInputBackground)
		c.bg.Refresh()
	}
	if dot := theme.Color(stateColor(sc.State)); c.dot.FillColor != dot {
		c.dot.FillColor = dot
		c.dot.Refresh()
	}
	setCanvasText(c.state, sc.State, fg)
	setCanvasText(c.share, string(sc.Share), dim)
	// The card's Restart is the server's: every child of it. With more
	// than one child it says so (a Backends row restarts one).
	restart := cardRestart
	if sc.Children > 1 {
		restart = cardRestartAll
	}
	if c.restart.Text != restart {
		c.restart.SetText(restart)
	}
	// The name is cut to what is left beside the badges and the buttons;
	// the Backends tab shows it whole.
	room := cardSize.Width - 2*cardPad - c.buttons.MinSize().Width - c.badges.MinSize().Width - 2*theme.Padding()
	setCanvasText(c.name, fitText(sc.Name, c.name.TextSize, c.name.TextStyle, room), fg)
	setCanvasText(c.sessions, sc.sessionsLine(), fg)
	act := fg
	switch {
	case sc.Hung > 0:
		act = theme.Color(theme.ColorNameError)
	case sc.InFlight == 0:
		act = dim
	}
	setCanvasText(c.activity, sc.activityLine(), act)
	// The children, then the server's note (its error), in the same
	// three lines, so that every card has the same shape.
	lines := sc.ChildLines
	if sc.Note != "" {
		lines = append(lines[:min(len(lines), len(c.children)-1):min(len(lines), len(c.children)-1)], sc.Note)
	}
	for i, t := range c.children {
		line, col := "", dim
		if i < len(lines) {
			line = lines[i]
		}
		if sc.Note != "" && i == len(lines)-1 {
			line, col = fitText(line, t.TextSize, t.TextStyle, cardSize.Width-2*cardPad), theme.Color(theme.ColorNameError)
		}
		setCanvasText(t, line, col)
	}
	for i, s := range sc.stats() {
		col := fg
		if i == 1 && sc.Saved > 0 {
			col = theme.Color(theme.ColorNameSuccess)
		}
		if i == 5 && sc.Figures.Errors > 0 {
			col = theme.Color(theme.ColorNameError)
		}
		setCanvasText(c.values[i], s.Value, col)
		setCanvasText(c.captions[i], s.Caption, dim)
	}
	c.latency.set(sc.Figures.Spark)
	c.inflight.set(sc.Figures.Spark)
	c.latCap.Color, c.inCap.Color = dim, dim
	if sc.State == "disabled" {
		c.restart.Disable()
	} else {
		c.restart.Enable()
	}
}
