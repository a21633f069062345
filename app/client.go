package app

import (
	"context"
	"io"
	"os"

	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/shim"
)

func pidSelf() int { return os.Getpid() }

// ErrNoPool means no Switchboard is running for this SWITCHBOARD_HOME.
var ErrNoPool = control.ErrNoPool

// Connect is `switchboard connect NAME` run in-process (package shim).
func Connect(name string, in io.Reader, out io.Writer) error { return shim.Connect(name, in, out) }

// Control is a client of this SWITCHBOARD_HOME's running pool.
func Control() (*control.Client, error) {
	paths, err := ResolvePaths()
	if err != nil {
		return nil, err
	}
	return control.NewClient(paths.ControlSocket()), nil
}

// FetchStatus asks the running pool for its status.
func FetchStatus(ctx context.Context) (control.Status, error) {
	c, err := Control()
	if err != nil {
		return control.Status{}, err
	}
	st, err := c.Status(ctx)
	st.Running = err == nil // a pool from before the field answers without it
	return st, err
}
