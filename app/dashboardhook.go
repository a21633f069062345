package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"time"
)

// needDisplay tells whether a window can open here at all (without one,
// fyne would abort the process).
func needDisplay() error {
	if runtime.GOOS != "linux" && runtime.GOOS != "freebsd" && runtime.GOOS != "openbsd" && runtime.GOOS != "netbsd" {
		return nil
	}
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return errors.New("no display (neither DISPLAY nor WAYLAND_DISPLAY is set)")
	}
	return nil
}

// setDashboard gives the instance its UI's ShowDashboard, for the control
// API's POST /v1/dashboard; nil takes it away. A headless instance has
// none.
func (inst *Instance) setDashboard(show func()) {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	inst.showDashboard = show
}

// handleDashboard is POST /v1/dashboard: a second `switchboard` launch
// asks this instance to show its dashboard.
func (inst *Instance) handleDashboard(w http.ResponseWriter, _ *http.Request) {
	inst.mu.Lock()
	show := inst.showDashboard
	inst.mu.Unlock()
	if show == nil {
		writeJSON(w, http.StatusConflict, map[string]string{"error": "this switchboard runs headless (`switchboard serve`): it has no dashboard"})
		return
	}
	show()
	writeJSON(w, http.StatusOK, map[string]bool{"shown": true})
}

// askForDashboard asks the running instance to show its dashboard.
func askForDashboard(ctx context.Context) error {
	c, err := controlClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://switchboard/v1/dashboard", nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("ask for the dashboard: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("ask for the dashboard: %s: %s", resp.Status, body)
	}
	return nil
}
