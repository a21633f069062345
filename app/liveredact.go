package app

import (
	"context"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/store"
)

// The live views (status and the control API, hangs, the dashboard) show
// a request's name and a child's roots as the history keeps them:
// redacted, since a resource's URI or a root may carry a password or a
// token. The pool keeps them whole: a child is told its real roots.

// redactSnapshot redacts snap's request names and roots in place. Its
// slices of requests and backends are its own; the roots of a backend
// are the pool's, and are replaced, never written to.
func redactSnapshot(snap *pool.Snapshot) {
	for i := range snap.InFlight {
		snap.InFlight[i].Name = store.RedactName(snap.InFlight[i].Name)
	}
	for i := range snap.Backends {
		snap.Backends[i].Roots = redactRoots(snap.Backends[i].Roots)
	}
}

// redactRoots is roots as the history keeps each; nil for none.
func redactRoots(roots []string) []string {
	if len(roots) == 0 {
		return roots
	}
	out := make([]string, len(roots))
	for i, r := range roots {
		out[i] = store.RedactRoot(r)
	}
	return out
}

// redactEvents relays a subscription's events with their request names
// and roots redacted. Its goroutine ends when events closes (the pool
// closes it when ctx ends, when the pool closes, and after an
// EventLagged), or when ctx ends; the channel it returns closes then.
func redactEvents(ctx context.Context, events <-chan pool.Event) <-chan pool.Event {
	out := make(chan pool.Event, cap(events))
	go func() {
		defer close(out)
		for e := range events {
			if e.Name != "" {
				e.Name = store.RedactName(e.Name)
			}
			e.Roots = redactRoots(e.Roots)
			select {
			case out <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
