package pool

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// endingRig is a pool with one session and one backend without a child
// process: requests are put in the backend's table in a chosen state, and
// ended the way the pool's code ends them.
type endingRig struct {
	p    *Pool
	s    *session
	b    *backend
	mu   sync.Mutex
	done []Event
	seq  []Event // the written and done events, in order
}

func newEndingRig(t testing.TB) *endingRig {
	t.Helper()
	r := &endingRig{}
	r.p = New(&Options{Record: func(e Event) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if e.Kind == EventRequestDone {
			r.done = append(r.done, e)
		}
		if e.Kind == EventRequestDone || e.Kind == EventRequestWritten {
			r.seq = append(r.seq, e)
		}
	}})
	if err := r.p.Apply([]ServerConfig{{Name: "x", Command: "/bin/true", Restart: RestartPolicy{MaxRestarts: 1}}}); err != nil {
		t.Fatal(err)
	}
	s, err := r.p.newSession("x", sessionSetup{transport: "test"})
	if err != nil {
		t.Fatal(err)
	}
	r.s = s
	r.b = buildBackend(s.srv, s.srv.config(), nil, nil, clientCaps{}, nil)
	// The backend is the session's partition's, as a started one would be,
	// so that Pool.Cancel and the session's requests find it.
	s.srv.mu.Lock()
	pt := s.srv.partLocked("", nil, nil)
	s.srv.enterLocked(s, pt)
	pt.current.Store(r.b)
	s.srv.mu.Unlock()
	t.Cleanup(func() {
		close(r.b.done) // no supervisor runs: let stop return
		r.p.Close()
	})
	return r
}

// add puts a client request with id in the table, tracked by the session.
func (r *endingRig) add(poolID uint64, id string, state reqState, ever bool) *pending {
	pe := &pending{id: poolID, sess: r.s, b: r.b, origID: []byte(id), method: "tools/call", name: "t",
		line: []byte(`{"jsonrpc":"2.0","id":` + fmt.Sprint(poolID) + `,"method":"tools/call"}`)}
	r.b.reqs.register(pe, 100, 0)
	r.b.reqs.update(func(*inFlight) { pe.state, pe.everWritten = state, ever })
	r.s.mu.Lock()
	r.s.trackLocked(string(pe.origID), pe.origID, pe)
	r.s.mu.Unlock()
	return pe
}

// answers drains what the session was sent.
func (r *endingRig) answers() []string {
	var out []string
	for {
		select {
		case q := <-r.s.out:
			out = append(out, string(q.line))
		default:
			return out
		}
	}
}

// toldChild lists the requests the child was told are cancelled.
func (r *endingRig) toldChild() []uint64 {
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	var ids []uint64
	for _, it := range r.b.queue {
		m, err := jsonrpc.Parse(it.line)
		if err != nil || m.Method != "notifications/cancelled" {
			continue
		}
		params := m.Params.Of(m.Raw)
		id, _ := jsonrpc.ParseUint(jsonrpc.Member(params, "requestId").Of(params))
		ids = append(ids, id)
	}
	return ids
}

