//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A session that survives its pool keeps what its client set up in it:
// its log level (logging/setLevel) and its resource subscriptions
// (resources/subscribe, less what it unsubscribed from). After a planned
// stop (SIGTERM), a crash (SIGKILL) or an upgrade in place (which carries
// the child over, its subscriptions let go as the sessions were handed
// back), attached or relayed, the client's
// first calls in the next pool get the log message its level admits (and
// not one below it) and the resources/updated they got before, and the
// next child is subscribed to what the session holds, not to what it let
// go of. On the first edition the resume carried the client's initialize
// alone: its calls went on, and no log message or update came again.
func TestSessionKeepsItsLogLevelAndSubscriptions(t *testing.T) {
	for _, how := range []string{"stopped", "killed", "upgraded"} {
		for _, mode := range []string{"attached", "relayed"} {
			t.Run(how+"/"+mode, func(t *testing.T) { testSessionKeepsItsState(t, mode == "relayed", how) })
		}
	}
}

func testSessionKeepsItsState(t *testing.T, relay bool, how string) {
	childLog := filepath.Join(t.TempDir(), "child.log")                // every line each child read
	first := serve(t, noClientStarts(fakeConfig(t, "-log", childLog))) // the test starts the next pool
	s := connectAs(t, first, "fake", relay)
	s.initialize("keeps-its-state")
	for _, req := range []string{
		`"method":"logging/setLevel","params":{"level":"warning"}`,
		`"method":"resources/subscribe","params":{"uri":"fake://counter"}`,
		`"method":"resources/subscribe","params":{"uri":"fake://let-go"}`,
		`"method":"resources/unsubscribe","params":{"uri":"fake://let-go"}`,
	} {
		s.send(`{"jsonrpc":"2.0","id":"setup",` + req + `}`)
		if r := s.recvID(`"setup"`); r.Error != nil {
			t.Fatalf("%s: %s", req, r.raw)
		}
	}
	checkLogAndUpdate(t, s, "before")
	before, err := os.ReadFile(childLog)
	if err != nil {
		t.Fatal(err)
	}
	if how == "upgraded" {
		if out, err := first.run("upgrade", "--binary", sbBin, "--json"); err != nil || !strings.Contains(out, `"carryChildren": true`) {
			t.Fatalf("upgrade: %v %s", err, out)
		}
	} else {
		goAway(t, first, how == "killed")
		serveHome(t, first.home)
	}
	checkLogAndUpdate(t, s, "after")
	all, err := os.ReadFile(childLog)
	if err != nil {
		t.Fatal(err)
	}
	next := string(all[len(before):]) // what the next pool's child (or the carried one, since) read
	if subs := subscribes(next); !strings.Contains(subs, `"fake://counter"`) || strings.Contains(subs, `"fake://let-go"`) {
		t.Errorf("the next child was subscribed to:\n%s\nwant fake://counter, and not fake://let-go, which the client unsubscribed from", subs)
	}
}

// checkLogAndUpdate has the fake log a debug and an error message and
// announce an update of fake://counter, and checks that the client, at
// level warning and subscribed to it, got the error message and the
// update, each before the answer to the call that made it, and not the
// debug message.
func checkLogAndUpdate(t *testing.T, s *shim, when string) {
	t.Helper()
	for _, c := range []struct {
		tool, args, note string
		want             bool
	}{
		{"log", `{"level":"debug","data":"below the level"}`, "notifications/message", false},
		{"log", `{"level":"error","data":"at or above the level"}`, "notifications/message", true},
		{"notify", `{"kind":"updated"}`, "notifications/resources/updated", true},
	} {
		id := fmt.Sprintf(`"%s-%s"`, c.tool, when)
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, c.tool, c.args))
		if notes := notesUntil(t, s, id); notes[c.note] != c.want {
			t.Errorf("%s the pool went away, the client's call %s %s brought %s: %v, want %v", when, c.tool, c.args, c.note, notes[c.note], c.want)
		}
	}
}

// notesUntil reads the client's output up to the answer to id, and lists
// the notifications that came before it.
func notesUntil(t *testing.T, s *shim, id string) map[string]bool {
	t.Helper()
	notes := map[string]bool{}
	for {
		line, err := s.out.ReadString('\n')
		if err != nil {
			t.Fatalf("read from connect: %v (stderr: %s)", err, s.errb.String())
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("connect wrote invalid JSON: %q", line)
		}
		switch {
		case m.Method != "" && m.ID == nil:
			notes[m.Method] = true
		case m.Method == "" && string(m.ID) == id:
			if m.Error != nil {
				t.Errorf("the call %s failed: %s", id, line)
			}
			return notes
		}
	}
}

// subscribes lists the subscribe lines of a child's log.
func subscribes(log string) string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, "resources/subscribe") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
