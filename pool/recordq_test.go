package pool

import (
	"sync"
	"testing"
	"time"
)

// events collects what a recordQueue hands over.
type events struct {
	mu  sync.Mutex
	got []Event
}

func (e *events) record(ev Event) {
	e.mu.Lock()
	e.got = append(e.got, ev)
	e.mu.Unlock()
}

func (e *events) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.got)
}

func (e *events) ids() []uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]uint64, len(e.got))
	for i, ev := range e.got {
		ids[i] = ev.PoolID
	}
	return ids
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRecordQueueHandsOverInOrderInBatches: the emitting goroutine only
// appends; the batch reaches Record later, in order; close hands over
// the rest and makes later events synchronous.
func TestRecordQueueHandsOverInOrderInBatches(t *testing.T) {
	var rec events
	q := newRecordQueue(rec.record)
	// A batch larger than recordBatch: part goes at once, the rest after
	// the delay.
	for i := range recordBatch + 10 {
		q.add(&Event{PoolID: uint64(i)})
	}
	waitUntil(t, "the first batches", func() bool { return rec.len() == recordBatch+10 })
	q.add(&Event{PoolID: 1 << 20})
	q.close()
	ids := rec.ids()
	if len(ids) != recordBatch+11 {
		t.Fatalf("recorded %d events, want %d", len(ids), recordBatch+11)
	}
	for i, id := range ids[:recordBatch+10] {
		if id != uint64(i) {
			t.Fatalf("event %d is %d: out of order", i, id)
		}
	}
	q.add(&Event{PoolID: 7})
	if ids := rec.ids(); ids[len(ids)-1] != 7 {
		t.Fatal("an event after close was not recorded at once")
	}
}

// TestRecordQueueConcurrentEmitters: events from many goroutines all
// arrive, each goroutine's in its own order, while flushes run.
func TestRecordQueueConcurrentEmitters(t *testing.T) {
	var rec events
	q := newRecordQueue(rec.record)
	const goroutines, each = 8, 3000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				q.add(&Event{PoolID: uint64(g)<<32 | uint64(i)})
			}
		})
	}
	wg.Wait()
	q.close()
	next := make([]uint64, goroutines)
	for _, id := range rec.ids() {
		g, i := id>>32, id&(1<<32-1)
		if i != next[g] {
			t.Fatalf("goroutine %d: event %d arrived when %d was due", g, i, next[g])
		}
		next[g]++
	}
	for g, n := range next {
		if n != each {
			t.Fatalf("goroutine %d: %d of %d events recorded", g, n, each)
		}
	}
}

// TestRecordQueueKeepsTheBufferASteadyLoadFills: a buffer kept between
// batches saves growing one from nothing each time (a steady 64 x 8 load
// makes batches larger than keepRecordBuf); a burst's buffer is let go by
// the first batch that leaves most of it empty.
func TestRecordQueueKeepsTheBufferASteadyLoadFills(t *testing.T) {
	tests := []struct {
		name     string
		len, cap int
		kept     bool
	}{
		{"a small buffer is kept", 10, keepRecordBuf, true},
		{"a large buffer the batch half filled is kept", 2000, 4000, true},
		{"a burst's buffer is let go by a small batch", 10, 4000, false},
		{"and by one that filled less than half", 1999, 4000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newRecordQueue(func(Event) {})
			q.buf = make([]Event, tt.len, tt.cap)
			q.flush()
			if kept := cap(q.spare) == tt.cap; kept != tt.kept {
				t.Errorf("kept %v (spare cap %d), want %v", kept, cap(q.spare), tt.kept)
			}
			q.close()
		})
	}
}
