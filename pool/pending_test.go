package pool

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Whether a request may have run is sticky: a request that reached a
// child and was re-queued after that child died (safe to repeat) still
// may have run, and every way of ending a request says so: here a stop
// (finishStop) and a crash loop (noteCrash) answer queued, written and
// re-queued requests.
func TestEndingSaysWhatMayHaveRun(t *testing.T) {
	for _, end := range []string{"stop", "crash loop"} {
		t.Run(end, func(t *testing.T) {
			p := New(&Options{})
			defer p.Close()
			if err := p.Apply([]ServerConfig{{Name: "x", Command: "/bin/true", Restart: RestartPolicy{MaxRestarts: 1}}}); err != nil {
				t.Fatal(err)
			}
			s, err := p.newSession("x", sessionSetup{transport: "test"})
			if err != nil {
				t.Fatal(err)
			}
			b := buildBackend(s.srv, s.srv.config(), nil, nil, clientCaps{}, nil)
			add := func(id string, state reqState, ever bool) {
				pe := &pending{id: uint64(b.reqs.count() + 1), sess: s, b: b, origID: []byte(id), method: "tools/call", state: state, everWritten: ever}
				b.reqs.update(func(in *inFlight) { in.pending[pe.id] = pe })
				s.mu.Lock()
				s.trackLocked(string(pe.origID), pe.origID, pe)
				s.mu.Unlock()
			}
			add(`"queued"`, stQueued, false)
			add(`"written"`, stWritten, false)
			add(`"requeued"`, stQueued, true)
			switch end {
			case "stop":
				b.stopErr = errors.New("stopped for the test")
				b.finishStop()
			case "crash loop":
				if failed, _ := b.noteCrash(errors.New("exited for the test"), newRestartBudget(RestartPolicy{MaxRestarts: 1, Window: time.Minute})); !failed {
					t.Fatal("one exit did not spend a budget of one")
				}
			}
			want := map[string]string{`"queued"`: `"mayHaveExecuted":false`, `"written"`: `"mayHaveExecuted":true`, `"requeued"`: `"mayHaveExecuted":true`}
			for range want {
				line := string((<-s.out).line)
				for id, flag := range want {
					if strings.Contains(line, `"id":`+id) && !strings.Contains(line, flag) {
						t.Errorf("%s answered %s, want %s", id, line, flag)
					}
				}
			}
		})
	}
}
