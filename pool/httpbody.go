package pool

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
)

// bodyBudget bounds the memory the front door holds for request bodies
// it is still reading, across every connection: a token holder could
// otherwise open any number of POSTs and send each a body of nearly
// MaxMessageBytes, never finishing it, and make the pool hold all of them
// (40 such bodies of 60 MiB held 3.7 GB). A body of up to sizedBody
// bytes, as clients send, is not counted: it is read into a buffer of its
// declared size. A larger one takes what its buffer grows by from the
// budget, and gives it back once read (or refused); past the budget it is
// refused with 503, and its connection closed.
type bodyBudget struct {
	left atomic.Int64
}

// sizedBody is the largest body read into a buffer of its declared size,
// in one allocation, and not counted in the budget.
const sizedBody = 64 << 10

// bodyBudgetOf is the budget of a pool whose messages are at most max
// bytes: two bodies of the largest size read at once (a buffer of up to
// twice the body's size each: it doubles as it grows).
func bodyBudgetOf(max int) *bodyBudget {
	b := &bodyBudget{}
	b.left.Store(4 * int64(max))
	return b
}

// take takes n bytes, or none and reports false when fewer are left.
func (b *bodyBudget) take(n int64) bool {
	for {
		left := b.left.Load()
		if left < n {
			return false
		}
		if b.left.CompareAndSwap(left, left-n) {
			return true
		}
	}
}

func (b *bodyBudget) give(n int64) { b.left.Add(n) }

// errBodyBudget refuses a body that would take the pool past its budget
// for bodies being read.
var errBodyBudget = errors.New("the pool is reading too many large request bodies at once; send it again in a moment")

// readBody reads a POST's body, up to limit+1 bytes (one more than the
// limit says it is too large). A small body whose length the request
// declares, as clients' are, is read into a buffer of that size, in one
// allocation; a large one grows as its bytes arrive (doubling, as readAll
// does), so that a caller cannot make the pool hold what it only
// announced, and each growth past sizedBody is taken from budget first:
// errBodyBudget when it is spent.
func readBody(r *http.Request, limit int, budget *bodyBudget) ([]byte, error) {
	if n := r.ContentLength; n >= 0 && n <= int64(min(limit, sizedBody)) {
		body := make([]byte, n) // net/http ends the body at its declared length
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, err
		}
		// Read to its end: closing it now spares net/http looking for
		// more of it (a copy to io.Discard) as the response begins.
		_ = r.Body.Close()
		return body, nil
	}
	var taken int64
	defer func() { budget.give(taken) }()
	return readAll(io.LimitReader(r.Body, int64(limit)+1), func(from, to int) error {
		if to <= sizedBody {
			return nil
		}
		more := int64(to) - int64(max(from, sizedBody))
		if !budget.take(more) {
			return fmt.Errorf("%w (%d bytes read)", errBodyBudget, from)
		}
		taken += more
		return nil
	})
}
