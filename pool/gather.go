package pool

import "io"

// gather is the bytes of one write to a child, assembled from queued
// lines: small pieces are copied together into buf, so that many short
// requests still go in one system call, and a large piece is referred to
// where it lies, so that a large request is not copied once more only to
// be written.
type gather struct {
	buf  []byte   // the small pieces, in order
	refs [][]byte // the large pieces, in place
	at   []int    // at[i]: where refs[i] goes among buf's bytes
	size int      // bytes in all
}

// gatherInPlace is the size from which a piece is referred to, not
// copied: a copy of a piece this large costs more than the system call
// that writing it alone adds.
const gatherInPlace = 16 << 10

// add appends b to the write. b must stay unchanged until the write is
// done.
func (g *gather) add(b []byte) {
	if len(b) >= gatherInPlace {
		g.refs = append(g.refs, b)
		g.at = append(g.at, len(g.buf))
	} else {
		g.buf = append(g.buf, b...)
	}
	g.size += len(b)
}

// addByte appends one byte (a line's newline).
func (g *gather) addByte(c byte) {
	g.buf = append(g.buf, c)
	g.size++
}

// writeTo writes the pieces in order, and reports how many bytes w took
// before the first error.
func (g *gather) writeTo(w io.Writer) (int, error) {
	n, from := 0, 0
	write := func(b []byte) error {
		if len(b) == 0 {
			return nil
		}
		k, err := w.Write(b)
		n += k
		return err
	}
	for i, ref := range g.refs {
		if err := write(g.buf[from:g.at[i]]); err != nil {
			return n, err
		}
		if err := write(ref); err != nil {
			return n, err
		}
		from = g.at[i]
	}
	return n, write(g.buf[from:])
}

// pieces appends to dst the pieces to write, in order, none empty: for
// one writev.
func (g *gather) pieces(dst [][]byte) [][]byte {
	from := 0
	for i, ref := range g.refs {
		if g.at[i] > from {
			dst = append(dst, g.buf[from:g.at[i]])
		}
		dst = append(dst, ref)
		from = g.at[i]
	}
	if len(g.buf) > from {
		dst = append(dst, g.buf[from:])
	}
	return dst
}

// reset empties g for the next write, keeping buf's memory and letting
// the large pieces go.
func (g *gather) reset() {
	clear(g.refs)
	g.buf, g.refs, g.at, g.size = g.buf[:0], g.refs[:0], g.at[:0], 0
}
