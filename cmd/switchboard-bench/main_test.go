package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// benchBin is this program, built by TestMain next to the switchboard and
// switchboard-connect it measures.
var benchBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sbbench")
	if err != nil {
		panic(err)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		for _, b := range []struct{ out, pkg, tags string }{
			{"switchboard", "../switchboard", "sqlite_omit_load_extension"},
			{"switchboard-connect", "../switchboard-connect", ""},
			{"switchboard-bench", ".", ""},
		} {
			build := exec.Command("go", "build", "-tags", b.tags, "-o", filepath.Join(dir, b.out), b.pkg)
			build.Env = append(os.Environ(), "GOFLAGS=")
			if out, err := build.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.out, err, out)
				return 1
			}
		}
		benchBin = filepath.Join(dir, "switchboard-bench")
		return m.Run()
	}()
	os.Exit(code)
}

// bench runs the load tool and returns what it printed.
func bench(t *testing.T, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(benchBin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("switchboard-bench %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out
}

// latencyJSON is the latency section of the report.
type latencyJSON struct {
	Rounds int `json:"rounds"`
	Paths  []struct {
		Mode                    string
		Requests                int
		Misrouted, Hung, Errors int
		P50Us, P99Us            float64
		P50RangeUs              [2]float64 `json:"p50RangeUs"`
		CPUUsPerRequest         float64    `json:"cpuUsPerRequest"`
		WakeupsPerRequest       float64    `json:"wakeupsPerRequest"`
		Rounds                  []struct{ Requests int }
	} `json:"paths"`
	Added []struct {
		Mode, Over   string
		P50Us, P99Us float64
	} `json:"added"`
	AddedOverRelayP50 float64 `json:"addedOverRelayP50"`
}

// checkLatency: every latency path ran every round and answered
// everything, and the added figures and the floor are there.
func checkLatency(t *testing.T, l latencyJSON, rounds int, out []byte) {
	t.Helper()
	modes := []string{"pipe", "relay", "direct", "connect", "connect (history off)"}
	if l.Rounds != rounds || len(l.Paths) != len(modes) {
		t.Fatalf("want %d rounds of %v:\n%s", rounds, modes, out)
	}
	for i, x := range l.Paths {
		if x.Mode != modes[i] || len(x.Rounds) != rounds || x.Requests == 0 || x.Misrouted != 0 || x.Hung != 0 || x.Errors != 0 ||
			x.P50Us <= 0 || x.P50RangeUs[0] > x.P50Us || x.CPUUsPerRequest <= 0 || x.WakeupsPerRequest <= 0 {
			t.Errorf("latency path %d: %+v, want %s", i, x, modes[i])
		}
	}
	if len(l.Added) != 3 || l.Added[0].Mode != "relay" || l.Added[0].Over != "pipe" || l.Added[1].Mode != "connect" ||
		l.Added[1].Over != "direct" || l.AddedOverRelayP50 == 0 {
		t.Errorf("added: %+v, over relay %v", l.Added, l.AddedOverRelayP50)
	}
}

// TestBenchJSON runs a tiny `switchboard-bench --json`: the pool and the
// direct pipe both answer everything, with nothing misrouted or hung, and
// the report carries every figure the README table is made of, the
// history's included (on/off pairs, a soak with nothing dropped and every
// request recorded, a row cap held).
func TestBenchJSON(t *testing.T) {
	out := bench(t, "--json", "--sessions", "3", "--inflight", "2",
		"--duration", "300ms", "--warmup", "50ms", "--rounds", "2", "--http-rounds", "1", "--throughput-rounds", "2", "--latency-duration", "100ms",
		"--latency-warmup", "20ms", "--idle", "20",
		"--history-runs", "2", "--soak", "1s", "--cap-rows", "300", "--cap-load", "1s",
		"--stalled-rounds", "1", "--stalled-calls", "2", "--stalled-bytes", "262144")
	var r struct {
		Latency    latencyJSON
		Throughput []struct {
			Mode                    string
			Requests                int
			Misrouted, Hung, Errors int
			P50Us, P99Us            float64
			PoolCPUSeconds          float64 `json:"poolCpuSeconds"`
			PoolRSSBytes            int64   `json:"poolRssBytes"`
			BehindCPU               float64 `json:"behindCpuUsPerRequest"`
			LoadCPU                 float64 `json:"loadToolCpuUsPerRequest"`
		}
		AddedP50Us             float64   `json:"addedP50Us"`
		PipeP50Us              float64   `json:"pipeP50Us"`
		ConnectRatio           float64   `json:"connectRatio"`
		HTTPRatio              float64   `json:"httpRatio"`
		ConnectRatios          []float64 `json:"connectRatios"`
		HTTPRatios             []float64 `json:"httpRatios"`
		ConnectCPURatio        float64   `json:"connectCpuRatio"`
		HTTPCPURatio           float64   `json:"httpCpuRatio"`
		ConnectCPURatios       []float64 `json:"connectCpuRatios"`
		HTTPCPURatios          []float64 `json:"httpCpuRatios"`
		ShimPSSBytes           int64     `json:"shimPssBytes"`
		Shims                  int       `json:"shims"`
		ShimsPSSBytes          int64     `json:"shimsPssBytes"`
		IdleBytesPerSession    float64   `json:"idleBytesPerSession"`
		HistoryOffP99Us        float64   `json:"historyOffP99Us"`
		HistoryOffLatencyP99Us float64   `json:"historyOffLatencyP99Us"`
		History                struct {
			Shapes []struct {
				Sessions, InFlight        int
				On, Off                   []struct{ Requests int }
				ThroughputRatio, P99Ratio float64
				PoolCPUOnUs, PoolCPUOffUs float64
				Misrouted, Hung, Errors   int
			}
			Soak struct {
				Answered, Recorded, Dropped int
				BytesPerRequest             float64
			}
			Cap struct {
				MaxRows, MaxObservedRows, Samples, Answered int
			}
		}
		Stalled *stalledJSON
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	checkLatency(t, r.Latency, 2, out)
	if len(r.Throughput) != 3 {
		t.Fatalf("want 3 throughput rows (direct, connect, http):\n%s", out)
	}
	for i, mode := range []string{"direct", "connect", "http"} {
		x := r.Throughput[i]
		if x.Mode != mode || (mode != "direct" && x.PoolRSSBytes == 0) {
			t.Errorf("throughput row %d: %+v, want mode %s with the pool's figures", i, x, mode)
		}
		if x.Requests == 0 || x.Misrouted != 0 || x.Hung != 0 || x.Errors != 0 || x.P50Us <= 0 || x.BehindCPU <= 0 || x.LoadCPU <= 0 {
			t.Errorf("%s: %+v", x.Mode, x)
		}
	}
	if len(r.ConnectCPURatios) != 2 || len(r.HTTPCPURatios) != 2 || r.ConnectCPURatio != slices.Min(r.ConnectCPURatios) ||
		r.HTTPCPURatio != slices.Min(r.HTTPCPURatios) || r.ConnectCPURatio <= 0 {
		t.Errorf("CPU per request vs direct: connect %v (%v), http %v (%v)", r.ConnectCPURatios, r.ConnectCPURatio, r.HTTPCPURatios, r.HTTPCPURatio)
	}
	// Two throughput rounds: the ratio is the lower middle one, and the
	// rows are the round it came from.
	if len(r.ConnectRatios) != 2 || len(r.HTTPRatios) != 2 || r.ConnectRatio != slices.Min(r.ConnectRatios) ||
		r.HTTPRatio != slices.Min(r.HTTPRatios) || r.Throughput[1].Requests == 0 {
		t.Errorf("throughput rounds: connect %v (%v), http %v (%v)", r.ConnectRatios, r.ConnectRatio, r.HTTPRatios, r.HTTPRatio)
	}
	if r.PipeP50Us <= 0 || r.AddedP50Us == 0 || r.ConnectRatio <= 0 || r.HTTPRatio <= 0 || r.ShimPSSBytes == 0 ||
		r.Shims != 10 || r.ShimsPSSBytes == 0 || r.IdleBytesPerSession == 0 || r.HistoryOffP99Us <= 0 || r.HistoryOffLatencyP99Us <= 0 {
		t.Errorf("report: %s", out)
	}
	h := r.History
	if len(h.Shapes) != 2 || h.Shapes[0].Sessions != 1 || h.Shapes[1].Sessions != 3 {
		t.Fatalf("history shapes: %+v", h.Shapes)
	}
	for _, s := range h.Shapes {
		if len(s.On) != 2 || len(s.Off) != 2 || s.On[0].Requests == 0 || s.ThroughputRatio <= 0 || s.P99Ratio <= 0 ||
			s.PoolCPUOnUs <= 0 || s.PoolCPUOffUs <= 0 || s.Misrouted+s.Hung+s.Errors != 0 {
			t.Errorf("history %dx%d: %+v", s.Sessions, s.InFlight, s)
		}
	}
	if s := h.Soak; s.Answered == 0 || s.Recorded != s.Answered || s.Dropped != 0 || s.BytesPerRequest <= 0 {
		t.Errorf("history soak: %+v", s)
	}
	if c := h.Cap; c.MaxRows != 300 || c.Answered <= c.MaxRows || c.MaxObservedRows > c.MaxRows || c.Samples == 0 {
		t.Errorf("history row cap: %+v", c)
	}
	checkStalled(t, r.Stalled, 1, 2*262144)
}

// stalledJSON is the stalled-readers section of the report.
type stalledJSON struct {
	StalledSessions, OtherSessions, Rounds int
	Alone, Beside                          []struct{ Sessions, InFlight, Answered int }
	Reading                                []struct{ Sessions, InFlight, Answered int } `json:"besideReading"`
	ReadingThroughputRatio                 float64
	ThroughputRatio, P99Ratio              float64
	ThroughputRatios, P99Ratios            []float64
	Misrouted, Hung, Errors                int
	UnreadBytes                            []int64
	UnreadBytesPerSession                  float64
	StalledForeign, StalledLost            int
	StalledEnded                           int
}

// checkStalled: 12 sessions ran alone, beside 4 stalled ones and beside
// 4 reading ones each round, with nothing misrouted, hung or failed; the
// stalled sessions had every answer they asked for waiting unread (at
// least asked bytes each), then read them all back, none foreign, none
// lost, and so did the reading ones.
func checkStalled(t *testing.T, s *stalledJSON, rounds int, asked int64) {
	t.Helper()
	if s == nil {
		t.Fatal("the report has no stalled section")
	}
	if s.StalledSessions != 4 || s.OtherSessions != 12 || s.Rounds != rounds || len(s.Alone) != rounds || len(s.Beside) != rounds || len(s.Reading) != rounds ||
		len(s.ThroughputRatios) != rounds || len(s.P99Ratios) != rounds || len(s.UnreadBytes) != rounds {
		t.Fatalf("stalled: want 4 stalled beside 12, %d rounds: %+v", rounds, s)
	}
	for i := range rounds {
		for _, x := range []struct{ Sessions, InFlight, Answered int }{s.Alone[i], s.Beside[i], s.Reading[i]} {
			// Answered, not Requests: how many fall in a short window
			// is timing, which the load tool measures and the test does
			// not.
			if x.Sessions != 12 || x.InFlight != 1 || x.Answered == 0 {
				t.Errorf("stalled round %d: %+v, want 12 x 1 answered", i, x)
			}
		}
		if s.UnreadBytes[i] < 4*asked {
			t.Errorf("stalled round %d: %d bytes unread, want at least 4 x %d", i, s.UnreadBytes[i], asked)
		}
	}
	if s.Misrouted != 0 || s.Hung != 0 || s.Errors != 0 || s.StalledForeign != 0 || s.StalledLost != 0 || s.StalledEnded != 0 {
		t.Errorf("stalled: the 12 misrouted %d, hung %d, errors %d; the 4 foreign %d, lost %d, ended %d",
			s.Misrouted, s.Hung, s.Errors, s.StalledForeign, s.StalledLost, s.StalledEnded)
	}
	if s.ThroughputRatio <= 0 || s.P99Ratio <= 0 || s.ReadingThroughputRatio <= 0 || s.UnreadBytesPerSession < float64(asked) {
		t.Errorf("stalled: ratios %v / %v, %v bytes unread per session", s.ThroughputRatio, s.P99Ratio, s.UnreadBytesPerSession)
	}
}

// TestBenchStalledOnly: --stalled-only measures the stalled readers and
// nothing else.
func TestBenchStalledOnly(t *testing.T) {
	out := bench(t, "--stalled-only", "--json", "--duration", "200ms", "--warmup", "50ms",
		"--stalled-rounds", "2", "--stalled-calls", "1", "--stalled-bytes", "65536")
	var r struct {
		Latency    struct{ Paths []json.RawMessage }
		Throughput []json.RawMessage
		History    json.RawMessage
		Stalled    *stalledJSON
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	checkStalled(t, r.Stalled, 2, 65536)
	if r.Latency.Paths != nil || r.Throughput != nil || r.History != nil {
		t.Errorf("--stalled-only ran more: %s", out)
	}
}

// TestBenchLatencyOnly: --latency-only measures the latency paths and
// nothing else, as a table that says how far the pool is from its target.
func TestBenchLatencyOnly(t *testing.T) {
	out := bench(t, "--latency-only", "--json", "--rounds", "1", "--latency-duration", "100ms", "--latency-warmup", "20ms")
	var r struct {
		Latency    latencyJSON
		Throughput []json.RawMessage
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	checkLatency(t, r.Latency, 1, out)
	if r.Throughput != nil {
		t.Errorf("--latency-only ran throughput: %s", out)
	}
	table := bench(t, "--latency-only", "--rounds", "1", "--latency-duration", "100ms", "--latency-warmup", "20ms")
	for _, want := range []string{"added by connect over direct: p50", "floor: a pipe round trip between two Go processes is", "target for the pool: added p50 ≤ 25 µs"} {
		if !strings.Contains(string(table), want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(string(table), "throughput") {
		t.Errorf("--latency-only printed throughput:\n%s", table)
	}
}
