//go:build linux

package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A call the pool holds while it waits for the client's answer to its
// roots/list (a client that declared roots and is slow to answer, or never
// does) is owed like any call the pool read: status lists it in flight,
// saying what it waits for, and a pool SIGKILLed during the hold leaves it
// in the shim's ledger, so the next pool answers it at once with the
// at-most-once error saying it did not run (the client may send it
// again). Before, the held call was in no ledger, journal or status: the
// kill lost it, and its client waited for an answer that never came.
func TestHeldForRootsCallSurvivesPoolKill(t *testing.T) {
	first := serve(t, noClientStarts(fakeConfig(t))) // the test starts the pool again
	s := first.connect(t, "fake")
	s.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"slow-roots","version":"1.0"}}}`)
	if r := s.recvID("0"); r.Error != nil {
		t.Fatalf("initialize: %s", r.raw)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for { // the pool asks the client its roots; the client does not answer
		line, err := s.out.ReadString('\n')
		if err != nil {
			t.Fatalf("read from shim: %v (stderr: %s)", err, s.errb.String())
		}
		var r reply
		if json.Unmarshal([]byte(line), &r) == nil && r.Method == "roots/list" {
			break
		}
	}
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"held"}}}`)
	// A ping is answered at once, never held: once it is, the pool has
	// read the call before it, and holds it.
	s.send(`{"jsonrpc":"2.0","id":"read","method":"ping"}`)
	if r := s.recvID(`"read"`); r.Error != nil {
		t.Fatalf("ping: %s", r.raw)
	}
	out, err := first.run("status", "--json")
	var st struct {
		InFlight []struct {
			OriginalID  string `json:"originalId"`
			Method      string `json:"method"`
			StateReason string `json:"stateReason"`
		} `json:"inFlight"`
	}
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || len(st.InFlight) != 1 || st.InFlight[0].OriginalID != "1" ||
		!strings.Contains(st.InFlight[0].StateReason, "roots/list") {
		t.Errorf("status --json while the call is held: want it in flight, waiting for roots/list; got %v %s", err, out)
	}

	answers := readAnswers(s)
	goAway(t, first, true)
	started := time.Now()
	serveHome(t, first.home)
	waitFor(t, "the held call's answer from the next pool", func() bool { _, ok := answers.get("1"); return ok })
	a, _ := answers.get("1")
	if !unwrittenAtRestart(a.line) {
		t.Errorf("the call held at the kill was answered %s; want -32003 with mayHaveExecuted false", a.line)
	}
	if d := a.at.Sub(started); d > 5*time.Second {
		t.Errorf("its answer came %s after the next pool started, want within 5 s", d)
	}
	t.Logf("answered %s after the next pool started: %s", a.at.Sub(started).Round(time.Millisecond), strings.TrimSpace(a.line))
}

// unwrittenAtRestart reports whether line is the next pool's answer to a
// request the pool before it had not written to a child when it died:
// -32003 with mayHaveExecuted false.
func unwrittenAtRestart(line string) bool {
	var m struct {
		Error *struct {
			Code int `json:"code"`
			Data struct {
				MayHaveExecuted *bool `json:"mayHaveExecuted"`
			} `json:"data"`
		} `json:"error"`
	}
	return json.Unmarshal([]byte(line), &m) == nil && m.Error != nil && m.Error.Code == -32003 &&
		m.Error.Data.MayHaveExecuted != nil && !*m.Error.Data.MayHaveExecuted
}
