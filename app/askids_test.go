package app

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// askIDsLog is a logger into a buffer, for what reserveAskIDs says.
func askIDsLog() (*slog.Logger, *syncBuffer) {
	logs := &syncBuffer{}
	return slog.New(slog.NewTextHandler(logs, nil)), logs
}

// storedAskIDMark is the high-water mark the file at path holds.
func storedAskIDMark(t *testing.T, path string) uint64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the ask ids' mark: %v", err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		t.Fatalf("the ask ids' file holds %q: %v", data, err)
	}
	return n
}

// TestAskIDsAboveThePreviousRunsWhenTheClockGoesBack: each run (a
// restart, an upgrade that execs the new program) counts the ids of the
// pool's requests to clients from above every id the runs before it could
// give, though the clock was set back an hour, then a day, between them;
// and from the clock again when it is ahead of the mark. Before, each run
// counted from its clock alone: a run after the clock went back asked
// under ids the run before it had asked under.
func TestAskIDsAboveThePreviousRunsWhenTheClockGoesBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ask-ids")
	log, logs := askIDsLog()
	t0 := time.Now()
	var last uint64 // the highest id the runs so far could give
	for i, now := range []time.Time{t0, t0.Add(-time.Hour), t0.Add(-24 * time.Hour), t0.Add(-24 * time.Hour), t0.Add(30 * 24 * time.Hour)} {
		floor := reserveAskIDs(path, now, log)
		if floor < last {
			t.Fatalf("run %d (clock at %v): floor %d, below %d, an id the runs before it could give", i, now, floor, last)
		}
		if clock := uint64(now.UnixMicro()); floor < clock {
			t.Errorf("run %d: floor %d, below the clock %d", i, floor, clock)
		}
		last = floor + askIDBlock
		if data, _ := os.ReadFile(path); string(data) != strconv.FormatUint(last, 10)+"\n" {
			t.Errorf("run %d: the file holds %q, want floor+block %d, reserved before the run asks", i, data, last)
		}
	}
	if s := logs.String(); s != "" {
		t.Errorf("the runs logged:\n%s", s)
	}
}

// TestAskIDsFileUnreadable: a mark that does not read (garbage, empty,
// out of range, not a file) is reported, and the run counts from the
// clock, as before there was a file: it still starts; and it writes a
// good mark for the next run.
func TestAskIDsFileUnreadable(t *testing.T) {
	for name, make := range map[string]func(path string) error{
		"garbage":  func(p string) error { return os.WriteFile(p, []byte("twelve\n"), 0o600) },
		"empty":    func(p string) error { return os.WriteFile(p, nil, 0o600) },
		"negative": func(p string) error { return os.WriteFile(p, []byte("-5\n"), 0o600) },
		"huge":     func(p string) error { return os.WriteFile(p, []byte("99999999999999999999999\n"), 0o600) },
		"long":     func(p string) error { return os.WriteFile(p, []byte(strings.Repeat("1", 4096)), 0o600) },
		"dir":      func(p string) error { return os.Mkdir(p, 0o700) },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ask-ids")
			if err := make(path); err != nil {
				t.Fatal(err)
			}
			log, logs := askIDsLog()
			now := time.Now()
			floor := reserveAskIDs(path, now, log)
			if floor != uint64(now.UnixMicro()) {
				t.Errorf("floor %d, want the clock's %d", floor, now.UnixMicro())
			}
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), path) {
				t.Errorf("the log does not name the file:\n%s", logs.String())
			}
			if name == "dir" {
				return // nothing replaces a directory
			}
			if mark := storedAskIDMark(t, path); mark != floor+askIDBlock {
				t.Errorf("the file holds %d, want %d", mark, floor+askIDBlock)
			}
		})
	}
}

// TestAskIDsNotWritten: a mark that cannot be written (a read-only state
// dir, a full disk) is reported; the run still starts above the mark it
// read.
func TestAskIDsNotWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ask-ids")
	now := time.Now()
	ahead := uint64(now.Add(time.Hour).UnixMicro())
	if err := os.WriteFile(path, []byte(strconv.FormatUint(ahead, 10)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := writeAskIDsFile
	writeAskIDsFile = func(string, []byte) error { return errors.New("read-only file system") }
	t.Cleanup(func() { writeAskIDsFile = old })
	log, logs := askIDsLog()
	if floor := reserveAskIDs(path, now, log); floor != ahead {
		t.Errorf("floor %d, want the mark read, %d", floor, ahead)
	}
	if !strings.Contains(logs.String(), "read-only file system") {
		t.Errorf("the log does not say the mark was not written:\n%s", logs.String())
	}
}

// TestAskIDsWrapBelow2To53: a mark so high that a run's block would pass
// 2^53 (clients read ids as JavaScript numbers, exact below it) starts
// the count again from the clock.
func TestAskIDsWrapBelow2To53(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ask-ids")
	if err := os.WriteFile(path, []byte(strconv.FormatUint(maxAskID-askIDBlock/2, 10)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log, _ := askIDsLog()
	now := time.Now()
	if floor := reserveAskIDs(path, now, log); floor != uint64(now.UnixMicro()) {
		t.Errorf("floor %d, want the clock's %d", floor, now.UnixMicro())
	}
	if mark := storedAskIDMark(t, path); mark != uint64(now.UnixMicro())+askIDBlock {
		t.Errorf("the file holds %d, want the clock's floor + block", mark)
	}
}

// TestStartReservesAskIDs: Start reads the mark an earlier run left (here
// a day ahead of the clock, as after the clock was set back a day) and
// reserves a block above it before the pool asks anything.
func TestStartReservesAskIDs(t *testing.T) {
	paths := sbHome(t)
	if err := os.WriteFile(paths.Config, fakeServers(t), 0o600); err != nil {
		t.Fatal(err)
	}
	ahead := uint64(time.Now().Add(24 * time.Hour).UnixMicro())
	if err := os.WriteFile(paths.AskIDsFile(), []byte(strconv.FormatUint(ahead, 10)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inst, _ := startIn(t, Options{})
	if mark := storedAskIDMark(t, paths.AskIDsFile()); mark != ahead+askIDBlock {
		t.Errorf("the file holds %d, want the earlier run's mark + block, %d", mark, ahead+askIDBlock)
	}
	runInstance(t, inst)
}
