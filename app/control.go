package app

import (
	"encoding/json"
	"net/http"
	"runtime"

	"github.com/switchboard-mcp/switchboard/app/version"
	"github.com/switchboard-mcp/switchboard/pool"
)

// Status is the JSON of `switchboard status --json` and of the control
// API's GET /v1/status.
type Status struct {
	Version     string             `json:"version"`
	Build       version.Info       `json:"build"`
	PID         int                `json:"pid"`
	Config      string             `json:"config"`
	ConfigError *string            `json:"configError"`
	Servers     []pool.ServerInfo  `json:"servers"`
	Sessions    []pool.SessionInfo `json:"sessions"`
	Backends    []pool.BackendInfo `json:"backends"`
	InFlight    []pool.RequestInfo `json:"inFlight"`
	Counters    pool.Counters      `json:"counters"`
	History     HistoryStatus      `json:"history"`
	HTTP        *HTTPStatus        `json:"http,omitempty"` // the HTTP front door, when it listens
	// Upgrade is set in a program that upgraded an earlier one in place.
	Upgrade *UpgradeInfo `json:"upgrade,omitempty"`
	// Goroutines counts the program's goroutines: flat while sessions sit
	// idle (one each), so growth without load is a leak to report.
	Goroutines int `json:"goroutines"`
}

// Status builds the status from a fresh snapshot.
func (inst *Instance) Status() Status {
	snap := inst.Pool.Snapshot()
	st := Status{Version: version.Version, Build: version.Get(), PID: pidSelf(), Config: inst.configPath, Servers: snap.Servers,
		Sessions: snap.Sessions, Backends: snap.Backends, InFlight: snap.InFlight, Counters: snap.Counters,
		History: inst.history.status(), Goroutines: runtime.NumGoroutine()}
	// One drop counter: the events the history could not record.
	st.Counters.DroppedEvents = st.History.Dropped
	if err := inst.ConfigError(); err != nil {
		msg := err.Error()
		st.ConfigError = &msg
	}
	st.Upgrade = inst.upgraded
	inst.mu.Lock()
	if inst.httpAddr != "" {
		st.HTTP = &HTTPStatus{Listen: inst.httpAddr, URL: "http://" + inst.httpAddr + "/mcp/NAME"}
	}
	inst.mu.Unlock()
	return st
}

// controlHandler is the control API, served on the 0600 control socket
// only: whoever can open the socket is the user.
func (inst *Instance) controlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, inst.Status())
	})
	mux.HandleFunc("GET /v1/leaks", inst.handleLeaks)
	mux.HandleFunc("GET /v1/config", inst.serveConfig)
	mux.HandleFunc("POST /v1/kill", inst.handleKill)
	mux.HandleFunc("POST /v1/dashboard", inst.handleDashboard)
	mux.HandleFunc("POST /v1/http-token/rotate", inst.handleRotateToken)
	mux.HandleFunc("POST /v1/restart", inst.handleServerAction(inst.Pool.Restart))
	mux.HandleFunc("POST /v1/stop", inst.handleServerAction(inst.Pool.Stop))
	mux.HandleFunc("POST /v1/upgrade", inst.handleUpgrade)
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
