// Package control is the running pool's control API: the messages, the
// server that answers them on the 0600 control socket, and the client the
// CLI uses. Whoever can open the socket is the user; nothing here listens
// anywhere else.
//
//	GET  /v1/status             Status
//	GET  /v1/leaks              []leaks.Leak
//	GET  /v1/config             the config the pool runs
//	POST /v1/kill               KillRequest -> KillResponse
//	POST /v1/dashboard          show the dashboard (409 when headless)
//	GET  /v1/http-token         {"token": T}
//	POST /v1/http-token/rotate  {"token": T}
//	POST /v1/restart, /v1/stop  ServerAction
//	POST /v1/upgrade            UpgradeRequest -> UpgradeAccepted
//	POST /v1/make-way           MakeWayRequest -> MakeWayAccepted: stop for the tray app that asks (409 unless a client started this headless pool)
//	POST /v1/quit               QuitAccepted: stop as the tray's Quit does (409 while an upgrade is under way)
//	GET  /v1/stacks             every goroutine's stack, as text
//	GET  /v1/ping               204, at once: a client asks it before an action
//
// Every POST is an action. The client sends with it the time by which
// the pool must begin it (the Switchboard-Deadline header, RFC 3339); the
// pool answers such a request 102 Processing as it reads it, and refuses
// it (408, not done) when that time has passed, is further ahead of its
// clock than a client sets, or the client has gone. A client with no
// answer by then has given up, saying nothing was done: a pool stopped
// or stuck reads the request only when it runs again. Every answer
// carries Switchboard-Honours-Deadline. A pool from before deadlines
// (still running after a newer CLI is installed, until it upgrades) sets
// none and does an action whenever it reads it: the client asks GET
// /v1/ping before each action to learn which it talks to, sends nothing
// to a pool that does not answer that, and giving up on an old pool says
// it may still do the action.
package control

import (
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/app/leaks"
	"github.com/switchboard-mcp/switchboard/app/shim"
	"github.com/switchboard-mcp/switchboard/app/version"
	"github.com/switchboard-mcp/switchboard/pool"
)

// ErrNoPool means no Switchboard is running for this SWITCHBOARD_HOME.
var ErrNoPool = shim.ErrNoPool

// ErrConflict marks a request the pool cannot take in its present state
// (an upgrade while another is under way): 409, not 400.
var ErrConflict = errors.New("conflict")

// ErrUnresponsive means the pool's control socket took a question and
// gave no answer in time: the pool runs but may be stuck.
var ErrUnresponsive = errors.New("the running Switchboard did not answer: it may be stuck (see \"Troubleshooting a hang\" in the README)")

// ErrHeadless is ShowDashboard's answer from `switchboard serve`.
var ErrHeadless = errors.New("this switchboard runs headless (`switchboard serve`): it has no dashboard")

// Status is the JSON of `switchboard status --json` and of GET /v1/status.
type Status struct {
	// Running is true in a running pool's status; `status --json` prints
	// a status with it false, and no pool's fields, when none runs.
	Running bool `json:"running"`
	// Unresponsive, set, is why `status --json` has no more to say of a
	// pool that holds this home and did not answer in time (stopped, or
	// stuck): a script then reads running true and this, rather than
	// nothing at all.
	Unresponsive *string      `json:"unresponsive,omitempty"`
	Version      string       `json:"version"`
	Build        version.Info `json:"build"`
	PID          int          `json:"pid"`
	Config       string       `json:"config"`
	ConfigError  *string      `json:"configError"`
	// ConfigWatchError, set, says why the config file is not watched:
	// edits to it wait until the pool can watch it again (it tries every
	// 30 s) or restarts.
	ConfigWatchError *string            `json:"configWatchError,omitempty"`
	Servers          []pool.ServerInfo  `json:"servers"`
	Sessions         []pool.SessionInfo `json:"sessions"`
	Backends         []pool.BackendInfo `json:"backends"`
	InFlight         []pool.RequestInfo `json:"inFlight"`
	Counters         pool.Counters      `json:"counters"`
	History          HistoryStatus      `json:"history"`
	HTTP             *HTTPStatus        `json:"http,omitempty"` // the HTTP front door, when it listens
	// HTTPListen is the address --http gave, which the pool uses in place
	// of the config's http.listen; "" when none did.
	HTTPListen string `json:"httpListen,omitempty"`
	// RestartNeeded lists the settings of the running config (as
	// "http.listen", "history.captureBytes") that differ from those the
	// pool started with and take effect when it restarts.
	RestartNeeded []string `json:"restartNeeded,omitempty"`
	// Upgrade is set in a program that upgraded an earlier one in place.
	Upgrade *UpgradeInfo `json:"upgrade,omitempty"`
	// Goroutines counts the program's goroutines: flat while sessions sit
	// idle (one each), so growth without load is a leak to report.
	Goroutines int `json:"goroutines"`
}

