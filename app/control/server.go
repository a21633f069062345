package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/pprof"
	"time"

	"github.com/switchboard-mcp/switchboard/app/leaks"
	"github.com/switchboard-mcp/switchboard/pool"
)

// Backend is what the control API controls: the running instance.
type Backend interface {
	Status() Status
	Leaks(ctx context.Context) ([]leaks.Leak, error)
	// Config is the config the pool runs, nil when none is loaded.
	Config() any
	Kill(ctx context.Context, req KillRequest) ([]KillResult, error)
	// ShowDashboard returns ErrHeadless without a dashboard.
	ShowDashboard() error
	// RotateHTTPToken replaces the HTTP front door's token; CurrentHTTPToken
	// is the one it takes now.
	RotateHTTPToken(ctx context.Context) (string, error)
	CurrentHTTPToken(ctx context.Context) (string, error)
	RestartServer(name string) error
	StopServer(name string) error
	// Upgrade accepts an upgrade to binary (an error that Is ErrConflict
	// when one cannot be taken now) and returns start, which begins it
	// once the answer is out.
	Upgrade(ctx context.Context, binary string) (acc UpgradeAccepted, start func(), err error)
	// MakeWay accepts to stop for a tray app that takes the pool's place
	// (an error that Is ErrConflict when this pool does not), says the
	// environment the app's pool is to run with, and returns stop, which
	// ends the pool once the answer is out.
	MakeWay(req MakeWayRequest) (acc MakeWayAccepted, stop func(), err error)
	// Quit accepts to stop as the tray's Quit does (an error that Is
	// ErrConflict when it cannot now) and returns stop, which ends the
	// pool once the answer is out.
	Quit() (acc QuitAccepted, stop func(), err error)
}

// Handler serves the control API for b.
func Handler(b Backend) http.Handler {
	mux := http.NewServeMux()
	// Every POST does something: it is begun only within its deadline.
	post := func(path string, h http.HandlerFunc) { mux.HandleFunc("POST "+path, action(h)) }
	mux.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, b.Status())
	})
	mux.HandleFunc("GET /v1/leaks", func(w http.ResponseWriter, r *http.Request) {
		ls, err := b.Leaks(r.Context())
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, ls)
	})
	mux.HandleFunc("GET /v1/config", func(w http.ResponseWriter, r *http.Request) {
		cfg := b.Config()
		if cfg == nil {
			http.Error(w, "no config loaded", http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, http.StatusOK, cfg)
	})
	post("/v1/kill", func(w http.ResponseWriter, r *http.Request) {
		// 200 with the results whether or not the kill was refused; the
		// CLI turns refusals into a non-zero exit.
		var req KillRequest
		dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || (req.PID > 0) == req.AllLeaked {
			writeError(w, http.StatusBadRequest, `the body must be {"pid": N} or {"allLeaked": true}`)
			return
		}
		res, err := b.Kill(r.Context(), req)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, KillResponse{Results: res})
	})
	post("/v1/dashboard", func(w http.ResponseWriter, r *http.Request) {
		if err := b.ShowDashboard(); err != nil {
			writeError(w, http.StatusConflict, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"shown": true})
	})
	mux.HandleFunc("GET /v1/http-token", tokenAction(b.CurrentHTTPToken))
	post("/v1/http-token/rotate", tokenAction(b.RotateHTTPToken))
	// A pool that seems stuck: what each of its goroutines is waiting on,
	// for a bug report (the format of a Go panic's trace).
	mux.HandleFunc("GET /v1/stacks", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = pprof.Lookup("goroutine").WriteTo(w, 2)
	})
	post("/v1/restart", serverAction(b.RestartServer))
	post("/v1/stop", serverAction(b.StopServer))
	post("/v1/upgrade", func(w http.ResponseWriter, r *http.Request) {
		var req UpgradeRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 8192)).Decode(&req); err != nil || req.Binary == "" {
			writeError(w, http.StatusBadRequest, `the body must be {"binary": ABSOLUTE_PATH}`)
			return
		}
		acc, start, err := b.Upgrade(r.Context(), req.Binary)
		acceptThen(w, acc, start, err, http.StatusBadRequest)
	})
	post("/v1/make-way", func(w http.ResponseWriter, r *http.Request) {
		var req MakeWayRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, `the body must be {"desktop": ["NAME=value", ...]}`)
			return
		}
		acc, stop, err := b.MakeWay(req)
		acceptThen(w, acc, stop, err, http.StatusInternalServerError)
	})
	post("/v1/quit", func(w http.ResponseWriter, r *http.Request) {
		acc, stop, err := b.Quit()
		acceptThen(w, acc, stop, err, http.StatusInternalServerError)
	})
	// Every answer says that actions here honour their deadline: a
	// client that gives up on one says so only to a pool that does.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(honoursHeader, "1")
		mux.ServeHTTP(w, r)
	})
}

