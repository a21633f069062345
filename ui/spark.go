package ui

import (
	"image"
	"image/color"
	"math"
	"slices"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// sparkKind says what a sparkline plots.
type sparkKind uint8

const (
	sparkLatency  sparkKind = iota // p50 per slot, on a log scale, as an area
	sparkInFlight                  // the most in flight per slot, as bars
)

// drawSpark draws points into a w x h image: transparent, with the
// plot in c. Pure, so it is tested on its own and drawn anywhere.
func drawSpark(points []sparkPoint, kind sparkKind, w, h int, c color.RGBA, scale float32) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, max(w, 1), max(h, 1)))
	if len(points) == 0 || w < 2 || h < 2 {
		return img
	}
	step := float32(w) / float32(len(points))
	pad := 2 * scale
	top, bottom := pad, float32(h)-pad
	switch kind {
	case sparkInFlight:
		most := 0
		for _, p := range points {
			most = max(most, p.InFlight)
		}
		if most == 0 {
			baseline(img, bottom, c, scale)
			return img
		}
		// A step area: each slot as wide as it is, as high as its most.
		line := []point{{0, bottom}}
		for i, p := range points {
			y := bottom - (bottom-top)*float32(p.InFlight)/float32(most)
			line = append(line, point{float32(i) * step, y}, point{float32(i+1) * step, y})
		}
		line = append(line, point{float32(w), bottom})
		fillPath(img, line, withA(c, 0x50))
		stroke(img, line[1:len(line)-1], 1.2*scale, withA(c, 0xd0))
		baseline(img, bottom, c, scale)
	case sparkLatency:
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, p := range points {
			if p.P50 > 0 {
				v := math.Log(float64(p.P50))
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		if math.IsInf(lo, 1) {
			baseline(img, bottom, c, scale)
			return img
		}
		if hi-lo < math.Log(4) { // a flat line sits in the middle, not at the top
			mid := (hi + lo) / 2
			lo, hi = mid-math.Log(2), mid+math.Log(2)
		}
		y := func(p sparkPoint) float32 {
			return bottom - (bottom-top)*float32((math.Log(float64(p.P50))-lo)/(hi-lo))
		}
		// Each run of slots with calls is an area under a line; a slot
		// without calls is a gap.
		var run []point
		flush := func() {
			if len(run) == 0 {
				return
			}
			if len(run) == 1 { // one slot: as wide as a slot
				run = []point{{run[0].x - step/2, run[0].y}, {run[0].x + step/2, run[0].y}}
			}
			area := append([]point{{run[0].x, bottom}}, run...)
			area = append(area, point{run[len(run)-1].x, bottom})
			fillPath(img, area, withA(c, 0x40))
			stroke(img, run, 1.5*scale, c)
			run = run[:0]
		}
		for i, p := range points {
			if p.P50 <= 0 {
				flush()
				continue
			}
			run = append(run, point{(float32(i) + 0.5) * step, y(p)})
		}
		flush()
		baseline(img, bottom, c, scale)
	}
	return img
}

func baseline(img *image.RGBA, y float32, c color.RGBA, scale float32) {
	ci := canvasImage{RGBA: img}
	ci.blend(0, int(y), img.Bounds().Dx(), int(y)+max(int(scale), 1), withA(c, 0x50))
}

// sparkline is a small chart of a card: a raster drawn from its points
// when fyne paints it. UI goroutine only.
type sparkline struct {
	widget.BaseWidget
	kind   sparkKind
	points []sparkPoint
	color  fyne.ThemeColorName
	raster *canvas.Raster
}

func newSparkline(kind sparkKind, c fyne.ThemeColorName) *sparkline {
	s := &sparkline{kind: kind, color: c}
	s.raster = canvas.NewRaster(func(w, h int) image.Image {
		scale := float32(1)
		if cv := fyne.CurrentApp().Driver().CanvasForObject(s); cv != nil {
			scale = cv.Scale()
		}
		return drawSpark(s.points, s.kind, w, h, rgba(theme.Color(s.color)), scale)
	})
	s.ExtendBaseWidget(s)
	return s
}

// set shows points, redrawing only when they changed.
func (s *sparkline) set(points []sparkPoint) {
	if slices.Equal(s.points, points) {
		return
	}
	s.points = points
	s.raster.Refresh()
}

// MinSize is a card's chart strip.
func (s *sparkline) MinSize() fyne.Size { return fyne.NewSize(120, 42) }

// CreateRenderer shows the raster.
func (s *sparkline) CreateRenderer() fyne.WidgetRenderer { return widget.NewSimpleRenderer(s.raster) }
