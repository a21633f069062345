//go:build windows

package localsock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// PipeName is the named pipe that stands for the socket path: one per
// SWITCHBOARD_HOME and endpoint, as the socket files are.
func PipeName(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	sum := sha256.Sum256([]byte(strings.ToLower(abs)))
	return `\\.\pipe\switchboard-` + strings.TrimSuffix(filepath.Base(path), ".sock") + "-" + hex.EncodeToString(sum[:8])
}

// pipeBuffer is each direction's buffer in the kernel.
const pipeBuffer = 64 << 10

// Listen creates the named pipe for path, which only the current user
// (and the system) may open, and only from this machine.
func Listen(path string) (net.Listener, error) {
	name := PipeName(path)
	sid, err := userSID()
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", name, err)
	}
	sd, err := windows.SecurityDescriptorFromString("D:P(A;;GA;;;SY)(A;;GA;;;" + sid + ")")
	if err != nil {
		return nil, fmt.Errorf("listen on %s: security descriptor: %w", name, err)
	}
	l := &listener{name: name, sa: &windows.SecurityAttributes{
		Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), SecurityDescriptor: sd}}
	// The first instance claims the name: another process (another pool)
	// cannot create it meanwhile.
	h, err := l.instance(true)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", name, err)
	}
	l.next = h
	return l, nil
}

// listener accepts one client per pipe instance: each Accept waits on
// the current instance and creates the next.
type listener struct {
	name string
	sa   *windows.SecurityAttributes

	mu     sync.Mutex
	next   windows.Handle // the instance Accept waits on
	closed bool
	cancel windows.Handle // the event of the pending connect, to cancel it
}

func (l *listener) instance(first bool) (windows.Handle, error) {
	mode := uint32(windows.PIPE_ACCESS_DUPLEX | windows.FILE_FLAG_OVERLAPPED)
	if first {
		mode |= windows.FILE_FLAG_FIRST_PIPE_INSTANCE
	}
	n, err := windows.UTF16PtrFromString(l.name)
	if err != nil {
		return 0, err
	}
	return windows.CreateNamedPipe(n, mode,
		windows.PIPE_TYPE_BYTE|windows.PIPE_READMODE_BYTE|windows.PIPE_WAIT|windows.PIPE_REJECT_REMOTE_CLIENTS,
		windows.PIPE_UNLIMITED_INSTANCES, pipeBuffer, pipeBuffer, 0, l.sa)
}

// Accept waits for a client on the current instance.
func (l *listener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, net.ErrClosed
	}
	h := l.next
	ev, err := windows.CreateEvent(nil, 1, 0, nil)
	if err != nil {
		l.mu.Unlock()
		return nil, err
	}
	l.cancel = ev
	l.mu.Unlock()
	defer windows.CloseHandle(ev)

	ov := windows.Overlapped{HEvent: ev}
	err = windows.ConnectNamedPipe(h, &ov)
	switch {
	case err == nil, errors.Is(err, windows.ERROR_PIPE_CONNECTED):
	case errors.Is(err, windows.ERROR_IO_PENDING):
		var n uint32
		err = windows.GetOverlappedResult(h, &ov, &n, true)
	}
	if errors.Is(err, windows.ERROR_PIPE_CONNECTED) {
		err = nil // the client came between CreateNamedPipe and ConnectNamedPipe
	}
	l.mu.Lock()
	l.cancel = 0
	closed := l.closed
	if err == nil && !closed {
		l.next, err = l.instance(false)
	}
	l.mu.Unlock()
	if closed {
		windows.CloseHandle(h)
		return nil, net.ErrClosed
	}
	if err != nil {
		windows.CloseHandle(h)
		return nil, fmt.Errorf("accept on %s: %w", l.name, err)
	}
	return newConn(h, l.name), nil
}

// Close stops Accept: the waiting connect is cancelled and the pending
// instance closed.
func (l *listener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.cancel != 0 {
		_ = windows.CancelIoEx(l.next, nil)
		return nil // Accept closes the instance it waited on
	}
	return windows.CloseHandle(l.next)
}

func (l *listener) Addr() net.Addr { return pipeAddr(l.name) }

// Dial connects to the named pipe for path, waiting while every instance
// is busy, until ctx ends.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	name := PipeName(path)
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, err
	}
	for {
		h, err := windows.CreateFile(n, windows.GENERIC_READ|windows.GENERIC_WRITE, 0, nil,
			windows.OPEN_EXISTING, windows.FILE_FLAG_OVERLAPPED|windows.SECURITY_SQOS_PRESENT|windows.SECURITY_IDENTIFICATION, 0)
		if err == nil {
			return newConn(h, name), nil
		}
		if !errors.Is(err, windows.ERROR_PIPE_BUSY) {
			return nil, &net.OpError{Op: "dial", Net: "pipe", Addr: pipeAddr(name), Err: err}
		}
		select {
		case <-ctx.Done():
			return nil, &net.OpError{Op: "dial", Net: "pipe", Addr: pipeAddr(name), Err: ctx.Err()}
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// conn is a connected pipe instance as a net.Conn. The handle is
// overlapped, so os.File runs it on the runtime's poller, with deadlines.
type conn struct {
	*os.File
	addr pipeAddr
}

func newConn(h windows.Handle, name string) *conn {
	return &conn{File: os.NewFile(uintptr(h), name), addr: pipeAddr(name)}
}

func (c *conn) LocalAddr() net.Addr  { return c.addr }
func (c *conn) RemoteAddr() net.Addr { return c.addr }

type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return string(a) }

// Remove does nothing: a named pipe leaves no file behind.
func Remove(string) {}

func userSID() (string, error) {
	tok := windows.GetCurrentProcessToken()
	u, err := tok.GetTokenUser()
	if err != nil {
		return "", fmt.Errorf("current user: %w", err)
	}
	return u.User.Sid.String(), nil
}
