package app

import (
	"errors"
	"fmt"
	"net/http"
	"runtime"

	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/launch"
	"github.com/switchboard-mcp/switchboard/app/version"
	"github.com/switchboard-mcp/switchboard/pool"
)

// Status builds the status from a fresh snapshot.
func (inst *Instance) Status() control.Status {
	snap := inst.snapshot()
	st := control.Status{Running: true, Version: version.Version, Build: version.Get(), PID: pidSelf(), Config: inst.configPath, Servers: snap.Servers,
		Sessions: snap.Sessions, Backends: snap.Backends, InFlight: snap.InFlight, Counters: snap.Counters,
		History: inst.history.status(), Goroutines: runtime.NumGoroutine()}
	// One drop counter: the events the history could not record.
	st.Counters.DroppedEvents = st.History.Dropped
	if err := inst.ConfigError(); err != nil {
		msg := redactErr(err)
		st.ConfigError = &msg
	}
	if err := inst.watchError(); err != nil {
		msg := redactErr(err)
		st.ConfigWatchError = &msg
	}
	st.Upgrade = inst.upgraded
	inst.mu.Lock()
	st.RestartNeeded = inst.restartNeeded
	st.HTTPListen = inst.httpListen
	if inst.httpAddr != "" {
		st.HTTP = &control.HTTPStatus{Listen: inst.httpAddr, URL: "http://" + inst.httpAddr + "/mcp/NAME"}
	}
	inst.mu.Unlock()
	return st
}

// controlHandler is the control API, served on the 0600 control socket
// only: whoever can open the socket is the user.
func (inst *Instance) controlHandler() http.Handler { return control.Handler(inst) }

// Config is the config the pool runs (control.Backend).
func (inst *Instance) Config() any {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if inst.cfg == nil {
		return nil
	}
	return inst.cfg
}

// RestartServer restarts a server's children (control.Backend).
func (inst *Instance) RestartServer(name string) error {
	return inst.withConfigProblem(inst.Pool.Restart(name))
}

// StopServer stops a server's children (control.Backend).
func (inst *Instance) StopServer(name string) error {
	return inst.withConfigProblem(inst.Pool.Stop(name))
}

// withConfigProblem adds the config error to a refusal for a server the
// pool does not run, as a session's refusal has it: the server may be in
// a file that does not load.
func (inst *Instance) withConfigProblem(err error) error {
	if errors.Is(err, pool.ErrUnknownServer) {
		if cause := inst.ConfigError(); cause != nil {
			return fmt.Errorf("%w; the config file does not load, and the pool runs without what it lists until it is fixed: %s", err, redactErr(cause))
		}
	}
	return err
}

// UnresponsiveStatus is what `status --json` prints when the pool that
// holds the home did not answer (why): Running true, Unresponsive saying
// so, and empty lists and zeros, as NoPoolStatus has, so that a script
// reads it as it reads a pool's status.
func UnresponsiveStatus(why error) control.Status {
	msg := why.Error()
	return control.Status{Running: true, Unresponsive: &msg,
		Servers: []pool.ServerInfo{}, Sessions: []pool.SessionInfo{}, Backends: []pool.BackendInfo{}, InFlight: []pool.RequestInfo{}}
}

// NoPoolStatus is what `status --json` prints when no pool runs for
// paths: Running false, the config a pool would read, and empty lists
// and zeros (no pool's version, pid or counters), so that a script reads
// it as it reads a pool's status.
func NoPoolStatus(paths Paths) control.Status {
	return control.Status{Config: launch.ConfigOf(paths),
		Servers: []pool.ServerInfo{}, Sessions: []pool.SessionInfo{}, Backends: []pool.BackendInfo{}, InFlight: []pool.RequestInfo{}}
}
