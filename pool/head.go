package pool

import (
	"bytes"
	"encoding/binary"
	"io"
	"sync/atomic"
	"unsafe"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// headMirror keeps an attached session's head (wire.HeadOffset): what the
// pool has taken of its client's input past the last whole line, in
// memory the shim shares, for the next pool should this one be killed
// before the line ends. Only the session's reader uses it (headReader),
// and the goroutine that starts the session before that: no lock.
//
// A line that arrives whole in one read costs a look at the read's last
// byte; a line read in pieces, a copy of each piece (never of the whole
// head again), and a system call only to free the pages of a head over
// headPunchFrom once its line ends.
type headMirror struct {
	mem   []byte           // the shared mapping: the length word, then the head
	n     int              // the length the word says
	over  bool             // the line outgrew mem: nothing is kept of it
	punch func(mem []byte) // frees mem's pages (page-aligned); nil: never
	drop  func()           // unmaps mem
	wordp *uint32          // the length word
}

// headPunchFrom is the length above which an ended head's pages are given
// back: a session that once sent a 60 MB message in pieces must not hold
// 60 MB of shared memory for the rest of its life.
const headPunchFrom = 256 << 10

func newHeadMirrorOf(mem []byte, punch func([]byte), drop func()) *headMirror {
	return &headMirror{mem: mem, punch: punch, drop: drop, wordp: (*uint32)(unsafe.Pointer(&mem[0]))}
}

// saw takes in fresh, bytes just read from the client (after those the
// mirror saw before): what follows their last newline is the head now;
// with none, they add to it.
func (m *headMirror) saw(fresh []byte) {
	switch {
	case len(fresh) == 0:
	case fresh[len(fresh)-1] == '\n': // whole lines: the common case
		m.set(nil)
	default:
		if i := bytes.LastIndexByte(fresh, '\n'); i >= 0 {
			m.set(fresh[i+1:])
			return
		}
		m.add(fresh)
	}
}

// set makes head the head, in place of the one before, whose line ended.
func (m *headMirror) set(head []byte) {
	if m.n == 0 && !m.over && len(head) == 0 {
		return
	}
	old := m.n
	m.over = false
	m.store(0) // before the bytes: a kill in between leaves no head, not a torn one
	m.add(head)
	if old > headPunchFrom && m.punch != nil {
		const page = 4 << 10
		from := (wire.HeadOffset + m.n + page - 1) / page * page
		if to := wire.HeadOffset + old; to > from {
			m.punch(m.mem[from:to])
		}
	}
}

// add appends b to the head, unless the line outgrew the mirror (it is
// longer than any message the pool takes): then no head is kept until
// the line ends.
func (m *headMirror) add(b []byte) {
	if m.over || len(b) == 0 {
		return
	}
	if m.n+len(b) > len(m.mem)-wire.HeadOffset {
		m.store(0)
		m.over = true
		return
	}
	copy(m.mem[wire.HeadOffset+m.n:], b)
	m.store(m.n + len(b)) // after the bytes
}

// store writes the length word, little-endian, in one atomic store.
func (m *headMirror) store(n int) {
	var le [4]byte
	binary.LittleEndian.PutUint32(le[:], uint32(n))
	atomic.StoreUint32(m.wordp, binary.NativeEndian.Uint32(le[:]))
	m.n = n
}

// close unmaps the mirror. The shim keeps the memfd, and what the
// mapping held.
func (m *headMirror) close() {
	if m != nil && m.mem != nil {
		m.drop()
		m.mem, m.wordp = nil, nil
	}
}

// headReader reads an attached session's client pipe and keeps the
// mirror up to date with each read, before the reader sees the bytes.
type headReader struct {
	r io.Reader
	m *headMirror
}

// mirrorHead is r, the client's input, kept in m; r when m is nil.
func mirrorHead(r io.Reader, m *headMirror) io.Reader {
	if m == nil {
		return r
	}
	return &headReader{r: r, m: m}
}

func (hr *headReader) Read(p []byte) (int, error) {
	n, err := hr.r.Read(p)
	hr.m.saw(p[:n])
	if err == io.EOF {
		// The reader returns a last line that did not end as a line: it
		// is handled here, and owed in the ledger if it is a request; the
		// next pool must not read it again.
		hr.m.set(nil)
	}
	return n, err
}

// tailOf is what follows the last newline of b.
func tailOf(b []byte) []byte {
	return b[bytes.LastIndexByte(b, '\n')+1:]
}
