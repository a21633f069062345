package ui

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"github.com/switchboard-mcp/switchboard/pool"
)

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// startLive runs u's loop over fake with the dashboard open on tab. From
// Start on, the loop goroutine owns the widgets: the test reads counters
// only.
func startLive(t *testing.T, fake *fakeCtrl, tab string) *UI {
	t.Helper()
	a := test.NewTempApp(t)
	u := New(a, fake, &Options{MinRedraw: 10 * time.Millisecond, Tick: 50 * time.Millisecond, LeakPoll: time.Hour,
		SamplePoll: 20 * time.Millisecond, sample: func(pids []int, _ time.Time) map[int]procStat {
			out := map[int]procStat{}
			for _, p := range pids {
				out[p] = procStat{RSS: 1 << 20}
			}
			return out
		}})
	u.showDashboard(tab)
	ctx, cancel := context.WithCancel(context.Background())
	u.Start(ctx)
	t.Cleanup(func() {
		cancel()
		u.Wait()
		fake.wg.Wait()
	})
	return u
}

// TestUIKeepsUpdatingWhile64SessionsHammer: 64 goroutines change the pool
// and emit events as fast as they can; frames must keep reaching the
// widgets the whole time, and a subscription that falls behind is renewed.
func TestUIKeepsUpdatingWhile64SessionsHammer(t *testing.T) {
	const sessions, perSession = 64, 8
	s := bigSnapshot(sessions, sessions*perSession, 4)
	fake := newFake(s)
	fake.buffer = 64 // small, so the loop can fall behind
	u := startLive(t, fake, tabInFlight)

	stop := make(chan struct{})
	var hammer sync.WaitGroup
	var sent atomic.Int64
	for i := range sessions {
		hammer.Go(func() {
			for n := uint64(0); ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				slot := i*perSession + int(n%perSession)
				id := uint64(i)<<32 | n
				fake.update(func(s *pool.Snapshot) {
					s.InFlight[slot].PoolID = id
					s.InFlight[slot].ReceivedAt = time.Now()
					s.InFlight[slot].WrittenToChild = n%2 == 0
				})
				kind := pool.EventRequestReceived
				if n%2 == 1 {
					kind = pool.EventRequestDone
				}
				fake.emit(pool.Event{Kind: kind, PoolID: id, Session: s.Sessions[i].ID, Server: s.Sessions[i].Server})
				sent.Add(1)
			}
		})
	}
	start := time.Now()
	f0 := u.Frames()
	framesKeepComing(t, "frames", u.Frames)
	close(stop)
	hammer.Wait()
	elapsed := time.Since(start)
	t.Logf("%d events from 64 goroutines in %v; %d frames (%.0f/s); %d subscriptions",
		sent.Load(), elapsed.Round(time.Millisecond), u.Frames()-f0, float64(u.Frames()-f0)/elapsed.Seconds(), fake.subscribes.Load())
	if sent.Load() < 1000 {
		t.Errorf("the hammer sent only %d events", sent.Load())
	}
}

// TestLaggingSubscriptionResubscribes: after EventLagged and the close,
// the loop subscribes again and keeps drawing.
func TestLaggingSubscriptionResubscribes(t *testing.T) {
	fake := newFake(fixture())
	fake.buffer = 1
	u := startLive(t, fake, tabSessions)
	waitUntil(t, 5*time.Second, "the first subscription", func() bool { return fake.subscribes.Load() == 1 })
	// Fill the buffer and overflow it while holding the lock, the way a
	// burst outruns the reader.
	fake.mu.Lock()
	for ch := range fake.subs {
		delete(fake.subs, ch)
		select {
		case <-ch:
		default:
		}
		ch <- pool.Event{Kind: pool.EventLagged}
		close(ch)
	}
	fake.mu.Unlock()
	waitUntil(t, 5*time.Second, "a new subscription", func() bool { return fake.subscribes.Load() == 2 })
	before := u.Frames()
	fake.emit(pool.Event{Kind: pool.EventSessionOpened})
	waitUntil(t, 5*time.Second, "frames after resubscribing", func() bool { return u.Frames() > before })
}

// TestLiveWaterfallCountCapWithoutHistory: with the history off, the
// live waterfall's mark where its count cap let requests go says they are
// kept nowhere, not that History has them; with it on, that History has
// them.
func TestLiveWaterfallCountCapWithoutHistory(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(map[bool]string{false: "off", true: "on"}[on], func(t *testing.T) {
			fake := newFake(fixture())
			fake.noHistory = !on
			u := New(test.NewTempApp(t), fake, &Options{MinRedraw: 10 * time.Millisecond, Tick: 50 * time.Millisecond,
				LeakPoll: time.Hour, sample: func([]int, time.Time) map[int]procStat { return nil }})
			u.track.maxDone = 10
			u.showDashboard(tabWaterfall)
			ctx, cancel := context.WithCancel(context.Background())
			u.Start(ctx)
			t.Cleanup(func() {
				cancel()
				u.Wait()
				fake.wg.Wait()
			})
			waitUntil(t, 5*time.Second, "the subscription", func() bool { return fake.subscribes.Load() == 1 })
			start := time.Now() // after the tracker began: it knows from then
			for i := range uint64(30) {
				at := start.Add(time.Duration(i) * time.Microsecond)
				fake.emit(pool.Event{Kind: pool.EventRequestReceived, Time: at, PoolID: i + 1, Server: "memory", Session: "s1",
					Method: "tools/call", Name: "echo"})
				fake.emit(pool.Event{Kind: pool.EventRequestDone, Time: at.Add(time.Microsecond), PoolID: i + 1, Status: pool.StatusOK})
			}
			var gap *wfMarker
			waitUntil(t, 5*time.Second, "the count cap's mark", func() bool {
				src := u.wfLive.Load()
				if src == nil {
					return false
				}
				for i := range src.Markers {
					if src.Markers[i].Kind == markGap {
						gap = &src.Markers[i]
						return true
					}
				}
				return false
			})
			text := gap.Title + "\n" + gap.Detail
			if points := strings.Contains(text, "History"); points != on {
				t.Errorf("history on %v; the mark says:\n%s\nwant it to point to History: %v", on, text, on)
			}
			if !on && !strings.Contains(gap.Title, "not kept") {
				t.Errorf("history off; the mark's title is %q, want it to say older requests are not kept", gap.Title)
			}
		})
	}
}

