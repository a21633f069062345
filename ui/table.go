package ui

import (
	"image/color"
	"math"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// table is a virtualised widget.Table over rows: only the visible cells
// exist, so 5,000 rows cost what 30 do. Its fields belong to the UI
// goroutine.
type table struct {
	cols   []column
	cellOf []int // each column's index in row.cells; -1 for a button
	rows   []row
	w      *widget.Table
	empty  *widget.Label
	view   fyne.CanvasObject
	stale  bool      // rows changed while hidden
	widths []float32 // the columns' widths now: they fit the content
	avail  float32   // the table's width as laid out (0: not yet)

	// onButton runs when a row's button is tapped, with the row as it was
	// shown; onSelect when a row is selected.
	onButton func(col column, r row)
	onSelect func(r row)
}

// newTable builds a table with a header row; emptyText shows while it
// has no rows.
func newTable(cols []column, emptyText string) *table {
	t := &table{cols: cols}
	n := 0
	for _, c := range cols {
		if c.button != "" {
			t.cellOf = append(t.cellOf, -1)
			continue
		}
		t.cellOf = append(t.cellOf, n)
		n++
	}
	t.w = widget.NewTableWithHeaders(
		func() (int, int) { return len(t.rows), len(t.cols) },
		t.createCell,
		t.updateCell,
	)
	t.w.ShowHeaderColumn = false
	t.w.StickyColumnCount = t.buttons() // the buttons stay in view, at the same place
	t.w.CreateHeader = func() fyne.CanvasObject {
		l := widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
		l.Truncation = fyne.TextTruncateEllipsis
		return l
	}
	t.w.UpdateHeader = func(id widget.TableCellID, o fyne.CanvasObject) {
		if id.Col >= 0 && id.Col < len(t.cols) {
			o.(*widget.Label).SetText(t.cols[id.Col].title)
		}
	}
	t.widths = make([]float32, len(cols))
	t.fitColumns()
	t.w.OnSelected = func(id widget.TableCellID) {
		if id.Row >= 0 && id.Row < len(t.rows) && t.onSelect != nil {
			t.onSelect(t.rows[id.Row])
		}
	}
	t.empty = widget.NewLabelWithStyle(emptyText, fyne.TextAlignCenter, fyne.TextStyle{Italic: true})
	t.view = container.New(fitLayout{t}, t.w, container.NewCenter(t.empty))
	return t
}

// buttons counts the button columns at the start.
func (t *table) buttons() int {
	for i, c := range t.cols {
		if c.button == "" {
			return i
		}
	}
	return len(t.cols)
}

// fitLayout stacks a table's parts, and fits its columns again when its
// width changes.
type fitLayout struct{ t *table }

func (l fitLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	if size.Width != l.t.avail {
		l.t.avail = size.Width
		l.t.fitColumns()
	}
	layout.NewStackLayout().Layout(objs, size)
}

func (l fitLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	return layout.NewStackLayout().MinSize(objs)
}

// cell is a table cell: a background that shows the row's level, and a
// label or a button.
type cell struct {
	widget.BaseWidget
	bg    *canvas.Rectangle
	label *widget.Label
	btn   *widget.Button
}

func (t *table) createCell() fyne.CanvasObject {
	c := &cell{bg: canvas.NewRectangle(color.Transparent), label: widget.NewLabel(""), btn: widget.NewButton("", nil)}
	c.label.Truncation = fyne.TextTruncateEllipsis
	c.ExtendBaseWidget(c)
	return c
}

// CreateRenderer stacks the parts; one of label and button is hidden.
func (c *cell) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(container.NewStack(c.bg, c.label, c.btn))
}

func (t *table) updateCell(id widget.TableCellID, o fyne.CanvasObject) {
	c := o.(*cell)
	if id.Row < 0 || id.Row >= len(t.rows) || id.Col < 0 || id.Col >= len(t.cols) {
		c.label.SetText("")
		c.btn.Hide()
		return
	}
	r, col := t.rows[id.Row], t.cols[id.Col]
	if bg := levelColor(r.level); c.bg.FillColor != bg {
		c.bg.FillColor = bg
		c.bg.Refresh()
	}
	if col.button != "" && col.show != nil && !col.show(r) {
		c.btn.Hide()
		if c.label.Text != "" {
			c.label.SetText("")
		}
		c.label.Show()
		return
	}
	if col.button != "" {
		c.label.Hide()
		c.btn.OnTapped = func() {
			if t.onButton != nil {
				t.onButton(col, r)
			}
		}
		imp := widget.MediumImportance
		if r.level == levelHung {
			imp = widget.DangerImportance
		}
		if c.btn.Text != col.button || c.btn.Importance != imp {
			c.btn.Text, c.btn.Importance = col.button, imp
			c.btn.Refresh()
		}
		c.btn.Show()
		return
	}
	c.btn.Hide()
	text := ""
	if ci := t.cellOf[id.Col]; ci < len(r.cells) {
		text = r.cells[ci]
	}
	imp := widget.MediumImportance
	if r.level == levelHung {
		imp = widget.DangerImportance
	}
	bold := r.level == levelHung
	if c.label.Text != text || c.label.Importance != imp || c.label.TextStyle.Bold != bold {
		c.label.Text = text
		c.label.Importance = imp
		c.label.TextStyle.Bold = bold
		c.label.Refresh()
	}
	c.label.Show()
}

