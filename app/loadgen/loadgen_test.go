package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/pool/mcptest"
)

// TestMain is also a stand-in switchboard when fakeSwitchboardEnv is set:
// it prints its arguments and home, so that a test sees what the bench
// ran.
func TestMain(m *testing.M) {
	if os.Getenv(fakeSwitchboardEnv) != "" {
		fmt.Printf("switchboard %s in %s\n", strings.Join(os.Args[1:], " "), os.Getenv("SWITCHBOARD_HOME"))
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

const fakeSwitchboardEnv = "LOADGEN_TEST_FAKE_SWITCHBOARD"

// TestRunAgainstTheFakeServer: sessions each on their own fake server
// process; everything is answered, nothing misrouted or hung.
func TestRunAgainstTheFakeServer(t *testing.T) {
	bin, err := mcptest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Config{Sessions: 4, InFlight: 3, Warmup: 20 * time.Millisecond, Duration: 200 * time.Millisecond},
		ProcessOpener([]string{bin}, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.Misrouted != 0 || res.Hung != 0 || res.Errors != 0 || res.P50 <= 0 || res.Max < res.P99 {
		t.Fatalf("result: %+v", res)
	}
	if _, err := os.Stat("/proc/self/task"); err == nil && (res.BehindCPUUsPerRequest <= 0 || res.LoadCPUUsPerRequest <= 0) {
		t.Fatalf("CPU per request: %v behind the client, %v in the load tool", res.BehindCPUUsPerRequest, res.LoadCPUUsPerRequest)
	}
}

// TestRunCountsWatchedProcessesAndTheirChildren: a process the run
// watches, whose child spins, adds that child's CPU time to what is
// behind the client.
func TestRunCountsWatchedProcessesAndTheirChildren(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc")
	}
	bin, err := mcptest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The outer shell waits for the inner one, which spins.
	spin := exec.Command("sh", "-c", `sh -c 'while :; do :; done'; :`)
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range withDescendants([]int{spin.Process.Pid}) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = spin.Wait()
	})
	cfg := Config{Sessions: 1, InFlight: 1, Warmup: 20 * time.Millisecond, Duration: 300 * time.Millisecond}
	open := ProcessOpener([]string{bin}, nil, nil)
	alone, err := Run(context.Background(), cfg, open)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Watch = []int{spin.Process.Pid}
	watched, err := Run(context.Background(), cfg, open)
	if err != nil {
		t.Fatal(err)
	}
	// The spinning child has a core of two to itself for most of the
	// window, and at least a tenth of it even on a busy machine: that
	// much more than the fake server alone, whose own share moves with
	// how busy the machine is.
	behind := func(r Result) time.Duration {
		return time.Duration(r.BehindCPUUsPerRequest * float64(r.Requests) * float64(time.Microsecond))
	}
	if behind(watched) < behind(alone)+cfg.Duration/10 {
		t.Fatalf("CPU behind the client: %v watching the spinner, %v without, over %v", behind(watched), behind(alone), cfg.Duration)
	}
}

// TestSampleCPUGivesUpWhenTheRunEndsEarly: a run that ends before its
// window does has no CPU figures, rather than a part window's; one that
// ends as its window does has them, whichever of the two select sees
// first.
func TestSampleCPUGivesUpWhenTheRunEndsEarly(t *testing.T) {
	quit := make(chan struct{})
	close(quit)
	now := time.Now()
	if w := sampleCPU([]int{os.Getpid()}, now, now.Add(time.Hour), quit); w.complete {
		t.Fatalf("sampleCPU after quit: %+v", w)
	}
	for range 100 {
		if w := sampleCPU([]int{os.Getpid()}, now, now, quit); !w.complete {
			t.Fatalf("sampleCPU of a window that ended as the run did: %+v", w)
		}
	}
}

// TestRunCountsMisroutedHungAndErrors: a server that answers some
// requests with another request's token, one with an error, and one never
// is reported as such.
func TestRunCountsMisroutedHungAndErrors(t *testing.T) {
	open := func(ctx context.Context, i int) (*Stream, error) {
		reqR, reqW := io.Pipe()
		ansR, ansW := io.Pipe()
		go badServer(reqR, ansW)
		return &Stream{W: reqW, R: ansR, Close: func() error { reqW.Close(); ansR.Close(); return nil }}, nil
	}
	res, err := Run(context.Background(), Config{Sessions: 1, InFlight: 1, Duration: 100 * time.Millisecond, HangAfter: 50 * time.Millisecond}, open)
	if err != nil {
		t.Fatal(err)
	}
	if res.Misrouted != 1 || res.Errors != 1 || res.Hung != 1 {
		t.Fatalf("want 1 misrouted, 1 error, 1 hung: %+v", res)
	}
}

