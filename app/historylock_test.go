package app

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/store"
)

// holdHistoryLocked holds the database at path locked for writing, as
// sqlite3 or a DB browser with an open transaction does, until the test
// ends or the returned func is called.
func holdHistoryLocked(t *testing.T, path string) (release func()) {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=0")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		_, _ = conn.ExecContext(ctx, "ROLLBACK")
		conn.Close()
		db.Close()
	}
	t.Cleanup(release)
	return release
}

// A history.db another program holds locked as the pool starts (the user
// looks into a crash with sqlite3 while a client starts the pool again)
// is opened once the lock goes: meanwhile status says why nothing is
// recorded, and from then on requests are. The pool used to run the whole
// run without its history.
func TestHistoryLockedAtStartOpensOnceReleased(t *testing.T) {
	paths := sbHome(t)
	servers := map[string][]string{"a": nil}
	if err := config.WriteFile(paths.Config, fakeConfig(t, servers), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(paths.History, nil) // the history of an earlier run
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	release := holdHistoryLocked(t, paths.History)
	inst, logs := startIn(t, Options{})
	stop := stopInstance(t, inst)
	if h := inst.Status().History; h.Enabled || h.Error == nil || !strings.Contains(*h.Error, "locked") {
		t.Errorf("history while another program holds it locked: %+v; want off, its error saying locked", h)
	}
	release()
	eventually(t, 30*time.Second, "the history opened once the lock went", func() bool {
		h := inst.Status().History
		return h.Enabled && h.Error == nil
	})
	c := dialSession(t, inst.Paths.PoolSocket(), "a") // initialize: id 1
	c.pid()                                           // 2
	c.close()
	stop()
	if got, want := recordedIDs(t), []string{"1 ok", "2 ok"}; !slices.Equal(got, want) {
		t.Errorf("the history holds %q, want %q\n%s", got, want, logs.String())
	}
}

// historyWith is a history state recording into st.
func historyWith(st *store.Store) *historyState {
	h := &historyState{}
	h.st.Store(st)
	return h
}

// While the database, locked by another program, is being opened again,
// the pool has a recorder, which drops and counts what it is given, and
// the capture the database will have; status says why nothing is
// recorded and counts the drops; and close stops the opening with the
// lock still held, leaving no goroutine behind.
func TestHistoryOpeningCountsDropsAndStopsAtClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	st, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	holdHistoryLocked(t, path)
	h := openHistory(path, &config.History{CapturePayloads: true}, slog.New(slog.DiscardHandler))
	rec := h.record()
	if rec == nil || h.captureBytes() != store.DefaultCaptureBytes || h.requests() != nil || h.leakSource() != nil {
		t.Fatalf("recorder %v, capture %d, requests %v; want a recorder, the capture to come, no database yet",
			rec != nil, h.captureBytes(), h.requests() != nil)
	}
	now := time.Now()
	rec(pool.Event{Kind: pool.EventSessionOpened, Time: now, Server: "a", Session: "s1"})
	rec(pool.Event{Kind: pool.EventRequestReceived, Time: now, Server: "a", Session: "s1", PoolID: 1, Method: "tools/list"})
	if s := h.status(); s.Enabled || s.Dropped != 2 || s.Error == nil ||
		!strings.Contains(*s.Error, "locked") || !strings.Contains(*s.Error, "dropped") {
		t.Errorf("status while opening: %+v; want off, 2 dropped, an error saying locked and that events are dropped", s)
	}
	closed := make(chan error, 1)
	go func() { closed <- h.close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("close: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("close did not stop opening the locked database")
	}
	if h.db() != nil {
		t.Error("a database opened after close")
	}
}
