//go:build unix

package shim

import (
	"io"
	"strings"
	"testing"
)

// A relaying shim whose resume a pool refuses (the session's server was
// removed from the config) says a pool restarted only when the pool that
// refused is another run than the one the session was on: the same pool
// ended the session. It said "the restarted pool did not take the
// session back" whatever the pool, though nothing had restarted.
func TestRefusedResumeSaysWhetherThePoolRestarted(t *testing.T) {
	const refusal = `"error":"no such server \"fake\" (it was removed from the config; configured: other)"`
	for _, tc := range []struct {
		name, welcome string
		restarted     bool
	}{
		{"same pool", `{` + refusal + `,"run":"r1"}`, false},
		{"restarted pool", `{` + refusal + `,"run":"r2"}`, true},
		{"pool of no run", `{` + refusal + `}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paths, hellos := poolsThatWelcome(t, tc.welcome)
			r := &relayed{paths: paths, name: "fake", run: "r1", session: "s1", kept: kept{init: []byte(`{}`)}, out: io.Discard,
				fromClient: make(chan []byte), clientErr: make(chan error, 1), count: newUnanswered()}
			_, _, err := r.reconnect(false)
			<-hellos
			if err == nil || !strings.Contains(err.Error(), "removed from the config") {
				t.Fatalf("reconnect: %v; want the refusal, saying the server was removed", err)
			}
			if said := strings.Contains(err.Error(), "restarted"); said != tc.restarted {
				t.Errorf("reconnect: %v; want it to say a pool restarted: %v", err, tc.restarted)
			}
		})
	}
}
