// Package loadgen drives MCP sessions the way many concurrent clients do:
// N sessions, each keeping K requests in flight, every session numbering
// its requests from 1 (so ids collide across sessions, numeric and string
// alternating). Each request carries a token naming its session and
// sequence number, and each answer is checked against it, so a pool that
// hands one session another's answer shows up as misrouted, not as speed.
//
// The same driver runs against any byte stream (a fake server's pipe, a
// `switchboard connect` process, an HTTP front door adapter), so modes
// measured in one run differ only in what carries the bytes.
package loadgen

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Stream is one session's connection to an MCP server: requests go to W,
// answers come from R, one JSON-RPC message per line.
type Stream struct {
	W io.Writer
	R io.Reader
	// Close ends the session (and any process behind it).
	Close func() error
	// PID is the process at the other end of W and R, when the stream
	// is a process's stdin and stdout; else 0.
	PID int
}

// Opener opens session number i.
type Opener func(ctx context.Context, i int) (*Stream, error)

// Config is one load run.
type Config struct {
	Sessions int           // concurrent sessions
	InFlight int           // requests each session keeps in flight
	Warmup   time.Duration // run before measuring
	Duration time.Duration // measured time
	// HangAfter is how long an unanswered request may take, after the
	// run stops sending, before it counts as hung. Default 5 s.
	HangAfter time.Duration
	// Watch are processes whose CPU time the run counts, with their
	// descendants, beside each stream's process and its descendants: the
	// pool behind connect shims or an HTTP front door.
	Watch []int
	// OnHang, when set, is called once after a run that left requests
	// unanswered, with the sessions that did, before any session closes:
	// while the requests still hang, what holds them can be read (the
	// pool's status and stacks).
	OnHang func([]HungSession)
}

// HungSession is a session that a run left with requests unanswered.
type HungSession struct {
	Session int `json:"session"` // its number in the run
	PID     int `json:"pid,omitempty"`
	// StreamEnded is set when the session's stream ended (its process
	// exited, or the server closed it) before the answers came; else the
	// run waited HangAfter for them in vain.
	StreamEnded bool          `json:"streamEnded"`
	Pending     []HungRequest `json:"pending"`
}

// HungRequest is a request never answered: its id as sent, its echo
// token, and when it was sent.
type HungRequest struct {
	ID    string    `json:"id"`
	Token string    `json:"token"`
	Sent  time.Time `json:"sent"`
}

// Result is what one run measured. Latencies are in microseconds.
type Result struct {
	Mode      string  `json:"mode"`
	Sessions  int     `json:"sessions"`
	InFlight  int     `json:"inFlight"`
	Requests  uint64  `json:"requests"` // answered in the measured window
	PerSecond float64 `json:"requestsPerSecond"`
	P50       float64 `json:"p50Us"`
	P90       float64 `json:"p90Us"`
	P99       float64 `json:"p99Us"`
	Max       float64 `json:"maxUs"`
	Misrouted uint64  `json:"misrouted"` // answers that were not this request's
	Hung      uint64  `json:"hung"`      // never answered
	Errors    uint64  `json:"errors"`    // JSON-RPC errors and broken lines

	// Answered counts every answer, warm-up and the drain after the
	// measured window included.
	Answered uint64 `json:"answered"`

	// BehindCPUUsPerRequest is the CPU time, per request of the measured
	// window, of the processes behind the client (each stream's process
	// and Config.Watch, with their descendants); LoadCPUUsPerRequest the
	// load tool's own (which is also the server in the in-process HTTP
	// mode). Their sum is what a request cost the machine: unlike
	// requests per second it barely moves when the VM's host takes CPU
	// time away, so it shows which of two paths is cheaper even in a
	// noisy hour. Zero where /proc cannot be read.
	BehindCPUUsPerRequest float64 `json:"behindCpuUsPerRequest,omitempty"`
	LoadCPUUsPerRequest   float64 `json:"loadToolCpuUsPerRequest,omitempty"`
}

// CPUUsPerRequest is the CPU time a request cost every process measured,
// the load tool's included.
func (r Result) CPUUsPerRequest() float64 { return r.BehindCPUUsPerRequest + r.LoadCPUUsPerRequest }

