package config

import (
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// Defaults of the settings the pool and the history read at start, as the
// README documents them: pool.Options' and store.Options' own defaults,
// which apply to the zero values the app passes for settings left out.
const (
	defaultEvictAfter          = 30 * time.Second
	defaultMaxInFlight         = 8192 // an eighth of a child's 65,536-request queue
	defaultMaxInFlightMiB      = 128
	defaultMaxSubscriptions    = 4096
	defaultMaxChildren         = 32
	defaultHistoryRetainDays   = 14
	defaultHistoryMaxRows      = 1_000_000
	defaultHistoryCaptureBytes = 4096
)

// Effective is f as the pool runs it, for comparing two configs: each
// setting written out at its default value reads as left out, and each
// duration in one spelling ("1m" and "60s" are one value). "Values are
// compared as they run": "idleTimeout": "10m" is no change from none.
// Servers' entries are compared so by Diff (asRun).
func (f *File) Effective() *File {
	if f == nil {
		return nil
	}
	g := *f
	g.HangThreshold = durationOr(g.HangThreshold, DefaultHangThreshold)
	g.EvictSlowClientsAfter = durationOr(g.EvictSlowClientsAfter, defaultEvictAfter)
	g.MaxInFlightPerSession = intOr(g.MaxInFlightPerSession, defaultMaxInFlight)
	g.MaxInFlightMiBPerSession = intOr(g.MaxInFlightMiBPerSession, defaultMaxInFlightMiB)
	g.MaxSubscriptionsPerSession = intOr(g.MaxSubscriptionsPerSession, defaultMaxSubscriptions)
	g.MaxChildrenPerServer = intOr(g.MaxChildrenPerServer, defaultMaxChildren)
	g.History = g.History.Effective()
	g.Autostart = g.Autostart.effective()
	return &g
}

// Effective is h with each setting written out at its default value read
// as left out, for comparing what the history runs with.
func (h History) Effective() History {
	h.RetainDays = intOr(h.RetainDays, defaultHistoryRetainDays)
	h.MaxRows = intOr(h.MaxRows, defaultHistoryMaxRows)
	h.CaptureBytes = intOr(h.CaptureBytes, defaultHistoryCaptureBytes)
	return h
}

// effective is a with each setting written out at its default value read
// as left out.
func (a Autostart) effective() Autostart {
	if a.FromClients != nil && *a.FromClients {
		a.FromClients = nil
	}
	if a.FollowInstall != nil && *a.FollowInstall {
		a.FollowInstall = nil
	}
	a.IdleExit = durationOr(a.IdleExit, DefaultIdleExit)
	return a
}

// effectiveServer is s with each pool-side setting written out at its
// default value read as left out, and durations in one spelling.
func effectiveServer(s Server) Server {
	s.IdleTimeout = durationOr(s.IdleTimeout, pool.DefaultIdleTimeout)
	s.RequestTimeout = durationOr(s.RequestTimeout, pool.DefaultRequestTimeout)
	if s.Restart != nil {
		rs := *s.Restart
		rs.MaxRestarts = intOr(rs.MaxRestarts, pool.DefaultMaxRestarts)
		rs.Window = durationOr(rs.Window, pool.DefaultRestartWindow)
		rs.MinBackoff = durationOr(rs.MinBackoff, pool.DefaultMinBackoff)
		rs.MaxBackoff = durationOr(rs.MaxBackoff, pool.DefaultMaxBackoff)
		s.Restart = &rs
	}
	return s
}

// durationOr is a duration setting as compared: "" when it is def, in
// one spelling otherwise (sameDuration).
func durationOr(v string, def time.Duration) string {
	if d, err := time.ParseDuration(v); err == nil && d == def {
		return ""
	}
	return sameDuration(v)
}

// intOr is a number setting as compared: 0 when it is def.
func intOr(v, def int) int {
	if v == def {
		return 0
	}
	return v
}
