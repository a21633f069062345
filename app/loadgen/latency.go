package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// LatencyConfig is one latency run: one session, one request at a time,
// written and its answer read by one goroutine, so that the client adds
// no hand-off of its own to what is measured.
type LatencyConfig struct {
	Warmup   time.Duration // run before measuring
	Duration time.Duration // measured time
	// HangAfter is how long one answer may take before the run stops and
	// counts it as hung. Default 5 s.
	HangAfter time.Duration
	// Raw: the far end echoes each line back unchanged (the floor: a pipe
	// to another process, or a relay in between). No MCP handshake; an
	// answer must equal its request.
	Raw bool
	// Watch are processes whose CPU and scheduling the run counts, with
	// their descendants, beside the stream's own process and its
	// descendants: the pool behind a connect shim.
	Watch []int
}

// LatencyResult is one latency run: the answers' times, and what the
// processes behind the stream spent per request in the measured window.
type LatencyResult struct {
	Result
	// CPUPerRequestUs is their CPU time per request, WakeupsPerRequest how
	// many times one of their threads was put on a CPU per request (each
	// is a wake-up or a preemption), and RunWaitPerRequestUs how long
	// their threads waited, runnable, for a CPU per request.
	CPUPerRequestUs     float64 `json:"cpuUsPerRequest"`
	WakeupsPerRequest   float64 `json:"wakeupsPerRequest"`
	RunWaitPerRequestUs float64 `json:"runWaitUsPerRequest"`
	Processes           int     `json:"processes"` // how many processes were counted
	// WatchedCPUPerRequestUs and WatchedWakeupsPerRequest are the same for
	// the Watch processes alone, without their descendants: the pool
	// process itself.
	WatchedCPUPerRequestUs   float64 `json:"watchedCpuUsPerRequest,omitempty"`
	WatchedWakeupsPerRequest float64 `json:"watchedWakeupsPerRequest,omitempty"`
}

