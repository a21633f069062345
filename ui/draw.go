package ui

import (
	"image"
	"image/color"
	"image/draw"
	"math"

	"golang.org/x/image/vector"
)

// This file draws into images in Go, off the UI goroutine: the
// waterfall's bars (thousands of them, where one fyne object each would
// cost far more than a frame) and the overview's sparklines.

// canvasImage is an RGBA image with fast opaque rectangles.
type canvasImage struct {
	*image.RGBA
	rows map[color.RGBA][]byte // a row of each fill colour so far, copied into place
}

func rgba(c color.Color) color.RGBA {
	return color.RGBAModel.Convert(c).(color.RGBA)
}

// fill paints the rectangle [x0,x1) x [y0,y1) with the opaque colour c
// (alpha is ignored), clipped to the image.
func (img *canvasImage) fill(x0, y0, x1, y1 int, c color.RGBA) {
	b := img.Bounds()
	x0, y0 = max(x0, b.Min.X), max(y0, b.Min.Y)
	x1, y1 = min(x1, b.Max.X), min(y1, b.Max.Y)
	if x0 >= x1 || y0 >= y1 {
		return
	}
	n := (x1 - x0) * 4
	c.A = 0xff
	row, ok := img.rows[c]
	if !ok {
		if img.rows == nil {
			img.rows = map[color.RGBA][]byte{}
		}
		row = make([]byte, b.Dx()*4)
		for i := 0; i < len(row); i += 4 {
			row[i], row[i+1], row[i+2], row[i+3] = c.R, c.G, c.B, 0xff
		}
		img.rows[c] = row
	}
	for y := y0; y < y1; y++ {
		off := img.PixOffset(x0, y)
		copy(img.Pix[off:off+n], row[:n])
	}
}

// blend paints the rectangle with c over what is there (c's alpha
// counts), clipped to the image.
func (img *canvasImage) blend(x0, y0, x1, y1 int, c color.RGBA) {
	r := image.Rect(x0, y0, x1, y1).Intersect(img.Bounds())
	if r.Empty() {
		return
	}
	draw.Draw(img.RGBA, r, image.NewUniform(c), image.Point{}, draw.Over)
}

// vline draws a vertical line at x from y0 to y1 with c, dashed when
// dash > 0 (dash pixels on, dash off).
func (img *canvasImage) vline(x, y0, y1, width int, c color.RGBA, dash int) {
	if dash <= 0 {
		img.fill(x, y0, x+width, y1, c)
		return
	}
	for y := y0; y < y1; y += 2 * dash {
		img.fill(x, y, x+width, min(y+dash, y1), c)
	}
}

// mix is a over b at alpha a/255, opaque.
func mix(a, b color.RGBA, alpha uint8) color.RGBA {
	f := float64(alpha) / 255
	m := func(x, y uint8) uint8 { return uint8(math.Round(float64(x)*f + float64(y)*(1-f))) }
	return color.RGBA{m(a.R, b.R), m(a.G, b.G), m(a.B, b.B), 0xff}
}

// withA is c with alpha a, premultiplied as color.RGBA wants.
func withA(c color.RGBA, a uint8) color.RGBA {
	f := float64(a) / 255
	return color.RGBA{uint8(float64(c.R) * f), uint8(float64(c.G) * f), uint8(float64(c.B) * f), a}
}

// stroke draws an anti-aliased polyline of width w (pixels) through pts
// onto dst with c.
func stroke(dst draw.Image, pts []point, w float32, c color.Color) {
	if len(pts) < 2 {
		if len(pts) == 1 {
			p := pts[0]
			fillPath(dst, []point{{p.x - w, p.y - w}, {p.x + w, p.y - w}, {p.x + w, p.y + w}, {p.x - w, p.y + w}}, c)
		}
		return
	}
	b := dst.Bounds()
	r := vector.NewRasterizer(b.Dx(), b.Dy())
	for i := 1; i < len(pts); i++ {
		p, q := pts[i-1], pts[i]
		dx, dy := q.x-p.x, q.y-p.y
		l := float32(math.Hypot(float64(dx), float64(dy)))
		if l == 0 {
			continue
		}
		nx, ny := -dy/l*w/2, dx/l*w/2
		r.MoveTo(p.x+nx, p.y+ny)
		r.LineTo(q.x+nx, q.y+ny)
		r.LineTo(q.x-nx, q.y-ny)
		r.LineTo(p.x-nx, p.y-ny)
		r.ClosePath()
	}
	r.Draw(dst, b, image.NewUniform(c), image.Point{})
}

// point is a position in an image's pixels.
type point struct{ x, y float32 }

// fillPath fills the closed polygon pts onto dst with c, anti-aliased.
func fillPath(dst draw.Image, pts []point, c color.Color) {
	if len(pts) < 3 {
		return
	}
	b := dst.Bounds()
	r := vector.NewRasterizer(b.Dx(), b.Dy())
	r.MoveTo(pts[0].x, pts[0].y)
	for _, p := range pts[1:] {
		r.LineTo(p.x, p.y)
	}
	r.ClosePath()
	r.Draw(dst, b, image.NewUniform(c), image.Point{})
}
