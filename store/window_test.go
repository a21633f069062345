package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestWindow: what the waterfall reads after the fact, over three runs:
// one that crashed long ago, one that crashed during the window with
// requests in flight (one received long before the window), and the live
// one.
func TestWindow(t *testing.T) {
	path := dbPath(t)
	ctx := context.Background()
	now := time.Now()
	ev := func(e pool.Event) pool.Event { return e }

	// Run A crashed five hours ago with one request in flight.
	a := openT(t, path, nil)
	a.Record(ev(pool.Event{Kind: pool.EventBackendStarted, Time: now.Add(-6 * time.Hour), Server: "srv", PID: 40, Command: []string{"srv"}}))
	a.Record(received(1, "s1", "tools/call", "ancient", now.Add(-5*time.Hour)))
	a.Record(written(1, "s1", 40, now.Add(-5*time.Hour)))
	crash(t, a)

	// Run B: a long call received two hours ago, one received three
	// minutes ago, both unanswered when B crashes two minutes ago.
	b := openT(t, path, nil)
	b.Record(pool.Event{Kind: pool.EventSessionOpened, Time: now.Add(-3 * time.Hour), Server: "srv", Session: "s1", Transport: "stdio",
		ClientName: "claude-code", ClientVersion: "2.1.3"})
	b.Record(pool.Event{Kind: pool.EventBackendStarted, Time: now.Add(-3 * time.Hour), Server: "srv", PID: 50, Command: []string{"srv"}})
	b.Record(received(1, "s1", "tools/call", "long", now.Add(-2*time.Hour)))
	b.Record(written(1, "s1", 50, now.Add(-2*time.Hour)))
	b.Record(received(2, "s1", "tools/call", "before", now.Add(-9*time.Minute)))
	b.Record(done(2, "s1", "tools/call", "before", pool.StatusOK, 50, now.Add(-9*time.Minute+5*time.Millisecond)))
	b.Record(received(3, "s1", "tools/call", "pay", now.Add(-3*time.Minute)))
	b.Record(written(3, "s1", 50, now.Add(-3*time.Minute)))
	b.Record(pool.Event{Kind: pool.EventBackendExited, Time: now.Add(-150 * time.Second), Server: "srv", PID: 50, ExitCode: 1, Err: "exit status 1"})
	b.Record(pool.Event{Kind: pool.EventBackendStarted, Time: now.Add(-149 * time.Second), Server: "srv", PID: 51, Command: []string{"srv"}})
	b.Record(received(4, "s1", "tools/list", "", now.Add(-2*time.Minute)))
	b.Record(done(4, "s1", "tools/list", "", pool.StatusError, 51, now.Add(-2*time.Minute+time.Millisecond)))
	crash(t, b)

	// Run C is live.
	c := openT(t, path, nil)
	c.Record(received(1, "s9", "tools/call", "fresh", now.Add(-30*time.Second)))
	c.Record(done(1, "s9", "tools/call", "fresh", pool.StatusOK, 60, now.Add(-30*time.Second+2*time.Millisecond)))
	c.Record(received(2, "s9", "tools/call", "waiting", now.Add(-10*time.Second)))
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}

	type req struct {
		Run    int64
		Name   string
		Status string
	}
	reqs := func(w Window) []req {
		var out []req
		for _, r := range w.Requests {
			out = append(out, req{r.Run, r.Name, r.Status})
		}
		return out
	}
	runA, runB, runC := c.Run()-2, c.Run()-1, c.Run()
	end := time.Now() // after every run started (runs start in real time; events carry their own)

	w, err := c.Window(ctx, now.Add(-4*time.Minute), end, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]req{
		{runB, "long", StatusAbandoned},
		{runB, "pay", StatusAbandoned},
		{runB, "", pool.StatusError},
		{runC, "fresh", pool.StatusOK},
		{runC, "waiting", StatusInFlight},
	}, reqs(w)); d != "" {
		t.Errorf("requests of the last four minutes (-want +got):\n%s", d)
	}
	if w.Truncated {
		t.Error("truncated")
	}
	var runs []int64
	for _, r := range w.Runs {
		runs = append(runs, r.ID)
		if want := now.Add(-2*time.Minute + time.Millisecond).Truncate(time.Microsecond); r.ID == runB && (!r.Crashed || !r.LastSeen.Equal(want)) {
			t.Errorf("run B: crashed %v, last seen %v ago; want crashed, its last answer (1m59.999s ago)", r.Crashed, now.Sub(r.LastSeen))
		}
	}
	if d := cmp.Diff([]int64{runB, runC}, runs); d != "" {
		t.Errorf("runs (-want +got):\n%s", d)
	}
	type child struct {
		Run      int64
		PID      int
		Exited   bool
		ExitCode int
	}
	var children []child
	for _, b := range w.Backends {
		children = append(children, child{b.Run, b.PID, !b.Exited.IsZero(), b.ExitCode})
	}
	if d := cmp.Diff([]child{{runB, 50, true, 1}, {runB, 51, false, 0}}, children); d != "" {
		t.Errorf("children (-want +got):\n%s", d)
	}
	if len(w.Sessions) != 1 || w.Sessions[0].ClientName != "claude-code" || w.Sessions[0].Run != runB {
		t.Errorf("sessions = %+v", w.Sessions)
	}

	// Five hours ago: run A's abandoned request, none of the later ones.
	w, err = c.Window(ctx, now.Add(-5*time.Hour-time.Minute), now.Add(-5*time.Hour+time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]req{{runA, "ancient", StatusAbandoned}}, reqs(w)); d != "" {
		t.Errorf("five hours ago (-want +got):\n%s", d)
	}

	// A limit keeps the earliest and says so.
	w, err = c.Window(ctx, now.Add(-4*time.Minute), end, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !w.Truncated || len(w.Requests) < 2 || w.Requests[0].Name != "long" {
		t.Errorf("limited window: truncated %v, %v", w.Truncated, reqs(w))
	}
	if _, err := c.Window(ctx, now, now.Add(-time.Second), 0); err == nil {
		t.Error("a window that ends before it starts is accepted")
	}
}

