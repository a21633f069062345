package pool

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"
)

// A Resolver turns a configured command into the one a child is started
// as: `npx -y PACKAGE` into `node ENTRY`, so that the package manager's
// wrapper process does not stay alive beside every server. The pool calls
// it once per server configuration (when the server is added or its
// command changes, and on Restart), off the request path, and starts every
// child of that configuration with the result. An error means "run the
// command as written"; its text says why.
type Resolver interface {
	Resolve(ctx context.Context, cfg ServerConfig) (Resolution, error)
}

// Resolution is what a Resolver made of a command.
type Resolution struct {
	Command string
	Args    []string
	// Env is added to the child's environment after the server's own
	// env: what the wrapper would have set for the command (npx's PATH).
	Env map[string]string
	// Note says what was resolved, for people: "npx -y pkg@latest: pkg
	// 1.2.3, bin pkg".
	Note string
}

// ResolveTimeout bounds one resolution (a cold npm download included);
// past it the command runs as written.
var ResolveTimeout = 2 * time.Minute

// resolveJob is one resolution of a server's configuration. Its result
// is written before done is closed and never changes after.
type resolveJob struct {
	done chan struct{}
	res  Resolution // zero Command: run as written
	note string     // what happened, for status and history
}

var errStoppedWhileResolving = errors.New("stopped while resolving the command")

// resolvingReason is the state reason while a child waits for its
// resolution; resolvingAgainReason from a user's restart until the next
// child starts, while status still shows the command resolved before.
const (
	resolvingReason      = "resolving the package to start it without its package-manager wrapper (npm may be downloading it)"
	resolvingAgainReason = "resolving the package again for the restart (npm may be downloading another version); the resolved command shown is the one before"
)

// resolveJobLocked returns the server's resolution of cfg, starting it
// when there is none. Nil when cfg has no resolver. Callers hold s.mu.
func (s *server) resolveJobLocked(cfg ServerConfig) *resolveJob {
	if cfg.Resolver == nil {
		return nil
	}
	if s.resolution != nil {
		return s.resolution
	}
	j := &resolveJob{done: make(chan struct{})}
	s.resolution = j
	p := s.p
	p.wg.Go(func() {
		s.emitState()       // starting, with no child yet: its package is resolved
		defer s.emitState() // after done is closed: no longer, when no child waits for it
		defer close(j.done)
		ctx, cancel := context.WithTimeout(context.Background(), ResolveTimeout)
		defer cancel()
		p.wg.Go(func() { // ends with ctx: the job's end, or the pool closing
			select {
			case <-p.closing:
				cancel()
			case <-ctx.Done():
			}
		})
		res, err := cfg.Resolver.Resolve(ctx, cfg)
		switch {
		case err != nil && isClosed(p.closing):
			// Cut short by the pool's stop: nothing will start.
			j.note = "not resolved: " + errStoppedWhileResolving.Error()
			p.log.Info("server command not resolved: the pool is stopping", "server", cfg.Name)
			return
		case err != nil:
			j.note = "started as written: " + err.Error()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				j.note = fmt.Sprintf("started as written: resolving took longer than %s", ResolveTimeout)
			}
		case res.Command == "":
			j.note = "started as written"
		default:
			j.res, j.note = res, res.Note
		}
		p.log.Info("server command resolved", "server", cfg.Name, "note", j.note)
	})
	return j
}

// startResolvingLocked starts the resolution of the server's current
// configuration now, at config load, so that the first child need not
// wait for it. Callers hold s.mu.
func (s *server) startResolvingLocked() {
	if !s.cfg.Disabled {
		s.resolveJobLocked(s.cfg)
	}
}

// resolvingLocked reports whether the server's command is being resolved
// now. Callers hold s.mu.
func (s *server) resolvingLocked() bool {
	if s.resolution == nil {
		return false
	}
	select {
	case <-s.resolution.done:
		return false
	default:
		return true
	}
}

// emitState tells subscribers the server's state as info sums it up
// (Event.State), where no backend's change of state does: a resolution
// that begins or ends before any child, which shows as starting. A
// dashboard that takes a snapshot at each event shows it then.
func (s *server) emitState() {
	s.p.emit(&Event{Kind: EventBackendState, Server: s.name, State: s.info().State})
}

// forgetResolutionLocked drops the resolution so the next child start
// resolves again (a changed command, a user's restart: `@latest` is looked
// up again then, and only then). Callers hold s.mu.
func (s *server) forgetResolutionLocked() { s.resolution = nil }

// showResolvingAgain shows, from a user's restart until the next child
// starts, that the server's package is being looked up again.
func (b *backend) showResolvingAgain() {
	b.mu.Lock()
	b.reason = resolvingAgainReason
	b.mu.Unlock()
	b.emitState()
}

// launchConfig is cfg as the next child is started: resolved when cfg has
// a resolver, after waiting for it (the backend shows starting with the
// reason meanwhile). ok is false when the backend was stopped while
// waiting.
func (b *backend) launchConfig(cfg ServerConfig) (run ServerConfig, ok bool) {
	b.srv.mu.Lock()
	j := b.srv.resolveJobLocked(cfg)
	b.srv.mu.Unlock()
	if j == nil {
		return cfg, true
	}
	select {
	case <-j.done:
	default:
		b.mu.Lock()
		if b.resolveNote == "" {
			b.reason = resolvingReason
		} else {
			b.reason = resolvingAgainReason // a restart's: the first is done
		}
		b.mu.Unlock()
		b.emitState()
		select {
		case <-j.done:
		case <-b.stopReq:
			return cfg, false
		}
	}
	b.mu.Lock()
	b.reason = ""
	b.resolveNote = j.note
	b.resolved = nil
	if j.res.Command != "" {
		b.resolved = append([]string{j.res.Command}, j.res.Args...)
	}
	b.mu.Unlock()
	if j.res.Command != "" {
		cfg.Command, cfg.Args, cfg.Env = j.res.Command, j.res.Args, overlayEnv(cfg.Env, j.res.Env)
	}
	return cfg, true
}

// overlayEnv is env with over's values in place of its own, as a new map
// (env is the configuration's). On Windows a name replaces the same name
// in any case (Path and PATH are one variable).
func overlayEnv(env, over map[string]string) map[string]string {
	if len(over) == 0 {
		return env
	}
	out := make(map[string]string, len(env)+len(over))
	for k, v := range env {
		out[k] = v
	}
	for k, v := range over {
		if runtime.GOOS == "windows" {
			for old := range out {
				if strings.EqualFold(old, k) {
					delete(out, old)
				}
			}
		}
		out[k] = v
	}
	return out
}
