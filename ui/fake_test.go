package ui

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// fakeCtrl is a hand-written Controller: it serves a snapshot the test
// sets, fans events out like the pool's hub (a full subscriber is told it
// lagged and dropped), and records every action as a string.
type fakeCtrl struct {
	buffer     int // subscription buffer; small ones provoke lag
	subscribes atomic.Int32
	quits      atomic.Int32
	restarts   atomic.Int32

	mu        sync.Mutex
	snap      pool.Snapshot
	subs      map[chan pool.Event]struct{}
	calls     []string
	leaks     []Leak
	leaksErr  error
	history   []HistoryRow
	timeline  []TimelineEntry
	payload   [2]string
	window    HistoryWindow
	windowErr error
	reloads   []ConfigReload
	hang      time.Duration
	configErr error
	dropped   uint64
	noHistory bool // the history records no requests
	atLogin   bool
	wg        sync.WaitGroup
}

func newFake(s pool.Snapshot) *fakeCtrl {
	return &fakeCtrl{snap: s, hang: 30 * time.Second, subs: map[chan pool.Event]struct{}{}, buffer: 1024}
}

func cloneSnap(s pool.Snapshot) pool.Snapshot {
	s.Servers = slices.Clone(s.Servers)
	s.Sessions = slices.Clone(s.Sessions)
	s.Backends = slices.Clone(s.Backends)
	s.InFlight = slices.Clone(s.InFlight)
	return s
}

func (f *fakeCtrl) Subscribe(ctx context.Context, _ int) (pool.Snapshot, <-chan pool.Event) {
	ch := make(chan pool.Event, f.buffer+1) // the last slot is EventLagged's
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	// Counted once the channel is in subs: a test that sees the count
	// and takes f.mu finds the subscriber there.
	f.subscribes.Add(1)
	snap := cloneSnap(f.snap)
	f.mu.Unlock()
	f.wg.Go(func() {
		<-ctx.Done()
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.subs[ch]; ok {
			delete(f.subs, ch)
			close(ch)
		}
	})
	return snap, ch
}

// emit sends e to every subscriber without blocking, like pool's hub:
// one whose buffer is full gets EventLagged in the slot kept for it, and
// is dropped.
func (f *fakeCtrl) emit(e pool.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		if len(ch) < cap(ch)-1 {
			ch <- e
			continue
		}
		delete(f.subs, ch)
		ch <- pool.Event{Kind: pool.EventLagged, Time: e.Time}
		close(ch)
	}
}

// lag drops every subscriber as if the event at `at` had found its
// buffer full: the events after it are lost to them.
func (f *fakeCtrl) lag(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		delete(f.subs, ch)
		ch <- pool.Event{Kind: pool.EventLagged, Time: at}
		close(ch)
	}
}

// update changes the snapshot under the lock.
func (f *fakeCtrl) update(fn func(s *pool.Snapshot)) {
	f.mu.Lock()
	fn(&f.snap)
	f.mu.Unlock()
}

func (f *fakeCtrl) Snapshot() pool.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := cloneSnap(f.snap)
	s.TakenAt = time.Now()
	return s
}

func (f *fakeCtrl) record(format string, args ...any) error {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
	f.mu.Unlock()
	return nil
}

func (f *fakeCtrl) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeCtrl) Restart(server string) error { return f.record("restart %s", server) }
func (f *fakeCtrl) Stop(server string) error    { return f.record("stop %s", server) }
func (f *fakeCtrl) Cancel(id uint64) error      { return f.record("cancel %d", id) }
func (f *fakeCtrl) KillChild(pid int) error     { return f.record("kill %d", pid) }

func (f *fakeCtrl) RestartBackend(id uint64) error { return f.record("restart backend %d", id) }

func (f *fakeCtrl) Leaks(context.Context) ([]Leak, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.leaks), f.leaksErr
}

func (f *fakeCtrl) KillLeak(_ context.Context, pid int) error { return f.record("killleak %d", pid) }

func (f *fakeCtrl) History(_ context.Context, hf HistoryFilter) ([]HistoryRow, error) {
	_ = f.record("history server=%q status=%q", hf.Server, hf.Status)
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.history
	if hf.Limit > 0 && len(h) > hf.Limit {
		h = h[:hf.Limit] // as the store pages
	}
	return slices.Clone(h), nil
}

func (f *fakeCtrl) Timeline(_ context.Context, r HistoryRow) (RequestDetail, error) {
	_ = f.record("timeline run %d request %d", r.Run, r.PoolID)
	f.mu.Lock()
	defer f.mu.Unlock()
	return RequestDetail{Steps: slices.Clone(f.timeline), RequestPayload: f.payload[0], ResponsePayload: f.payload[1]}, nil
}

func (f *fakeCtrl) Window(_ context.Context, from, until time.Time) (HistoryWindow, error) {
	_ = f.record("window %s %s", from.UTC().Format(time.TimeOnly), until.UTC().Format(time.TimeOnly))
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.windowErr != nil {
		return HistoryWindow{}, f.windowErr
	}
	w := f.window
	w.From, w.Until = from, until
	return w, nil
}

func (f *fakeCtrl) ConfigReloads() []ConfigReload {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reloads)
}

func (f *fakeCtrl) ConfigPath() string { return "/home/me/.config/switchboard/config.json" }

func (f *fakeCtrl) ConfigError() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.configErr
}

func (f *fakeCtrl) HistoryDropped() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped
}

func (f *fakeCtrl) HistoryOn() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.noHistory
}

func (f *fakeCtrl) HangThreshold() time.Duration { return f.hang }
func (f *fakeCtrl) Quit()                        { f.quits.Add(1) }
func (f *fakeCtrl) RestartApp() error            { f.restarts.Add(1); return nil }

func (f *fakeCtrl) StartAtLogin() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.atLogin
}

func (f *fakeCtrl) SetStartAtLogin(on bool) error {
	f.mu.Lock()
	f.atLogin = on
	f.mu.Unlock()
	return f.record("start at login %v", on)
}

func (f *fakeCtrl) About() string {
	return "switchboard 1.2.3 (commit abc1234, built 2026-11-23T20:00:00Z, go1.26.8)"
}

var _ Controller = (*fakeCtrl)(nil)
