package pool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"
	"sync/atomic"
)

// lineReader reads newline-delimited messages, the framing of MCP's stdio
// transport and of the pool's local socket. It reads into a buffer of its
// own and returns lines as parts of it: a line is copied only when the
// buffer must grow to hold it (by doubling), never fragment by fragment.
// A line longer than max is skipped, not buffered: its size and last
// bytes are reported in a *tooLongError so the caller can answer the
// sender.
type lineReader struct {
	r         io.Reader
	max       int
	onRelease func() // called when a buffer larger than keepBuf is let go
	// onLong, when set, is told the buffer a line of more than keepBuf
	// bytes needs, as the reader waits for more of it: the one the line is
	// in, or the one it is about to grow to; and 0 once that line ended
	// (returned, or skipped as too long). An error stops the reader before
	// its buffer grows: readLine returns it. Smaller lines never call it.
	onLong func(need int) error
	long   bool // onLong was last told a line's need, not its end
	need   int  // what onLong was last told
	// progress, when set, is given the length of a line past keepBuf read
	// so far, before each read of more of it.
	progress *atomic.Int64

	buf        []byte // all of it is the reader's to fill: len(buf) == cap(buf)
	small      []byte // the reader's own buffer of readBuf bytes; buf when lines are small
	start, end int    // buf[start:end] is read and not yet returned
	scanned    int    // buf[start:start+scanned] holds no newline
	err        error  // the input's error, returned once the lines before it are
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: r, max: max}
}

// readBuf is a reader's first buffer, and its size again after a large line.
const readBuf = 64 << 10

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

// lineReady reports whether a whole line that next returns (not a blank
// one, which next skips) waits in the buffer: the next call of next then
// returns it without reading.
func (lr *lineReader) lineReady() bool {
	for b := lr.buf[lr.start:lr.end]; ; {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return false
		}
		if len(bytes.TrimSpace(b[:i])) > 0 {
			return true
		}
		b = b[i+1:]
	}
}

// keepBuf is the size from which a message's buffer, let go, asks for a
// memory trim (memtrim.go).
const keepBuf = 1 << 20

func (lr *lineReader) readLine() ([]byte, error) {
	lr.shrink()
	for {
		from := lr.start + lr.scanned
		if i := bytes.IndexByte(lr.buf[from:lr.end], '\n'); i >= 0 {
			if from+i-lr.start > lr.max {
				return nil, lr.skip()
			}
			line := lr.buf[lr.start : from+i]
			lr.start, lr.scanned = from+i+1, 0
			lr.lineEnded()
			return line, nil
		}
		lr.scanned = lr.end - lr.start
		switch {
		case lr.scanned > lr.max:
			return nil, lr.skip()
		case lr.err == nil:
			lr.fill()
		case errors.Is(lr.err, io.EOF) && lr.scanned > 0:
			line := lr.buf[lr.start:lr.end]
			lr.start, lr.scanned = lr.end, 0
			lr.lineEnded()
			return line, nil
		default:
			// What was read before the error stays: a session handed
			// back to its shim gives it to the next pool (unread). The
			// error is returned once, as a bufio.Reader's is.
			err := lr.err
			lr.err = nil
			return nil, err
		}
	}
}

// lineEnded tells onLong that the line it was told of ended.
func (lr *lineReader) lineEnded() {
	if lr.long {
		lr.long, lr.need = false, 0
		_ = lr.onLong(0) // giving back cannot fail
	}
}

// holdLong tells onLong the buffer the unfinished line past keepBuf
// needs before more of it is read: the buffer it is in, or twice that
// when the line fills it. It tells each size once.
func (lr *lineReader) holdLong() error {
	need := len(lr.buf)
	if lr.end == need {
		need *= 2
	}
	if lr.long && need == lr.need {
		return nil
	}
	lr.long, lr.need = true, need
	return lr.onLong(need)
}

// fill reads more after the unfinished line, which first moves to the
// buffer's start; a buffer the line fills doubles, so a large message is
// read straight into the buffer that returns it.
func (lr *lineReader) fill() {
	if lr.start > 0 {
		lr.end = copy(lr.buf, lr.buf[lr.start:lr.end])
		lr.start = 0
	}
	if lr.onLong != nil && lr.end > keepBuf {
		if lr.progress != nil {
			lr.progress.Store(int64(lr.end))
		}
		if err := lr.holdLong(); err != nil {
			lr.err = err
			return
		}
	}
	switch {
	case len(lr.buf) == 0:
		if lr.small == nil {
			lr.small = make([]byte, readBuf)
		}
		lr.buf = lr.small
	case lr.end == len(lr.buf):
		buf := getLineBuf(2 * len(lr.buf))
		copy(buf, lr.buf[:lr.end])
		lr.letGo()
		lr.buf = buf
	}
	for range maxEmptyReads {
		n, err := lr.r.Read(lr.buf[lr.end:])
		lr.end += n
		if lr.err = err; n > 0 || err != nil {
			return
		}
	}
	lr.err = io.ErrNoProgress
}

