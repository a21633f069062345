//go:build unix

package leaks

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestChildrenFileOfEarlierVersions: the file earlier versions wrote is
// read (a damaged last line skipped, exits honoured) and compacted down
// to the children that may still run, then away.
func TestChildrenFileOfEarlierVersions(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "children.jsonl")

	// Nothing recorded: empty, not an error; Compact has nothing to do.
	if got, err := FileSource(path).ChildrenOfEarlierRuns(ctx); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("missing file: %v, %v", got, err)
	}
	must(t, FileSource(path).Compact(ctx))

	live := exec.Command("sleep", "1000")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })
	st, err := StartTime(ctx, live.Process.Pid)
	must(t, err)
	lines := []fileLine{
		{"start", ChildRecord{PID: live.Process.Pid, Server: "a", Command: []string{"sleep", "1000"}, StartedAt: st, Run: "first"}},
		{"start", ChildRecord{PID: 1 << 30, Server: "gone", StartedAt: time.Unix(1e9, 0), Run: "first"}}, // no such process
		{"start", ChildRecord{PID: 1<<30 - 1, Server: "exited", Run: "first"}},
		{"exit", ChildRecord{PID: 1<<30 - 1, Run: "first"}},
	}
	var data []byte
	for _, l := range lines {
		b, _ := json.Marshal(l)
		data = append(append(data, b...), '\n')
	}
	data = append(data, `{"op":"start","pid":12`...) // a crash mid-append
	must(t, os.WriteFile(path, data, 0o600))

	got, err := FileSource(path).ChildrenOfEarlierRuns(ctx)
	must(t, err)
	if len(got) != 2 || got[0].Server != "gone" || got[1].Server != "a" || !got[1].StartedAt.Equal(st) {
		t.Fatalf("open children = %+v; want gone, a", got)
	}

	// Compact keeps only children that may still be alive.
	must(t, FileSource(path).Compact(ctx))
	got, err = FileSource(path).ChildrenOfEarlierRuns(ctx)
	must(t, err)
	if len(got) != 1 || got[0].Server != "a" {
		t.Errorf("after Compact: %+v; want a", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode after Compact: %v %v", fi, err)
	}
	// Once none runs, the file goes.
	_ = live.Process.Kill()
	_ = live.Wait()
	must(t, FileSource(path).Compact(ctx))
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file outlived its last child: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
