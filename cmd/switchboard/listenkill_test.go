//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// lineLog is every line a client read from its stdout, in order.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

// readLines reads the shim's output until it ends.
func readLines(s *shim) *lineLog {
	l := &lineLog{}
	go func() {
		r := bufio.NewReader(s.out)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			l.mu.Lock()
			l.lines = append(l.lines, line)
			l.mu.Unlock()
		}
	}()
	return l
}

// about is the lines that answer id (a response), or whose method is
// method and that name id as their subscription (a listen's
// acknowledgement).
func (l *lineLog) about(id, method string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(line), &m) != nil || m.Method != method {
			continue
		}
		if method == "" && string(m.ID) == id || method != "" && string(m.Params.Meta["io.modelcontextprotocol/subscriptionId"]) == id {
			out = append(out, line)
		}
	}
	return out
}

// An attached client's open 2026-07-28 subscriptions/listen is owed in its
// shim's ledger while it is open: a pool SIGKILLed with it open leaves it
// for the next pool, which answers it once with -32003 saying the stream
// ended with the restart, so the client listens again (and can). A
// listen the client cancelled first is owed nothing and gets nothing.
// Before, an open listen held no slot: after the kill its client was
// never told, and waited for notifications that never came.
//
// A pool stopped on purpose (SIGTERM) ends the listen itself, with its
// closing result: the next pool must not answer it a second time.
func TestOpenListenSurvivesPoolKill(t *testing.T) {
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	listen := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + meta + `}}`
	}
	call := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` + meta + `}}`
	}
	const ack = "notifications/subscriptions/acknowledged"
	for _, c := range []struct{ how, at string }{{"killed", "kill"}, {"stopped", "stop"}} {
		how, at := c.how, c.at
		t.Run(how, func(t *testing.T) {
			first := serve(t, noClientStarts(fakeConfig(t, "-era", "modern")))
			s := first.connect(t, "fake")
			lines := readLines(s)
			s.send(listen(`"gone"`))
			waitFor(t, "the first listen acknowledged", func() bool { return len(lines.about(`"gone"`, ack)) == 1 })
			s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"gone"}}`)
			s.send(listen(`"L"`))
			waitFor(t, "the second listen acknowledged", func() bool { return len(lines.about(`"L"`, ack)) == 1 })

			goAway(t, first, how == "killed")
			serveHome(t, first.home)
			// The next pool answers what it owes before it reads the
			// client: once this call is answered, all of that is in.
			s.send(call(`"after"`))
			waitFor(t, "a call answered by the next pool", func() bool { return len(lines.about(`"after"`, "")) == 1 })

			got := lines.about(`"L"`, "")
			switch {
			case len(got) != 1:
				t.Fatalf("the listen open at the %s was answered %d times: %q; want once", at, len(got), got)
			case how == "killed" && (!unwrittenAtRestart(got[0]) || !strings.Contains(got[0], "listen again")):
				t.Errorf("the listen open at the kill was answered %s; want -32003 saying to listen again", got[0])
			case how == "stopped" && !strings.Contains(got[0], `"resultType":"complete"`):
				t.Errorf("the listen open at the stop was answered %s; want its closing result", got[0])
			}
			if gone := lines.about(`"gone"`, ""); len(gone) != 0 {
				t.Errorf("the listen cancelled before the %s was answered: %q", at, gone)
			}
			t.Logf("the listen open at the %s: %s", at, strings.TrimSpace(got[0]))

			// The client listens again, as it is told, and is heard.
			s.send(listen(`"L2"`))
			waitFor(t, "a listen on the next pool acknowledged", func() bool { return len(lines.about(`"L2"`, ack)) == 1 })
		})
	}
}