// maxEmptyReads is how many reads that return nothing, and no error, a
// reader is given before it is taken for broken (bufio's bound).
const maxEmptyReads = 100

// shrink goes back to the small buffer once a large line was returned,
// when what follows it fits there: a session that once sent a 60 MB
// message must not hold 60 MB for the rest of its life. What follows
// that does not fit, the start of a line no longer than keepBuf, goes to
// a buffer of twice its size from a buffer larger than that: such a line
// may stay unfinished as long as its session lasts, counted by no bound
// (onLong counts only lines past keepBuf), so it must not keep a buffer
// of 128 MiB.
func (lr *lineReader) shrink() {
	rest := lr.end - lr.start
	if len(lr.buf) <= readBuf || rest > keepBuf || (rest > readBuf/2 && len(lr.buf) <= 2*keepBuf) {
		return
	}
	if lr.small == nil {
		lr.small = make([]byte, readBuf)
	}
	buf := lr.small
	if rest > readBuf/2 {
		buf = getLineBuf(2 * rest)
	}
	lr.end, lr.start = copy(buf, lr.buf[lr.start:lr.end]), 0
	lr.letGo()
	lr.buf = buf
}

// letGo gives a large buffer, done with, to the next large line.
func (lr *lineReader) letGo() {
	if len(lr.buf) <= readBuf {
		return
	}
	if len(lr.buf) > keepBuf && lr.onRelease != nil {
		lr.onRelease()
	}
	putLineBuf(lr.buf)
}

// lineBufs keep the buffers of large lines between lines, and between
// readers, by size: powers of two from 128 KiB. A session that sends a
// large message usually sends more, and a buffer made anew for each was
// zeroed and faulted into memory again each time (the largest part of
// the pool's cost for a large message). The garbage collector empties
// the pools once large lines stop coming.
var lineBufs [lineBufClasses]sync.Pool

const lineBufClasses = 14 // 128 KiB to 1 GiB

// lineBufSize is the size of buffers of class c.
func lineBufSize(c int) int { return 2 * readBuf << c }

// lineBufClass is the class of the smallest pooled buffer of n bytes or
// more (n > 0).
func lineBufClass(n int) int { return bits.Len(uint(n-1) / uint(2*readBuf)) }

// getLineBuf returns a buffer of n bytes or more.
func getLineBuf(n int) []byte {
	c := lineBufClass(n)
	if c >= lineBufClasses {
		return make([]byte, n)
	}
	if b, ok := lineBufs[c].Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, lineBufSize(c))
}

// putLineBuf keeps b, a buffer of a class size, for getLineBuf.
func putLineBuf(b []byte) {
	c := lineBufClass(cap(b))
	if c < lineBufClasses && cap(b) == lineBufSize(c) {
		b = b[:cap(b)]
		lineBufs[c].Put(&b)
	}
}

// reset makes lr read r from its start, keeping its buffer.
func (lr *lineReader) reset(r io.Reader) {
	*lr = lineReader{r: r, max: lr.max, onRelease: lr.onRelease, buf: lr.buf, small: lr.small}
}

// readAll is io.ReadAll with a buffer that doubles when full: append and
// io.ReadAll grow a large slice by a quarter, so a 1 MiB body took 24
// buffers, each a copy of all before it into fresh memory; this takes 13.
// grow, when set, is asked before each growth, from the buffer's old
// capacity to its new one; its error ends the read.
func readAll(r io.Reader, grow func(from, to int) error) ([]byte, error) {
	b := make([]byte, 0, 512)
	for {
		if len(b) == cap(b) {
			if grow != nil {
				if err := grow(cap(b), 2*cap(b)); err != nil {
					return b, err
				}
			}
			b = append(make([]byte, 0, 2*cap(b)), b...)
		}
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
// a line: a partial line and whatever was read after it.
func (lr *lineReader) unread() []byte {
	return append([]byte(nil), lr.buf[lr.start:lr.end]...)
}

// skip discards the oversize line at lr.start, reading on to its end.
func (lr *lineReader) skip() error {
	const keep = 256
	e := &tooLongError{}
	e.head = append(e.head, lr.buf[lr.start:lr.start+min(keep, lr.end-lr.start)]...)
	for {
		stop := lr.end
		i := bytes.IndexByte(lr.buf[lr.start:lr.end], '\n')
		if i >= 0 {
			stop = lr.start + i + 1
		}
		e.size += stop - lr.start
		e.tail = append(e.tail, lr.buf[max(lr.start, stop-keep):stop]...)
		if len(e.tail) > keep {
			e.tail = append(e.tail[:0], e.tail[len(e.tail)-keep:]...)
		}
		lr.start, lr.scanned = stop, 0
		switch {
		case i >= 0:
			lr.lineEnded()
			return e
		case lr.err != nil:
			return errors.Join(e, lr.err)
		}
		lr.start, lr.end = 0, 0 // what was read of the line is dropped
		lr.fill()
	}
}
