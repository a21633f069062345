package shim

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/switchboard-mcp/switchboard/app/home"
	"github.com/switchboard-mcp/switchboard/app/launch"
	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// A shim whose pool went away starts the next one (launch.Ensure) when
// clients may. A pool that will not start (a broken install, a home it
// cannot use) must not be started again and again while the client waits
// for ever: the shim backs off between attempts, and after
// maxFailedStarts it gives up. It then answers what its client waits for
// with a JSON-RPC error naming the cause, and exits saying why.

// maxFailedStarts is how many failed pool starts in a row a shim makes
// before it gives up on its session.
const maxFailedStarts = 3

// firstStartBackoff is the wait after the first failed start; it doubles
// after each.
const firstStartBackoff = time.Second

// startBackoff paces a shim's attempts to start a pool. The zero value
// allows an attempt at once.
type startBackoff struct {
	failures int
	next     time.Time // no attempt before
}

// ready reports whether an attempt may be made now.
func (b *startBackoff) ready() bool { return !time.Now().Before(b.next) }

// failed counts a failed attempt and reports whether that was the last.
func (b *startBackoff) failed() (giveUp bool) {
	b.failures++
	b.next = time.Now().Add(firstStartBackoff << (b.failures - 1))
	return b.failures >= maxFailedStarts
}

// succeeded starts the count again.
func (b *startBackoff) succeeded() { *b = startBackoff{} }

// A resuming shim whose hello a pool does not answer (it closed the
// connection: it went away as the hello came, or could not take it; or
// it did not answer in time) tries the next after the same growing wait,
// and after maxFailedStarts such pools in a row gives up as above: a pool
// that is gone at once, over and over, must not be tried again at full
// speed for ever while the client waits.

// helloBackoff paces a resuming shim's hellos. The zero value allows one
// at once.
type helloBackoff struct {
	startBackoff
	busy busyRetry
}

// next judges err, a hello that did not take the session: nil to try the
// next pool once ready, or the error the session ends with. A pool that
// is stopping is passed after reattachPoll (the next one takes the
// session); one at its limit of local connections is tried again for a
// while (busyRetry); one that refused the session ends it
// (refusedResume: w is its Welcome, wasOn the run the session was on).
func (h *helloBackoff) next(err error, w wire.Welcome, wasOn string) error {
	var gone *poolGoneError
	var refused refusedError
	var busy busyError
	switch {
	case errors.As(err, &gone) && gone.stopping:
		h.startBackoff.next = time.Now().Add(reattachPoll)
		return nil
	case errors.As(err, &busy):
		wait, err := h.busy.next(err)
		if err != nil {
			return err
		}
		h.startBackoff.next = time.Now().Add(wait)
		return nil
	case errors.As(err, &refused):
		return refusedResume(err, w.Run, wasOn)
	case h.failed():
		return fmt.Errorf("%d pools in a row did not answer the session's hello; the last: %w", maxFailedStarts, err)
	}
	return nil
}

// A pool at its limit of local connections (Options.MaxLocalSessions)
// refuses a connection before it reads the hello (Welcome.Busy): it did
// not refuse the session, and takes it once a connection closed. That
// comes soon after a burst (every shim resuming at once after a restart),
// or not while a local process holds the connections. A shim, resuming a
// session or opening a new one, tries again after a short wait that grows
// (with jitter: the shims refused together do not come back together),
// and after busyWait of refusals gives up as when no pool answers: its
// client is not left waiting for ever.

// busyWait bounds how long a shim tries pools that refuse it as busy:
// as long as it waits for a pool that does not come (userStartWait).
const busyWait = userStartWait

// maxBusyPause is the longest wait between hellos to a busy pool.
const maxBusyPause = time.Second

// busyRetry paces a shim's hellos to pools that refuse them as busy. The
// zero value has seen no refusal.
type busyRetry struct {
	since time.Time // the first refusal
	tries int
}

// next judges err, a busy refusal: the wait before the next hello, or,
// once refusals have come for busyWait, the error the session ends with.
func (b *busyRetry) next(err error) (time.Duration, error) {
	now := time.Now()
	if b.since.IsZero() {
		b.since = now
	}
	if now.Sub(b.since) >= busyWait {
		return 0, fmt.Errorf("the pool stayed at its limit of local connections for %s: %w", busyWait, err)
	}
	pause := min(reattachPoll<<min(b.tries, 4), maxBusyPause)
	b.tries++
	return pause/2 + rand.N(pause/2), nil
}

