//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// A client connected through `switchboard connect`, calling every 100 ms,
// keeps its session when the pool is SIGKILLed and started again: no new
// handshake and no closed pipe; the call that was running in the child at
// the kill (and recorded by the history, which writes every 50 ms) gets
// the at-most-once error (mayHaveExecuted) within 2 s of the new pool's
// start; every call gets an answer; later calls succeed; status shows the
// session as reattached. The calls pause around the kill: one taken in the
// history's last 50 ms would be lost (README, Sessions survive the pool).
func TestSessionSurvivesPoolKill(t *testing.T) {
	config := fakeConfig(t)
	config = strings.TrimSuffix(config, "}") + `,"autostart":{"fromClients":false}}` // the test starts the pool again
	first := serve(t, config)
	home := first.home
	s := first.connect(t, "fake")
	s.initialize("survivor")

	type answer struct {
		at   time.Time
		line string
	}
	var mu sync.Mutex
	answers := map[string]answer{}
	readerDone := make(chan error, 1)
	go func() {
		r := bufio.NewReader(s.out)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				readerDone <- err
				return
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal([]byte(line), &m) == nil && m.Method == "" {
				mu.Lock()
				answers[string(m.ID)] = answer{time.Now(), line}
				mu.Unlock()
			}
		}
	}()
	got := func(id string) (answer, bool) {
		mu.Lock()
		defer mu.Unlock()
		a, ok := answers[id]
		return a, ok
	}

	// Calls every 100 ms, before and after the restart.
	stop := make(chan struct{})
	sent := make(chan int, 1)
	var pause sync.Mutex // held around the kill
	n := 0
	go func() {
		defer func() { sent <- n }()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				pause.Lock()
				n++
				pause.Unlock()
				s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"call %d"}}}`, n, n))
			}
		}
	}()
	// A call that is surely running in the child when the pool dies.
	s.send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"sleep_echo","arguments":{"ms":30000,"text":"never"}}}`)
	waitFor(t, "the slow call to reach the child", func() bool {
		for _, r := range first.status().InFlight {
			if r.Name == "sleep_echo" && r.WrittenToChild {
				return true
			}
		}
		return false
	})
	pause.Lock()
	waitFor(t, "the history to record the calls so far", func() bool {
		out, err := first.run("history", "--json", "--limit", "1000")
		var rows []struct{ Name, OriginalID string }
		if err != nil || json.Unmarshal([]byte(out), &rows) != nil {
			return false
		}
		slow, last := false, n == 0
		for _, r := range rows {
			slow = slow || r.Name == "sleep_echo"
			last = last || r.OriginalID == fmt.Sprint(n)
		}
		return slow && last
	})
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := <-first.done
	first.done <- err

	started := time.Now()
	second := serveHome(t, home)
	pause.Unlock()
	waitFor(t, "the slow call's at-most-once error", func() bool { _, ok := got(`"slow"`); return ok })
	slow, _ := got(`"slow"`)
	if !strings.Contains(slow.line, `"mayHaveExecuted":true`) {
		t.Errorf("the call running at the kill was answered %s", slow.line)
	}
	if d := slow.at.Sub(started); d > 2*time.Second {
		t.Errorf("its error came %s after the new pool started, want within 2 s", d)
	}

	// Calls after the restart succeed, without a new initialize.
	mu.Lock()
	mark := len(answers)
	mu.Unlock()
	waitFor(t, "calls answered by the new pool", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(answers) >= mark+5
	})
	close(stop)
	n = <-sent
	waitFor(t, "an answer to every call", func() bool {
		for i := 1; i <= n; i++ {
			if _, ok := got(fmt.Sprint(i)); !ok {
				return false
			}
		}
		return true
	})
	ok, failed := 0, 0
	for i := 1; i <= n; i++ {
		a, _ := got(fmt.Sprint(i))
		switch {
		case strings.Contains(a.line, fmt.Sprintf(`"text":"call %d"`, i)):
			ok++
		case strings.Contains(a.line, `"mayHaveExecuted"`):
			failed++ // in flight at the kill
		default:
			t.Errorf("call %d: %s", i, a.line)
		}
	}
	last, _ := got(fmt.Sprint(n))
	if !strings.Contains(last.line, fmt.Sprintf(`"text":"call %d"`, n)) {
		t.Errorf("the last call, after the restart: %s", last.line)
	}
	t.Logf("%d calls: %d answered, %d at-most-once errors; the slow call's error %s after the new pool started",
		n, ok, failed, slow.at.Sub(started).Round(time.Millisecond))

	select {
	case err := <-readerDone:
		t.Fatalf("the client's stdout closed: %v", err)
	case err := <-s.done:
		t.Fatalf("connect exited: %v (stderr: %s)", err, s.errb.String())
	default:
	}
	var st struct {
		Sessions []struct {
			ClientName     string `json:"clientName"`
			ReattachedFrom string `json:"reattachedFrom"`
		} `json:"sessions"`
	}
	out, err := second.run("status", "--json")
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || len(st.Sessions) != 1 ||
		st.Sessions[0].ClientName != "survivor" || !strings.HasPrefix(st.Sessions[0].ReattachedFrom, "run ") {
		t.Errorf("status after the restart: %v %s", err, out)
	}
}

// With clients allowed to start the pool (the default), a connect whose
// pool was killed starts the next one itself and brings its session
// along: the client's next call, with no new initialize, is answered.
func TestReattachStartsAPool(t *testing.T) {
	home := coldHome(t, `{"idleExit": "1m"}`)
	s := coldShim(t, home)
	s.initialize("keeps-its-session")
	pools := killTheOnlyPool(t, home)
	start := time.Now()
	s.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"same session"}}}`)
	if got := toolText(s.recvID("7")); got != "same session" {
		t.Fatalf("the call after the kill: %q", got)
	}
	now := poolsOf(home)
	if len(now) != 1 || now[0] == pools[0] {
		t.Fatalf("pools after the reattach: %v (killed: %d)", now, pools[0])
	}
	t.Logf("the shim started pool %d and the call was answered %s after the kill", now[0], time.Since(start).Round(time.Millisecond))
}
