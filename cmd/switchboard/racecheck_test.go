package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// goBuild is `go build ARGS` with GOFLAGS cleared, and with -race when
// race is set.
func goBuild(race bool, args ...string) *exec.Cmd {
	if race {
		args = append([]string{"-race"}, args...)
	}
	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	return cmd
}

// raceLogs is where every race-enabled process the tests start writes
// its race reports: GORACE's log_path, set in this process's environment,
// which every child inherits. A report fails the test during which it was
// written (see watchRaces), or else the run (TestMain).
var raceLogs struct {
	dir  string
	mu   sync.Mutex
	seen map[string]bool
}

// setRaceLogs points the race detector of every process started from now
// on at dir/race.PID. atexit_sleep_ms=0: a race-enabled program otherwise
// sleeps a second before it exits, and the tests run thousands of them.
func setRaceLogs(dir string) error {
	raceLogs.dir, raceLogs.seen = dir, map[string]bool{}
	opts := strings.TrimSpace(os.Getenv("GORACE") + " log_path=" + filepath.Join(dir, "race") + " atexit_sleep_ms=0")
	if err := os.Setenv("GORACE", opts); err != nil {
		return fmt.Errorf("set GORACE: %w", err)
	}
	return nil
}

// scriptRaceLog is the GORACE a test script's commands get: their
// reports are named after the script, so they fail it by name even when
// written after it ended.
func scriptRaceLog(script string) string {
	return strings.TrimSpace(os.Getenv("GORACE") + " log_path=" + filepath.Join(raceLogs.dir, script) + " atexit_sleep_ms=0")
}

// newRaceReports returns the race reports under raceLogs.dir whose file
// names start with prefix and that no earlier call returned: each as
// its file name, with what is known of the process that wrote it, and
// the report.
func newRaceReports(prefix string) []string {
	raceLogs.mu.Lock()
	defer raceLogs.mu.Unlock()
	if raceLogs.dir == "" {
		return nil
	}
	names, _ := filepath.Glob(filepath.Join(raceLogs.dir, prefix+"*"))
	slices.Sort(names)
	var reports []string
	for _, name := range names {
		if raceLogs.seen[name] {
			continue
		}
		raceLogs.seen[name] = true
		text, err := os.ReadFile(name)
		if err != nil {
			text = []byte(err.Error())
		}
		who := "exited"
		pid, _ := strconv.Atoi(strings.TrimPrefix(filepath.Ext(name), "."))
		if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); pid > 0 && len(cmdline) > 0 {
			who = string(bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '}))
		}
		reports = append(reports, fmt.Sprintf("%s (%s):\n%s", filepath.Base(name), who, text))
	}
	return reports
}

// watchRaces fails t, when it ends, with every race report a child
// process wrote while it ran. Called where a test starts (homeDir,
// shortDir), so it runs after the cleanups that stop the test's pools.
// The tests that do not call t.Parallel run one at a time, so a report
// is this test's, or comes from a process an earlier test left running
// (its command line says which). The parallel ones (tests that wait) run
// together once those have ended: a report one of them shows may come
// from another running beside it, its command line says which; the run
// fails all the same.
func watchRaces(t testing.TB) {
	if !raceBuild {
		return
	}
	t.Cleanup(func() {
		for _, r := range newRaceReports("race.") {
			t.Errorf("DATA RACE in a process started while this test ran: %s", r)
		}
	})
}

// plain is the switchboard built without -race, for the tests that
// cannot run the race-enabled one (see plainBinary).
var plain struct {
	once sync.Once
	bin  string
	err  error
}

// plainBinary is switchboard built without the race detector, once, for
// a test that measures the pool's memory: a race build's shadow memory
// is the detector's, not the pool's. Without -race it is sbBin.
func plainBinary(t testing.TB) string {
	t.Helper()
	if !raceBuild {
		return sbBin
	}
	plain.once.Do(func() {
		dir := filepath.Join(filepath.Dir(sbBin), "plain")
		if plain.err = os.MkdirAll(dir, 0o755); plain.err != nil {
			return
		}
		plain.bin = filepath.Join(dir, "switchboard")
		build := goBuild(false, "-tags", "sqlite_omit_load_extension", "-o", plain.bin, ".")
		if out, err := build.CombinedOutput(); err != nil {
			plain.err = fmt.Errorf("build switchboard without -race: %w\n%s", err, out)
		}
	})
	if plain.err != nil {
		t.Fatal(plain.err)
	}
	return plain.bin
}

// servePlain is serve with the pool built without the race detector, for
// a test that bounds the pool's resident memory: a race build keeps the
// detector's shadow of its peak heap resident after the heap itself is
// handed back (the stalled client's 64 MiB backlog: 80 MiB resting, 295
// at the peak, still 220 a minute after the eviction), so a bound on its
// RSS says nothing about the pool's. Its shims and CLI keep -race.
func servePlain(t *testing.T, config string) *instance {
	t.Helper()
	home := homeDir(t)
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return serveBinary(t, plainBinary(t), home)
}
