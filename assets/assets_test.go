package assets

import (
	"bytes"
	"image/png"
	"testing"
)

func TestIconsDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		size int
	}{
		{"Icon", Icon, 256},
		{"TrayIdle", TrayIdle, 64},
		{"TrayBusy", TrayBusy, 64},
		{"TrayHung", TrayHung, 64},
		{"TrayIdleDark", TrayIdleDark, 64},
		{"TrayBusyDark", TrayBusyDark, 64},
		{"TrayHungDark", TrayHungDark, 64},
	} {
		img, err := png.Decode(bytes.NewReader(tc.data))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if b := img.Bounds(); b.Dx() != tc.size || b.Dy() != tc.size {
			t.Errorf("%s is %dx%d, want %dx%d", tc.name, b.Dx(), b.Dy(), tc.size, tc.size)
		}
		// The corners are transparent (rounded panel) and the centre is not.
		if _, _, _, a := img.At(0, 0).RGBA(); a != 0 {
			t.Errorf("%s: corner is not transparent", tc.name)
		}
		if _, _, _, a := img.At(tc.size/2, tc.size/2).RGBA(); a == 0 {
			t.Errorf("%s: centre is transparent", tc.name)
		}
	}
}
