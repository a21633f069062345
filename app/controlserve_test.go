package app

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// runControl runs an instance serving the fake server "a" and returns it
// once its control API answers.
func runControl(t *testing.T) *Instance {
	t.Helper()
	paths := sbHome(t)
	if err := os.WriteFile(paths.Config, fakeServers(t, "a"), 0o600); err != nil {
		t.Fatal(err)
	}
	inst, _ := startIn(t, Options{})
	runInstance(t, inst)
	eventually(t, 5*time.Second, "the control API listening", func() bool {
		c, err := net.Dial("unix", inst.Paths.ControlSocket())
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return inst
}

// readAnswer reads the answer to the request just written on conn,
// through br, within limit, and drops its body: a test asks of it its
// status and whether it keeps the connection. what names the request.
func readAnswer(t *testing.T, conn net.Conn, br *bufio.Reader, limit time.Duration, what string) *http.Response {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(limit))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// pingControl sends GET /v1/ping on conn and reads its answer.
func pingControl(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	fmt.Fprint(conn, "GET /v1/ping HTTP/1.1\r\nHost: switchboard\r\n\r\n")
	resp := readAnswer(t, conn, br, 5*time.Second, "ping")
	if resp.StatusCode != http.StatusNoContent || resp.Close {
		t.Fatalf("ping: %d, close %v; want 204 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
}

// TestControlAPIClosesIdleConnections: a keep-alive connection left idle
// on the control API (any process of the user may open one) is closed
// after controlIdleTimeout; it held a goroutine and a descriptor of the
// pool for ever, and a thousand of them left the pool socket none.
func TestControlAPIClosesIdleConnections(t *testing.T) {
	old := controlIdleTimeout
	controlIdleTimeout = 200 * time.Millisecond
	t.Cleanup(func() { controlIdleTimeout = old })
	inst := runControl(t)
	conn, err := net.Dial("unix", inst.Paths.ControlSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	pingControl(t, conn, br)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("the idle connection: %v, want it closed by the control API", err)
	}
}

// TestControlAPIBoundsItsConnections: connections to the control API that
// are held open (each with a request answered, so not idle for long) take
// at most controlMaxConns of the pool's descriptors; past it a connection
// waits unaccepted, and is served once one closes.
func TestControlAPIBoundsItsConnections(t *testing.T) {
	if _, err := os.ReadDir("/proc/self/fd"); err != nil {
		t.Skip("needs /proc/self/fd to count descriptors:", err)
	}
	old := controlMaxConns
	controlMaxConns = 8
	t.Cleanup(func() { controlMaxConns = old })
	inst := runControl(t)
	floodIsBounded(t, "the control API", controlMaxConns, func() (net.Conn, error) {
		return net.Dial("unix", inst.Paths.ControlSocket()) // the kernel queues it, accepted or not
	})
	conn, err := net.Dial("unix", inst.Paths.ControlSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pingControl(t, conn, bufio.NewReader(conn))
}