// HistoryStatus is the "history" object of Status: whether requests are
// being recorded, why not, how many events were lost, and how many
// requests in flight the crash journal lists (what a crash now would
// leave to be recorded as abandoned).
type HistoryStatus struct {
	Enabled   bool    `json:"enabled"`
	Path      string  `json:"path,omitempty"`
	Error     *string `json:"error"`
	Dropped   uint64  `json:"dropped"`
	Journaled int     `json:"journaled"`
	// JournaledWritten of Journaled were written to a child.
	JournaledWritten int `json:"journaledWritten"`
	// JournalError, when set, says why requests are recorded without the
	// crash journal (no room on the disk for it, say; or its file was
	// deleted, replaced or truncated while the pool runs, until the pool
	// has made it again): a crash then loses the requests in flight that
	// had no row yet.
	JournalError *string `json:"journalError,omitempty"`
	// Repaired, when set, says that the database was found damaged this
	// run and its indexes were rebuilt, after which requests are recorded
	// again.
	Repaired *string `json:"repaired,omitempty"`
}

// HTTPStatus is the "http" object of Status.
type HTTPStatus struct {
	// Listen is the bound address (with the real port when the config
	// asked for port 0).
	Listen string `json:"listen"`
	// URL is what an HTTP MCP client is given, with NAME for the server.
	URL string `json:"url"`
}

// UpgradeInfo, in the status of an upgraded program, says what it took
// over.
type UpgradeInfo struct {
	From version.Info `json:"from"`
	At   time.Time    `json:"at"`
	// CarriedChildren are the PIDs of the children the earlier program
	// handed over and this one adopted: they did not restart.
	CarriedChildren []int `json:"carriedChildren"`
}

// KillRequest is the body of POST /v1/kill: one PID, or every proven leak.
type KillRequest struct {
	PID       int  `json:"pid,omitempty"`
	AllLeaked bool `json:"allLeaked,omitempty"`
}

// KillResult is what happened to one PID.
type KillResult struct {
	PID    int    `json:"pid"`
	Server string `json:"server,omitempty"`
	Killed bool   `json:"killed"`
	// Refused means the PID is not a provable MCP backend; Error says why.
	Refused bool   `json:"refused,omitempty"`
	Error   string `json:"error,omitempty"`
	// Skipped marks a suspect that --all-leaked left alone (an orphan
	// without a run marker, a process a live child detached); Note says
	// why. It is not a failure.
	Skipped bool `json:"skipped,omitempty"`
	// NotRunning marks a PID that no process has any more (a leak that
	// exited since it was listed): nothing to kill, not a failure.
	NotRunning bool `json:"notRunning,omitempty"`
	// Note adds context to a kill, e.g. that a pool child will restart.
	Note string `json:"note,omitempty"`
}

// Err is the result as an error (nil when killed). A refusal Is
// leaks.ErrRefused.
func (r KillResult) Err() error {
	switch {
	case r.Killed, r.Skipped, r.NotRunning:
		return nil
	case r.Refused:
		return refusedError(r.Error)
	case r.Error != "":
		return errors.New(r.Error)
	}
	return fmt.Errorf("PID %d was not killed", r.PID)
}

// refusedError carries a refusal's message across the control API.
type refusedError string

func (e refusedError) Error() string        { return string(e) }
func (e refusedError) Is(target error) bool { return target == leaks.ErrRefused }

// KillResponse is the answer to POST /v1/kill.
type KillResponse struct {
	Results []KillResult `json:"results"`
}

// ServerAction is the body of POST /v1/restart and /v1/stop.
type ServerAction struct {
	Server string `json:"server"`
}

// MakeWayRequest is the body of POST /v1/make-way: the tray app's own
// values ("NAME=value") of the desktop session's variables, which it
// keeps when it runs the pool in the stopping pool's place.
type MakeWayRequest struct {
	Desktop []string `json:"desktop"`
}

// MakeWayAccepted is its answer: the environment the tray app's pool is
// to run with, the stopping pool's with the app's desktop variables, so
// that ${VAR} in the config and the children see what they saw. It may
// hold secrets: it goes over the control socket only, and is never
// logged. Empty from a pool too old to tell it.
type MakeWayAccepted struct {
	Env []string `json:"env,omitempty"`
}

// UpgradeRequest is the body of POST /v1/upgrade: `switchboard upgrade`.
type UpgradeRequest struct {
	Binary string `json:"binary"`
}

// UpgradeAccepted is its answer: the upgrade has begun.
type UpgradeAccepted struct {
	PID           int          `json:"pid"`
	Binary        string       `json:"binary"`
	From          version.Info `json:"from"`
	To            version.Info `json:"to"`
	CarryChildren bool         `json:"carryChildren"`
	// Why says why the children will restart, when they will.
	Why string `json:"why,omitempty"`
}

// QuitAccepted is the answer to POST /v1/quit: the pool is stopping, and
// its process, PID, exits once it has.
type QuitAccepted struct {
	PID int `json:"pid"`
}
