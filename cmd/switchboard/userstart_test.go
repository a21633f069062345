//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// userStartWait is how long a connect that needs a pool, where clients
// may not start one, waits for the user to start it (README, *Off
// switch*).
const userStartWait = 10 * time.Second

// With autostart.fromClients off, a connect whose pool went away (stopped,
// or killed with a call in flight) while its client calls waits for the
// user to start a pool. When none comes within userStartWait it answers
// the call the dead pool owed with the at-most-once error (-32003) and the
// call sent since with an error saying how to start a pool, and exits 3
// with one line on stderr. When one comes in time, the session goes on
// there as with fromClients on. Before, such a connect waited for ever:
// no answer, no exit.
func TestReattachWithoutAutostart(t *testing.T) {
	t.Parallel() // its subtests wait beside the other tests that wait
	for _, how := range []string{"stopped", "killed"} {
		for _, mode := range []string{"attached", "relayed"} {
			for _, back := range []string{"no pool comes", "the pool comes back"} {
				t.Run(how+"/"+mode+"/"+back, func(t *testing.T) {
					t.Parallel() // each waits userStartWait for nothing
					testReattachWithoutAutostart(t, how == "killed", mode == "relayed", back == "the pool comes back")
				})
			}
		}
	}
}

func testReattachWithoutAutostart(t *testing.T, kill, relay, back bool) {
	first := serve(t, noClientStarts(fakeConfig(t)))
	s := connectAs(t, first, "fake", relay)
	s.initialize("waits-for-the-user")
	answers := readAnswers(s)
	if kill {
		s.send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"sleep_echo","arguments":{"ms":60000,"text":"never"}}}`)
		waitFor(t, "the slow call to reach the child", func() bool {
			for _, r := range first.status().InFlight {
				if r.Name == "sleep_echo" && r.WrittenToChild {
					return true
				}
			}
			return false
		})
	}
	gone := time.Now()
	goAway(t, first, kill)
	s.send(`{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`)
	answered := func() bool {
		_, a := answers.get(`"after"`)
		_, b := answers.get(`"slow"`)
		return a && (b || !kill)
	}

	if back {
		serveHome(t, first.home)
		waitFor(t, "the calls' answers from the next pool", answered)
		if a, _ := answers.get(`"after"`); !strings.Contains(a.line, `"text":"after"`) {
			t.Errorf("the call sent while no pool ran: %s", a.line)
		}
		if a, ok := answers.get(`"slow"`); ok && (!strings.Contains(a.line, `"code":-32003`) || !strings.Contains(a.line, `"mayHaveExecuted":true`)) {
			t.Errorf("the call in flight at the kill: %s", a.line)
		}
		select {
		case err := <-s.done:
			t.Fatalf("connect exited: %v (stderr: %s)", err, s.errb.String())
		default:
		}
		return
	}

	waitForWithin(t, userStartWait+30*time.Second, "the calls' answers", answered)
	after, _ := answers.get(`"after"`)
	if d := after.at.Sub(gone); d < userStartWait {
		t.Errorf("answered %s after the pool went away: it did not wait %s for the user to start one", d, userStartWait)
	}
	if !strings.Contains(after.line, `"error":{"code":-320`) || !strings.Contains(after.line, "autostart.fromClients") {
		t.Errorf("the call sent while no pool ran: %s, want an error saying how to start a pool", after.line)
	}
	// An attached connect knows no pool read the call sent after the kill;
	// a relaying one may have relayed it to the dying pool.
	if !relay && strings.Contains(after.line, `"mayHaveExecuted":true`) {
		t.Errorf("the call no pool took: %s", after.line)
	}
	if kill {
		slow, _ := answers.get(`"slow"`)
		var a struct {
			Error struct {
				Code int `json:"code"`
				Data struct {
					Retryable       bool   `json:"retryable"`
					MayHaveExecuted bool   `json:"mayHaveExecuted"`
					Server          string `json:"server"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(slow.line), &a); err != nil || a.Error.Code != -32003 ||
			!a.Error.Data.Retryable || !a.Error.Data.MayHaveExecuted || a.Error.Data.Server != "fake" {
			t.Errorf("the call in flight at the kill: %s", slow.line)
		}
	}
	select {
	case err := <-s.done:
		s.done <- err
		var ee *exec.ExitError
		stderr := s.errb.String()
		if !errors.As(err, &ee) || ee.ExitCode() != 3 || strings.Count(stderr, "\n") != 1 ||
			!strings.Contains(stderr, "switchboard is not running") || !strings.Contains(stderr, "autostart.fromClients") {
			t.Errorf("connect exit: %v, stderr %q; want exit 3 with one line saying how to start a pool", err, stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("connect did not exit after answering")
	}
	t.Logf("stderr: %s", strings.TrimSpace(s.errb.String()))
}

// With autostart.fromClients off, an idle session (nothing in flight)
// whose pool crashed waits for the user as long as it takes, as after a
// planned stop: a pool started again after more than userStartWait takes
// it, and answers its next call. Before, the connect gave up
// userStartWait after the crash and exited 3: the client's server was
// gone.
func TestIdleSessionOutwaitsCrashWithoutAutostart(t *testing.T) {
	t.Parallel() // its subtests wait beside the other tests that wait
	for _, mode := range []string{"attached", "relayed"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel() // each waits longer than userStartWait
			first := serve(t, noClientStarts(fakeConfig(t)))
			s := connectAs(t, first, "fake", mode == "relayed")
			s.initialize("idle")
			answers := readAnswers(s)
			settled(t, s, answers)
			goAway(t, first, true)
			select {
			case err := <-s.done:
				s.done <- err
				t.Fatalf("connect exited (%v) while its idle client waited for nothing (stderr: %s)", err, s.errb.String())
			case <-time.After(userStartWait + 2*time.Second): // measured: it outlives the wait
			}
			serveHome(t, first.home)
			s.send(`{"jsonrpc":"2.0","id":"later","method":"tools/call","params":{"name":"echo","arguments":{"text":"later"}}}`)
			waitFor(t, "the call's answer from the next pool", func() bool { _, ok := answers.get(`"later"`); return ok })
			if a, _ := answers.get(`"later"`); !strings.Contains(a.line, `"text":"later"`) {
				t.Errorf("the call after the restart: %s", a.line)
			}
		})
	}
}

