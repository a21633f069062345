//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A request that waits for its child's handshake (the child is starting:
// an npx server installs itself) is owed like any request the pool read:
// a pool SIGKILLed during the wait leaves it in the shim's ledger, so the
// next pool answers it at once with the at-most-once error saying it did
// not run (the client may send it again). Each of the four such requests:
// initialize (whose params no pool had passed to the shim yet, so the
// next pool knows nothing of it but the ledger), server/discover and
// subscriptions/listen of a 2026-07-28 client, logging/setLevel of a
// legacy one. Before, a wait held no ledger slot: the kill lost it, and
// its client waited for an answer that never came.
func TestRequestWaitingForItsChildSurvivesPoolKill(t *testing.T) {
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, rq := range []struct {
		method, id, line string
		legacy           bool // initialized first, on a child that started
	}{
		{method: "initialize", id: "0",
			line: `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1.0"}}}`},
		{method: "server/discover", id: `"d"`,
			line: `{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{` + meta + `}}`},
		{method: "subscriptions/listen", id: `"L"`,
			line: `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + meta + `}}`},
		{method: "logging/setLevel", id: "5", legacy: true,
			line: `{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"debug"}}`},
	} {
		t.Run(rq.method, func(t *testing.T) {
			gate := filepath.Join(t.TempDir(), "starting") // the child starts only once it is gone
			hold := func() {
				if err := os.WriteFile(gate, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			first := serve(t, noClientStarts(fakeConfig(t, "-start-while", gate)))
			s := first.connect(t, "fake")
			if rq.legacy { // a legacy session's initialize would wait too: it is made on a child that starts
				s.initialize("c")
				hold()
				if out, err := first.run("stop", "fake"); err != nil {
					t.Fatalf("stop: %v %s", err, out)
				}
			} else {
				hold()
			}
			s.send(rq.line)
			waitFor(t, rq.method+" in flight, waiting for its starting child", func() bool {
				in := first.status().InFlight
				return len(in) == 1 && in[0].Method == rq.method && in[0].PID != 0 && !in[0].WrittenToChild
			})

			answers := readAnswers(s)
			goAway(t, first, true)
			if err := os.Remove(gate); err != nil {
				t.Fatal(err)
			}
			started := time.Now()
			serveHome(t, first.home)
			waitForWithin(t, 10*time.Second, rq.method+"'s answer from the next pool", func() bool { _, ok := answers.get(rq.id); return ok })
			a, _ := answers.get(rq.id)
			if !unwrittenAtRestart(a.line) {
				t.Errorf("%s waiting at the kill was answered %s; want -32003 with mayHaveExecuted false", rq.method, a.line)
			}
			t.Logf("answered %s after the next pool started: %s", a.at.Sub(started).Round(time.Millisecond), strings.TrimSpace(a.line))

			// Sent again, as the error invites, it works: the session
			// goes on with the next pool (an initialize too, which no
			// pool had answered). A listen, open once acknowledged, is
			// followed by a call instead.
			again := strings.Replace(rq.line, `"id":`+rq.id, `"id":"again"`, 1)
			if rq.method == "subscriptions/listen" {
				again = `{"jsonrpc":"2.0","id":"again","method":"tools/call","params":{"name":"echo","arguments":{"text":"after"},` + meta + `}}`
			}
			s.send(again)
			waitFor(t, "the request sent again, answered", func() bool { _, ok := answers.get(`"again"`); return ok })
			if a, _ := answers.get(`"again"`); strings.Contains(a.line, `"error"`) {
				t.Errorf("sent again after the error: %s", a.line)
			}
		})
	}
}
