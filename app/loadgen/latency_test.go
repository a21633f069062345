package loadgen

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/mcptest"
)

// pipeEchoOpener opens an in-process PipeEcho over two pipes.
func pipeEchoOpener(ctx context.Context, _ int) (*Stream, error) {
	reqR, reqW := io.Pipe()
	ansR, ansW := io.Pipe()
	go func() { _ = PipeEcho(reqR, ansW); ansW.Close() }()
	return &Stream{W: reqW, R: ansR, Close: func() error { reqW.Close(); ansR.Close(); return nil }}, nil
}

// TestLatencyAgainstTheFakeServer: one goroutine, one request at a time,
// against the fake server answering echo inline; the fake's process is
// counted.
func TestLatencyAgainstTheFakeServer(t *testing.T) {
	bin, err := mcptest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res, err := Latency(context.Background(), LatencyConfig{Warmup: 20 * time.Millisecond, Duration: 200 * time.Millisecond},
		ProcessOpener([]string{bin, "-inline-echo"}, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.Misrouted != 0 || res.Hung != 0 || res.Errors != 0 || res.P50 <= 0 || res.Max < res.P99 {
		t.Fatalf("result: %+v", res)
	}
	if _, err := os.Stat("/proc/self/task"); err == nil && (res.Processes != 1 || res.CPUPerRequestUs <= 0 || res.WakeupsPerRequest <= 0) {
		t.Fatalf("the fake's scheduling was not counted: %+v", res)
	}
}

// TestLatencyRaw: the floor's mode, where an answer is the request
// echoed back.
func TestLatencyRaw(t *testing.T) {
	res, err := Latency(context.Background(), LatencyConfig{Duration: 100 * time.Millisecond, Raw: true}, pipeEchoOpener)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.Errors != 0 || res.Misrouted != 0 || res.Hung != 0 {
		t.Fatalf("result: %+v", res)
	}
}

// TestLatencyCountsMisroutedErrorsAndHung: a wrong token is misrouted, an
// error an error, and a request never answered ends the run as hung,
// even on a stream that takes no read deadline.
func TestLatencyCountsMisroutedErrorsAndHung(t *testing.T) {
	open := func(ctx context.Context, i int) (*Stream, error) {
		reqR, reqW := io.Pipe()
		ansR, ansW := io.Pipe()
		go badServer(reqR, ansW)
		return &Stream{W: reqW, R: ansR, Close: func() error { reqW.Close(); ansR.Close(); return nil }}, nil
	}
	res, err := Latency(context.Background(), LatencyConfig{Duration: 100 * time.Millisecond, HangAfter: 50 * time.Millisecond}, open)
	if err != nil {
		t.Fatal(err)
	}
	if res.Misrouted != 1 || res.Errors != 1 || res.Hung != 1 || res.Requests != 0 {
		t.Fatalf("want 1 misrouted, 1 error, 1 hung and nothing measured: %+v", res)
	}
	// The same before the measured window: the run could not be measured.
	_, err = Latency(context.Background(), LatencyConfig{Warmup: 200 * time.Millisecond, Duration: 100 * time.Millisecond, HangAfter: 50 * time.Millisecond}, open)
	if err == nil || !strings.Contains(err.Error(), "1 hung, 1 errors, 1 misrouted") {
		t.Fatalf("want the run to fail with 1 hung, 1 error, 1 misrouted; got %v", err)
	}
}

// TestRunLatencyAddsWithinRounds: every path runs every round, and what
// one adds over another comes out per path pair.
func TestRunLatencyAddsWithinRounds(t *testing.T) {
	paths := []latencyPath{
		{mode: ModePipe, cfg: LatencyConfig{Raw: true}, open: pipeEchoOpener},
		{mode: ModeRelay, cfg: LatencyConfig{Raw: true}, open: pipeEchoOpener},
	}
	rep, err := runLatency(context.Background(), paths, LatencyConfig{Duration: 50 * time.Millisecond}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 || len(rep.Rows[0].Rounds) != 3 || len(rep.Rows[1].Rounds) != 3 {
		t.Fatalf("rows: %+v", rep.Rows)
	}
	if len(rep.Added) != 1 || rep.Added[0].Mode != ModeRelay || rep.Added[0].Over != ModePipe {
		t.Fatalf("added: %+v", rep.Added)
	}
	a, pipe, relay := rep.Added[0], rep.Rows[0], rep.Rows[1]
	if a.P50RangeUs[0] > a.P50Us || a.P50Us > a.P50RangeUs[1] || pipe.P50RangeUs[0] > pipe.P50 || relay.P50 > relay.P50RangeUs[1] {
		t.Fatalf("medians outside their ranges: %+v %+v %+v", a, pipe, relay)
	}
}

func TestMedianAndSpan(t *testing.T) {
	for _, c := range []struct {
		in     []float64
		median float64
		span   [2]float64
	}{
		{nil, 0, [2]float64{}},
		{[]float64{3}, 3, [2]float64{3, 3}},
		{[]float64{5, 1, 3}, 3, [2]float64{1, 5}},
		{[]float64{4, 1, 3, 2}, 2.5, [2]float64{1, 4}},
	} {
		if m, s := median(c.in), span(c.in); m != c.median || s != c.span {
			t.Errorf("median, span of %v = %v, %v; want %v, %v", c.in, m, s, c.median, c.span)
		}
	}
}

// TestRelayCarriesBothWays: the floor's relay, in front of cat.
func TestRelayCarriesBothWays(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs cat")
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Relay([]string{"cat"}, inR, outW); outW.Close() }()
	go func() { _, _ = io.WriteString(inW, "one\ntwo\n"); inW.Close() }()
	got, err := io.ReadAll(outR)
	if err != nil || string(got) != "one\ntwo\n" {
		t.Fatalf("relayed %q, %v", got, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestSchedCountsProcessTrees: a child of this process is found below
// it, and this process's threads have run.
func TestSchedCountsProcessTrees(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc")
	}
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if pids := withDescendants([]int{os.Getpid()}); !slices.Contains(pids, cmd.Process.Pid) || pids[0] != os.Getpid() {
		t.Fatalf("descendants of %d: %v, want the child %d among them", os.Getpid(), pids, cmd.Process.Pid)
	}
	if st := readSched([]int{os.Getpid()}); st.cpu <= 0 || st.slices == 0 {
		t.Fatalf("schedstat of this process: %+v", st)
	}
}

// TestRaceBuiltIsNoticed: a binary built with -race is told apart, since
// measuring one misleads.
func TestRaceBuiltIsNoticed(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// This test binary is built with -race exactly when the race detector
	// is on.
	if got := raceBuilt(self); got != raceEnabled {
		t.Fatalf("raceBuilt(this test) = %v, want %v", got, raceEnabled)
	}
	if raceBuilt(os.DevNull) {
		t.Fatal("a file that is no Go binary was taken for a race build")
	}
}

// TestSchedSinceOutlivesEndedProcesses: a process behind the client that
// ends within the measured window (a child the pool stops, say) takes
// none of its CPU time off the others'. Taking one sum from the other
// did: a child that had run for a while and exited made the window's CPU
// time negative, and a ratio of 0 failed TestBenchHTTPOnly on a loaded CI
// run.
func TestSchedSinceOutlivesEndedProcesses(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc")
	}
	// A child that burns CPU until a file exists.
	stop := filepath.Join(t.TempDir(), "stop")
	busy := exec.Command("sh", "-c", `while [ ! -e "$1" ]; do :; done`, "sh", stop)
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Process.Kill(); _ = busy.Wait() }()
	self := []int{os.Getpid()}
	roots := []int{os.Getpid(), busy.Process.Pid}
	deadline := time.Now().Add(10 * time.Second)
	for readSched(roots[1:]).cpu < 50*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatal("the busy child did not run")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := readSchedTasks(roots)
	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := busy.Wait(); err != nil {
		t.Fatal(err)
	}
	after := readSchedTasks(roots)
	mine := schedTasks{}
	for k, v := range after {
		if k[0] == self[0] {
			mine[k] = v
		}
	}
	if got, mine := after.since(before), mine.since(before); got.cpu < 0 || got.cpu != mine.cpu {
		t.Errorf("with a process that ended in the window: %v of CPU, want this process's %v alone", got.cpu, mine.cpu)
	}
}
