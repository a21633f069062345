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
	in   []byte // a partial line from the client
	outp []byte // a partial line from the pool
}

func newUnanswered() *unanswered { return &unanswered{ids: map[string]struct{}{}} }

// sent notes the client's bytes: requests add their id, a
// notifications/cancelled removes its requestId (a cancelled request is
// never answered).
func (u *unanswered) sent(b []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.in = eachLine(u.in, b, func(line []byte) {
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

// received notes the pool's bytes for the client: answers remove their id.
func (u *unanswered) received(b []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.outp = eachLine(u.outp, b, func(line []byte) {
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

// lost lists the requests still unanswered, and forgets them: the next
// pool answers them.
func (u *unanswered) lost() []wire.Lost {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]wire.Lost, 0, len(u.ids))
	for id := range u.ids {
		out = append(out, wire.Lost{ID: id, Written: true})
	}
	clear(u.ids)
	return out
}

// eachLine calls f on every line completed by b after the partial line
// part, and returns the new partial line. A partial line longer than
// maxCounted is dropped: the count is for ordinary requests, not for
// megabyte payloads it would otherwise hold.
func eachLine(part, b []byte, f func([]byte)) []byte {
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(part)+len(b) > maxCounted {
				return part[:0]
			}
			return append(part, b...)
		}
		line := b[:i]
		if len(part) > 0 {
			line = append(part, line...)
			part = part[:0]
		}
		f(line)
		b = b[i+1:]
	}
}

// maxCounted bounds the partial line the count keeps.
const maxCounted = 1 << 20
