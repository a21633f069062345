package app

import (
	"context"
	"errors"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/store"
)

// The live views (status and the control API, hangs, the dashboard) show
// a request's name and a child's roots as the history keeps them:
// redacted, since a resource's URI or a root may carry a password or a
// token. The pool keeps them whole: a child is told its real roots.
//
// They show the error texts the history keeps (a request's error, why a
// server, a child or a session ended) and a child's stderr lines, which
// those errors quote, redacted as the history redacts its error texts
// (store.RedactText), though not cut: a child may print a token it was
// given, or log a request with its credentials.
//
// They show a child's command lines (configured, and as resolved) as the
// history keeps them too (store.RedactArgs): a server's args may hold a
// secret written literally, not through a ${VAR}.
//
// So are the config's errors (configError and configWatchError in
// status, why a reload was not applied on the dashboard), which the
// history keeps redacted too: a problem may quote the value it is about
// (an origin with a password, a ${...} holding a token). The log keeps
// them whole.

// redactSnapshot redacts snap's request names, roots, command lines and
// error texts in place. Its slices of servers, requests and backends are
// its own; the roots, command lines and stderr lines of a backend are the
// pool's, and are replaced, never written to.
func redactSnapshot(snap *pool.Snapshot) {
	for i := range snap.Servers {
		snap.Servers[i].Error = store.RedactText(snap.Servers[i].Error)
	}
	for i := range snap.InFlight {
		snap.InFlight[i].Name = store.RedactName(snap.InFlight[i].Name)
	}
	for i := range snap.Backends {
		b := &snap.Backends[i]
		b.Roots = redactRoots(b.Roots)
		b.LastError, b.ResolveNote = store.RedactText(b.LastError), store.RedactText(b.ResolveNote)
		b.StderrTail = redactLines(b.StderrTail)
		b.Command, b.ResolvedCommand = redactCommand(b.Command), redactCommand(b.ResolvedCommand)
	}
}

// redactCommand is a command line as the history keeps it
// (store.RedactArgs): a secret written literally in a server's args (its
// ${VAR}s stay unexpanded) is redacted. It is argv itself when empty.
func redactCommand(argv []string) []string {
	if len(argv) == 0 {
		return argv
	}
	return store.RedactArgs(argv)
}

// redactLines is lines redacted as the history redacts an error text
// quoting them; lines itself when empty (a tail is [], not null).
func redactLines(lines []string) []string {
	if len(lines) == 0 {
		return lines
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = store.RedactText(l)
	}
	return out
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

// redactEvents relays a subscription's events with their request names,
// roots and errors redacted. Its goroutine ends when events closes (the
// pool closes it when ctx ends, when the pool closes, and after an
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
			e.Err = store.RedactText(e.Err)
			e.Command, e.ResolvedCommand = redactCommand(e.Command), redactCommand(e.ResolvedCommand)
			select {
			case out <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// redactErr is err's text as the live views show it; err is not nil.
func redactErr(err error) string { return store.RedactText(err.Error()) }

// redactedError is err as the dashboard shows it: its text redacted; nil
// for nil.
func redactedError(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(redactErr(err))
}

// redactReloads redacts why each reload of rs, the instance's copy, was
// not applied, in place.
func redactReloads(rs []configReload) []configReload {
	for i := range rs {
		rs[i].Err = store.RedactText(rs[i].Err)
	}
	return rs
}
