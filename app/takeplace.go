package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/flock"
	"github.com/switchboard-mcp/switchboard/app/launch"
)

// place is what takePlace took: the instance lock, the start lock that
// the caller lets go once its pool answers, and the environment the pool
// that made way ran with, its desktop variables this app's (nil from a
// pool too old to tell it).
type place struct {
	lock, start *flock.Lock
	env         []string
}

// errShown is takePlace's answer when the running pool showed its
// dashboard: another launch took the headless pool's place first.
var errShown = errors.New("the running pool showed its dashboard")

// takePlace asks the headless pool that a client started to make way for
// this tray app (tray) or `switchboard serve`, and takes the instance
// lock as the pool lets it go: the pool this program runs takes its
// place, and the pool's sessions resume with it. It holds the start lock,
// so that no client starts another pool meanwhile (package launch). Once
// it has the start lock the tray app asks the running pool for its
// dashboard again: a launch that got there first runs it now (errShown).
// An error that Is control.ErrConflict is the pool's refusal.
func takePlace(ctx context.Context, tray bool) (p place, err error) {
	paths, err := ResolvePaths()
	if err != nil {
		return p, err
	}
	if p.start, err = flock.Wait(paths.StartLockFile(), time.Now().Add(launch.StartTimeout)); err != nil {
		return p, fmt.Errorf("wait for a client starting the pool: %w", err)
	}
	if tray {
		if err := askForDashboard(ctx); err == nil {
			p.start.Unlock()
			return place{}, errShown
		}
	}
	acc, err := control.NewClient(paths.ControlSocket()).MakeWay(ctx, control.MakeWayRequest{Desktop: desktopOf(os.Environ())})
	if err != nil {
		p.start.Unlock()
		return place{}, err
	}
	if p.lock, err = flock.Wait(paths.LockFile(), time.Now().Add(handoverLockWait)); err != nil {
		p.start.Unlock()
		return place{}, fmt.Errorf("it was asked to make way, and did not stop within %s: %w", handoverLockWait, err)
	}
	_ = p.lock.WritePID()
	p.env = acc.Env
	return p, nil
}

// awaitControl waits until this home's control socket answers, at most
// for within.
func awaitControl(ctx context.Context, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := FetchStatus(qctx)
		cancel()
		if err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond) // as flock.Wait polls
	}
}