// Run opens cfg.Sessions streams with open, completes each one's MCP
// handshake, drives the load, and closes them. An error means the run
// could not be set up; what went wrong during it is counted in Result.
func Run(ctx context.Context, cfg Config, open Opener) (Result, error) {
	if cfg.Sessions <= 0 || cfg.InFlight <= 0 {
		return Result{}, errors.New("loadgen: sessions and in-flight must be positive")
	}
	if cfg.HangAfter <= 0 {
		cfg.HangAfter = 5 * time.Second
	}
	sessions := make([]*session, 0, cfg.Sessions)
	defer func() {
		for _, s := range sessions {
			_ = s.st.Close()
		}
	}()
	for i := range cfg.Sessions {
		st, err := open(ctx, i)
		if err != nil {
			return Result{}, fmt.Errorf("open session %d: %w", i, err)
		}
		s := &session{n: i, st: st, r: bufio.NewReaderSize(st.R, 64<<10), pending: map[string]pendingReq{}}
		sessions = append(sessions, s)
		if err := s.handshake(); err != nil {
			return Result{}, fmt.Errorf("session %d: %w", i, err)
		}
	}

	var run runState
	start := time.Now()
	run.measureFrom = start.Add(cfg.Warmup)
	run.stopAt = run.measureFrom.Add(cfg.Duration)
	roots := slices.Clone(cfg.Watch)
	for _, s := range sessions {
		if s.st.PID > 0 {
			roots = append(roots, s.st.PID)
		}
	}
	driven := make(chan struct{})
	cpu := make(chan cpuWindow, 1)
	go func() { cpu <- sampleCPU(roots, run.measureFrom, run.stopAt, driven) }()
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() { s.drive(&run, cfg.InFlight, cfg.HangAfter) })
	}
	wg.Wait()
	close(driven)
	used := <-cpu
	if cfg.OnHang != nil {
		if hung := hungSessions(sessions); len(hung) > 0 {
			cfg.OnHang(hung)
		}
	}

	res := Result{Sessions: cfg.Sessions, InFlight: cfg.InFlight}
	var lat []time.Duration
	for _, s := range sessions {
		lat = append(lat, s.latencies...)
		res.Misrouted += s.misrouted
		res.Answered += s.answered
		res.Hung += uint64(len(s.pending))
		res.Errors += s.errors
	}
	res.setLatencies(lat, cfg.Duration)
	if res.Requests > 0 && used.complete {
		res.BehindCPUUsPerRequest = micros(used.behind) / float64(res.Requests)
		res.LoadCPUUsPerRequest = micros(used.self) / float64(res.Requests)
	}
	return res, nil
}

// hungSessions describes the sessions with requests still pending.
func hungSessions(sessions []*session) []HungSession {
	var hung []HungSession
	for _, s := range sessions {
		if len(s.pending) == 0 {
			continue
		}
		h := HungSession{Session: s.n, PID: s.st.PID, StreamEnded: s.ended}
		for id, p := range s.pending {
			h.Pending = append(h.Pending, HungRequest{ID: id, Token: p.token, Sent: p.sent})
		}
		slices.SortFunc(h.Pending, func(a, b HungRequest) int { return a.Sent.Compare(b.Sent) })
		hung = append(hung, h)
	}
	return hung
}

// setLatencies fills r's count, rate, percentiles and maximum from the
// latencies measured over d (it sorts lat).
func (r *Result) setLatencies(lat []time.Duration, d time.Duration) {
	r.Requests = uint64(len(lat))
	r.PerSecond = float64(len(lat)) / d.Seconds()
	slices.Sort(lat)
	r.P50, r.P90, r.P99 = micros(percentile(lat, 50)), micros(percentile(lat, 90)), micros(percentile(lat, 99))
	if len(lat) > 0 {
		r.Max = micros(lat[len(lat)-1])
	}
}

// runState is shared, read-only, by all sessions of a run.
type runState struct {
	measureFrom, stopAt time.Time
}

// session is one client: it alone writes to and reads from its stream.
type session struct {
	n       int
	st      *Stream
	r       *bufio.Reader
	next    int
	pending map[string]pendingReq // by the id's bytes

	latencies         []time.Duration // answers inside the measured window
	answered          uint64          // every answer
	misrouted, errors uint64
	ended             bool // the stream ended while drive waited on it
	buf               []byte
}

