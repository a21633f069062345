//go:build linux

package main

import (
	"strings"
	"testing"
)

// A relaying connect (a terminal, Windows) counts its client's requests
// and their answers, however large, so that after a crash the next pool
// answers exactly what was owed: a call answered with 2 MB before the kill
// is not answered again, and one of 1.5 MB in flight at the kill gets the
// at-most-once error. On the first edition lines over 1 MiB went
// uncounted: the first was answered twice (the second time with -32003,
// mayHaveExecuted), the second never.
func TestRelayCountsLargeMessagesAcrossAKill(t *testing.T) {
	first := serve(t, noClientStarts(fakeConfig(t)))
	s := connectAs(t, first, "fake", true)
	s.initialize("large")
	answers := readAnswers(s)
	s.send(`{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"big","arguments":{"bytes":2000000}}}`)
	waitFor(t, "the 2 MB answer", func() bool { _, ok := answers.get(`"big"`); return ok })
	s.send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"sleep_echo","arguments":{"ms":60000,"text":"never"}}}`)
	s.send(`{"jsonrpc":"2.0","id":"large","method":"tools/call","params":{"name":"sleep_echo","arguments":{"ms":60000,"text":"` + strings.Repeat("y", 1_500_000) + `"}}}`)
	waitWrittenToChild(t, first, "both calls to reach the child", 2)
	goAway(t, first, true)
	serveHome(t, first.home)
	// The next pool answers what it owed before anything the client sends
	// after: once this call is answered, those are too.
	s.send(`{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"echo","arguments":{"text":"same session"}}}`)
	waitFor(t, "the call after the kill", func() bool { _, ok := answers.get(`"after"`); return ok })
	for _, id := range []string{`"slow"`, `"large"`} {
		if a, ok := answers.get(id); !ok || !strings.Contains(a.line, `"code":-32003`) || !strings.Contains(a.line, `"mayHaveExecuted":true`) {
			t.Errorf("call %s, in flight at the kill: answered %v: %.200s", id, ok, a.line)
		}
	}
	if a, _ := answers.get(`"big"`); strings.HasPrefix(a.line, "DUPLICATE") {
		t.Errorf("the call answered before the kill was answered again: %.200s", a.line)
	}
}
