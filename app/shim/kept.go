package shim

import (
	"maps"
	"slices"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// kept is what a shim keeps of its session, from the pool's State lines,
// to resume the session with another pool: the client's initialize, and
// what the client set up in the session since. It outlives every pool
// the session is on, so a crash loses only a change the pool made in its
// last instant.
type kept struct {
	began  time.Time           // when the first pool welcomed the session
	init   []byte              // the client's initialize params
	initID string              // that initialize's id, as JSON
	level  string              // the level its logging/setLevel set
	subs   map[string]struct{} // the resources it holds a subscription to, wire.MaxKeptSubscriptions at most
}

// note applies a State line.
func (k *kept) note(st wire.State) {
	if st.Initialize != nil {
		k.init, k.initID = st.Initialize, st.InitializeID
	}
	if st.LogLevel != "" {
		k.level = st.LogLevel
	}
	if u := st.Unsubscribed; u != nil {
		delete(k.subs, *u)
	}
	if u := st.Subscribed; u != nil && len(*u) <= wire.MaxKeptURI && len(k.subs) < wire.MaxKeptSubscriptions {
		if k.subs == nil {
			k.subs = map[string]struct{}{}
		}
		k.subs[*u] = struct{}{}
	}
}

// resume is the Resume of the session run, session, with what was kept.
func (k *kept) resume(run, session string) *wire.Resume {
	return &wire.Resume{Run: run, Session: session, Initialize: k.init, InitializeID: k.initID, LogLevel: k.level,
		Subscriptions: slices.Sorted(maps.Keys(k.subs)), Began: k.began}
}
