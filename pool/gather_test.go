package pool

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// limitWriter takes at most max bytes, then fails; it records each write.
type limitWriter struct {
	max    int
	got    bytes.Buffer
	writes []int
}

var errFull = errors.New("full")

func (w *limitWriter) Write(b []byte) (int, error) {
	n := min(len(b), w.max-w.got.Len())
	w.got.Write(b[:n])
	w.writes = append(w.writes, len(b))
	if n < len(b) {
		return n, errFull
	}
	return n, nil
}

// A write's pieces arrive in order whichever are copied and which are
// referred to; large pieces are written from where they lie (their own
// write), small ones together; a failing writer stops the write and the
// count says how far it got.
func TestGather(t *testing.T) {
	small := func(c byte) []byte { return bytes.Repeat([]byte{c}, 100) }
	large := func(c byte) []byte { return bytes.Repeat([]byte{c}, gatherInPlace) }
	for _, tc := range []struct {
		name   string
		pieces [][]byte
		max    int   // what the writer takes; 0: all
		writes []int // the sizes of the writes made, newlines (copied) included
	}{
		{"nothing", nil, 0, nil},
		{"small ones in one write", [][]byte{small('a'), small('b'), small('c')}, 0, []int{303}},
		{"one large", [][]byte{large('a')}, 0, []int{gatherInPlace, 1}},
		{"large between small", [][]byte{small('a'), large('b'), small('c'), small('d')}, 0, []int{101, gatherInPlace, 203}},
		{"two large in a row", [][]byte{large('a'), large('b'), small('c')}, 0, []int{gatherInPlace, 1, gatherInPlace, 102}},
		{"just under the size is copied", [][]byte{small('a'), bytes.Repeat([]byte{'b'}, gatherInPlace-1)}, 0, []int{gatherInPlace + 101}},
		{"stops inside a large piece", [][]byte{small('a'), large('b'), small('c')}, 150, []int{101, gatherInPlace}},
		{"stops before the end", [][]byte{large('a'), small('b')}, gatherInPlace + 50, []int{gatherInPlace, 102}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g gather
			var want []byte
			for _, p := range tc.pieces {
				g.add(p)
				g.addByte('\n')
				want = append(append(want, p...), '\n')
			}
			if g.size != len(want) {
				t.Fatalf("size %d, want %d", g.size, len(want))
			}
			max := tc.max
			if max == 0 {
				max = len(want)
			}
			w := &limitWriter{max: max}
			n, err := g.writeTo(w)
			if wantErr := max < len(want); (err != nil) != wantErr || n != max {
				t.Fatalf("wrote %d (err %v), want %d (an error: %v)", n, err, max, wantErr)
			}
			if !bytes.Equal(w.got.Bytes(), want[:max]) {
				t.Errorf("the bytes differ from the pieces in order")
			}
			if !slices.Equal(w.writes, tc.writes) {
				t.Errorf("writes of %v bytes, want %v", w.writes, tc.writes)
			}
			g.reset()
			if g.size != 0 || len(g.buf) != 0 || len(g.refs) != 0 {
				t.Errorf("reset left %d bytes, %d in buf, %d pieces", g.size, len(g.buf), len(g.refs))
			}
		})
	}
}