// With autostart.fromClients off, a connect whose pool went away (stopped
// or killed) and whose client, owed nothing, closes its input exits 0 at
// once: the session is over. Before, an attached connect took the closed
// input for a client that needs a pool, waited userStartWait and exited 3.
func TestCleanEOFWithoutPool(t *testing.T) {
	for _, how := range []string{"stopped", "killed"} {
		for _, mode := range []string{"attached", "relayed"} {
			t.Run(how+"/"+mode, func(t *testing.T) {
				t.Parallel()
				first := serve(t, noClientStarts(fakeConfig(t)))
				s := connectAs(t, first, "fake", mode == "relayed")
				s.initialize("finishing")
				settled(t, s, readAnswers(s))
				goAway(t, first, how == "killed")
				s.stdin.Close()
				select {
				case err := <-s.done:
					s.done <- err
					if err != nil {
						t.Fatalf("connect exit: %v (stderr: %s), want 0", err, s.errb.String())
					}
				case <-time.After(3 * time.Second):
					t.Fatalf("connect did not exit within 3 s of its client closing its input (stderr: %s)", s.errb.String())
				}
			})
		}
	}
}

// With autostart.fromClients off, a relaying connect whose client
// half-closes its input while a call is owed (before or after the pool is
// killed) waits for the answer as a half-close does: no pool comes, so
// after userStartWait it answers the call with the at-most-once error
// (-32003) and exits 3. Before, it exited 0 at once, the call unanswered.
func TestRelayedHalfCloseAnswersOwed(t *testing.T) {
	t.Parallel() // its subtests wait beside the other tests that wait
	for _, order := range []string{"half-closed then killed", "killed then half-closed"} {
		t.Run(order, func(t *testing.T) {
			t.Parallel()
			first := serve(t, noClientStarts(fakeConfig(t)))
			s := connectAs(t, first, "fake", true)
			s.initialize("half-closing")
			answers := readAnswers(s)
			s.send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"sleep_echo","arguments":{"ms":60000,"text":"never"}}}`)
			waitFor(t, "the slow call to reach the child", func() bool {
				for _, r := range first.status().InFlight {
					if r.Name == "sleep_echo" && r.WrittenToChild {
						return true
					}
				}
				return false
			})
			if order == "half-closed then killed" {
				s.stdin.Close()
				goAway(t, first, true)
			} else {
				goAway(t, first, true)
				s.stdin.Close()
			}
			select {
			case <-answers.done: // all it wrote is read
			case <-time.After(userStartWait + 30*time.Second):
				t.Fatal("connect did not end its output")
			}
			err := <-s.done
			s.done <- err
			slow, ok := answers.get(`"slow"`)
			if !ok || !strings.Contains(slow.line, `"code":-32003`) || !strings.Contains(slow.line, `"mayHaveExecuted":true`) {
				t.Fatalf("connect exited (%v, stderr %q); the call owed: %q, want the at-most-once error", err, s.errb.String(), slow.line)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 3 {
				t.Errorf("connect exit: %v (stderr %q), want 3", err, s.errb.String())
			}
		})
	}
}

// settled waits until the pool owes the session nothing: a ping's answer,
// read after the initialize's, is written only once the initialize's
// ledger slot is released. Without it a kill in the microseconds between
// that answer's write and its release leaves the initialize owed, and the
// shim waits for a pool to answer it.
func settled(t *testing.T, s *shim, answers *answerLog) {
	t.Helper()
	s.send(`{"jsonrpc":"2.0","id":"settled","method":"ping"}`)
	waitFor(t, "the ping's answer", func() bool { _, ok := answers.get(`"settled"`); return ok })
}
