//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A pool killed while its client waits on a call, and no pool that can
// take the session back: the pool cannot start (its token file is a
// directory), or starts with a config it cannot load and so without the
// client's server. The connect tries a few times, backing off, then
// answers the call in flight and the one sent meanwhile with a JSON-RPC
// error that names the cause, and exits non-zero saying why. On the first
// edition it started pools every 100 ms for as long as the client waited
// (a reviewer counted 136 in 15 s), and the client got no answer, ever.
func TestConnectGivesUpWhenNoPoolTakesTheSession(t *testing.T) {
	t.Parallel() // each case waits out the connect's backoff in a home of its own
	for _, tc := range []struct {
		name      string
		breakHome func(home string) error
		cause     string // in the answers and on stderr
	}{
		{"the pool cannot start", func(home string) error {
			tok := filepath.Join(home, "http-token")
			if err := os.Remove(tok); err != nil {
				return err
			}
			return os.Mkdir(tok, 0o700)
		}, "HTTP token"},
		{"the config is broken", func(home string) error {
			return os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"mcpServers": {"fake": {"command": `), 0o600)
		}, `no such server \"fake\"`},
	} {
		for _, mode := range []string{"attached", "relayed"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				home := coldHome(t, `{"idleExit": "1m"}`)
				env := clientEnv(home)
				if mode == "relayed" {
					env = append(env, "SWITCHBOARD_NO_ATTACH=1")
				}
				s := startShim(t, "fake", env)
				s.initialize("gives-up")
				answers := readAnswers(s)
				s.send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"sleep_echo","arguments":{"ms":60000,"text":"never"}}}`)
				waitFor(t, "the slow call to reach the child", func() bool {
					out, _, code := sbIn(home, "status", "--json")
					var st statusJSON
					if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
						return false
					}
					return len(st.InFlight) == 1 && st.InFlight[0].WrittenToChild
				})
				if err := tc.breakHome(home); err != nil {
					t.Fatal(err)
				}
				killTheOnlyPool(t, home)
				s.send(`{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`)

				waitForWithin(t, time.Minute, "answers to both calls", func() bool {
					_, a := answers.get(`"slow"`)
					_, b := answers.get(`"after"`)
					return a && b
				})
				slow, _ := answers.get(`"slow"`)
				after, _ := answers.get(`"after"`)
				for _, a := range []answer{slow, after} {
					if !strings.Contains(a.line, `"error":{"code":-320`) || !strings.Contains(a.line, tc.cause) {
						t.Errorf("answer %s, want a JSON-RPC error naming %q", a.line, tc.cause)
					}
				}
				if !strings.Contains(slow.line, `"mayHaveExecuted":true`) {
					t.Errorf("the call in flight at the kill: %s", slow.line)
				}
				// An attached connect knows no pool read the call sent after
				// the kill; a relaying one may have relayed it to the dying
				// pool, and cannot tell.
				if mode == "attached" && strings.Contains(after.line, `"mayHaveExecuted":true`) {
					t.Errorf("the call no pool took: %s", after.line)
				}
				select {
				case err := <-s.done:
					s.done <- err
					var ee *exec.ExitError
					if !errors.As(err, &ee) || !strings.Contains(s.errb.String(), strings.ReplaceAll(tc.cause, `\"`, `"`)) {
						t.Errorf("connect exit: %v, stderr %q", err, s.errb.String())
					}
				case <-time.After(20 * time.Second):
					t.Fatal("connect did not exit after answering")
				}
				log, _ := os.ReadFile(filepath.Join(home, "logs", "pool.log"))
				if n := strings.Count(string(log), "started by a client"); n > 5 {
					t.Errorf("%d pools started, want a few at most", n)
				}
				t.Logf("stderr: %s", strings.TrimSpace(s.errb.String()))
			})
		}
	}
}
