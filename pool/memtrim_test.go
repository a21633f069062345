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
