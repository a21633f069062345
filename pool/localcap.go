package pool

import (
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// localSlots counts the local socket's connections open at once, from
// their accept (a connection that has not said hello yet holds a
// descriptor too) to their session's end (Options.MaxLocalSessions).
type localSlots struct {
	open   atomic.Int64
	warned atomic.Int64 // unix nanoseconds of the last refusal logged
}

// take counts one more connection, unless limit are open. release, safe
// to call more than once, counts it out.
func (l *localSlots) take(limit int) (release func(), ok bool) {
	if l.open.Add(1) > int64(limit) {
		l.open.Add(-1)
		return nil, false
	}
	var once sync.Once
	return func() { once.Do(func() { l.open.Add(-1) }) }, true
}

// refuseLocal tells a connection past MaxLocalSessions why it is refused,
// in its Welcome, and closes it. The Welcome says the pool is Busy: a
// shim resuming a session tries again a moment later, rather than end
// the session for good (a burst of shims resuming after a restart, or a
// process that holds connections, must not end them); a new session's
// shim tries for a moment too, then prints it and answers its client
// with it. It runs in the accept loop, so it gives the write only a
// moment: a fresh connection's buffer takes a Welcome at once, and a
// connection that does not is refused all the same.
func (p *Pool) refuseLocal(conn net.Conn) {
	limit := p.opts.MaxLocalSessions
	msg := fmt.Sprintf("Switchboard has %d local sessions and connections open, its limit: this one is refused; "+
		"the sessions open are not affected (a process opening connection after connection may hold them)", limit)
	line, _ := json.Marshal(Welcome{Error: msg, Busy: true, Run: p.opts.RunID})
	_ = conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = conn.Write(append(line, '\n'))
	conn.Close()
	now := time.Now().UnixNano()
	if last := p.local.warned.Load(); now-last >= int64(10*time.Second) && p.local.warned.CompareAndSwap(last, now) {
		p.log.Warn("refusing local connections: too many open", "limit", limit)
	}
}
