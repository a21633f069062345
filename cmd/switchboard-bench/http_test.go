package main

import (
	"encoding/json"
	"os/exec"
	"testing"
)

// TestBenchHTTPOnly runs a tiny `switchboard-bench --http-only --json`:
// each era of the HTTP front door against the in-process HTTP server and
// a minimal relay to the same child, on a pool with history on and on one
// with history off, in two alternating rounds; every run answers everything, with nothing misrouted or hung,
// and each era's ratio is the median (for two, the lower) of its rounds'.
func TestBenchHTTPOnly(t *testing.T) {
	out, err := exec.Command(benchBin, "--http-only", "--json", "--http-rounds", "2", "--sessions", "3", "--inflight", "2",
		"--duration", "300ms", "--warmup", "50ms").Output()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	type run struct {
		Mode                    string
		Requests                int
		Misrouted, Hung, Errors int
		PoolCPUSeconds          float64 `json:"poolCpuSeconds"`
		BehindCPU               float64 `json:"behindCpuUsPerRequest"`
		LoadCPU                 float64 `json:"loadToolCpuUsPerRequest"`
	}
	type pair struct {
		InProcess run       `json:"inProcess"`
		Pool      run       `json:"pool"`
		Ratio     float64   `json:"ratio"`
		Rounds    []float64 `json:"roundRatios"`
		CPURatio  float64   `json:"cpuRatio"`
		CPURounds []float64 `json:"roundCpuRatios"`
		// The minimal relay to the same child, in the same rounds.
		Relay            *run      `json:"relay"`
		RelayRatio       float64   `json:"relayRatio"`
		PoolVsRelay      float64   `json:"poolVsRelay"`
		RelayRounds      []float64 `json:"roundRelayRatios"`
		PoolVsRelayRound []float64 `json:"roundPoolVsRelay"`
	}
	type comparison struct{ Legacy, Stateless pair }
	var r struct {
		On  *comparison `json:"httpVsInProcess"`
		Off *comparison `json:"httpVsInProcessHistoryOff"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.On == nil || r.Off == nil {
		t.Fatalf("bench --http-only --json: %v\n%s", err, out)
	}
	for _, c := range []*comparison{r.On, r.Off} {
		for _, p := range []pair{c.Legacy, c.Stateless} {
			if p.Relay == nil {
				t.Fatalf("%s: no minimal relay run", p.Pool.Mode)
			}
			for _, x := range []run{p.InProcess, *p.Relay, p.Pool} {
				if x.Requests == 0 || x.Misrouted != 0 || x.Hung != 0 || x.Errors != 0 {
					t.Errorf("%s: %+v", x.Mode, x)
				}
			}
			if p.Ratio <= 0 || p.Pool.PoolCPUSeconds <= 0 {
				t.Errorf("%s: ratio %v, pool CPU %v", p.Pool.Mode, p.Ratio, p.Pool.PoolCPUSeconds)
			}
			if len(p.Rounds) != 2 || p.Ratio != min(p.Rounds[0], p.Rounds[1]) {
				t.Errorf("%s: ratio %v of rounds %v, want the lower of two", p.Pool.Mode, p.Ratio, p.Rounds)
			}
			if len(p.RelayRounds) != 2 || p.RelayRatio != min(p.RelayRounds[0], p.RelayRounds[1]) || p.RelayRatio <= 0 ||
				len(p.PoolVsRelayRound) != 2 || p.PoolVsRelay != min(p.PoolVsRelayRound[0], p.PoolVsRelayRound[1]) || p.PoolVsRelay <= 0 {
				t.Errorf("%s: relay ratio %v of rounds %v, pool vs relay %v of rounds %v", p.Pool.Mode,
					p.RelayRatio, p.RelayRounds, p.PoolVsRelay, p.PoolVsRelayRound)
			}
			// The relay and its child are behind its client, as the pool
			// and its child are.
			if p.Relay.BehindCPU <= 0 {
				t.Errorf("%s: the relay's CPU was not counted: %+v", p.Relay.Mode, *p.Relay)
			}
			// The in-process server runs in the load tool: nothing is
			// behind its client. Through the pool, the pool and its child are.
			if p.InProcess.BehindCPU != 0 || p.InProcess.LoadCPU <= 0 || p.Pool.BehindCPU <= 0 || p.Pool.LoadCPU <= 0 ||
				len(p.CPURounds) != 2 || p.CPURatio != min(p.CPURounds[0], p.CPURounds[1]) || p.CPURatio <= 0 {
				t.Errorf("%s: CPU per request %+v / %+v, ratio %v of rounds %v", p.Pool.Mode, p.InProcess, p.Pool, p.CPURatio, p.CPURounds)
			}
		}
	}
}
