package pool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// FuzzLineReader: whatever the stream, the line limit and the size of
// the reads (a pipe hands over what it holds), the reader returns what
// splitting the whole stream at its newlines gives: each line without
// its ending, blank ones left out, and one error in place of each line
// over the limit, with the line's size.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\n\n  \r\nbb\r\n"+strings.Repeat("x", 100)+"\nlast"), uint16(7), uint16(50))
	f.Add([]byte(strings.Repeat("y", 300)+"\n"+strings.Repeat("z", 10)+"\n"), uint16(1), uint16(10))
	f.Add([]byte("one\ntwo\nthree"), uint16(64<<10-1), uint16(3))
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		var b []byte
		for range rng.IntN(20) {
			b = append(b, bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, rng.IntN(3000))...)
			b = append(b, "\n\r \n"[rng.IntN(4)])
		}
		f.Add(b, uint16(1+rng.IntN(5000)), uint16(rng.IntN(4000)))
	}
	f.Fuzz(func(t *testing.T, stream []byte, chunk, limit uint16) {
		lr := newLineReader(&chunkReader{r: bytes.NewReader(stream), max: max(1, int(chunk))}, int(limit))
		if got, want := readLines(t, lr), splitLines(stream, int(limit)); !slices.Equal(got, want) {
			t.Fatalf("read %q\nwant %q", got, want)
		}
	})
}

// readLines reads lr to its end: its lines, "too long: N bytes" for an
// oversize one, and "EOF".
func readLines(t *testing.T, lr *lineReader) []string {
	var got []string
	for {
		line, err := lr.next()
		var tl *tooLongError
		switch {
		case err == nil:
			got = append(got, string(line))
			continue
		case errors.As(err, &tl):
			got = append(got, fmt.Sprintf("too long: %d bytes", tl.size))
			if err == error(tl) {
				continue
			}
		}
		if !errors.Is(err, io.EOF) {
			t.Fatalf("unexpected error %v", err)
		}
		return append(got, "EOF")
	}
}

// splitLines is what a line reader with limit max returns for stream.
func splitLines(stream []byte, max int) []string {
	var out []string
	for len(stream) > 0 {
		line, rest, found := bytes.Cut(stream, []byte("\n"))
		stream = rest
		switch {
		case len(line) > max:
			size := len(line)
			if found {
				size++
			}
			out = append(out, fmt.Sprintf("too long: %d bytes", size))
		case len(bytes.TrimSpace(bytes.TrimRight(line, "\r"))) > 0:
			out = append(out, string(bytes.TrimRight(line, "\r")))
		}
	}
	return append(out, "EOF")
}

// Large lines' buffers are powers of two from 128 KiB to 1 GiB, kept for
// the next large line; a larger one is made to measure and not kept.
func TestLineBufs(t *testing.T) {
	for _, tc := range []struct{ n, size int }{
		{1, 128 << 10}, {128 << 10, 128 << 10}, {128<<10 + 1, 256 << 10}, {1 << 20, 1 << 20},
		{1<<20 + 1, 2 << 20}, {1 << 30, 1 << 30}, {1<<30 + 1, 0},
	} {
		c := lineBufClass(tc.n)
		if size := lineBufSize(c); c >= lineBufClasses && tc.size != 0 || c < lineBufClasses && size != tc.size {
			t.Errorf("a buffer for %d bytes: class %d of %d bytes, want %d bytes", tc.n, c, size, tc.size)
		}
		if tc.n <= 4<<20 {
			if b := getLineBuf(tc.n); len(b) != tc.size {
				t.Errorf("a buffer for %d bytes: %d", tc.n, len(b))
			}
		}
	}
	// What is put is what the next get of its class returns (the race
	// detector's pool drops a quarter of what is put: a few tries).
	b := getLineBuf(300 << 10)
	for range 20 {
		putLineBuf(b)
		if got := getLineBuf(257 << 10); &got[0] == &b[0] {
			return
		}
	}
	t.Error("a buffer put back is never handed out again")
}

// emptyReader returns nothing, and no error, for ever.
type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

// A reader that never returns anything, nor an error, is taken for
// broken (as bufio does) instead of being read for ever.
func TestLineReaderGivesUpOnAnEmptyReader(t *testing.T) {
	lr := newLineReader(io.MultiReader(strings.NewReader("first\nhalf"), emptyReader{}), 100)
	if line, err := lr.next(); err != nil || string(line) != "first" {
		t.Fatalf("first line: %q, %v", line, err)
	}
	if _, err := lr.next(); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("then %v, want io.ErrNoProgress", err)
	}
	if got := string(lr.unread()); got != "half" {
		t.Fatalf("unread %q, want the half line read", got)
	}
}

// TestLineReady: a line is ready when next would return it without
// reading; blank lines, which next skips, are not.
func TestLineReady(t *testing.T) {
	for _, tc := range []struct {
		buffered string
		want     bool
	}{
		{"", false},
		{"{}", false},
		{"{}\n", true},
		{"{}\r\n", true},
		{"\n", false},
		{"\r\n \t\n", false},
		{"\n\n{}\n", true},
		{"\n\n{}", false},
		{"{}\n{", true},
	} {
		lr := &lineReader{buf: []byte(tc.buffered), end: len(tc.buffered)}
		if got := lr.lineReady(); got != tc.want {
			t.Errorf("lineReady with %q buffered = %v, want %v", tc.buffered, got, tc.want)
		}
	}
}