// Every way a request ends agrees, because each is finish with one
// outcome: whether the client is answered, whether the answer says the
// request may have run (exactly when it had reached a child, also before
// a re-queue), whether the child is told to stop, and that history gets
// one EventRequestDone saying the same. Rows: how it ends; columns: the
// state it was in.
func TestEveryEndingAgrees(t *testing.T) {
	type want struct {
		answered  bool   // the client gets a line
		code      int    // the error's code, 0 for the child's answer
		status    string // history's
		tellChild bool   // notifications/cancelled, given the request may have run
		stays     bool   // not ended at all: it waits for the next child
	}
	endings := []struct {
		name string
		end  func(r *endingRig, pe *pending)
		want want
	}{
		{"answered", func(r *endingRig, pe *pending) {
			msg, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":` + fmt.Sprint(pe.id) + `,"result":{}}`))
			r.b.onResponse(&msg, nil)
		}, want{answered: true, status: StatusOK}},
		{"timeout", func(r *endingRig, pe *pending) { r.b.expire(pe) },
			want{answered: true, code: jsonrpc.CodeRequestTimeout, status: StatusTimeout, tellChild: true}},
		{"client cancel", func(r *endingRig, pe *pending) { r.b.cancel(pe, "changed its mind") },
			want{status: StatusCancelled, tellChild: true}},
		{"user cancel", func(r *endingRig, pe *pending) {
			if err := r.p.Cancel(pe.id); err != nil {
				panic(err)
			}
		}, want{answered: true, code: jsonrpc.CodeRequestCancelled, status: StatusCancelled, tellChild: true}},
		{"pool hands the session back", func(r *endingRig, pe *pending) { r.b.abandon(pe) },
			want{answered: true, code: jsonrpc.CodeBackendDied, status: StatusFailed, tellChild: true}},
		{"server stopped", func(r *endingRig, _ *pending) {
			r.b.stopErr = errors.New("stopped for the test")
			r.b.finishStop()
		}, want{answered: true, code: jsonrpc.CodeBackendUnavailable, status: StatusFailed}},
		{"crash loop", func(r *endingRig, _ *pending) {
			if failed, _ := r.b.noteCrash(errors.New("exited for the test"), newRestartBudget(RestartPolicy{MaxRestarts: 1, Window: time.Minute})); !failed {
				panic("one exit did not spend a budget of one")
			}
		}, want{answered: true, code: jsonrpc.CodeBackendUnavailable, status: StatusFailed}},
		{"child died", func(r *endingRig, _ *pending) {
			r.b.reap(deadChild(t), nil)
			if failed, _ := r.b.noteCrash(errors.New("exited for the test"), newRestartBudget(RestartPolicy{MaxRestarts: 5, Window: time.Minute})); failed {
				panic("one exit spent a budget of five")
			}
		}, want{answered: true, code: jsonrpc.CodeBackendDied, status: StatusFailed}},
		{"child died, failing the server", func(r *endingRig, _ *pending) {
			r.b.reap(deadChild(t), nil)
			if failed, _ := r.b.noteCrash(errors.New("exited for the test"), newRestartBudget(RestartPolicy{MaxRestarts: 1, Window: time.Minute})); !failed {
				panic("one exit did not spend a budget of one")
			}
		}, want{answered: true, code: jsonrpc.CodeBackendUnavailable, status: StatusFailed}},
	}
	states := []struct {
		name  string
		state reqState
		ever  bool
		ran   bool
	}{
		{"queued", stQueued, false, false},
		{"writing", stWriting, false, true},
		{"written", stWritten, false, true},
		{"re-queued after its child died", stQueued, true, true},
	}
	for _, end := range endings {
		for _, st := range states {
			t.Run(end.name+"/"+st.name, func(t *testing.T) {
				r := newEndingRig(t)
				pe := r.add(41, `"a"`, st.state, st.ever)
				end.end(r, pe)
				r.p.events.record.flush() // what Options.Record would be handed within recordDelay
				w := end.want
				if end.name == "child died" && st.state == stQueued {
					w = want{stays: true} // not written to the dead child: it waits for the next one
				}
				if end.name == "answered" {
					st.ran = true // an answer says it ran
				}
				got := r.answers()
				r.mu.Lock()
				done := r.done
				r.mu.Unlock()
				if w.stays {
					if len(got) != 0 || len(done) != 0 || r.b.reqs.lookup(41) == nil {
						t.Fatalf("ended (%q, %d events); want it still in flight", got, len(done))
					}
					return
				}
				if r.b.reqs.lookup(41) != nil {
					t.Fatal("still in the table after it ended")
				}
				if len(done) != 1 {
					t.Fatalf("%d EventRequestDone, want exactly one", len(done))
				}
				if ev := done[0]; ev.Status != w.status || ev.Written != st.ran || ev.PoolID != 41 || ev.Session != r.s.id {
					t.Errorf("history: status %q written %v pool id %d session %q; want %q, %v, 41, %q",
						ev.Status, ev.Written, ev.PoolID, ev.Session, w.status, st.ran, r.s.id)
				}
				if !w.answered {
					if len(got) != 0 {
						t.Errorf("the client was answered %q; a cancelled request gets no answer", got)
					}
				} else {
					if len(got) != 1 {
						t.Fatalf("the client got %d lines, want 1: %q", len(got), got)
					}
					var m struct {
						ID    json.RawMessage `json:"id"`
						Error *struct {
							Code int `json:"code"`
							Data struct {
								MayHaveExecuted *bool `json:"mayHaveExecuted"`
								Retryable       *bool `json:"retryable"`
							} `json:"data"`
						} `json:"error"`
					}
					if err := json.Unmarshal([]byte(got[0]), &m); err != nil || string(m.ID) != `"a"` {
						t.Fatalf("answer %s: not for the client's id", got[0])
					}
					switch {
					case w.code == 0 && m.Error != nil:
						t.Errorf("answer %s: want the child's result", got[0])
					case w.code != 0 && (m.Error == nil || m.Error.Code != w.code):
						t.Errorf("answer %s: want error %d", got[0], w.code)
					case w.code != 0 && (m.Error.Data.MayHaveExecuted == nil || *m.Error.Data.MayHaveExecuted != st.ran || m.Error.Data.Retryable == nil):
						t.Errorf("answer %s: want mayHaveExecuted %v and retryable in its data", got[0], st.ran)
					}
					if done[0].ErrCode != w.code {
						t.Errorf("history's error code %d, the client's %d", done[0].ErrCode, w.code)
					}
				}
				told := r.toldChild()
				if wantTold := w.tellChild && st.ran; wantTold != (len(told) == 1 && told[0] == 41) || len(told) > 1 {
					t.Errorf("the child was told to cancel %v; want told: %v", told, wantTold)
				}
				if n := r.s.info().InFlight; n != 0 {
					t.Errorf("the session still counts %d in flight", n)
				}
			})
		}
	}
}

