package store

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// The children a crashed run never saw exit are listed to the next run,
// page by page, with their recorded start (none when not recorded); the
// rows the app finds gone are closed with the time found and why, no exit
// code, and leave the children of earlier runs (leak detection's
// candidates); a row that ended meanwhile, or of the run itself, is left
// alone.
func TestCloseGoneChildren(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	started := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	s1 := openT(t, path, nil)
	for _, pid := range []int{101, 102, 103, 104} {
		start := started
		if pid == 102 {
			start = time.Time{} // not recorded
		}
		s1.Record(pool.Event{Kind: pool.EventBackendStarted, Time: started, Server: "srv", PID: pid, ProcessStart: start,
			Command: []string{"srv-mcp"}})
	}
	s1.Record(pool.Event{Kind: pool.EventBackendExited, Time: started.Add(time.Second), Server: "srv", PID: 104})
	crash(t, s1)

	s2 := openT(t, path, nil)
	s2.Record(pool.Event{Kind: pool.EventBackendStarted, Time: time.Now(), Server: "srv", PID: 201, ProcessStart: started,
		Command: []string{"srv-mcp"}})
	if err := s2.flush(); err != nil {
		t.Fatal(err)
	}
	var open []OpenChild
	for after := int64(0); ; {
		page, err := s2.OpenChildrenOfEarlierRuns(ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 2 {
			t.Fatalf("page of %d rows, asked for 2", len(page))
		}
		open = append(open, page...)
		after = page[len(page)-1].ID
	}
	var pids []int
	for _, c := range open {
		pids = append(pids, c.PID)
		if c.Run != 1 || c.ProcessStart.IsZero() != (c.PID == 102) || (c.PID != 102 && !c.ProcessStart.Equal(started)) {
			t.Errorf("open child %+v: want run 1, started %s (102: not recorded)", c, started)
		}
	}
	if !slices.Equal(pids, []int{101, 102, 103}) {
		t.Fatalf("open children of earlier runs %v, want 101 102 103 (104 exited, 201 is this run's)", pids)
	}

	// 101 and 102 are gone. 103 was found gone too, but its row was
	// closed since it was read; and a row of this run is never closed.
	execSQL(t, path, `UPDATE backends SET exited = 1, exit_reason = 'carried over to run 2 by an upgrade' WHERE pid = 103`)
	own := OpenChild{ID: open[2].ID + 1, Run: 2, PID: 201}
	at := time.Now().Truncate(time.Microsecond)
	n, err := s2.CloseGoneChildren(ctx, append(slices.Clone(open), own), at)
	if err != nil || n != 2 {
		t.Fatalf("closed %d, %v; want 2", n, err)
	}
	kids, err := s2.ChildrenOfEarlierRuns(ctx)
	if err != nil || len(kids) != 0 {
		t.Errorf("children of earlier runs %+v, %v; want none left", kids, err)
	}
	type row struct {
		pid    int
		exited sql.NullInt64
		code   sql.NullInt64
		reason sql.NullString
	}
	rows, err := queryAll(ctx, s2.rdb(), "rows", func(sc scanner) (row, error) {
		var r row
		err := sc.Scan(&r.pid, &r.exited, &r.code, &r.reason)
		return r, err
	}, `SELECT pid, exited, exit_code, exit_reason FROM backends ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		var want row
		switch r.pid {
		case 101, 102:
			want = row{r.pid, sql.NullInt64{Int64: at.UnixMicro(), Valid: true}, sql.NullInt64{}, sql.NullString{String: "gone; not seen exiting (found by run 2)", Valid: true}}
		case 103:
			want = row{r.pid, sql.NullInt64{Int64: 1, Valid: true}, sql.NullInt64{}, sql.NullString{String: "carried over to run 2 by an upgrade", Valid: true}}
		case 104:
			want = r // its own exit
		case 201:
			want = row{pid: 201}
		}
		if r != want {
			t.Errorf("row %+v, want %+v", r, want)
		}
	}

	// A read-only Store has no run of its own.
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.OpenChildrenOfEarlierRuns(ctx, 0, 10); !errors.Is(err, errReadOnly) {
		t.Errorf("read-only open children: %v", err)
	}
	if _, err := ro.CloseGoneChildren(ctx, open, at); !errors.Is(err, errReadOnly) {
		t.Errorf("read-only close: %v", err)
	}
	// A closed Store says so, and does not wait.
	s2.Close()
	if _, err := s2.CloseGoneChildren(ctx, open, at); err == nil {
		t.Error("closing rows through a closed Store: no error")
	}
}
