package ui

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/mcptest"
	"github.com/switchboard-mcp/switchboard/store"
)

// poolCtrl is a Controller over a real pool and its real history: the
// pool's snapshots and events (through a small buffer, so that a burst
// outruns the loop), the store's windows, and the fake's everything else.
type poolCtrl struct {
	*fakeCtrl
	p      *pool.Pool
	st     *store.Store
	buffer int
	subs   atomic.Int32
	// answered is how many requests the burst has; Window waits until the
	// history has recorded them all, where the app's loop waits a while.
	answered int
	since    time.Time
}

func (c *poolCtrl) Subscribe(ctx context.Context, _ int) (pool.Snapshot, <-chan pool.Event) {
	c.subs.Add(1)
	return c.p.Subscribe(ctx, c.buffer)
}

func (c *poolCtrl) Snapshot() pool.Snapshot { return c.p.Snapshot() }

func (c *poolCtrl) Window(ctx context.Context, from, until time.Time) (HistoryWindow, error) {
	for {
		counts, err := c.st.CountsByStatus(ctx, c.since)
		if err != nil {
			return HistoryWindow{}, err
		}
		if counts[pool.StatusOK] >= c.answered {
			break
		}
		select {
		case <-ctx.Done():
			return HistoryWindow{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	w, err := c.st.Window(ctx, from, until, 0)
	if err != nil {
		return HistoryWindow{}, err
	}
	out := HistoryWindow{From: w.From, Until: w.Until}
	for _, r := range w.Requests {
		d, _ := r.Duration()
		out.Requests = append(out.Requests, HistoryRow{ID: r.ID, Run: r.Run, PoolID: r.PoolID, Server: r.Server,
			Session: r.Session, Method: r.Method, Name: r.Name, Status: r.Status, ReceivedAt: r.Received, Duration: d,
			PID: r.PID, Error: r.Err, WrittenAt: r.Written, AnsweredAt: r.Answered})
	}
	for _, s := range w.Sessions {
		out.Sessions = append(out.Sessions, HistorySession{Run: s.Run, ID: s.ID, Server: s.Server, ClientName: s.ClientName,
			ClientVersion: s.ClientVersion, Transport: s.Transport, Connected: s.Connected, Disconnected: s.Disconnected})
	}
	for _, r := range w.Runs {
		out.Runs = append(out.Runs, HistoryRun{ID: r.ID, Started: r.Started, Ended: r.Ended, LastSeen: r.LastSeen, Crashed: r.Crashed})
	}
	return out, nil
}

// TestFiguresStayRightWhenABurstOutrunsTheLoop: 20 sessions send 100
// calls each at once to a real pool; the loop's subscription lags again
// and again. Once the history has filled the gaps in, the live
// waterfall shows each of the 2,000 calls once, as answered, and the
// overview counts 2,000 calls, as the history does (and the first
// session's initialize, which waited for the child to start: the
// sessions open one after another, so the others find it started).
func TestFiguresStayRightWhenABurstOutrunsTheLoop(t *testing.T) {
	const sessions, calls = 20, 100
	const requests = sessions*calls + 1
	withGapReads(t)
	dir, err := os.MkdirTemp("", "sbui")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin, err := mcptest.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(dir, "history.db"), &store.Options{FlushInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the pool is closed
		if err := st.Close(); err != nil {
			t.Errorf("close the history: %v", err)
		}
	})
	p := pool.New(&pool.Options{Record: st.Record})
	if err := p.Apply([]pool.ServerConfig{{Name: "fake", Command: bin}}); err != nil {
		t.Fatal(err)
	}
	sock := mcptest.Serve(t, p, dir)

	ctrl := &poolCtrl{fakeCtrl: newFake(pool.Snapshot{}), p: p, st: st, buffer: 4, answered: requests,
		since: time.Now().Add(-time.Second)}
	u := New(test.NewTempApp(t), ctrl, &Options{MinRedraw: 10 * time.Millisecond, Tick: 50 * time.Millisecond,
		LeakPoll: time.Hour, SamplePoll: time.Hour})
	u.showDashboard(tabWaterfall)
	ctx, cancel := context.WithCancel(context.Background())
	u.Start(ctx)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			u.Wait()
		}
	}
	t.Cleanup(stop)

	conns := make([]net.Conn, sessions)
	for i := range conns {
		conns[i] = mcptest.Open(t, sock, "fake", "burst")
	}
	var burst sync.WaitGroup
	for i, c := range conns {
		burst.Go(func() {
			defer c.Close()
			var batch []byte
			for id := 1; id <= calls; id++ {
				batch = fmt.Appendf(batch, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"s%d"}}}`+"\n", id, i)
			}
			if _, err := c.Write(batch); err != nil {
				t.Errorf("session %d: %v", i, err)
				return
			}
			br := bufio.NewReader(c)
			for range calls {
				if line, err := br.ReadBytes('\n'); err != nil || !strings.Contains(string(line), `"result"`) {
					t.Errorf("session %d: %s %v", i, line, err)
					return
				}
			}
		})
	}
	burst.Wait()

	// Every gap read back for good: its marker says how many it filled in.
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("the live waterfall last showed %s", last)
		}
	}()
	waitUntil(t, 30*time.Second, "the live waterfall to hold every call, its gaps filled in", func() bool {
		src := u.liveSource()
		if src == nil {
			return false
		}
		by := map[string]int{}
		src.Done.each(func(_ int, r *wfReq) { by[r.Status]++ })
		last = fmt.Sprintf("%d ended %v, %d in flight", src.Done.Len(), by, len(src.Open))
		if src.Done.Len() < requests || len(src.Open) > 0 {
			return false
		}
		for _, m := range src.Markers {
			if m.Kind == markGap && !strings.HasSuffix(m.Detail, "read back from the history.") {
				return false
			}
		}
		return true
	})
	stop() // the tracker is the loop's until it stops
	if n := ctrl.subs.Load(); n < 2 {
		t.Fatalf("%d subscriptions: the burst did not outrun the loop", n)
	}
	seen := map[uint64]int{}
	statuses := map[string]int{}
	u.track.done.each(func(_ int, r *wfReq) {
		seen[r.PoolID]++
		statuses[r.Status]++
	})
	for id, n := range seen {
		if n > 1 {
			t.Errorf("request %d has %d bars", id, n)
		}
	}
	if len(seen) != requests || statuses[pool.StatusOK] != requests {
		t.Errorf("the live waterfall shows %d requests, by status %v; want %d answered", len(seen), statuses, requests)
	}
	if f := u.track.figures("fake", time.Now()); f.Calls != requests || f.Errors != 0 || f.P50 <= 0 {
		t.Errorf("the overview counts %d calls, %d errors, p50 %v; want %d calls, none failed", f.Calls, f.Errors, f.P50, requests)
	}
	t.Logf("%d subscriptions for %d calls", ctrl.subs.Load(), sessions*calls)
}
