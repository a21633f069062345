//go:build linux

package main

import (
	"io"
	"strings"
	"testing"
)

// A relaying `connect` sends the client's bytes on as they come, so a pool
// may hold the head of a request line when it goes. Killed, it takes the
// head with it: `connect` sends the head it relayed to the next pool
// first, and the line arrives whole and runs. Stopped on purpose, it hands
// the head back, and `connect` counts it once (not once as relayed and
// again as handed back): the request is owed, and a pool killed with it
// in its child leaves it for the next to answer.
func TestRelayedHalfLineSurvivesPoolKill(t *testing.T) {
	const head = `{"jsonrpc":"2.0","id":"half","method":"tools/call",`
	t.Run("killed", func(t *testing.T) {
		first, s, answers := poolGoneWithHead(t, head, true)
		s.send(`"params":{"name":"echo","arguments":{"text":"whole"}}}`)
		serveHome(t, first.home)
		waitFor(t, "the half line's answer", func() bool { _, ok := answers.get(`"half"`); return ok })
		if a, _ := answers.get(`"half"`); !strings.Contains(a.line, `"text":"whole"`) || strings.HasPrefix(a.line, "DUPLICATE") {
			t.Errorf("the request split across the kill was answered %s; want its result, once", a.line)
		}
	})
	t.Run("stopped, then killed", func(t *testing.T) {
		first, s, answers := poolGoneWithHead(t, head, false)
		s.send(`"params":{"name":"sleep_echo","arguments":{"ms":30000,"text":"never"}}}`)
		second := serveHome(t, first.home)
		waitFor(t, "the split call to reach the child", func() bool {
			for _, r := range second.status().InFlight {
				if r.Name == "sleep_echo" && r.WrittenToChild {
					return true
				}
			}
			return false
		})
		goAway(t, second, true)
		serveHome(t, first.home)
		waitFor(t, "the split call's answer", func() bool { _, ok := answers.get(`"half"`); return ok })
		if a, _ := answers.get(`"half"`); !strings.Contains(a.line, `"mayHaveExecuted":true`) || strings.HasPrefix(a.line, "DUPLICATE") {
			t.Errorf("the call the killed pool owed was answered %s; want the at-most-once error, once", a.line)
		}
	})
}

// poolGoneWithHead starts a pool and a relaying `connect` session to it,
// writes head (the start of a request line) and has the pool go away
// (killed or stopped on purpose). The status round trip makes it likely,
// not certain, that the pool read the head first; and `connect` may write
// the line's end to a killed pool's connection before it sees the pool
// gone, or after. Every order must end alike: the line arrives whole at
// the next pool (app/shim's TestRelayHoldsTheEndAKilledPoolDidNotTake
// forces the one where `connect` writes the end to the dead pool).
func poolGoneWithHead(t *testing.T, head string, kill bool) (*instance, *shim, *answerLog) {
	t.Helper()
	first := serve(t, strings.TrimSuffix(noClientStarts(fakeConfig(t)), "}")+`, "history": {"disabled": true}}`)
	s := connectAs(t, first, "fake", true)
	s.initialize("half-line")
	answers := readAnswers(s)
	if _, err := io.WriteString(s.stdin, head); err != nil {
		t.Fatal(err)
	}
	first.status() // a round trip: the pool has likely read the head
	goAway(t, first, kill)
	return first, s, answers
}