type pendingReq struct {
	token string
	sent  time.Time
}

// handshake is a 2025-06-18 client's initialize.
func (s *session) handshake() error {
	const hello = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"switchboard-bench","version":"1"}}}` + "\n"
	if _, err := io.WriteString(s.st.W, hello); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	line, err := s.r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var m answer
	if err := json.Unmarshal(line, &m); err != nil || m.Error != nil {
		return fmt.Errorf("initialize answered %q", line)
	}
	_, err = io.WriteString(s.st.W, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	return err
}

// send writes the session's next request: id n, numeric when n is even
// and a string when odd, as different clients do.
func (s *session) send() error {
	s.next++
	id, token := requestID(s.next), "s"+strconv.Itoa(s.n)+"/"+strconv.Itoa(s.next)
	s.buf = appendEcho(s.buf[:0], id, token)
	s.pending[id] = pendingReq{token: token, sent: time.Now()}
	_, err := s.st.W.Write(s.buf)
	return err
}

// answer is the part of a response the driver checks.
type answer struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Result struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
}

// drive keeps inFlight requests outstanding until the run stops, then
// waits up to hangAfter for the rest.
func (s *session) drive(run *runState, inFlight int, hangAfter time.Duration) {
	for range inFlight {
		if err := s.send(); err != nil {
			s.errors++
			return
		}
	}
	lines := make(chan []byte, 64)
	done := make(chan struct{})
	defer close(done)
	go func() { // the stream's reader; it ends with drive, or the stream
		defer close(lines)
		for {
			line, err := s.r.ReadBytes('\n')
			if err != nil {
				return
			}
			select {
			case lines <- line:
			case <-done:
				return
			}
		}
	}()
	stop := time.NewTimer(time.Until(run.stopAt))
	defer stop.Stop()
	stopped := false
	var hang <-chan time.Time // nil until the run stops
	for {
		select {
		case <-stop.C:
			stopped, hang = true, time.After(hangAfter)
		case <-hang:
			return // what is still pending is hung
		case line, ok := <-lines:
			if !ok {
				s.ended = true
				return // the stream ended: what is pending is hung
			}
			s.receive(line, run)
			if !stopped {
				if err := s.send(); err != nil {
					s.errors++
					return
				}
			}
		}
		if stopped && len(s.pending) == 0 {
			return
		}
	}
}

// receive checks one line against what is pending.
func (s *session) receive(line []byte, run *runState) {
	now := time.Now()
	var m answer
	if err := json.Unmarshal(line, &m); err != nil {
		s.errors++
		return
	}
	if m.Method != "" || m.ID == nil {
		return // a notification (or a request) from the server
	}
	p, ok := s.pending[string(m.ID)]
	if !ok {
		s.misrouted++ // an id this session has no request under
		return
	}
	delete(s.pending, string(m.ID))
	s.answered++
	switch {
	case m.Error != nil:
		s.errors++
	case len(m.Result.Content) == 0 || m.Result.Content[0].Text != p.token:
		s.misrouted++
	case !p.sent.Before(run.measureFrom) && !now.After(run.stopAt):
		s.latencies = append(s.latencies, now.Sub(p.sent))
	}
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[max(0, min(i, len(sorted))-1)]
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// Held is a set of open, initialized, idle sessions.
type Held struct{ sessions []*session }

// Hold opens n sessions with open and completes each one's handshake,
// then leaves them idle until Close: the cost of sessions that just sit
// there, as most of a busy developer's do.
func Hold(ctx context.Context, n int, open Opener) (*Held, error) {
	h := &Held{}
	for i := range n {
		st, err := open(ctx, i)
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("open session %d: %w", i, err)
		}
		s := &session{n: i, st: st, r: bufio.NewReaderSize(st.R, 4<<10)}
		h.sessions = append(h.sessions, s)
		if err := s.handshake(); err != nil {
			h.Close()
			return nil, fmt.Errorf("session %d: %w", i, err)
		}
	}
	return h, nil
}

// Close ends every session.
func (h *Held) Close() {
	for _, s := range h.sessions {
		_ = s.st.Close()
	}
}
