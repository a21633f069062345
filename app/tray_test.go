package app

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/store"
	"github.com/switchboard-mcp/switchboard/ui"
)

// TestDashboardHook: POST /v1/dashboard shows the tray instance's
// dashboard, and a headless instance says it has none.
func TestDashboardHook(t *testing.T) {
	inst := &Instance{}
	post := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		inst.handleDashboard(w, httptest.NewRequest(http.MethodPost, "/v1/dashboard", nil))
		return w
	}
	if w := post(); w.Code != http.StatusConflict {
		t.Errorf("headless: status %d, want 409", w.Code)
	}
	shown := 0
	dashboardHooks.Store(inst, func() { shown++ })
	defer dashboardHooks.Delete(inst)
	if w := post(); w.Code != http.StatusOK || shown != 1 {
		t.Errorf("tray: status %d, shown %d times, want 200 and 1", w.Code, shown)
	}
}

// TestTrayControllerHistory: the UI reads the same SQLite history the CLI
// does, and is told why when there is none.
func TestTrayControllerHistory(t *testing.T) {
	ctx := context.Background()
	off := &trayController{inst: &Instance{}}
	if _, err := off.History(ctx, ui.HistoryFilter{}); !errors.Is(err, ui.ErrUnavailable) {
		t.Errorf("History without a store = %v, want ErrUnavailable", err)
	}
	if off.HistoryDropped() != 0 {
		t.Error("drops without a store")
	}

	st, err := store.Open(filepath.Join(t.TempDir(), "history.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	for _, e := range []pool.Event{
		{Kind: pool.EventRequestReceived, Time: now.Add(-time.Minute), Server: "fake", Session: "s2", PoolID: 9, Method: "tools/call", Name: "sleep", OriginalID: "1"},
		{Kind: pool.EventRequestWritten, Time: now.Add(-time.Minute), Server: "fake", Session: "s2", PoolID: 9, PID: 66},
		{Kind: pool.EventRequestReceived, Time: now.Add(-time.Second), Server: "fake", Session: "s2", PoolID: 10, Method: "tools/list", OriginalID: "2"},
		{Kind: pool.EventRequestDone, Time: now.Add(-time.Second + 2*time.Millisecond), Server: "fake", Session: "s2", PoolID: 10,
			Method: "tools/list", Status: pool.StatusError, Err: "boom"},
	} {
		st.Record(e)
	}
	c := &trayController{inst: &Instance{history: &historyState{st: st}}}
	var rows []ui.HistoryRow
	waitHistory(t, "two requests", func() bool {
		rows, err = c.History(ctx, ui.HistoryFilter{Server: "fake"})
		return err == nil && len(rows) == 2
	})
	if r := rows[0]; r.PoolID != 10 || r.Status != pool.StatusError || r.Error != "boom" || r.Duration != 2*time.Millisecond {
		t.Errorf("newest row = %+v", r)
	}
	hung := rows[1]
	if hung.PoolID != 9 || hung.Status != "in-flight" || !hung.WrittenToChild || hung.PID != 66 || hung.Run != st.Run() {
		t.Errorf("hung row = %+v", hung)
	}
	steps, err := c.Timeline(ctx, hung)
	if err != nil {
		t.Fatal(err)
	}
	var whats []string
	for _, s := range steps {
		whats = append(whats, s.What)
	}
	joined := strings.Join(whats, "\n")
	for _, want := range []string{"received tools/call sleep", "written to child PID 66", "still in flight", "run "} {
		if !strings.Contains(joined, want) {
			t.Errorf("timeline lacks %q:\n%s", want, joined)
		}
	}
}