// TestWindowConfigReloads: config reloads, applied or not, are in the
// window that holds them, with their run, across a crash; none outside
// it; with history off none is kept.
func TestWindowConfigReloads(t *testing.T) {
	path := dbPath(t)
	ctx := context.Background()
	now := time.Now()

	a := openT(t, path, nil)
	a.RecordConfigReload(ConfigReload{At: now.Add(-10 * time.Minute), Changes: "added: early"})
	a.RecordConfigReload(ConfigReload{At: now.Add(-3 * time.Minute), Changes: "added: memory; unchanged: 2"})
	crash(t, a)
	b := openT(t, path, nil)
	b.RecordConfigReload(ConfigReload{At: now.Add(-time.Minute), Err: "line 3: invalid character '}'"})
	b.RecordConfigReload(ConfigReload{Run: 99, At: now.Add(-30 * time.Second)}) // Run is the store's to set
	if err := b.flush(); err != nil {
		t.Fatal(err)
	}

	w, err := b.Window(ctx, now.Add(-5*time.Minute), now, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []ConfigReload{
		{Run: a.Run(), At: now.Add(-3 * time.Minute), Changes: "added: memory; unchanged: 2"},
		{Run: b.Run(), At: now.Add(-time.Minute), Err: "line 3: invalid character '}'"},
		{Run: b.Run(), At: now.Add(-30 * time.Second)},
	}
	if d := cmp.Diff(want, w.Reloads, cmp.Comparer(func(x, y time.Time) bool { return x.Sub(y).Abs() < time.Microsecond })); d != "" {
		t.Errorf("reloads (-want +got):\n%s", d)
	}

	off := openT(t, dbPath(t), &Options{ChildrenOnly: true})
	off.RecordConfigReload(ConfigReload{At: now, Changes: "added: x"})
	if err := off.flush(); err != nil {
		t.Fatal(err)
	}
	if w, err := off.Window(ctx, now.Add(-time.Minute), now.Add(time.Minute), 0); err != nil || len(w.Reloads) != 0 {
		t.Errorf("history off: reloads %+v, %v; want none", w.Reloads, err)
	}
}
