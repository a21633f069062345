//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// rawSession opens a session on in's pool socket the way a shim does,
// with hello, and returns it with the pool's welcome. It has neither a
// ledger nor a count: what a killed pool owed it, only the history says
// (as for an attached client on macOS, where there is no ledger).
func rawSession(t *testing.T, home string, hello wire.Hello) (*shim, wire.Welcome) {
	t.Helper()
	conn, err := net.Dial("unix", filepath.Join(home, "run", "pool.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	line, _ := json.Marshal(hello)
	if _, err := conn.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
	s := &shim{t: t, stdin: conn, stdout: conn, out: bufio.NewReader(conn), errb: &syncBuffer{}, done: make(chan error, 1)}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	wl, err := s.out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var w wire.Welcome
	if err := json.Unmarshal([]byte(wl), &w); err != nil || w.Error != "" || w.Session == "" {
		t.Fatalf("welcome %q: %v", wl, err)
	}
	return s, w
}

// A pool killed (SIGKILL) with calls in flight, some for seconds and some
// sent in its last moment (younger than the second after which a request
// in flight gets a row of its own: the history's journal alone holds
// them), owes each of them an answer: the next pool, asked for the
// session with nothing but the earlier run's history to go by, answers
// every one exactly once with the at-most-once error (mayHaveExecuted:
// they had reached the child), and `hangs --json` lists them as that
// run's abandoned requests.
func TestHistoryAnswersWhatAKilledPoolOwed(t *testing.T) {
	first := serve(t, noClientStarts(fakeConfig(t)))
	initParams := `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"no-ledger","version":"1.0"}}`
	s, w := rawSession(t, first.home, wire.Hello{Server: "fake"})
	s.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + initParams + `}`)
	if r := s.recvID("0"); r.Error != nil {
		t.Fatalf("initialize: %s", r.raw)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	call := func(id string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"sleep_echo","arguments":{"ms":60000,"text":"never"}}}`, id)
	}
	inFlight := func(minAge int64) int {
		n := 0
		for _, r := range first.status().InFlight {
			if r.WrittenToChild && r.AgeMs >= minAge {
				n++
			}
		}
		return n
	}
	s.send(call(`"old"`))
	waitFor(t, "the old call to be in flight past a second (its row written)", func() bool { return inFlight(1500) == 1 })
	const young = 20
	owed := map[string]bool{`"old"`: true}
	for i := 1; i <= young; i++ {
		s.send(call(fmt.Sprint(i)))
		owed[fmt.Sprint(i)] = true
	}
	waitFor(t, "the young calls to reach the child", func() bool { return inFlight(0) == young+1 })
	// and the journal (the pool hands events over in batches up to 10 ms
	// apart: what a crash in between loses is the README's limit, not
	// this test's subject).
	waitFor(t, "the calls to be journaled as written", func() bool {
		h := first.status().History
		return h.Journaled == young+1 && h.JournaledWritten == young+1
	})
	goAway(t, first, true)

	second := serveHome(t, first.home)
	s2, _ := rawSession(t, first.home, wire.Hello{Server: "fake",
		Resume: &wire.Resume{Run: w.Run, Session: w.Session, Initialize: []byte(initParams)}})
	// The owed answers come first; then a new call is answered, with no
	// new initialize.
	s2.send(`{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"echo","arguments":{"text":"same session"}}}`)
	got := map[string]int{}
	for {
		line, err := s2.out.ReadString('\n')
		if err != nil {
			t.Fatalf("read from the new pool: %v (answered %v)", err, got)
		}
		var r reply
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Method != "" {
			continue
		}
		id := string(r.ID)
		if id == `"after"` {
			if toolText(r) != "same session" {
				t.Errorf("the call after the restart: %s", line)
			}
			break
		}
		got[id]++
		if !owed[id] || !strings.Contains(line, `"mayHaveExecuted":true`) {
			t.Errorf("answer %s: %s", id, line)
		}
	}
	for id := range owed {
		if got[id] != 1 {
			t.Errorf("call %s answered %d times, want once", id, got[id])
		}
	}

	var abandoned int
	for _, h := range second.hangs("--over", "0s") {
		if h.Run != nil && fmt.Sprint(*h.Run) == w.Run && *h.Abandoned && *h.WrittenToChild && *h.Session == w.Session {
			abandoned++
		}
	}
	if abandoned != young+1 {
		t.Errorf("hangs --json lists %d abandoned calls of run %s, want %d", abandoned, w.Run, young+1)
	}
}