// levelColor is the background of a row: red for hung, amber for warn.
func levelColor(l level) color.Color {
	var base color.Color
	switch l {
	case levelHung:
		base = theme.Color(theme.ColorNameError)
	case levelWarn:
		base = theme.Color(theme.ColorNameWarning)
	default:
		return color.Transparent
	}
	r, g, b, _ := base.RGBA()
	alpha := uint8(0x38)
	if l == levelWarn {
		alpha = 0x20
	}
	return color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: alpha}
}

// setRows replaces the rows and redraws the visible cells. A table on a
// hidden tab only keeps the rows; refresh draws them when it is shown.
func (t *table) setRows(rows []row) {
	t.rows = rows
	if len(rows) == 0 {
		t.empty.Show()
	} else {
		t.empty.Hide()
	}
	if t.view.Visible() {
		t.fitColumns()
		t.w.Refresh()
	} else {
		t.stale = true
	}
}

// refresh fits and redraws a table whose rows changed while it was
// hidden.
func (t *table) refresh() {
	if t.stale {
		t.stale = false
		t.fitColumns()
		t.w.Refresh()
	}
}

// Column widths: each column as wide as its widest text (header, cell,
// or the widest form of its ticking figures), within bounds, so that
// nothing is cut that could be shown and no room is wasted. Growing
// follows the content at once; shrinking waits until a column would lose
// a fifth, so widths do not twitch. When the columns are wider than the
// table, the free-text ones (those with a max) give up the difference,
// down to minFree, so that more columns stay in view; selecting a row
// shows its text whole. The buttons, first and sticky, are always in
// view.
const (
	minColumn = 44
	maxColumn = 420
	minFree   = 96
)

// fitColumns sets the columns' widths from the header and the rows. The
// widest texts are found by length (cheap for thousands of rows); only
// they are measured.
func (t *table) fitColumns() {
	want := t.contentWidths()
	for ci, w := range want {
		if cur := t.widths[ci]; w <= cur+0.5 && w >= cur*0.8 {
			want[ci] = cur // close enough: no twitching
		}
	}
	t.shrinkFree(want)
	for ci, w := range want {
		if w != t.widths[ci] {
			t.widths[ci] = w
			t.w.SetColumnWidth(ci, w)
		}
	}
}

// shrinkFree narrows the free-text columns of want, each in proportion to
// what it has above minFree, until the columns fit the table's width.
func (t *table) shrinkFree(want []float32) {
	if t.avail <= 0 {
		return
	}
	total, spare := float32(0), float32(0)
	for ci, w := range want {
		total += w + theme.Padding() // the table puts a padding between columns
		if t.cols[ci].max > 0 {
			spare += max(w-minFree, 0)
		}
	}
	over := total - t.avail
	if over <= 0 || spare <= 0 {
		return
	}
	cut := min(over/spare, 1)
	for ci, w := range want {
		if t.cols[ci].max > 0 && w > minFree {
			want[ci] = float32(math.Floor(float64(w - (w-minFree)*cut)))
		}
	}
}

// contentWidths are the widths the columns' content asks for, within
// their bounds.
func (t *table) contentWidths() []float32 {
	pad := 2*theme.InnerPadding() + theme.Padding()
	out := make([]float32, len(t.cols))
	for ci, c := range t.cols {
		var w float32
		switch {
		case c.button != "":
			w = buttonWidth(c.button)
		default:
			w = fyne.MeasureText(c.title, theme.TextSize(), fyne.TextStyle{Bold: true}).Width + pad
			for _, s := range append(longestCells(t.rows, t.cellOf[ci], 2), c.fit...) {
				// Bold: a hung row's cells are.
				w = max(w, fyne.MeasureText(s, theme.TextSize(), fyne.TextStyle{Bold: true}).Width+pad)
			}
		}
		limit := float32(maxColumn)
		if c.max > 0 {
			limit = c.max
		}
		out[ci] = min(max(w, minColumn), limit)
	}
	return out
}

// longestCells are the n longest texts of column ci.
func longestCells(rows []row, ci, n int) []string {
	best := make([]string, 0, n)
	for _, r := range rows {
		if ci >= len(r.cells) {
			continue
		}
		s := r.cells[ci]
		switch {
		case len(best) < n:
			best = append(best, s)
		default:
			shortest := 0
			for i := range best {
				if len(best[i]) < len(best[shortest]) {
					shortest = i
				}
			}
			if len(s) > len(best[shortest]) {
				best[shortest] = s
			}
		}
	}
	return best
}

var buttonWidths = map[string]float32{}

// buttonWidth is how wide a cell's button is.
func buttonWidth(label string) float32 {
	if w, ok := buttonWidths[label]; ok {
		return w
	}
	w := widget.NewButton(label, nil).MinSize().Width + theme.Padding()
	buttonWidths[label] = w
	return w
}