// maxDeadlineAhead bounds how far ahead of the pool's clock an action's
// deadline may be: clients set one at most QuestionTimeout ahead. One
// further is not a deadline this pool's clock can judge (the clock was set
// back after it was sent, by how much and how long ago unknown): it is
// refused, and the client's next request carries one of the clock now.
const maxDeadlineAhead = time.Minute

// action guards a route that does something. A request with a deadline
// (deadlineHeader; clients from before it send none, and are served as
// before) is answered 102 Processing as soon as it is read, which tells
// its client to wait for the answer; then it is refused, not done, when
// its client has gone (the 102 could not be written) or its deadline has
// passed: a pool stopped (SIGSTOP) or stuck reads its requests when it
// runs again, after their clients gave up saying they were not done.
func action(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get(deadlineHeader)
		if v == "" {
			h(w, r)
			return
		}
		deadline, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("the %s header must be an RFC 3339 time: %q", deadlineHeader, v))
			return
		}
		w.WriteHeader(http.StatusProcessing)
		now := time.Now()
		switch {
		case r.Context().Err() != nil:
			return // no one to answer
		case now.After(deadline):
			writeError(w, http.StatusRequestTimeout, fmt.Sprintf("not done: the pool read this request at %s, after its deadline, %s",
				now.Format(time.RFC3339Nano), deadline.Format(time.RFC3339Nano)))
			return
		case deadline.Sub(now) > maxDeadlineAhead:
			writeError(w, http.StatusRequestTimeout, fmt.Sprintf("not done: its deadline, %s, is more than %s after the pool's clock, %s (was the clock changed?); ask again",
				deadline.Format(time.RFC3339Nano), maxDeadlineAhead, now.Format(time.RFC3339Nano)))
			return
		}
		h(w, r)
	}
}

// acceptThen answers an action that ends with the pool going away
// (upgrade, make-way, quit): a conflict is 409, another error the given
// status; an accepted one is answered first and then carried out, so the
// answer goes out before the instance stops its control server gracefully.
func acceptThen(w http.ResponseWriter, acc any, then func(), err error, errStatus int) {
	switch {
	case errors.Is(err, ErrConflict):
		writeError(w, http.StatusConflict, err.Error())
		return
	case err != nil:
		writeError(w, errStatus, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, acc)
	go then()
}

// serverAction serves POST /v1/restart and /v1/stop: the same pool
// actions as the tray's per-server menu.
func serverAction(act func(string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req ServerAction
		if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil || req.Server == "" {
			writeError(w, http.StatusBadRequest, `the body must be {"server": NAME}`)
			return
		}
		if err := act(req.Server); err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, pool.ErrUnknownServer) {
				code = http.StatusNotFound
			}
			writeError(w, code, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"server": req.Server})
	}
}

// tokenAction serves GET /v1/http-token and POST /v1/http-token/rotate.
func tokenAction(act func(context.Context) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, err := act(r.Context())
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"token": tok})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
