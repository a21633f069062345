package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/switchboard-mcp/switchboard/app/localsock"
	"github.com/switchboard-mcp/switchboard/app/shim"
)

func pidSelf() int { return os.Getpid() }

// ErrNoPool means no Switchboard is running for this SWITCHBOARD_HOME.
var ErrNoPool = shim.ErrNoPool

// Connect is `switchboard connect NAME` run in-process (package shim).
func Connect(name string, in io.Reader, out io.Writer) error { return shim.Connect(name, in, out) }

// controlClient talks to the running pool's control API.
func controlClient() (*http.Client, error) {
	paths, err := ResolvePaths()
	if err != nil {
		return nil, err
	}
	sock := paths.ControlSocket()
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := localsock.Dial(ctx, sock)
			if err != nil {
				return nil, fmt.Errorf("%w (no control socket at %s)", ErrNoPool, sock)
			}
			return c, nil
		}},
	}, nil
}

// getJSON fetches a control API path into v.
func getJSON(ctx context.Context, path string, v any) error {
	c, err := controlClient()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://switchboard"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) && errors.Is(err, ErrNoPool) {
			return ErrNoPool
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// FetchStatus asks the running pool for its status.
func FetchStatus(ctx context.Context) (Status, error) {
	var st Status
	err := getJSON(ctx, "/v1/status", &st)
	return st, err
}
