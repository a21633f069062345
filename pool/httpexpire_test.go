package pool

import (
	"testing"
	"time"
)

// TestHTTPSessionsExpire: a server's stateless session stays while an
// exchange is under way and for statelessLinger after the last one, then
// ends (so that its partition's child can be reaped), and the next
// request opens another; a legacy session ends after HTTPSessionIdle
// without a request or a stream, and an ended one is forgotten.
func TestHTTPSessionsExpire(t *testing.T) {
	p := New(nil)
	t.Cleanup(func() { p.Close() })
	if err := p.Apply([]ServerConfig{{Name: "x", Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	h := p.HTTPHandler().(*httpFront)
	srv, err := p.server("x")
	if err != nil {
		t.Fatal(err)
	}

	st, err := h.statelessFor(srv)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := h.statelessFor(srv); again != st {
		t.Fatal("a second exchange got a second stateless session")
	}
	h.release(st)
	h.expireIdle(time.Now().Add(2 * statelessLinger))
	if !st.s.alive() {
		t.Fatal("the stateless session ended with an exchange under way")
	}
	h.release(st)
	h.expireIdle(time.Now())
	if !st.s.alive() {
		t.Fatal("the stateless session ended before statelessLinger")
	}
	h.expireIdle(time.Now().Add(statelessLinger))
	if st.s.alive() {
		t.Fatal("the stateless session outlived statelessLinger without an exchange")
	}
	next, err := h.statelessFor(srv)
	if err != nil {
		t.Fatal(err)
	}
	if next == st || !next.s.alive() || !next.s.stateless || next.s.era != EraModern {
		t.Fatalf("after the first ended: %+v", next.s.info())
	}
	h.release(next)

	hs, sid, err := h.open("x", "")
	if err != nil {
		t.Fatal(err)
	}
	h.expireIdle(time.Now().Add(HTTPSessionIdle / 2))
	if !hs.s.alive() {
		t.Fatal("a legacy session ended before HTTPSessionIdle")
	}
	h.expireIdle(time.Now().Add(HTTPSessionIdle + time.Second))
	if hs.s.alive() {
		t.Fatal("a legacy session outlived HTTPSessionIdle")
	}
	h.expireIdle(time.Now())
	h.mu.Lock()
	_, kept := h.sessions[sid]
	h.mu.Unlock()
	if kept || h.lookup(sid, "x") != nil {
		t.Fatal("an ended legacy session is still known")
	}
}