// Latency opens one stream with open and measures its round trip one
// request at a time. An error means the run could not be set up; what
// went wrong during it is counted in the result.
func Latency(ctx context.Context, cfg LatencyConfig, open Opener) (LatencyResult, error) {
	if cfg.HangAfter <= 0 {
		cfg.HangAfter = 5 * time.Second
	}
	res := LatencyResult{Result: Result{Sessions: 1, InFlight: 1}}
	st, err := open(ctx, 0)
	if err != nil {
		return res, fmt.Errorf("open: %w", err)
	}
	closeStream := sync.OnceValue(st.Close) // the watchdog below may close it first
	defer closeStream()
	s := &session{st: st, r: bufio.NewReaderSize(st.R, 64<<10)}
	if !cfg.Raw {
		if err := s.handshake(); err != nil {
			return res, err
		}
	}
	var roots []int
	if st.PID > 0 {
		roots = append(roots, st.PID)
	}
	roots = append(roots, cfg.Watch...)

	// A read that takes HangAfter (the first) or lasts past the measured
	// window by HangAfter is a hang: a deadline on the stream when it
	// takes one, else the stream is closed under the read.
	var hangAt func(time.Time)
	if d, ok := st.R.(interface{ SetReadDeadline(time.Time) error }); ok && d.SetReadDeadline(time.Now().Add(cfg.HangAfter)) == nil {
		hangAt = func(t time.Time) { _ = d.SetReadDeadline(t) }
	} else {
		watchdog := time.AfterFunc(cfg.HangAfter, func() { _ = closeStream() })
		defer watchdog.Stop()
		hangAt = func(t time.Time) { watchdog.Reset(time.Until(t)) }
	}
	// The clock starts at the first answer: a process slow to start is
	// not a slow round trip.
	var measureFrom, stopAt time.Time
	var (
		lat             []time.Duration
		before, wBefore schedTasks // wBefore: of cfg.Watch alone
		pids            []int
		began           time.Time
		line            []byte
	)
	for n := 1; ; n++ {
		now := time.Now()
		if !stopAt.IsZero() && now.After(stopAt) {
			break
		}
		if began.IsZero() && !stopAt.IsZero() && !now.Before(measureFrom) {
			pids = withDescendants(roots)
			before, wBefore = readSchedTasks(pids), readSchedTasks(cfg.Watch)
			began = time.Now()
		}
		id, token := requestID(n), "s0/"+strconv.Itoa(n)
		s.buf = appendEcho(s.buf[:0], id, token)
		t0 := time.Now()
		if _, err := st.W.Write(s.buf); err != nil {
			res.Errors++
			break
		}
		line, err = s.answerTo(cfg.Raw)
		t1 := time.Now()
		if err != nil {
			res.Hung++
			break
		}
		if stopAt.IsZero() {
			measureFrom = t1.Add(cfg.Warmup)
			stopAt = measureFrom.Add(cfg.Duration)
			hangAt(stopAt.Add(cfg.HangAfter))
		}
		switch ok, misrouted := checkAnswer(line, s.buf, id, token, cfg.Raw); {
		case misrouted:
			res.Misrouted++
		case !ok:
			res.Errors++
		case !began.IsZero():
			lat = append(lat, t1.Sub(t0))
		}
	}
	if began.IsZero() {
		return res, fmt.Errorf("the stream failed before the measured window (%d hung, %d errors, %d misrouted)", res.Hung, res.Errors, res.Misrouted)
	}
	used, wUsed := readSchedTasks(pids).since(before), readSchedTasks(cfg.Watch).since(wBefore)
	elapsed := time.Since(began)

	res.setLatencies(lat, elapsed)
	if len(lat) > 0 {
		per := func(x float64) float64 { return x / float64(len(lat)) }
		res.CPUPerRequestUs = per(micros(used.cpu))
		res.WakeupsPerRequest = per(float64(used.slices))
		res.RunWaitPerRequestUs = per(micros(used.wait))
		if len(cfg.Watch) > 0 {
			res.WatchedCPUPerRequestUs = per(micros(wUsed.cpu))
			res.WatchedWakeupsPerRequest = per(float64(wUsed.slices))
		}
	}
	res.Processes = len(pids)
	return res, nil
}

// requestID is request n's id: numeric when n is even and a string when
// odd, as different clients do.
func requestID(n int) string {
	id := strconv.Itoa(n)
	if n%2 == 1 {
		id = `"` + id + `"`
	}
	return id
}

// appendEcho appends a tools/call of the echo tool, with its newline.
func appendEcho(buf []byte, id, token string) []byte {
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, id...)
	buf = append(buf, `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`...)
	buf = append(buf, token...)
	return append(buf, "\"}}}\n"...)
}

// answerTo reads the next line that answers a request: for an MCP
// server, the next response (notifications are skipped). The line is
// valid until the next read.
func (s *session) answerTo(raw bool) ([]byte, error) {
	for {
		line, err := s.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			rest, rerr := s.r.ReadBytes('\n')
			line, err = append(append([]byte(nil), line...), rest...), rerr
		}
		if err != nil {
			return nil, err
		}
		if raw || !bytes.Contains(line, []byte(`"method"`)) {
			return line, nil
		}
	}
}

// checkAnswer says whether line answers the request sent (ok), and
// whether it is another request's answer (misrouted).
func checkAnswer(line, sent []byte, id, token string, raw bool) (ok, misrouted bool) {
	if raw {
		return bytes.Equal(line, sent), false
	}
	var m answer
	if err := json.Unmarshal(line, &m); err != nil {
		return false, false
	}
	if string(m.ID) != id {
		return false, true
	}
	switch {
	case m.Error != nil:
		return false, false
	case len(m.Result.Content) == 0 || m.Result.Content[0].Text != token:
		return false, true
	}
	return true, false
}
