// Package mcptest holds the fake MCP server that tests run as a real child
// process (package fakemcp below it), and helpers to build it and to read
// what it saw. A real process, not an in-memory fake, is what exercises
// pipes, signals, process groups and crashes.
package mcptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// fakePackage is the import path of the fake server's main package.
const fakePackage = "github.com/switchboard-mcp/switchboard/pool/mcptest/fakemcp"

// Build compiles the fake MCP server into dir and returns the binary's
// path (dir/fakemcp, with .exe on Windows). Tests call it once, from
// TestMain. The fake is built without the race detector and without cgo,
// even when GOFLAGS asks for -race: it is a plain, fast peer, and the code
// under test is what the race detector should watch.
func Build(dir string) (string, error) {
	out := filepath.Join(dir, "fakemcp")
	if runtime.GOOS == "windows" {
		out += ".exe"
	}
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", out, fakePackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS="+withoutSanitizers(os.Getenv("GOFLAGS")))
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build fakemcp: %w\n%s", err, b)
	}
	return out, nil
}

// withoutSanitizers drops the GOFLAGS that need cgo.
func withoutSanitizers(goflags string) string {
	var keep []string
	for _, f := range strings.Fields(goflags) {
		switch f {
		case "-race", "-msan", "-asan":
		default:
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, " ")
}

// ReadLog parses the file the fake's -log flag names: every line the fake
// received, in order, one JSON object each. A last line without its
// newline is still being written and is left out. A line that is not a
// JSON object is an error: the child was sent something that is not a
// message. A missing file returns the error from os.ReadFile unwrapped, so
// os.IsNotExist works on it.
func ReadLog(path string) ([]map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := bytes.Split(b, []byte("\n"))
	lines = lines[:len(lines)-1] // after the last newline: empty or partial
	var out []map[string]any
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil || m == nil {
			return out, fmt.Errorf("%s:%d: not a JSON object: %.80q", path, i+1, line)
		}
		out = append(out, m)
	}
	return out, nil
}

// Attach opens a session for server on conn, a connection to the pool's
// socket, the way `switchboard connect` does, and completes its MCP
// handshake as client (2025-06-18, no capabilities): what tests that drive
// a pool as its clients do share this.
func Attach(conn net.Conn, server, client string) error {
	br := bufio.NewReader(conn)
	fmt.Fprintf(conn, "{\"server\":%q}\n", server)
	fmt.Fprintf(conn, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":%q,"version":"1"}}}`+"\n", client)
	for range 2 { // the welcome, then the initialize result
		line, err := br.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("open a session on %s: %w", server, err)
		}
		if bytes.Contains(line, []byte(`"error"`)) {
			return fmt.Errorf("open a session on %s: %s", server, line)
		}
	}
	if br.Buffered() > 0 {
		return errors.New("unexpected bytes after the handshake")
	}
	_, err := fmt.Fprintln(conn, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return err
}

// Serve serves p's sessions on a Unix socket in dir, as the app does,
// until the test ends (then p is closed), and returns the socket's path.
func Serve(tb testing.TB, p *pool.Pool, dir string) string {
	tb.Helper()
	sock := filepath.Join(dir, "pool.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		tb.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.ServeStdio(ln) }()
	tb.Cleanup(func() {
		p.Close()
		ln.Close()
		if err := <-served; err != nil {
			tb.Errorf("ServeStdio: %v", err)
		}
	})
	return sock
}

// Open dials the pool's socket and opens a session for server on it as
// client (Attach).
func Open(tb testing.TB, sock, server, client string) net.Conn {
	tb.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		tb.Fatal(err)
	}
	if err := Attach(conn, server, client); err != nil {
		tb.Fatal(err)
	}
	return conn
}
