package pool

import (
	"runtime"
	"strings"
	"testing"
)

// A session whose queue is full is evicted by whoever delivers to it,
// a timer among them (a roots ask's timeout, a held request's deadline):
// a goroutine none of the pool's. The pool may close between its look
// at the session and the start of the session's end, and that end must
// then not start: Close has ended the session and may have waited for
// the pool's goroutines already (the end started then is one it did not
// wait for, or, as it waits, a misuse of the WaitGroup).
func TestEvictionAcrossClose(t *testing.T) {
	p := New(&Options{SessionQueue: 1})
	if err := p.Apply([]ServerConfig{{Name: "x", Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	s, err := p.newSession("x", sessionSetup{transport: "http"})
	if err != nil {
		t.Fatal(err)
	}
	s.deliver([]byte(`{"jsonrpc":"2.0","method":"a"}`), notice("a")) // fills the queue
	// The pool closes as the eviction begins; the trimmer's lock, held
	// until the end, keeps an end started after Close from finishing.
	testHookEvicting = func(*session) {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
		p.trim.mu.Lock()
	}
	defer func() { testHookEvicting = nil }()
	s.deliver([]byte(`{"jsonrpc":"2.0","method":"b"}`), notice("b"))
	stacks := goroutineStacks()
	p.trim.mu.Unlock()
	if strings.Contains(stacks, "endEvicted") {
		t.Fatalf("the eviction started the session's end after Close returned:\n%s", stacks)
	}
}

// goroutineStacks returns every goroutine's stack.
func goroutineStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}
