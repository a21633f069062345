package app

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

func pidSelf() int { return os.Getpid() }

// ErrNoPool means no Switchboard is running for this SWITCHBOARD_HOME.
var ErrNoPool = errors.New("switchboard is not running")

// Connect is `switchboard connect NAME`: it relays in to the pool's server
// name and the pool's answers to out, until in ends (then it returns nil at
// once) or the pool closes the connection. It is the process a client
// starts per session, so it does nothing else.
func Connect(name string, in io.Reader, out io.Writer) error {
	paths, err := ResolvePaths()
	if err != nil {
		return err
	}
	conn, err := net.DialTimeout("unix", paths.PoolSocket(), 5*time.Second)
	if err != nil {
		return fmt.Errorf("%w (no pool socket at %s): start it with `switchboard` or `switchboard serve`", ErrNoPool, paths.PoolSocket())
	}
	defer conn.Close()
	hello, _ := json.Marshal(pool.Hello{Server: name, PID: os.Getpid()})
	if _, err := conn.Write(append(hello, '\n')); err != nil {
		return fmt.Errorf("talk to the pool: %w", err)
	}
	br := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := br.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("the pool did not answer: %w", err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	var w pool.Welcome
	if err := json.Unmarshal(line, &w); err != nil {
		return fmt.Errorf("the pool answered something unexpected: %q", line)
	}
	if w.Error != "" {
		return errors.New(w.Error)
	}
	fromPool := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, br)
		fromPool <- err
	}()
	fromClient := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, in)
		fromClient <- err
	}()
	select {
	case err := <-fromClient:
		// The client closed our stdin: it is done with the session.
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
		return nil
	case err := <-fromPool:
		if err != nil {
			return fmt.Errorf("pool connection: %w", err)
		}
		return errors.New("the pool closed the connection (it shut down or evicted this session)")
	}
}

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
			var d net.Dialer
			c, err := d.DialContext(ctx, "unix", sock)
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
