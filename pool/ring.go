package pool

import "sync"

// ring keeps the last lines a child wrote to stderr, so that a crash can be
// explained in status and in the error clients get. Each child has its
// own (child.errTail): what it holds is that child's, never the lines of
// the one it took the place of. It has its own lock because the stderr
// reader must never wait for the backend's.
type ring struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

func newRing(n int) *ring { return &ring{lines: make([]string, n)} }

// add records one line, truncated so a runaway child cannot grow memory.
func (r *ring) add(line string) {
	const maxLine = 512
	if len(line) > maxLine {
		line = line[:maxLine] + "…"
	}
	r.mu.Lock()
	r.lines[r.next] = line
	r.next = (r.next + 1) % len(r.lines)
	if r.next == 0 {
		r.full = true
	}
	r.mu.Unlock()
}

// tail returns up to n of the newest lines, oldest first.
func (r *ring) tail(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	count := r.next
	if r.full {
		count = len(r.lines)
	}
	if n > count {
		n = count
	}
	out := make([]string, 0, n)
	for i := n; i > 0; i-- {
		out = append(out, r.lines[(r.next-i+len(r.lines))%len(r.lines)])
	}
	return out
}
