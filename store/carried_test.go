package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A child carried over by an in-place upgrade is the new run's: its
// record in the run that started it ends there, so leak detection, which
// reads the children of earlier runs, never takes the live child for a
// leak of the run that has ended.
func TestCarriedChildIsNotAChildOfAnEarlierRun(t *testing.T) {
	path := dbPath(t)
	ctx := context.Background()
	started := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	s1 := openT(t, path, nil)
	s1.Record(pool.Event{Kind: pool.EventBackendStarted, Time: started, Server: "srv", PID: 4242, ProcessStart: started,
		Command: []string{"srv-mcp"}})
	s1.Record(pool.Event{Kind: pool.EventBackendStarted, Time: started, Server: "other", PID: 4343, ProcessStart: started,
		Command: []string{"other-mcp"}})
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openT(t, path, nil)
	s2.Record(pool.Event{Kind: pool.EventBackendStarted, Time: time.Now(), Server: "srv", PID: 4242, ProcessStart: started,
		Command: []string{"srv-mcp"}, Carried: true})
	if err := s2.flush(); err != nil {
		t.Fatal(err)
	}
	kids, err := s2.ChildrenOfEarlierRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != 1 || kids[0].PID != 4343 {
		t.Errorf("children of earlier runs = %+v, want only 4343 (4242 was carried over to this run)", kids)
	}
	all, err := s2.RecordedChildren(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range all {
		got = append(got, fmt.Sprintf("%d run %s started %s", c.PID, c.Run, c.StartedAt.Format(time.RFC3339Nano)))
	}
	st := started.UTC().Format(time.RFC3339Nano)
	want := []string{"4242 run 1 started " + st, "4343 run 1 started " + st, "4242 run 2 started " + st}
	if !slices.Equal(got, want) {
		t.Errorf("recorded children = %q, want every child of every run, exited or not: %q", got, want)
	}
}
