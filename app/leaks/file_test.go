//go:build unix

package leaks

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestFileRecorder(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "children.jsonl")

	// Nothing recorded yet: empty, not an error.
	if got, err := FileSource(path).ChildrenOfEarlierRuns(ctx); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("missing file: %v, %v", got, err)
	}

	live := exec.Command("sleep", "1000")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })

	first := newFileRecorder(path, "first")
	must(t, first.Record(ChildRecord{PID: live.Process.Pid, Server: "a", Command: []string{"sleep", "1000"}, StartedAt: time.Now().Add(time.Hour)}))
	must(t, first.Record(ChildRecord{PID: 1 << 30, Server: "gone", StartedAt: time.Unix(1e9, 0)})) // no such process
	must(t, first.Record(ChildRecord{PID: 1<<30 - 1, Server: "exited"}))
	must(t, first.Exited(1<<30-1))
	// A crash mid-append leaves half a line.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, _ = f.WriteString(`{"op":"start","pid":12`)
	must(t, f.Close())

	if got, err := first.Earlier(); err != nil || len(got) != 0 {
		t.Errorf("the first run sees its own children as earlier: %+v, %v", got, err)
	}
	second := newFileRecorder(path, "second")
	must(t, second.Record(ChildRecord{PID: os.Getpid(), Server: "self"}))
	got, err := second.Earlier()
	must(t, err)
	if len(got) != 2 || got[0].Server != "gone" || got[1].Server != "a" {
		t.Fatalf("second.Earlier() = %+v; want gone, a", got)
	}
	// Record replaced the clock reading with the OS's start time.
	st, err := StartTime(ctx, live.Process.Pid)
	must(t, err)
	if !got[1].StartedAt.Equal(st) || got[1].Run != first.Run() {
		t.Errorf("record %+v; want startedAt %s run %s", got[1], st, first.Run())
	}
	if all, _ := FileSource(path).ChildrenOfEarlierRuns(ctx); len(all) != 3 {
		t.Errorf("FileSource sees %d open children, want 3 (gone, a, self)", len(all))
	}

	// Compact keeps only children that may still be alive.
	must(t, second.Compact(ctx))
	all, err := FileSource(path).ChildrenOfEarlierRuns(ctx)
	must(t, err)
	if len(all) != 2 || all[0].Server != "a" && all[1].Server != "a" {
		t.Errorf("after Compact: %+v; want a and self", all)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode after Compact: %v %v", fi, err)
	}
	// Appends after a Compact land in the new file.
	must(t, first.Exited(live.Process.Pid))
	got, err = second.Earlier()
	must(t, err)
	if len(got) != 0 {
		t.Errorf("after the first run's exit line: %+v", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