// TestOnHangRunsWhileTheHungSessionsAreOpen: a run that leaves a request
// unanswered calls OnHang once, with the sessions that did, before any
// session is closed; a run that leaves none does not call it.
func TestOnHangRunsWhileTheHungSessionsAreOpen(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(io.ReadCloser, io.WriteCloser)
		calls int
		ended bool // the hung sessions' streams ended
	}{
		{"one request hangs", badServer, 1, false},
		{"the stream ends", endingServer, 1, true},
		{"all answered", echoServer, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var closed, calls, closedAtCall int
			var hung []HungSession
			open := func(ctx context.Context, i int) (*Stream, error) {
				reqR, reqW := io.Pipe()
				ansR, ansW := io.Pipe()
				go tc.serve(reqR, ansW)
				return &Stream{W: reqW, R: ansR, Close: func() error { closed++; reqW.Close(); ansR.Close(); return nil }}, nil
			}
			cfg := Config{Sessions: 2, InFlight: 1, Duration: 100 * time.Millisecond, HangAfter: 50 * time.Millisecond,
				OnHang: func(h []HungSession) { calls++; closedAtCall = closed; hung = h }}
			if _, err := Run(context.Background(), cfg, open); err != nil {
				t.Fatal(err)
			}
			if calls != tc.calls || closedAtCall != 0 || closed != 2 {
				t.Fatalf("OnHang called %d times (want %d), after %d sessions closed (want 0); %d closed in the end (want 2)", calls, tc.calls, closedAtCall, closed)
			}
			if calls == 0 {
				return
			}
			// Both servers leave each session's third request unanswered.
			if len(hung) != 2 {
				t.Fatalf("hung sessions: %+v, want both", hung)
			}
			for _, h := range hung {
				if h.StreamEnded != tc.ended || len(h.Pending) != 1 || h.Pending[0].Token != fmt.Sprintf("s%d/3", h.Session) || h.Pending[0].Sent.IsZero() {
					t.Errorf("hung session %+v: want its request 3 pending, streamEnded %v", h, tc.ended)
				}
			}
		})
	}
}

// endingServer is badServer that ends its output at the request it does
// not answer.
func endingServer(in io.ReadCloser, out io.WriteCloser) {
	pr, pw := io.Pipe()
	go func() {
		defer pw.Close()
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			if bytes.Contains(sc.Bytes(), []byte(`"id":"3"`)) {
				return // badServer would leave it unanswered; this one also ends its output
			}
			if _, err := pw.Write(append(sc.Bytes(), '\n')); err != nil {
				return
			}
		}
	}()
	badServer(pr, out)
}

// echoServer answers initialize, then every request with its token.
func echoServer(in io.ReadCloser, out io.WriteCloser) {
	defer out.Close()
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Arguments struct {
					Text string `json:"text"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		text, _ := json.Marshal(m.Params.Arguments.Text)
		if _, err := io.WriteString(out, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"content":[{"type":"text","text":`+string(text)+`}]}}`+"\n"); err != nil {
			return
		}
	}
}

// badServer answers initialize, then: request 1 with a wrong token,
// request 2 with an error, request 3 not at all.
func badServer(in io.ReadCloser, out io.WriteCloser) {
	defer out.Close()
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		var line string
		switch strings.Trim(string(m.ID), `"`) {
		case "0":
			line = `{"jsonrpc":"2.0","id":0,"result":{}}`
		case "1":
			line = `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"content":[{"type":"text","text":"s9/1"}]}}`
		case "2":
			line = `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32603,"message":"boom"}}`
		default:
			continue // never answered
		}
		if _, err := io.WriteString(out, line+"\n"); err != nil {
			return
		}
	}
}

// sink keeps TestReadProcSelf's work from being optimised away.
var sink int

func TestReadProcSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	// CPU time counts in ticks of 10 ms: work until one is counted (a
	// test run alone may not have used one yet).
	st := ReadProc(os.Getpid())
	for deadline, x := time.Now().Add(10*time.Second), 0; st.CPU <= 0 && time.Now().Before(deadline); st = ReadProc(os.Getpid()) {
		for i := range 1 << 20 {
			x ^= i * i
		}
		sink = x
	}
	if st.RSS == 0 || st.CPU <= 0 {
		t.Fatalf("ReadProc(self) = %+v", st)
	}
	// Syscalls counts this process's reads and writes: ten writes to a
	// pipe add at least ten.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for range 10 {
		if _, err := w.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if after := ReadProc(os.Getpid()); after.Syscalls < st.Syscalls+10 {
		t.Fatalf("system calls %d, then %d after ten writes", st.Syscalls, after.Syscalls)
	}
}