// TestAgesTickWithoutEvents: with a quiet pool the ticker still redraws,
// so the age of a hung request keeps growing on screen.
func TestAgesTickWithoutEvents(t *testing.T) {
	fake := newFake(fixture())
	u := startLive(t, fake, tabInFlight)
	before := u.Frames()
	waitUntil(t, 5*time.Second, "ticks", func() bool { return u.Frames() >= before+3 })
	if n := fake.subscribes.Load(); n != 1 {
		t.Errorf("%d subscriptions, want 1", n)
	}
}

// TestSamplerMeasuresTheSnapshotsChildren: the loop tells the sampler
// which children the latest snapshot has, so the dashboard shows the
// memory and CPU of those, and of a child started later.
func TestSamplerMeasuresTheSnapshotsChildren(t *testing.T) {
	fake := newFake(fixture())
	u := startLive(t, fake, tabBackends)
	measured := func() map[int]procStat {
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.stats
	}
	waitUntil(t, 5*time.Second, "child 4242 measured", func() bool { _, ok := measured()[4242]; return ok })
	fake.update(func(s *pool.Snapshot) {
		s.Backends[0].PID = 4343 // fake's child was restarted
	})
	fake.emit(pool.Event{Kind: pool.EventBackendStarted, Time: time.Now(), Server: "fake", PID: 4343})
	waitUntil(t, 5*time.Second, "the new child 4343 measured, the old one no more", func() bool {
		st := measured()
		_, now := st[4343]
		_, old := st[4242]
		return now && !old
	})
}

func TestProcSamplerMeasuresItself(t *testing.T) {
	s := newProcSampler()
	pid := os.Getpid()
	first := s.sample([]int{pid, 1 << 30}, time.Now())
	if first[pid].RSS == 0 {
		t.Fatalf("RSS of this process = 0")
	}
	if _, ok := first[1<<30]; ok {
		t.Error("a PID that does not exist was measured")
	}
	// Burn a little CPU so the second sample has something to show.
	deadline := time.Now().Add(50 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	second := s.sample([]int{pid}, time.Now())
	if second[pid].CPU <= 0 {
		t.Errorf("CPU after a busy loop = %v, want > 0", second[pid].CPU)
	}
}

// TestWaterfallKeepsDrawingWhile64SessionsHammer: 64 sessions keep 8
// requests each in flight, as fast as the events can be sent; the live
// waterfall on screen keeps getting frames, and they show the traffic.
func TestWaterfallKeepsDrawingWhile64SessionsHammer(t *testing.T) {
	const sessions, perSession = 64, 8
	s := bigSnapshot(sessions, 0, 4)
	fake := newFake(s)
	fake.buffer = 256
	u := startLive(t, fake, tabWaterfall)

	stop := make(chan struct{})
	var hammer sync.WaitGroup
	var done atomic.Int64
	for i := range sessions {
		sess := s.Sessions[i]
		hammer.Go(func() {
			var open []uint64
			for n := uint64(1); ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				id := uint64(i)<<32 | n
				now := time.Now()
				fake.emit(pool.Event{Kind: pool.EventRequestReceived, Time: now, PoolID: id, Session: sess.ID, Server: sess.Server,
					Method: "tools/call", Name: "echo"})
				fake.emit(pool.Event{Kind: pool.EventRequestWritten, Time: now, PoolID: id, PID: 4242})
				open = append(open, id)
				if len(open) == perSession {
					fake.emit(pool.Event{Kind: pool.EventRequestDone, Time: time.Now(), PoolID: open[0], Status: pool.StatusOK})
					open = open[1:]
					done.Add(1)
				}
			}
		})
	}
	start := time.Now()
	f0 := u.WaterfallFrames()
	framesKeepComing(t, "waterfall frames", u.WaterfallFrames)
	waitUntil(t, 10*time.Second, "the live waterfall to hold the traffic", func() bool {
		src := u.liveSource()
		return src != nil && src.Done.Len() > 1000 && len(src.Open) > 0
	})
	close(stop)
	hammer.Wait()
	elapsed := time.Since(start)
	src := u.liveSource()
	t.Logf("%d requests ended in %v; %d waterfall frames (%.0f/s); the last source holds %d ended and %d in flight; %d subscriptions",
		done.Load(), elapsed.Round(time.Millisecond), u.WaterfallFrames()-f0, float64(u.WaterfallFrames()-f0)/elapsed.Seconds(),
		src.Done.Len(), len(src.Open), fake.subscribes.Load())
	if n := len(src.Open); n > sessions*perSession {
		t.Errorf("%d requests in flight in the waterfall, more than the %d the sessions had", n, sessions*perSession)
	}
}

// framesKeepComing waits, five rounds over, for three more frames (what
// they are) each round, as frames counts them.
func framesKeepComing(t *testing.T, what string, frames func() uint64) {
	t.Helper()
	for round := range 5 {
		before := frames()
		waitUntil(t, 10*time.Second, fmt.Sprintf("%s to keep coming (round %d, %d so far)", what, round, before),
			func() bool { return frames() >= before+3 })
	}
}
