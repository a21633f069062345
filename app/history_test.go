package app

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/store"
)

func TestMergeHangs(t *testing.T) {
	now := time.Now()
	received := now.Add(-time.Minute)
	liveReq := pool.RequestInfo{PoolID: 9, Session: "s2", Server: "fake", Method: "tools/call", Name: "sleep",
		PID: 66, ReceivedAt: received, AgeMs: 60_000, WrittenToChild: true, WrittenAt: received.Add(time.Millisecond)}
	young := pool.RequestInfo{PoolID: 10, Session: "s2", Server: "fake", Method: "tools/list", ReceivedAt: now, AgeMs: 5}
	abandoned := store.Request{Run: 1, PoolID: 3, Server: "fake", Session: "s1", Method: "tools/call", Name: "pay",
		Status: store.StatusAbandoned, Abandoned: true, Received: now.Add(-time.Hour), Written: now.Add(-time.Hour), PID: 55,
		Err: "Switchboard stopped"}
	dbLive := store.Request{Run: 2, PoolID: 9, Server: "fake", Session: "s2", Method: "tools/call", Name: "sleep",
		Status: store.StatusInFlight, Received: received, PID: 66}
	type row struct {
		Run       int64
		PoolID    uint64
		Live      bool
		Abandoned bool
		Status    string
	}
	for _, tc := range []struct {
		name string
		live *control.Status
		want []row
	}{
		{"no pool: the history as it is", nil, []row{{1, 3, false, true, "abandoned"}, {2, 9, false, false, "in-flight"}}},
		{"pool: its snapshot replaces its own rows", &control.Status{InFlight: []pool.RequestInfo{liveReq, young}},
			[]row{{1, 3, false, true, "abandoned"}, {2, 9, true, false, "in-flight"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mergeHangs(tc.live, 2, []store.Request{abandoned, dbLive}, 30*time.Second, now)
			var rows []row
			for _, e := range got {
				rows = append(rows, row{e.Run, e.PoolID, e.Live, e.Abandoned, e.Status})
			}
			if d := cmp.Diff(tc.want, rows); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestHangsAndHistory runs the CLI side against a real database under
// SWITCHBOARD_HOME, first with no pool running, then with a control API
// that reports one request in flight.
func TestHangsAndHistory(t *testing.T) {
	home, err := os.MkdirTemp("", "sbh")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(home)
	t.Setenv("SWITCHBOARD_HOME", home)
	paths, err := ResolvePaths()
	if err != nil {
		t.Fatal(err)
	}
	if err := paths.EnsureRunDir(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	if got, notes, err := History(ctx, HistoryQuery{}); err != nil || len(got) != 0 || got == nil || len(notes) != 0 {
		t.Fatalf("History without a database = %v, %q, %v; want an empty list", got, notes, err)
	}

	now := time.Now()
	// Run 1 dies (it is made to look like one SIGKILLed: no end, request
	// 3 still in flight): the next open marks request 3 abandoned.
	st1, err := store.Open(paths.History, nil)
	if err != nil {
		t.Fatal(err)
	}
	st1.Record(pool.Event{Kind: pool.EventRequestReceived, Time: now.Add(-time.Hour), Server: "fake", Session: "s1", PoolID: 3,
		Method: "tools/call", Name: "pay", OriginalID: "7"})
	st1.Record(pool.Event{Kind: pool.EventRequestWritten, Time: now.Add(-time.Hour), Server: "fake", Session: "s1", PoolID: 3, PID: 55})
	// Run 1 lives a minute more (a child starts): request 3 waited that long.
	st1.Record(pool.Event{Kind: pool.EventBackendStarted, Time: now.Add(-59 * time.Minute), Server: "fake", PID: 56,
		ProcessStart: now.Add(-59 * time.Minute), Command: []string{"fake"}})
	if err := st1.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", paths.History)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE request_log SET status = 0, error = NULL WHERE run = 1; UPDATE runs SET ended = NULL WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// Run 2 is "the running pool": request 9 in flight for a minute, 10 done.
	st2, err := store.Open(paths.History, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	for _, e := range []pool.Event{
		{Kind: pool.EventRequestReceived, Time: now.Add(-time.Minute), Server: "fake", Session: "s2", PoolID: 9, Method: "tools/call", Name: "sleep", OriginalID: "1"},
		{Kind: pool.EventRequestWritten, Time: now.Add(-time.Minute), Server: "fake", Session: "s2", PoolID: 9, PID: 66},
		{Kind: pool.EventRequestReceived, Time: now.Add(-time.Second), Server: "fake", Session: "s2", PoolID: 10, Method: "tools/list", OriginalID: "2"},
		{Kind: pool.EventRequestDone, Time: now.Add(-time.Second + 1500*time.Microsecond), Server: "fake", Session: "s2", PoolID: 10, Method: "tools/list", Status: pool.StatusError, Err: "boom", ErrCode: -32603},
	} {
		st2.Record(e)
	}
	waitHistory(t, "run 2 to be written", func() bool {
		got, _, err := History(ctx, HistoryQuery{})
		return err == nil && len(got) == 3
	})

	hangs, notes, err := Hangs(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || len(hangs) != 2 || !hangs[0].Abandoned || hangs[0].PID != 55 || *hangs[0].AgeMs != 60_000 || hangs[1].Abandoned ||
		hangs[1].PID != 66 || !hangs[1].WrittenToChild || hangs[1].Live {
		t.Errorf("hangs without a pool = %+v, notes %q", hangs, notes)
	}
	checkHistoryKeys(t, hangs, "session", "server", "method", "name", "pid", "ageMs", "writtenToChild", "run", "writtenAt", "abandoned", "status", "receivedAt")

	// A pool answers on the control socket with request 9 in flight.
	liveReq := pool.RequestInfo{PoolID: 9, Session: "s2", Server: "fake", Method: "tools/call", Name: "sleep", PID: 66,
		ReceivedAt: now.Add(-time.Minute), AgeMs: 60_000, WrittenToChild: true, WrittenAt: now.Add(-time.Minute)}
	ln, err := net.Listen("unix", paths.ControlSocket())
	if err != nil {
		t.Fatal(err)
	}
	var liveHistory atomic.Pointer[control.HistoryStatus]
	liveHistory.Store(&control.HistoryStatus{Enabled: true, Path: paths.History})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(control.Status{Running: true, InFlight: []pool.RequestInfo{liveReq}, History: *liveHistory.Load()})
	})}
	go srv.Serve(ln)
	defer srv.Close()
	hangs, notes, err = Hangs(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 0 || len(hangs) != 2 || !hangs[0].Abandoned || !hangs[1].Live || hangs[1].Run != st2.Run() || hangs[1].PID != 66 {
		t.Errorf("hangs with a pool = %+v, notes %q", hangs, notes)
	}

	hist, notes, err := History(ctx, HistoryQuery{Status: "error", Since: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].Error == nil || *hist[0].Error != "boom" || hist[0].DurationMs == nil || *hist[0].DurationMs != 1.5 || len(notes) != 0 {
		t.Errorf("history of errors = %+v, notes %q", hist, notes)
	}
	checkHistoryKeys(t, hist, "server", "session", "method", "name", "status", "receivedAt", "durationMs", "pid", "error")

	// The pool records no history now (its database was locked as it
	// started, say): history and hangs show what was recorded before,
	// and say so, rather than pass it off as the running pool's.
	locked := "open history.db: database is locked"
	liveHistory.Store(&control.HistoryStatus{Enabled: false, Error: &locked})
	for what, notes := range map[string][]string{
		"history": func() []string { _, n, _ := History(ctx, HistoryQuery{}); return n }(),
		"hangs":   func() []string { _, n, _ := Hangs(ctx, 30*time.Second); return n }(),
	} {
		if len(notes) != 1 || !strings.Contains(notes[0], "not recording history") || !strings.Contains(notes[0], locked) {
			t.Errorf("%s with a pool that records nothing: notes %q", what, notes)
		}
	}
}

func TestRecordingNote(t *testing.T) {
	failing := "disk I/O error"
	for _, tc := range []struct {
		name string
		h    control.HistoryStatus
		want string // in the note; "" for none
	}{
		{"recording", control.HistoryStatus{Enabled: true, Path: "/h/history.db"}, ""},
		{"path not reported", control.HistoryStatus{Enabled: true}, ""},
		{"switched off", control.HistoryStatus{}, "records no history"},
		{"could not open", control.HistoryStatus{Error: &failing}, "not recording history (disk I/O error)"},
		{"writes fail", control.HistoryStatus{Enabled: true, Error: &failing}, "writes fail (disk I/O error)"},
		{"another file", control.HistoryStatus{Enabled: true, Path: "/other/history.db"}, "records into /other/history.db, not /h/history.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := recordingNote(tc.h, "/h/history.db")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("recordingNote = %q, want %q in it", got, tc.want)
			}
		})
	}
}

// checkKeys asserts the JSON interface contract: every entry has the keys.
func checkHistoryKeys(t *testing.T, entries []HistoryEntry, keys ...string) {
	t.Helper()
	b, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	var objs []map[string]any
	if err := json.Unmarshal(b, &objs); err != nil {
		t.Fatal(err)
	}
	for i, o := range objs {
		for _, k := range keys {
			if _, ok := o[k]; !ok {
				t.Errorf("entry %d lacks %q: %s", i, k, b)
			}
		}
		ts, _ := o["receivedAt"].(string)
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Errorf("entry %d: receivedAt %v is not RFC 3339", i, o["receivedAt"])
		}
	}
}

func waitHistory(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestOpenHistory: the instance's history is on, off, or unavailable with
// a reason; the pool gets a recorder only when it is on.
func TestOpenHistory(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("not sqlite "), 500), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		path        string
		cfg         *config.History // nil: no config loaded
		enabled     bool
		wantErr     bool
		wantCapture int
	}{
		{"on", filepath.Join(dir, "on.db"), &config.History{}, true, false, 0},
		{"capture", filepath.Join(dir, "capture.db"), &config.History{CapturePayloads: true}, true, false, store.DefaultCaptureBytes},
		{"off", filepath.Join(dir, "off.db"), &config.History{Disabled: true}, false, false, 0},
		// Off, and saying why, until a config loads: it may switch it off.
		{"no config", filepath.Join(dir, "none.db"), nil, false, true, 0},
		// A damaged file is moved aside and a fresh history starts.
		{"corrupt", garbage, &config.History{}, true, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := openHistory(tc.path, tc.cfg, log)
			defer h.close()
			st := h.status()
			// Off or on, the database records children (leak detection's
			// one record of them); requests only when on.
			if st.Enabled != tc.enabled || (st.Error != nil) != tc.wantErr || h.record() == nil ||
				h.captureBytes() != tc.wantCapture || h.leakSource() == nil || (h.requests() != nil) != tc.enabled ||
				(h.runID() != "") != tc.enabled || (h.unanswered() != nil) != tc.enabled {
				t.Errorf("status %+v, error %v, recorder %v, capture %d, requests %v", st, st.Error, h.record() != nil, h.captureBytes(), h.requests() != nil)
			}
			if _, err := h.leakSource().ChildrenOfEarlierRuns(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	if aside, _ := filepath.Glob(garbage + ".damaged-*"); len(aside) != 1 {
		t.Errorf("the damaged history was not kept aside: %v", aside)
	}
	var none *historyState
	if none.status().Enabled || none.record() != nil || none.close() != nil {
		t.Error("a nil history is not off")
	}
}

// TestOpenHistoryMovesAsideAFileMarkedDamaged: a history that the last
// run found damaged beyond rebuilding its indexes (it leaves PATH-damaged)
// is moved aside at the next start, and a fresh one records.
func TestOpenHistoryMovesAsideAFileMarkedDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	st, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := os.WriteFile(path+"-damaged", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h := openHistory(path, &config.History{}, slog.New(slog.DiscardHandler))
	defer h.close()
	if s := h.status(); !s.Enabled || s.Error != nil {
		t.Errorf("status %+v, error %v, want a fresh history on", s, s.Error)
	}
	if aside, _ := filepath.Glob(path + ".damaged-*"); len(aside) == 0 {
		t.Error("the file marked damaged was not moved aside")
	}
	if _, err := os.Stat(path + "-damaged"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mark is left: %v", err)
	}
}

// TestHistoryStatusSaysWithoutAJournal: a history that records without
// its crash journal (its file cannot be made; on a full disk, no room for
// it) is on, and status says what it lacks and why.
func TestHistoryStatusSaysWithoutAJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	if err := os.Mkdir(path+"-inflight", 0o700); err != nil { // no file can be made there
		t.Fatal(err)
	}
	h := openHistory(path, &config.History{}, slog.New(slog.DiscardHandler))
	defer h.close()
	st := h.status()
	if !st.Enabled || st.Error != nil || st.JournalError == nil || !strings.Contains(*st.JournalError, "inflight") {
		t.Errorf("status %+v; want on, no error, and why there is no journal", st)
	}
	if b, err := json.Marshal(control.HistoryStatus{Enabled: true}); err != nil || strings.Contains(string(b), "journalError") {
		t.Errorf("a history with its journal: %s, %v; want no journalError key", b, err)
	}
}

// TestHistoryStatusSaysWhenItsFilesAreTruncated: the journal or the
// database truncated in place while the pool runs (`: > file`,
// logrotate's copytruncate) is said in status (journalError, error) until
// the pool has made it again, and `history` refuses the empty database
// (deleting nothing) rather than call it an older schema. Status used to
// say nothing of either: both were the same files, shorter.
func TestHistoryStatusSaysWhenItsFilesAreTruncated(t *testing.T) {
	paths := sbHome(t)
	h := openHistory(paths.History, &config.History{}, slog.New(slog.DiscardHandler))
	defer h.close()

	if err := os.Truncate(paths.History+"-inflight", 0); err != nil {
		t.Fatal(err)
	}
	if st := h.status(); st.Error != nil || st.JournalError == nil || !strings.Contains(*st.JournalError, "truncated") {
		t.Errorf("status after the journal was truncated: %+v; want no error, and a journalError that says so", st)
	}
	waitHistory(t, "the journal made again", func() bool {
		fi, err := os.Stat(paths.History + "-inflight")
		return h.status().JournalError == nil && err == nil && fi.Size() > 0
	})

	// The pool makes the file again as soon as its writer looks (every
	// second while it writes, or when its status is asked): a reader, or
	// status, can come after that and find the new file. Then truncate it
	// again: a pool that never said so would fail every time.
	for try := 1; ; try++ {
		if err := os.Truncate(paths.History, 0); errors.Is(err, fs.ErrNotExist) && try < 10 {
			// Caught while the pool makes it again: truncate the new one.
			waitHistory(t, "the database made again", func() bool { _, err := os.Stat(paths.History); return err == nil })
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		_, _, err := History(context.Background(), HistoryQuery{})
		st := h.status()
		refused := err != nil && strings.Contains(err.Error(), "empty or damaged (was it truncated?)")
		if refused && st.Error != nil && strings.Contains(*st.Error, "truncated") {
			break
		}
		if (err != nil && !refused) || try == 10 {
			t.Fatalf("history of the truncated database: %v, status %+v; want it refused as empty, and status to say so", err, st)
		}
	}
	waitHistory(t, "the database made again", func() bool { return h.status().Error == nil })
	if got, _, err := History(context.Background(), HistoryQuery{}); err != nil || len(got) != 0 {
		t.Errorf("history of the database made again: %v, %v; want no request, no error", got, err)
	}
}

// TestHistorySwitchedWhileRunning: a config that switches history off
// applies at once: no request is recorded from then on, while one in
// flight then still gets its end recorded (no row left in flight); one
// that switches it back on applies at once too. On the first edition
// history settings applied from the next start only: the requests of a
// user who had just switched history off went on being recorded.
func TestHistorySwitchedWhileRunning(t *testing.T) {
	paths := sbHome(t)
	servers := map[string][]string{"a": nil}
	if err := config.WriteFile(paths.Config, fakeConfig(t, servers), 0o600); err != nil {
		t.Fatal(err)
	}
	inst, logs := startIn(t, Options{})
	stop := stopInstance(t, inst)
	c := dialSession(t, inst.Paths.PoolSocket(), "a")                          // initialize: id 1, which waits for the child to start
	c.pid()                                                                    // 2
	slow := c.send("tools/call", `{"name":"sleep","arguments":{"ms":600000}}`) // 3
	eventually(t, 5*time.Second, "the slow call in flight", func() bool { return len(inst.Status().InFlight) == 1 })
	off := configWith(t, servers, map[string]any{"history": map[string]any{"disabled": true}})
	if err := config.WriteFile(paths.Config, off, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "history switched off, and the log saying so", func() bool {
		return !inst.Status().History.Enabled && strings.Contains(logs.String(), "request history switched off")
	})
	if st := inst.Status(); st.History.Error != nil || len(st.RestartNeeded) != 0 {
		t.Errorf("history status %+v, restartNeeded %q; want off by choice, nothing waiting for a restart", st.History, st.RestartNeeded)
	}
	c.pid() // 4
	fmt.Fprintf(c.conn, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s}}`+"\n", slow)
	eventually(t, 5*time.Second, "the slow call cancelled", func() bool { return len(inst.Status().InFlight) == 0 })
	if err := config.WriteFile(paths.Config, fakeConfig(t, servers), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "history switched on again", func() bool { return inst.Status().History.Enabled })
	c.pid() // 5
	c.close()
	stop()
	if got, want := recordedIDs(t), []string{"1 ok", "2 ok", "3 cancelled", "5 ok"}; !slices.Equal(got, want) {
		t.Errorf("the history holds %q, want %q", got, want)
	}
}

// TestHistorySwitchedOnNeedsARestart: a pool started with history off
// opened its database for the children's record only: a config that
// switches history on is applied at the next start, and status and the
// log say so.
func TestHistorySwitchedOnNeedsARestart(t *testing.T) {
	paths := sbHome(t)
	servers := map[string][]string{"a": nil}
	off := configWith(t, servers, map[string]any{"history": map[string]any{"disabled": true}})
	if err := config.WriteFile(paths.Config, off, 0o600); err != nil {
		t.Fatal(err)
	}
	inst, logs := startIn(t, Options{})
	runInstance(t, inst)
	on := configWith(t, servers, map[string]any{"hangThreshold": "5s"})
	if err := config.WriteFile(paths.Config, on, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the new file applied, and the log saying a restart is needed", func() bool {
		return strings.Contains(logs.String(), "take effect when Switchboard restarts")
	})
	if st := inst.Status(); st.History.Enabled || !slices.Equal(st.RestartNeeded, []string{"history.disabled"}) {
		t.Errorf("history %+v, restartNeeded %q; want off, and history.disabled waiting for a restart", st.History, st.RestartNeeded)
	}
	if !strings.Contains(logs.String(), "history.disabled") {
		t.Errorf("the log does not name history.disabled:\n%s", logs.String())
	}
}

// TestBrokenConfigSwitchesHistoryOff: a file that does not load (here a
// bad hangThreshold) but reads history.disabled as true switches history
// off at once, while the last good config keeps running everything else;
// the next broken file that does not say so leaves it off, and a file
// that loads decides again. Before, a user who switched history off for
// privacy and made a typo elsewhere in the same edit went on being
// recorded until the typo was found.
func TestBrokenConfigSwitchesHistoryOff(t *testing.T) {
	paths := sbHome(t)
	servers := map[string][]string{"a": nil}
	if err := config.WriteFile(paths.Config, fakeConfig(t, servers), 0o600); err != nil {
		t.Fatal(err)
	}
	inst, logs := startIn(t, Options{})
	stop := stopInstance(t, inst)
	c := dialSession(t, inst.Paths.PoolSocket(), "a") // initialize: id 1, which waits for the child to start
	c.pid()                                           // 2
	write := func(extra map[string]any) {
		t.Helper()
		if err := config.WriteFile(paths.Config, configWith(t, servers, extra), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(map[string]any{"hangThreshold": "soon"})
	eventually(t, 5*time.Second, "the broken file reported", func() bool { return inst.Status().ConfigError != nil })
	c.pid() // 3: recorded, history is on
	// The same problem, so the same error: only history.disabled differs.
	write(map[string]any{"hangThreshold": "soon", "history": map[string]any{"disabled": true}})
	eventually(t, 5*time.Second, "history switched off, and the log saying so", func() bool {
		return !inst.Status().History.Enabled && strings.Contains(logs.String(), "request history switched off")
	})
	c.pid() // 4: not recorded
	write(map[string]any{"hangThreshold": "later"})
	eventually(t, 5*time.Second, "the second broken file reported", func() bool {
		e := inst.Status().ConfigError
		return e != nil && strings.Contains(*e, "later")
	})
	if inst.Status().History.Enabled {
		t.Error("a broken file that does not say history is off switched it on again")
	}
	c.pid() // 5: not recorded
	write(nil)
	eventually(t, 5*time.Second, "the good file loaded, history on again", func() bool {
		st := inst.Status()
		return st.ConfigError == nil && st.History.Enabled
	})
	c.pid() // 6
	c.close()
	stop()
	if got, want := recordedIDs(t), []string{"1 ok", "2 ok", "3 ok", "6 ok"}; !slices.Equal(got, want) {
		t.Errorf("the history holds %q, want %q", got, want)
	}
}
