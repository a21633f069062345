package pool

import (
	"testing"
	"time"
)

// TestHTTPSessionsExpire: a server's stateless session stays while an
// exchange is under way and, after the last one, as long as a child kept
// for it would (its server's idleTimeout, at least minStatelessLinger, for
// ever under never), then ends (so that its partition's child can be
// reaped), and the next request opens another; a legacy session ends
// after HTTPSessionIdle without a request or a stream, and an ended one
// is forgotten.
func TestHTTPSessionsExpire(t *testing.T) {
	p := New(nil)
	t.Cleanup(func() { p.Close() })
	if err := p.Apply([]ServerConfig{{Name: "x", Command: "/bin/true"}, {Name: "short", Command: "/bin/true", IdleTimeout: 10 * time.Second},
		{Name: "never", Command: "/bin/true", IdleTimeout: -1}}); err != nil {
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
	h.expireIdle(time.Now().Add(2 * DefaultIdleTimeout))
	if !st.s.alive() {
		t.Fatal("the stateless session ended with an exchange under way")
	}
	h.release(st)
	h.expireIdle(time.Now().Add(2 * minStatelessLinger))
	if !st.s.alive() {
		t.Fatal("the stateless session ended before its server's idleTimeout: sparse requests would each open one")
	}
	h.expireIdle(time.Now().Add(DefaultIdleTimeout))
	if st.s.alive() {
		t.Fatal("the stateless session outlived its server's idleTimeout without an exchange")
	}
	next, err := h.statelessFor(srv)
	if err != nil {
		t.Fatal(err)
	}
	if next == st || !next.s.alive() || !next.s.stateless || next.s.era != EraModern {
		t.Fatalf("after the first ended: %+v", next.s.info())
	}
	h.release(next)

	for _, tc := range []struct {
		server      string
		stays, ends time.Duration // after the last exchange
	}{
		{"short", minStatelessLinger / 2, minStatelessLinger},
		{"never", 100 * 24 * time.Hour, 0},
	} {
		srv, err := p.server(tc.server)
		if err != nil {
			t.Fatal(err)
		}
		st, err := h.statelessFor(srv)
		if err != nil {
			t.Fatal(err)
		}
		h.release(st)
		h.expireIdle(time.Now().Add(tc.stays))
		if !st.s.alive() {
			t.Fatalf("%s: the stateless session ended %v after its last exchange", tc.server, tc.stays)
		}
		if tc.ends > 0 {
			h.expireIdle(time.Now().Add(tc.ends))
			if st.s.alive() {
				t.Fatalf("%s: the stateless session outlived %v after its last exchange", tc.server, tc.ends)
			}
		}
	}

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
