package pool

import (
	"testing"
	"testing/synctest"
	"time"
)

// The trim comes once, trimDelay after the last large buffer is let go:
// not while large messages keep coming (each trim is paid for again in
// page faults by the next large buffer), and not never.
func TestTrimWaitsForTheLargeMessagesToStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(nil)
		defer p.Close()

		// A stream of large messages, one every 100 ms for 3 s.
		for range 30 {
			p.releasedLarge()
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			if n := p.trim.done.Load(); n != 0 {
				t.Fatalf("%d trims while large messages kept coming", n)
			}
		}
		time.Sleep(trimDelay)
		synctest.Wait()
		if n := p.trim.done.Load(); n != 1 {
			t.Fatalf("%d trims %s after the last large message, want 1", n, trimDelay+100*time.Millisecond)
		}

		// A later burst gets its own trim.
		p.releasedLarge()
		p.releasedLarge()
		time.Sleep(trimDelay + time.Millisecond)
		synctest.Wait()
		if n := p.trim.done.Load(); n != 2 {
			t.Fatalf("%d trims after the second burst, want 2", n)
		}
	})
}

// A session evicted for not reading is counted once, however many
// deliveries find its queue full before it has closed, and what it piled
// up, though every line of it was small, is asked back (a trim).
func TestEvictionCountedOnceAndTrimmed(t *testing.T) {
	p := New(&Options{SessionQueue: 4})
	defer p.Close()
	if err := p.Apply([]ServerConfig{{Name: "x", Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	s, err := p.newSession("x", sessionSetup{transport: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// No output is started: nothing takes the queue, as a client that
	// stopped reading. Every delivery past the fourth finds it full.
	line := []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`)
	for range 100 {
		s.deliver(line, notice("notifications/message"))
	}
	waitUntil(t, "the session to close", func() bool { return isClosed(s.closed) })
	if n := p.evicted.Load(); n != 1 {
		t.Errorf("evicted counted %d times, want 1", n)
	}
	waitUntil(t, "a trim after the eviction", func() bool { return p.trim.done.Load() == 1 })
}