// refusedResume is the error a session ends with when a pool refused to
// take it back (its server was removed from the config, say): it says a
// pool restarted only when the one that refused is another run than the
// one the session was on (Welcome.Run). The same pool ended the session
// with no word the shim read; a pool that names no run (history off)
// might be either.
func refusedResume(err error, refusedBy, wasOn string) error {
	switch {
	case refusedBy != "" && refusedBy != wasOn:
		return fmt.Errorf("the restarted pool did not take the session back: %w", err)
	case refusedBy != "":
		return fmt.Errorf("the pool ended the session and did not take it back: %w", err)
	}
	return fmt.Errorf("the pool did not take the session back: %w", err)
}

// A shim that needs a pool where clients may not start one
// (autostart.fromClients is false) waits for the user to start it, but
// not for ever: its client waits for answers (what the dead pool owed,
// what it sent since). After userStartWait with no pool the shim gives
// up as above, and exits saying how to start one.

// userStartWait bounds that wait: as long as a client waits for a pool
// that is starting (launch's runningWait), time enough for the user to
// restart the tray.
const userStartWait = 10 * time.Second

// userStart times a shim's wait for a pool it may not start. The zero
// value has not started waiting.
type userStart struct {
	until time.Time
}

// over starts the wait on its first call, and reports whether it is over.
func (w *userStart) over() bool {
	if w.until.IsZero() {
		w.until = time.Now().Add(userStartWait)
	}
	return time.Now().After(w.until)
}

// noPoolCame is the cause a shim gives up with when no pool came in
// userStartWait: disabled says why it did not start one.
func noPoolCame(paths home.Paths, disabled error) error {
	return fmt.Errorf("%w (no pool socket at %s; none came within %s) and %v in %s: start it with `switchboard` (tray) or `switchboard serve`, or turn autostart.fromClients on",
		ErrNoPool, paths.PoolSocket(), userStartWait, disabled, launch.ConfigOf(paths))
}

// answerLost appends an error answer for each request a pool took and
// never answered: it may have run where it had been written to a child.
// The code is the one a pool answers an owed request with (-32003).
func answerLost(dst []byte, lost []wire.Lost, server string, cause error) []byte {
	for _, l := range lost {
		e := &jsonrpc.Error{Code: jsonrpc.CodeBackendDied,
			Message: fmt.Sprintf("Switchboard stopped while this request was in flight on server %q, and no pool could take the session back: %v; it was not re-sent because it may have executed", server, cause)}
		if !l.Written {
			e.Message = fmt.Sprintf("Switchboard stopped before this request reached server %q, and no pool could take the session back: %v; it did not run", server, cause)
		}
		e.Data = map[string]any{"retryable": true, "mayHaveExecuted": l.Written, "server": server}
		dst = append(jsonrpc.AppendErrorResponse(dst, []byte(l.ID), e), '\n')
	}
	return dst
}

// answerInput appends an error answer for each request in input, the
// client's bytes no pool has handled (a line cut short at its end is
// no request yet). answered lists ids answered already, which are not
// answered twice. A pool's refusal of the session (no such server, the
// server disabled) does not clear by sending the request again.
func answerInput(dst, input []byte, server string, cause error, answered map[string]bool) []byte {
	var refused refusedError
	retryable := !errors.As(cause, &refused)
	for len(input) > 0 {
		i := bytes.IndexByte(input, '\n')
		if i < 0 {
			break
		}
		line := input[:i]
		input = input[i+1:]
		m, err := jsonrpc.Parse(line)
		if err != nil || m.Kind != jsonrpc.KindRequest || answered[string(m.IDBytes())] {
			continue
		}
		answered[string(m.IDBytes())] = true
		e := &jsonrpc.Error{Code: jsonrpc.CodeBackendUnavailable,
			Message: fmt.Sprintf("Switchboard cannot serve this session of server %q: %v; the request did not run", server, cause),
			Data:    map[string]any{"retryable": retryable, "mayHaveExecuted": false, "server": server}}
		dst = append(jsonrpc.AppendErrorResponse(dst, m.IDBytes(), e), '\n')
	}
	return dst
}

// lostIDs is the set of ids in lost.
func lostIDs(lost []wire.Lost) map[string]bool {
	ids := make(map[string]bool, len(lost))
	for _, l := range lost {
		ids[l.ID] = true
	}
	return ids
}
