package shim

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// A shim keeps what the pool's State lines say of its session, for the
// next pool: the last initialize (with its id) and log level, and the subscriptions
// the session holds (an unsubscribe lets one go), within their bounds: a
// URI longer than wire.MaxKeptURI, or one past wire.MaxKeptSubscriptions,
// is not kept.
func TestKeptFollowsTheStateLines(t *testing.T) {
	uri := func(s string) *string { return &s }
	var k kept
	for _, st := range []wire.State{
		{Initialize: []byte(`{"a":1}`), InitializeID: "0"},
		{LogLevel: "debug"},
		{Subscribed: uri("fake://a")},
		{Subscribed: uri("fake://b")},
		{Subscribed: uri("fake://" + strings.Repeat("x", wire.MaxKeptURI))},
		{Unsubscribed: uri("fake://a")},
		{LogLevel: "error"},
		{Initialize: []byte(`{"a":2}`), InitializeID: `"again"`},
	} {
		k.note(st)
	}
	r := k.resume("r1", "s1")
	if r.Run != "r1" || r.Session != "s1" || string(r.Initialize) != `{"a":2}` || r.InitializeID != `"again"` || r.LogLevel != "error" ||
		!slices.Equal(r.Subscriptions, []string{"fake://b"}) {
		t.Errorf("resume = %+v (initialize %s)", r, r.Initialize)
	}

	for i := range wire.MaxKeptSubscriptions + 1 {
		k.note(wire.State{Subscribed: uri(fmt.Sprint("fake://", i))})
	}
	if n := len(k.resume("r1", "s1").Subscriptions); n != wire.MaxKeptSubscriptions {
		t.Errorf("%d subscriptions kept, want at most %d", n, wire.MaxKeptSubscriptions)
	}
}
