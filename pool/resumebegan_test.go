//go:build unix

package pool_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// TestResumedSessionKeepsWhenItBegan: a shim resuming a session says when
// its client's session began, with the first pool; the pool shows it
// (beganAt) beside when the session reattached (connectedAt), so that
// status and the dashboard tell how long the client has had its session.
// A shim that does not say (an older connect), or says a time to come,
// leaves it unset.
func TestResumedSessionKeepsWhenItBegan(t *testing.T) {
	tp := newTestPool(t, nil, fake("fake"))
	began := time.Now().Add(-3 * time.Hour).Round(0)
	for _, tc := range []struct {
		name  string
		began time.Time
		want  time.Time
	}{
		{"said", began, began},
		{"not said", time.Time{}, time.Time{}},
		{"to come", time.Now().Add(time.Hour), time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hello, _ := json.Marshal(pool.Hello{Server: "fake", Attach: true,
				Resume: &wire.Resume{Run: "earlier", Session: "s1", Began: tc.began}})
			before := time.Now()
			a := tp.attachHello(t, hello, nil, nil)
			defer a.close()
			var got *pool.SessionInfo
			for _, s := range tp.Snapshot().Sessions {
				if !s.ConnectedAt.Before(before) {
					got = &s
				}
			}
			if got == nil || got.ReattachedFrom == "" {
				t.Fatalf("no reattached session in %+v", tp.Snapshot().Sessions)
			}
			if !got.BeganAt.Equal(tc.want) {
				t.Errorf("beganAt %v, want %v (connectedAt %v)", got.BeganAt, tc.want, got.ConnectedAt)
			}
		})
	}
}
