// Package shim is `switchboard connect NAME`: the process an MCP client
// starts for each session, relaying its stdin and stdout to the pool over
// the pool's Unix socket. A client may run dozens of these at once, so the
// package imports little (no GUI, no SQL) and the relay copies bytes
// without parsing them: framing and routing are the pool's job.
package shim

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/switchboard-mcp/switchboard/app/home"
	"github.com/switchboard-mcp/switchboard/app/launch"
	"github.com/switchboard-mcp/switchboard/app/localsock"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// ErrNoPool means no Switchboard is running for this SWITCHBOARD_HOME and
// none could be started.
var ErrNoPool = errors.New("switchboard is not running")

// bufSize is the relay's buffer each way: one read or write moves a
// whole burst of messages.
const bufSize = 64 << 10

// Connect relays in to the pool's server name and the pool's answers to
// out, until in ends (then it returns nil at once) or the pool closes the
// connection. When in and out are this process's stdin and stdout and
// are pipes or sockets, it hands them to the pool instead (SCM_RIGHTS)
// and only waits for the session to end: the pool then reads and writes
// the client's pipes itself.
func Connect(name string, in io.Reader, out io.Writer) error {
	paths, err := home.Resolve()
	if err != nil {
		return err
	}
	sock := paths.PoolSocket()
	conn, err := localsock.DialTimeout(sock, 5*time.Second)
	if err != nil {
		// No pool (or a stale socket of a killed one): start it, as the
		// user would otherwise have to before every client.
		conn, err = launch.Ensure(paths, func() (net.Conn, error) { return localsock.DialTimeout(sock, time.Second) })
		if errors.Is(err, launch.ErrDisabled) {
			return fmt.Errorf("%w (no pool socket at %s) and %v in %s: start it with `switchboard` (tray) or `switchboard serve`, or turn autostart.fromClients on", ErrNoPool, sock, err, paths.Config)
		}
		if err != nil {
			return fmt.Errorf("%w (no pool socket at %s) and starting one failed: %v", ErrNoPool, sock, err)
		}
	}
	defer conn.Close()
	attach := attachable(in, out)
	var ledger *os.File
	if attach {
		ledger = newLedger()
	}
	hello, _ := json.Marshal(wire.Hello{Server: name, PID: os.Getpid(), Attach: attach, Ledger: ledger != nil})
	if err := writeHello(conn, append(hello, '\n'), attach, ledger); err != nil {
		return fmt.Errorf("talk to the pool: %w", err)
	}
	br := bufio.NewReaderSize(conn, bufSize)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := br.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("the pool did not answer: %w", err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	var w wire.Welcome
	if err := json.Unmarshal(line, &w); err != nil {
		return fmt.Errorf("the pool answered something unexpected: %q", line)
	}
	if w.Error != "" {
		return errors.New(w.Error)
	}
	if w.Attached {
		return (&attached{paths: paths, name: name, run: w.Run, session: w.Session, ledger: ledger}).wait(conn, br)
	}
	fromPool := make(chan error, 1)
	go func() {
		// bufio.Reader.WriteTo drains what the welcome read buffered,
		// then copies straight from the socket.
		_, err := br.WriteTo(out)
		fromPool <- err
	}()
	fromClient := make(chan error, 1)
	go func() {
		_, err := io.CopyBuffer(conn, onlyReader{in}, make([]byte, bufSize))
		fromClient <- err
	}()
	select {
	case err := <-fromClient:
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
		// The client closed our stdin: it has finished sending, not
		// stopped listening. Tell the pool (a half-close) and relay its
		// answers until it ends the session.
		cw, ok := conn.(interface{ CloseWrite() error })
		if !ok || cw.CloseWrite() != nil {
			return nil
		}
		if err := <-fromPool; err != nil {
			return fmt.Errorf("pool connection: %w", err)
		}
		return nil
	case err := <-fromPool:
		if err != nil {
			return fmt.Errorf("pool connection: %w", err)
		}
		return errors.New("the pool closed the connection (it shut down or evicted this session)")
	}
}

// onlyReader hides a reader's WriteTo, so io.CopyBuffer uses the large
// buffer instead of a small one of the reader's choosing.
type onlyReader struct{ io.Reader }
