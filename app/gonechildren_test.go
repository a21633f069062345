package app

import (
	"context"
	"database/sql"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/leaks"
	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/store"
)

// backendRow is a row of the history's backends table, as a test reads it.
type backendRow struct {
	run, pid   int
	exited     sql.NullInt64
	exitCode   sql.NullInt64
	exitReason sql.NullString
}

// backendRows reads every row of the backends table of the database at
// path, by id.
func backendRows(t *testing.T, path string) []backendRow {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT run, pid, exited, exit_code, exit_reason FROM backends ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []backendRow
	for rows.Next() {
		var r backendRow
		if err := rows.Scan(&r.run, &r.pid, &r.exited, &r.exitCode, &r.exitReason); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// goneProcess starts a process and waits for it: its PID names no
// process any more (short of a reuse, which a start time tells apart).
func goneProcess(t *testing.T) (pid int, start time.Time) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "exit 0")
	start = time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid, start
}

// TestGoneChildrenOfACrashedRunAreClosed: a run that crashed never saw
// its children exit, and their rows would stay open for ever, read by
// every leak scan and never pruned. The next run closes the rows of those
// that are provably gone (no process has the PID, or the one that has it
// started at another time) and leaves open a row whose process still
// runs: a leak, still listed as one.
func TestGoneChildrenOfACrashedRunAreClosed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	gone, goneStart := goneProcess(t)
	goneNoStart, _ := goneProcess(t)
	leaked := plantSleep(t, "")
	leakedStart, err := leaks.StartTime(ctx, leaked)
	if err != nil {
		t.Fatal(err)
	}
	reused := plantSleep(t, "")
	reusedStart, err := leaks.StartTime(ctx, reused)
	if err != nil {
		t.Fatal(err)
	}
	runningNoStart := plantSleep(t, "")

	st, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, c := range []struct {
		pid   int
		start time.Time
	}{
		{gone, goneStart},
		{goneNoStart, time.Time{}}, // its start not recorded
		{leaked, leakedStart},
		// The PID names a process that started an hour after the one
		// recorded: the PID was reused.
		{reused, reusedStart.Add(-time.Hour)},
		{runningNoStart, time.Time{}},
	} {
		st.Record(pool.Event{Kind: pool.EventBackendStarted, Time: now, Server: "fake", PID: c.pid, ProcessStart: c.start,
			Command: []string{"fake"}})
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// The run crashed: it never ended.
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE runs SET ended = NULL WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	before := time.Now()
	h := openHistory(path, &config.History{}, slog.New(slog.DiscardHandler))
	defer h.close()
	closed := map[int]bool{gone: true, goneNoStart: true, reused: true}
	eventually(t, 10*time.Second, "the gone children's rows to close", func() bool {
		for _, r := range backendRows(t, path) {
			if closed[r.pid] && !r.exited.Valid {
				return false
			}
		}
		return true
	})
	rows := backendRows(t, path)
	if len(rows) != 5 {
		t.Fatalf("rows %+v, want the 5 recorded", rows)
	}
	for _, r := range rows {
		switch {
		case closed[r.pid]:
			at := time.UnixMicro(r.exited.Int64)
			if r.exitCode.Valid || r.exitReason.String != "gone; not seen exiting (found by run 2)" || at.Before(before.Truncate(time.Microsecond)) || at.After(time.Now()) {
				t.Errorf("pid %d: exited %s, code %v, reason %q; want closed when found, no code, and why", r.pid, at, r.exitCode, r.exitReason.String)
			}
		case r.exited.Valid:
			t.Errorf("pid %d still runs, but its row is closed: %+v", r.pid, r)
		}
	}
	found, err := leaks.Find(ctx, t.TempDir(), h.leakSource(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(found, func(l leaks.Leak) bool { return l.PID == leaked && l.Kind == leaks.KindRecorded && l.Proven }) {
		t.Errorf("leaks %+v: want the child that still runs, %d, as a recorded leak", found, leaked)
	}
}

// TestCloseGoneChildrenIsBounded: one start looks at goneChildrenMax rows
// at most, a page at a time; the next start looks at the rest.
func TestCloseGoneChildrenIsBounded(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	page, most := goneChildrenPage, goneChildrenMax
	goneChildrenPage, goneChildrenMax = 2, 3
	t.Cleanup(func() { goneChildrenPage, goneChildrenMax = page, most })
	pid, start := goneProcess(t)
	st, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		st.Record(pool.Event{Kind: pool.EventBackendStarted, Time: start, Server: "fake", PID: pid, ProcessStart: start, Command: []string{"fake"}})
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{3, 2, 0} {
		st, err := store.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		n, err := closeGoneChildren(ctx, st)
		st.Close()
		if n != want || err != nil {
			t.Errorf("start %d: closed %d, %v; want %d", i+2, n, err, want)
		}
	}
}
