// Package ui is Switchboard's tray menu and dashboard (fyne).
//
// The UI renders snapshots of the pool and acts through a Controller; it
// never holds a lock of the pool, never runs SQL and never blocks the UI
// goroutine on either. One event loop turns the pool's snapshot and event
// stream into rows (pure functions of a Snapshot and the time, in rows.go
// and menu.go) and hands them to the widgets through fyne.Do, at most a
// few times a second however busy the pool is.
//
// Package ui imports pool's plain data types only; package app adapts its
// Instance to Controller.
package ui

import (
	"context"
	"errors"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// Controller is everything the UI reads and does. app implements it over
// a running instance; tests use a small fake. Every method may be called
// from any goroutine; the UI calls the slow ones (Leaks, KillLeak, History,
// Timeline, Restart, RestartBackend, Stop, Cancel, KillChild) off the UI
// goroutine.
type Controller interface {
	// Subscribe returns the current snapshot and the events after it, as
	// pool.Pool.Subscribe does: the channel closes when ctx ends, when the
	// pool closes, or right after an EventLagged.
	Subscribe(ctx context.Context, buffer int) (pool.Snapshot, <-chan pool.Event)
	// Snapshot returns a fresh copy of the pool's live state.
	Snapshot() pool.Snapshot

	// Restart restarts every child of a server (the tray's submenu, the
	// overview's card); RestartBackend one child slot, by its
	// pool.BackendInfo.ID (a Backends row), leaving the server's other
	// children (other sessions', other roots partitions') running.
	Restart(server string) error
	RestartBackend(id uint64) error
	Stop(server string) error
	Cancel(poolID uint64) error
	KillChild(pid int) error

	// Leaks lists leaked backends; KillLeak kills one of them.
	Leaks(ctx context.Context) ([]Leak, error)
	KillLeak(ctx context.Context, pid int) error

	// History queries recorded requests, newest first; Timeline is what
	// happened to one of them (Run 0: the running pool's; an orphaned
	// answer, which has no PoolID, is found by its ID), with its
	// captured payloads; Window is everything recorded about a span of
	// time, for the waterfall after the fact. They return an error
	// wrapping ErrUnavailable when there is no history (switched off, or
	// the database could not be opened).
	History(ctx context.Context, f HistoryFilter) ([]HistoryRow, error)
	Timeline(ctx context.Context, r HistoryRow) (RequestDetail, error)
	Window(ctx context.Context, from, until time.Time) (HistoryWindow, error)
	// ConfigReloads lists the latest config reloads of this run, oldest
	// first (cheap: the loop asks for every frame).
	ConfigReloads() []ConfigReload

	// ConfigPath is the config file the instance loaded.
	ConfigPath() string
	// ConfigError is the error of the last config load (the last good
	// config stays in force), or nil.
	ConfigError() error
	// HistoryDropped counts events the history store dropped because its
	// queue was full.
	HistoryDropped() uint64
	// HistoryOn reports whether the history records requests now (cheap:
	// the loop asks it for every frame): when it does not, what the live
	// waterfall lets go is kept nowhere.
	HistoryOn() bool
	// HangThreshold is the age at which an in-flight request counts as
	// hung.
	HangThreshold() time.Duration
	// Quit shuts the instance down (every child included) and then the
	// app. It returns at once; the app exits when the pool has closed.
	Quit()
	// RestartApp replaces the running program with the installed binary
	// in place (`switchboard upgrade`): children keep running and client
	// sessions resume. It returns once the restart has begun.
	RestartApp() error

	// StartAtLogin reports whether the app starts at login (cheap: the
	// UI asks it for every frame); SetStartAtLogin turns that on or off.
	StartAtLogin() bool
	SetStartAtLogin(on bool) error
	// About is the build, one line: version, commit, date, Go.
	About() string
}

// ErrUnavailable means a back end (history, leak detection) is not there
// in this build or this run; the view says so instead of an error.
var ErrUnavailable = errors.New("not available")

// Leak is one leaked backend: a process Switchboard can prove is an MCP
// server nobody uses any more.
type Leak struct {
	PID       int
	Server    string
	Command   string
	StartedAt time.Time
	RSSBytes  uint64
	// Reason says why it counts as a leak, for the user.
	Reason string
	// Proven leaks are Switchboard's beyond doubt and may be killed; the
	// others are suspects (an orphan without a run marker, a process a
	// live child detached), only listed.
	Proven bool
}

// HistoryFilter narrows a history query. Zero fields match everything.
type HistoryFilter struct {
	Server  string
	Session string
	Status  string
	Method  string
	Since   time.Time
	Limit   int
}

// HistoryRow is one recorded request.
type HistoryRow struct {
	ID int64 // the store's row id
	// Run and PoolID name the request within the app start that saw it;
	// PoolID is 0 for an orphaned answer (a child's late answer to a
	// request that had ended), which only ID names.
	Run            int64
	PoolID         uint64
	Server         string
	Session        string
	Method         string
	Name           string
	Status         string
	ReceivedAt     time.Time
	Duration       time.Duration
	PID            int
	Error          string
	WrittenToChild bool
	// WrittenAt and AnsweredAt are zero when it did not happen.
	WrittenAt, AnsweredAt time.Time
}

// TimelineEntry is one step in a request's life (received, written to the
// child, answered...), or a fact about it when At is zero.
type TimelineEntry struct {
	At     time.Time
	What   string
	Detail string
}

// RequestDetail is what the UI shows of one request: its timeline and,
// when capture is on, the bounded, redacted prefixes of what was sent and
// answered.
type RequestDetail struct {
	Steps                           []TimelineEntry
	RequestPayload, ResponsePayload string
}

// ConfigReload is one reload of the config file, which the waterfall
// marks.
type ConfigReload struct {
	Seq     uint64 // grows by one with each reload of the run
	At      time.Time
	Changes string // what changed ("" when nothing did)
	Err     string // why the file was not applied; empty when it was
}

// HistoryWindow is what history.db holds about a span of time: the
// requests alive in it (including those of runs that crashed, as
// abandoned), the children that lived in it, the sessions and the runs.
type HistoryWindow struct {
	From, Until time.Time
	Requests    []HistoryRow
	// Truncated says more requests matched than were loaded.
	Truncated bool
	Children  []HistoryChild
	Sessions  []HistorySession
	Runs      []HistoryRun
	// Reloads are the config reloads in the span, oldest first (Seq is
	// not set).
	Reloads []ConfigReload
}

// HistoryChild is one recorded child process.
type HistoryChild struct {
	Run             int64
	Server, Session string
	PID             int
	Roots           []string
	Started, Exited time.Time // Exited zero: no exit recorded
	ExitCode        int
	ExitReason      string
}

// HistorySession is one recorded client session.
type HistorySession struct {
	Run                       int64
	ID, Server                string
	ClientName, ClientVersion string
	Transport                 string
	Connected, Disconnected   time.Time
}

// HistoryRun is one start of Switchboard. A run that crashed has no
// Ended; LastSeen is its last recorded moment, where it presumably died.
type HistoryRun struct {
	ID                       int64
	Started, Ended, LastSeen time.Time
	Crashed                  bool
	Version                  string
	PID                      int
}