// deadChild is a child that has exited and whose loops are done, for reap.
func deadChild(t *testing.T) *child {
	t.Helper()
	var files []*os.File
	for range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, r, w)
	}
	t.Cleanup(func() {
		for _, f := range files {
			f.Close()
		}
	})
	c := newChildState(&child{pid: -1, stdin: files[1], stdout: files[2], stderr: files[4]})
	close(c.exited)
	close(c.writerDone)
	close(c.readerDone)
	close(c.stderrDone)
	return c
}

// A request refused before it reached its backend (the server failed) is
// answered and recorded once, as not run; a request ended while it was
// being sent is not queued after its end.
func TestRefusedRequestEndsOnce(t *testing.T) {
	r := newEndingRig(t)
	r.b.mu.Lock()
	r.b.state = StateFailed
	r.b.hsErr = newErrorData(errServerFailed, false, "x", map[string]any{"state": StateFailed}, "x", 5, "1m0s", "exit 3", "")
	r.b.mu.Unlock()
	msg, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t"}}`))
	r.s.forward(&msg, []byte("7"), nil, nil)
	r.p.events.record.flush()
	got := r.answers()
	if len(got) != 1 || !strings.Contains(got[0], `"mayHaveExecuted":false`) || !strings.Contains(got[0], `"id":7`) {
		t.Fatalf("answer: %q", got)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.done) != 1 || r.done[0].Status != StatusFailed || r.done[0].Written || r.done[0].ErrCode != jsonrpc.CodeBackendUnavailable {
		t.Fatalf("history: %+v", r.done)
	}
	if n := r.p.errorsN.Load(); n != 1 {
		t.Errorf("errors counted: %d, want 1", n)
	}

	r2 := newEndingRig(t)
	pe := &pending{id: 9, sess: r2.s, b: r2.b, origID: []byte("9"), method: "tools/call"}
	r2.b.cancel(pe, "gone") // the session closed as it was sending
	if err := r2.b.send(pe); !errors.Is(err, errAlreadyEnded) || r2.b.reqs.lookup(9) != nil {
		t.Fatalf("a request ended before it was sent was queued: %v", err)
	}
}

// An answer can reach the pool before the writer that wrote its request
// has marked it written (the child is that quick): the request was written
// whole, and its events still say written, then done, once each. The
// writer's bookkeeping, coming after, finds it ended and adds nothing.
func TestAnswerBeforeWrittenBookkeepingStillSaysWritten(t *testing.T) {
	r := newEndingRig(t)
	pe := r.add(3, "3", stWriting, false)
	r.b.reqs.update(func(*inFlight) { pe.pid = 42 })
	answer, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":3,"result":{}}`))
	if !r.b.finish(pe, answered(&answer)) {
		t.Fatal("the answer did not end the request")
	}
	var late bool
	r.b.reqs.update(func(in *inFlight) { late, _ = in.wroteLocked(pe, time.Now(), 42) })
	if late {
		t.Fatal("the writer marked an ended request written")
	}
	r.p.events.record.flush()
	r.mu.Lock()
	defer r.mu.Unlock()
	var got []string
	for _, e := range r.seq {
		if e.PoolID == 3 {
			got = append(got, fmt.Sprintf("%v pid=%d written=%v", e.Kind, e.PID, e.Written))
		}
	}
	want := []string{fmt.Sprintf("%v pid=42 written=false", EventRequestWritten), fmt.Sprintf("%v pid=42 written=true", EventRequestDone)}
	if !slices.Equal(got, want) {
		t.Errorf("the request's events: %q, want %q", got, want)
	}
}
