package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/switchboard-mcp/switchboard/pool"
)

// serverAction is the body of POST /v1/restart and /v1/stop.
type serverAction struct {
	Server string `json:"server"`
}

// handleServerAction serves POST /v1/restart and /v1/stop: the same pool
// actions as the tray's per-server menu.
func (inst *Instance) handleServerAction(act func(string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req serverAction
		if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil || req.Server == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": `the body must be {"server": NAME}`})
			return
		}
		if err := act(req.Server); err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, pool.ErrUnknownServer) {
				code = http.StatusNotFound
			}
			writeJSON(w, code, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"server": req.Server})
	}
}

// RestartServer is `switchboard restart NAME`: the server's children are
// restarted gracefully, and a failed server gets a fresh restart budget
// without a config edit.
func RestartServer(ctx context.Context, name string) error {
	if err := postJSON(ctx, "/v1/restart", serverAction{Server: name}, &struct{}{}); err != nil {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	return nil
}

// StopServer is `switchboard stop NAME`: the server's children stop now;
// the next request starts them again.
func StopServer(ctx context.Context, name string) error {
	if err := postJSON(ctx, "/v1/stop", serverAction{Server: name}, &struct{}{}); err != nil {
		return fmt.Errorf("stop %s: %w", name, err)
	}
	return nil
}
