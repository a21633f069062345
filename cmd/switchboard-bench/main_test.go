package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// TestBenchJSON runs a tiny `switchboard-bench --json`: the pool and the
// direct pipe both answer everything, with nothing misrouted or hung, and
// the report carries every figure the README table is made of, the
// history's included (on/off pairs, a soak with nothing dropped and every
// request recorded, a row cap held).
func TestBenchJSON(t *testing.T) {
	out, err := exec.Command(benchBin, "--json", "--sessions", "3", "--inflight", "2",
		"--duration", "300ms", "--warmup", "50ms", "--idle", "20",
		"--history-runs", "2", "--soak", "1s", "--cap-rows", "300", "--cap-load", "1s").Output()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	var r struct {
		Latency, Throughput []struct {
			Mode                    string
			Requests                int
			Misrouted, Hung, Errors int
			P50Us, P99Us            float64
			PoolCPUSeconds          float64 `json:"poolCpuSeconds"`
			PoolRSSBytes            int64   `json:"poolRssBytes"`
		}
		ConnectRatio        float64 `json:"connectRatio"`
		HTTPRatio           float64 `json:"httpRatio"`
		ShimPSSBytes        int64   `json:"shimPssBytes"`
		IdleBytesPerSession float64 `json:"idleBytesPerSession"`
		HistoryOffP99Us     float64 `json:"historyOffP99Us"`
		History             struct {
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
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	if len(r.Latency) != 2 || len(r.Throughput) != 3 {
		t.Fatalf("want 2 latency and 3 throughput rows (direct, connect, http):\n%s", out)
	}
	for _, x := range append(r.Latency, r.Throughput...) {
		if x.Requests == 0 || x.Misrouted != 0 || x.Hung != 0 || x.Errors != 0 || x.P50Us <= 0 {
			t.Errorf("%s: %+v", x.Mode, x)
		}
	}
	for i, mode := range []string{"direct", "connect", "http"} {
		if x := r.Throughput[i]; x.Mode != mode || (mode != "direct" && x.PoolRSSBytes == 0) {
			t.Errorf("throughput row %d: %+v, want mode %s with the pool's figures", i, x, mode)
		}
	}
	if r.ConnectRatio <= 0 || r.HTTPRatio <= 0 || r.ShimPSSBytes == 0 || r.IdleBytesPerSession == 0 || r.HistoryOffP99Us <= 0 {
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
}
