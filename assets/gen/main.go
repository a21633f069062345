//go:build ignore

// Command gen draws Switchboard's icons: a rounded panel with three jacks
// patched to one hub. Run it with `go run assets/gen/main.go` from the
// repository root; the PNGs are committed.
package main

import (
	"image"
	"image/color"
	"image/png"
	"log"
	"math"
	"os"
	"path/filepath"
)

type palette struct{ panel, line, badge color.RGBA }

func main() {
	clear := color.RGBA{}
	states := map[string]palette{
		"idle": {color.RGBA{0x5f, 0x6b, 0x7a, 0xff}, color.RGBA{0xff, 0xff, 0xff, 0xff}, clear},
		"busy": {color.RGBA{0x1f, 0x6f, 0xeb, 0xff}, color.RGBA{0xff, 0xff, 0xff, 0xff}, clear},
		"hung": {color.RGBA{0x5f, 0x6b, 0x7a, 0xff}, color.RGBA{0xff, 0xff, 0xff, 0xff}, color.RGBA{0xf5, 0x9e, 0x0b, 0xff}},
	}
	dark := map[string]palette{
		"idle": {color.RGBA{0xd8, 0xde, 0xe6, 0xff}, color.RGBA{0x22, 0x27, 0x2e, 0xff}, clear},
		"busy": {color.RGBA{0x6c, 0xa8, 0xff, 0xff}, color.RGBA{0x10, 0x18, 0x28, 0xff}, clear},
		"hung": {color.RGBA{0xd8, 0xde, 0xe6, 0xff}, color.RGBA{0x22, 0x27, 0x2e, 0xff}, color.RGBA{0xff, 0xb0, 0x20, 0xff}},
	}
	for name, p := range states {
		write("tray-"+name+".png", draw(64, p))
	}
	for name, p := range dark {
		write("tray-"+name+"-dark.png", draw(64, p))
	}
	write("icon.png", draw(256, states["busy"]))
}

func write(name string, img image.Image) {
	f, err := os.Create(filepath.Join("assets", name))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		log.Fatal(err)
	}
}

func draw(size int, p palette) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, size, size))
	s := float64(size)
	r := s * 0.2
	// Rounded panel.
	for y := 0; y < size; y++ {
		for x := 0; x < size; x++ {
			if insideRounded(float64(x)+0.5, float64(y)+0.5, s*0.04, s*0.96, r) {
				img.Set(x, y, p.panel)
			}
		}
	}
	hub := [2]float64{s * 0.70, s * 0.5}
	jacks := [][2]float64{{s * 0.28, s * 0.27}, {s * 0.28, s * 0.5}, {s * 0.28, s * 0.73}}
	for _, j := range jacks {
		line(img, j, hub, s*0.045, p.line)
		disc(img, j, s*0.085, p.line)
	}
	disc(img, hub, s*0.11, p.line)
	if p.badge.A != 0 {
		disc(img, [2]float64{s * 0.8, s * 0.2}, s*0.17, p.badge)
	}
	return img
}

func insideRounded(x, y, lo, hi, r float64) bool {
	cx := math.Max(lo+r, math.Min(x, hi-r))
	cy := math.Max(lo+r, math.Min(y, hi-r))
	return (x-cx)*(x-cx)+(y-cy)*(y-cy) <= r*r && x >= lo && x <= hi && y >= lo && y <= hi
}

func disc(img *image.RGBA, c [2]float64, r float64, col color.RGBA) {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			dx, dy := float64(x)+0.5-c[0], float64(y)+0.5-c[1]
			if dx*dx+dy*dy <= r*r {
				img.Set(x, y, col)
			}
		}
	}
}

func line(img *image.RGBA, a, b [2]float64, w float64, col color.RGBA) {
	bd := img.Bounds()
	dx, dy := b[0]-a[0], b[1]-a[1]
	l2 := dx*dx + dy*dy
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			px, py := float64(x)+0.5, float64(y)+0.5
			t := math.Max(0, math.Min(1, ((px-a[0])*dx+(py-a[1])*dy)/l2))
			qx, qy := a[0]+t*dx-px, a[1]+t*dy-py
			if qx*qx+qy*qy <= w*w {
				img.Set(x, y, col)
			}
		}
	}
}
