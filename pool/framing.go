package pool

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// lineReader reads newline-delimited messages, the framing of MCP's stdio
// transport and of the pool's local socket. A line longer than max is
// skipped, not buffered: its size and last bytes are reported in a
// *tooLongError so the caller can answer the sender.
type lineReader struct {
	r         *bufio.Reader
	max       int
	buf       []byte
	onRelease func() // called when a buffer larger than keepBuf is let go
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// tooLongError reports a skipped oversize line.
type tooLongError struct {
	size int
	head []byte // first bytes, to find an id written early
	tail []byte // last bytes, to find an id written late
}

func (e *tooLongError) Error() string {
	return fmt.Sprintf("message of %d bytes or more exceeds the limit", e.size)
}

// next returns the next non-empty line without its line ending. The slice
// is only valid until the next call. At EOF a final unterminated line is
// returned before io.EOF.
func (lr *lineReader) next() ([]byte, error) {
	for {
		line, err := lr.readLine()
		if err != nil {
			return nil, err
		}
		line = bytes.TrimRight(line, "\r")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		return line, nil
	}
}

// keepBuf is the largest line buffer kept between lines: a session that
// once sent a 60 MB message must not hold 60 MB for the rest of its life.
const keepBuf = 1 << 20

func (lr *lineReader) readLine() ([]byte, error) {
	if cap(lr.buf) > keepBuf {
		lr.buf = nil // the caller is done with the last line
		if lr.onRelease != nil {
			lr.onRelease()
		}
	}
	lr.buf = lr.buf[:0]
	for {
		frag, err := lr.r.ReadSlice('\n')
		if len(lr.buf)+len(frag) > lr.max+1 {
			return nil, lr.skip(frag, err)
		}
		switch {
		case err == nil:
			if len(lr.buf) == 0 {
				return frag[:len(frag)-1], nil
			}
			lr.buf = append(lr.buf, frag[:len(frag)-1]...)
			return lr.buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			lr.buf = appendDoubling(lr.buf, frag)
		case errors.Is(err, io.EOF) && len(lr.buf)+len(frag) > 0:
			lr.buf = append(lr.buf, frag...)
			return lr.buf, nil
		default:
			// What was read before the error is kept: a session handed
			// back to its shim gives it to the next pool (unread).
			lr.buf = append(lr.buf, frag...)
			return nil, err
		}
	}
}

// growDoubling returns b with room for n more bytes, at least doubling
// its capacity when it must grow. append and io.ReadAll grow a large
// slice by a quarter, so a 1 MB message read 64 KB at a time was copied
// again and again into fresh memory, each copy paying page faults: the
// largest cost of a large message in the pool.
func growDoubling(b []byte, n int) []byte {
	if len(b)+n <= cap(b) {
		return b
	}
	grown := make([]byte, len(b), max(2*cap(b), len(b)+n))
	copy(grown, b)
	return grown
}

// appendDoubling is append for a line growing by buffer-sized fragments
// (a 1 MiB line read 64 KiB at a time: five buffers, not ten).
func appendDoubling(buf, frag []byte) []byte {
	return append(growDoubling(buf, len(frag)), frag...)
}

// readAll is io.ReadAll with a buffer that doubles when full: a 1 MiB
// body took 24 buffers with io.ReadAll, each a copy of all before it;
// this takes 13.
func readAll(r io.Reader) ([]byte, error) {
	b := make([]byte, 0, 512)
	for {
		b = growDoubling(b, 1)
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// unread is what the reader took from its input and has not returned as
// a line: a partial line and whatever is buffered after it.
func (lr *lineReader) unread() []byte {
	rest := append([]byte(nil), lr.buf...)
	if n := lr.r.Buffered(); n > 0 {
		b, _ := lr.r.Peek(n)
		rest = append(rest, b...)
	}
	return rest
}

// skip discards the rest of an oversize line.
func (lr *lineReader) skip(frag []byte, err error) error {
	const keep = 256
	e := &tooLongError{size: len(lr.buf)}
	e.head = append(e.head, lr.buf[:min(keep, len(lr.buf))]...)
	if len(e.head) < keep {
		e.head = append(e.head, frag[:min(keep-len(e.head), len(frag))]...)
	}
	lr.buf = lr.buf[:0]
	for {
		e.size += len(frag)
		e.tail = append(e.tail, frag...)
		if len(e.tail) > keep {
			e.tail = append(e.tail[:0], e.tail[len(e.tail)-keep:]...)
		}
		if err == nil {
			return e
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return errors.Join(e, err)
		}
		frag, err = lr.r.ReadSlice('\n')
	}
}
