//go:build ignore

// Command gen draws Switchboard's icons: a rounded panel with three jacks on
// the left patched into one hub on the right, the picture of many sessions
// sharing one server. The PNGs it writes are committed; rerun it after
// changing a colour or the geometry:
//
//	go run assets/gen/main.go            # from the repository root
//	go run assets/gen/main.go -o DIR     # anywhere else
//
// Tray icons are 64x64 in three states (idle: slate, busy: blue, hung: amber
// with a red "!" badge), each in a variant for light panels and one for dark
// panels. The app icon is 256x256 with a soft vertical gradient.
//
// Shapes are signed distance functions rendered with one pixel of
// anti-aliasing into alpha masks, then composited with image/draw, so the
// icons stay crisp when a tray scales them down to 16-24 px.
package main

import (
	"flag"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"log"
	"math"
	"os"
	"path/filepath"
)

// style is one icon's colours. top and bottom are the panel gradient (equal
// for a flat panel); badge is zero when there is no badge.
type style struct {
	top, bottom color.NRGBA
	glyph       color.NRGBA
	badge       color.NRGBA
	mark        color.NRGBA // the "!" on the badge
}

func hex(v uint32) color.NRGBA {
	return color.NRGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 0xff}
}

func flat(panel, glyph uint32) style {
	return style{top: hex(panel), bottom: hex(panel), glyph: hex(glyph)}
}

func withBadge(s style, badge, mark uint32) style {
	s.badge, s.mark = hex(badge), hex(mark)
	return s
}

func main() {
	out := flag.String("o", "assets", "directory to write the PNGs into")
	flag.Parse()

	const white, ink = 0xffffff, 0x1b2330
	tray := map[string]style{
		// Light panels: saturated panel, white glyph.
		"tray-idle.png": flat(0x64748b, white),
		"tray-busy.png": flat(0x2563eb, white),
		"tray-hung.png": withBadge(flat(0xd97706, white), 0xdc2626, white),
		// Dark panels: light panel, dark glyph.
		"tray-idle-dark.png": flat(0xe2e8f0, ink),
		"tray-busy-dark.png": flat(0x7cb4ff, 0x0b1b3a),
		"tray-hung-dark.png": withBadge(flat(0xfbbf24, 0x2a1a00), 0xf87171, 0x2a0a0a),
	}
	for name, s := range tray {
		write(filepath.Join(*out, name), render(64, s))
	}
	icon := style{top: hex(0x4f8dfd), bottom: hex(0x1d4ed8), glyph: hex(white)}
	write(filepath.Join(*out, "icon.png"), render(256, icon))
}

func write(path string, img image.Image) {
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	if err := png.Encode(f, img); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}

// sdf is a signed distance in pixels from a point to a shape's edge:
// negative inside, positive outside.
type sdf func(x, y float64) float64

// mask rasterises a shape into an alpha mask with one pixel of
// anti-aliasing along its edge.
func mask(size int, f sdf) *image.Alpha {
	m := image.NewAlpha(image.Rect(0, 0, size, size))
	for y := 0; y < size; y++ {
		for x := 0; x < size; x++ {
			cov := math.Max(0, math.Min(1, 0.5-f(float64(x)+0.5, float64(y)+0.5)))
			m.SetAlpha(x, y, color.Alpha{uint8(math.Round(cov * 255))})
		}
	}
	return m
}

func union(fs ...sdf) sdf {
	return func(x, y float64) float64 {
		d := math.Inf(1)
		for _, f := range fs {
			d = math.Min(d, f(x, y))
		}
		return d
	}
}

func circle(cx, cy, r float64) sdf {
	return func(x, y float64) float64 { return math.Hypot(x-cx, y-cy) - r }
}

// capsule is a segment from (ax, ay) to (bx, by) with round ends of radius r.
func capsule(ax, ay, bx, by, r float64) sdf {
	return func(x, y float64) float64 {
		dx, dy := bx-ax, by-ay
		t := math.Max(0, math.Min(1, ((x-ax)*dx+(y-ay)*dy)/(dx*dx+dy*dy)))
		return math.Hypot(x-(ax+t*dx), y-(ay+t*dy)) - r
	}
}

// roundedSquare spans [lo, hi] on both axes with corner radius r.
func roundedSquare(lo, hi, r float64) sdf {
	c := (lo + hi) / 2
	h := (hi-lo)/2 - r
	return func(x, y float64) float64 {
		qx, qy := math.Abs(x-c)-h, math.Abs(y-c)-h
		out := math.Hypot(math.Max(qx, 0), math.Max(qy, 0))
		return out + math.Min(math.Max(qx, qy), 0) - r
	}
}

// gradient is a vertical two-stop gradient image.
type gradient struct {
	top, bottom color.NRGBA
	size        int
}

func (g gradient) ColorModel() color.Model { return color.NRGBAModel }
func (g gradient) Bounds() image.Rectangle { return image.Rect(-1e9, -1e9, 1e9, 1e9) }
func (g gradient) At(_, y int) color.Color {
	t := math.Max(0, math.Min(1, (float64(y)+0.5)/float64(g.size)))
	mix := func(a, b uint8) uint8 { return uint8(math.Round(float64(a) + t*(float64(b)-float64(a)))) }
	return color.NRGBA{mix(g.top.R, g.bottom.R), mix(g.top.G, g.bottom.G), mix(g.top.B, g.bottom.B), 0xff}
}

func render(size int, s style) *image.NRGBA {
	n := float64(size)
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	paint := func(f sdf, src image.Image, op draw.Op) {
		draw.DrawMask(img, img.Bounds(), src, image.Point{}, mask(size, f), image.Point{}, op)
	}

	// Panel.
	paint(roundedSquare(n*0.03, n*0.97, n*0.22), gradient{s.top, s.bottom, size}, draw.Over)

	// Glyph: three jacks patched into one hub.
	hubX, hubY := n*0.70, n*0.50
	jackX := n * 0.29
	jackY := []float64{n * 0.27, n * 0.50, n * 0.73}
	var parts []sdf
	for _, y := range jackY {
		parts = append(parts, capsule(jackX, y, hubX, hubY, n*0.037), circle(jackX, y, n*0.085))
	}
	parts = append(parts, circle(hubX, hubY, n*0.125))
	paint(union(parts...), image.NewUniform(s.glyph), draw.Over)
	// A hole in the hub makes it read as a socket, not a blob.
	paint(circle(hubX, hubY, n*0.05), gradient{s.top, s.bottom, size}, draw.Over)

	if s.badge.A != 0 {
		bx, by, br := n*0.82, n*0.18, n*0.16
		// Cut a transparent ring so the badge stands off the panel.
		erase(img, mask(size, circle(bx, by, br+n*0.04)))
		paint(circle(bx, by, br), image.NewUniform(s.badge), draw.Over)
		mark := union(
			capsule(bx, by-br*0.52, bx, by+br*0.12, br*0.14),
			circle(bx, by+br*0.50, br*0.15),
		)
		paint(mark, image.NewUniform(s.mark), draw.Over)
	}
	return img
}

// erase makes img transparent where m is set, keeping the anti-aliased edge
// (draw.Src with a mask would clear everything outside the mask too).
func erase(img *image.NRGBA, m *image.Alpha) {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := img.NRGBAAt(x, y)
			c.A = uint8(math.Round(float64(c.A) * (1 - float64(m.AlphaAt(x, y).A)/255)))
			img.SetNRGBA(x, y, c)
		}
	}
}
