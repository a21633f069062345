//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A connect takes its session to the next pool in its hello: the client's
// initialize, and what the dead pool owed it. Both can be large (a client
// that declares many KiB of capabilities; hundreds of calls in flight at
// a kill), and the next pool takes the session all the same: it answers
// each call owed with the at-most-once error, and the next call works
// with no new handshake. Attached and relayed alike. On the first edition
// a pool closed a hello over 4 KiB unanswered, and connect tried again at
// once, for ever: nothing more was answered, at full CPU.
func TestReattachCarriesALargeHello(t *testing.T) {
	for _, mode := range []string{"attached", "relayed"} {
		relay := mode == "relayed"
		t.Run(mode+"/400 in flight at a kill", func(t *testing.T) { testReattachManyInFlight(t, relay) })
		t.Run(mode+"/8 KiB initialize at a stop", func(t *testing.T) { testReattachLargeInitialize(t, relay, 8<<10) })
		// More than a socket takes in one write.
		t.Run(mode+"/1 MiB initialize at a stop", func(t *testing.T) { testReattachLargeInitialize(t, relay, 1<<20) })
	}
}

func testReattachManyInFlight(t *testing.T, relay bool) {
	first := serve(t, noClientStarts(fakeConfig(t)))
	began := time.Now()
	s := connectAs(t, first, "fake", relay)
	s.initialize("busy")
	answers := readAnswers(s)
	const calls = 400
	killWithCallsInFlight(t, first, s, calls)
	second := serveHome(t, first.home)
	waitFor(t, "an answer to every call in flight at the kill", func() bool { return answers.count() == calls })
	for i := 1; i <= calls; i++ {
		if a, _ := answers.get(fmt.Sprint(i)); !strings.Contains(a.line, `"code":-32003`) || !strings.Contains(a.line, `"mayHaveExecuted":true`) {
			t.Fatalf("call %d: %s", i, a.line)
		}
	}
	s.send(`{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"echo","arguments":{"text":"same session"}}}`)
	waitFor(t, "the call after the kill", func() bool { _, ok := answers.get(`"after"`); return ok })
	if a, _ := answers.get(`"after"`); !strings.Contains(a.line, `"text":"same session"`) {
		t.Errorf("the call after the kill: %s", a.line)
	}
	checkResumed(t, second, "busy", began)
}

func testReattachLargeInitialize(t *testing.T, relay bool, size int) {
	first := serve(t, noClientStarts(fakeConfig(t)))
	began := time.Now()
	s := connectAs(t, first, "fake", relay)
	pad := strings.Repeat("p", size)
	s.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"experimental":{"pad":"` + pad + `"}},"clientInfo":{"name":"wordy","version":"1.0"}}}`)
	if r := s.recvID("0"); r.Error != nil {
		t.Fatalf("initialize: %s", r.raw)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`) // answered: the pool read everything before it
	if r := s.recvID("1"); r.Error != nil {
		t.Fatalf("tools/list: %s", r.raw)
	}
	answers := readAnswers(s)
	goAway(t, first, false)
	second := serveHome(t, first.home)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"same session"}}}`)
	waitFor(t, "the call after the stop", func() bool { _, ok := answers.get("2"); return ok })
	if a, _ := answers.get("2"); !strings.Contains(a.line, `"text":"same session"`) {
		t.Errorf("the call after the stop: %s", a.line)
	}
	checkResumed(t, second, "wordy", began)
}

// checkResumed checks that in has one session, the client's, resumed
// from an earlier pool with its initialize, and that it says the session
// began with that pool, after began, not when it reattached.
func checkResumed(t *testing.T, in *instance, client string, began time.Time) {
	t.Helper()
	var st struct {
		Sessions []struct {
			ClientName     string    `json:"clientName"`
			ReattachedFrom string    `json:"reattachedFrom"`
			ConnectedAt    time.Time `json:"connectedAt"`
			BeganAt        time.Time `json:"beganAt"`
		} `json:"sessions"`
	}
	out, err := in.run("status", "--json")
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || len(st.Sessions) != 1 ||
		st.Sessions[0].ClientName != client || !strings.HasPrefix(st.Sessions[0].ReattachedFrom, "run ") {
		t.Fatalf("status after the restart: %v %s", err, out)
	}
	if s := st.Sessions[0]; s.BeganAt.Before(began) || !s.BeganAt.Before(s.ConnectedAt) {
		t.Errorf("the resumed session began at %v, reattached at %v; want it begun after %v, before it reattached",
			s.BeganAt, s.ConnectedAt, began)
	}
}

// killWithCallsInFlight sends calls tools/calls on s that sleep a
// minute, waits for in's child to have every one, and kills in.
func killWithCallsInFlight(t *testing.T, in *instance, s *shim, calls int) {
	t.Helper()
	for i := 1; i <= calls; i++ {
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"sleep_echo","arguments":{"ms":60000,"text":"never"}}}`, i))
	}
	waitWrittenToChild(t, in, "every call to reach the child", calls)
	goAway(t, in, true)
}

// waitWrittenToChild waits until n of the requests in flight at in have
// been written to its child.
func waitWrittenToChild(t *testing.T, in *instance, what string, n int) {
	t.Helper()
	waitFor(t, what, func() bool {
		written := 0
		for _, r := range in.status().InFlight {
			if r.WrittenToChild {
				written++
			}
		}
		return written == n
	})
}
