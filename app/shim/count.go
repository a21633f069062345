package shim

import (
	"bytes"
	"sync"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// unanswered is a relaying shim's own count of its client's requests that
// no answer has passed back yet: it sees every byte both ways, so the
// count is exact about answers, and after a crash it is what the next
// pool answers (whether a request reached a child only the history may
// know). Lines are framed here as the pool frames them; a line that does
// not parse is the pool's to refuse, not this count's.
type unanswered struct {
	mu   sync.Mutex
	ids  map[string]struct{}
	in   lineBuf // a partial line from the client
	outp lineBuf // a partial line from the pool
	// before is in as it was before the last sent, for unsent: each
	// never writes over a line's bytes once framed, so it stays whole.
	before lineBuf
}

func newUnanswered() *unanswered { return &unanswered{ids: map[string]struct{}{}} }

// sent notes the client's bytes: requests add their id, a
// notifications/cancelled removes its requestId (a cancelled request is
// never answered).
func (u *unanswered) sent(b []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.before = u.in
	u.in.each(b, func(line []byte) {
		m, err := jsonrpc.Parse(line)
		switch {
		case err != nil:
		case m.Kind == jsonrpc.KindRequest:
			u.ids[string(m.IDBytes())] = struct{}{}
		case m.Kind == jsonrpc.KindNotification && m.Method == "notifications/cancelled":
			params := m.Params.Of(m.Raw)
			if id := jsonrpc.Member(params, "requestId"); id.Present() {
				delete(u.ids, string(id.Of(params)))
			}
		}
	})
}

// unsent takes back b[n:], the end of what the last sent noted (b),
// which no pool took: the write to the pool failed there, as a killed
// pool's connection does. The requests whose lines end in it are not
// owed, and the line under way ends where b[:n] ends it, so the next
// pool reads that head first, then b[n:], and the line arrives whole and
// runs, rather than being answered as possibly executed by a pool that
// never read its end.
func (u *unanswered) unsent(b []byte, n int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.in = u.before
	u.in.each(b[:n], func([]byte) {}) // counted by sent already
	rest := u.in
	rest.each(b[n:], func(line []byte) {
		if m, err := jsonrpc.Parse(line); err == nil && m.Kind == jsonrpc.KindRequest {
			delete(u.ids, string(m.IDBytes()))
		}
	})
}

// received notes the pool's bytes for the client: answers remove their id.
func (u *unanswered) received(b []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.outp.each(b, func(line []byte) {
		if m, err := jsonrpc.Parse(line); err == nil && m.Kind == jsonrpc.KindResponse {
			delete(u.ids, string(m.IDBytes()))
		}
	})
}

// owed reports whether a request is still unanswered.
func (u *unanswered) owed() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.ids) > 0
}

// lost lists the requests still unanswered, for the next pool to answer.
// They stay counted until their answers pass back (received): a pool that
// dies before it answered them leaves them owed, for the one after it.
func (u *unanswered) lost() []wire.Lost {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]wire.Lost, 0, len(u.ids))
	for id := range u.ids {
		out = append(out, wire.Lost{ID: id, Written: true})
	}
	return out
}

// handedBack forgets what a pool that stopped on purpose hands back: it
// answered every request it took, and the input it had not handled, the
// head of a line included, comes back to be sent, and counted, again.
func (u *unanswered) handedBack() {
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.ids)
	u.in.part, u.in.skip = nil, false
}

// head is the start of the line the client is writing, which the pool
// the shim sent it to read: one that died with it leaves the next pool to
// read it first, whole with its end. nil when the line is longer than
// the count frames (the pool refuses it anyway).
func (u *unanswered) head() []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.in.skip {
		return nil
	}
	return append([]byte(nil), u.in.part...)
}

// lineBuf frames a stream into lines for the count.
type lineBuf struct {
	part []byte // the line under way
	skip bool   // the line under way is longer than maxCounted
}

// each calls f on every line completed by b. A line of any size the
// pool takes is counted whole: its id may come after megabytes of params
// or result. One longer than that (maxCounted) is the pool's to refuse,
// and is skipped to its end.
func (lb *lineBuf) each(b []byte, f func([]byte)) {
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if lb.skip || len(lb.part)+len(b) > maxCounted {
				lb.part, lb.skip = nil, true
				return
			}
			lb.part = append(lb.part, b...)
			return
		}
		line := b[:i]
		if len(lb.part) > 0 {
			line = append(lb.part, line...)
		}
		if !lb.skip && len(line) <= maxCounted {
			f(line)
		}
		// A new buffer for the next line: the framed line's bytes stay as
		// they were, for unsent to frame again.
		lb.part, lb.skip = nil, false
		b = b[i+1:]
	}
}

// maxCounted bounds a line the count frames: the pool's largest message.
const maxCounted = wire.MaxMessageBytes
