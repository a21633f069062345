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
// (and the system) may open, and only from this machine. The pipe is the
// current user's, as its owner (what Dial checks), even when the process
// runs elevated, whose objects an administrator group owns by default.
func Listen(path string) (net.Listener, error) {
	name := PipeName(path)
	me, err := userSID()
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", name, err)
	}
	sid := me.String()
	sd, err := windows.SecurityDescriptorFromString("O:" + sid + "D:P(A;;GA;;;SY)(A;;GA;;;" + sid + ")")
	if err != nil {
		return nil, fmt.Errorf("listen on %s: security descriptor: %w", name, err)
	}
	l := &listener{name: name, sa: &windows.SecurityAttributes{
		Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), SecurityDescriptor: sd}}
	// The first instance claims the name: another process (another pool)
	// cannot create it meanwhile. Creating it is refused when the name
	// exists: another program, maybe another user's, holds it.
	h, err := l.instance(true)
	switch {
	case errors.Is(err, windows.ERROR_ACCESS_DENIED):
		err = whyTaken(name, me)
	case err == nil:
		// Where the flag is not enforced (Wine), the instance may have
		// joined a pipe another program created: the owner is the pipe's.
		if err = checkOwner(h, me); err != nil {
			windows.CloseHandle(h)
			err = fmt.Errorf("another program took the pipe name first: %w", err)
		}
	}
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

// whyTaken says who holds the pipe name that Listen could not claim.
func whyTaken(name string, me *windows.SID) error {
	h, err := openPipe(name)
	if err != nil {
		return fmt.Errorf("the pipe exists already: another program holds it (%w)", windows.ERROR_ACCESS_DENIED)
	}
	defer windows.CloseHandle(h)
	if err := checkOwner(h, me); err != nil {
		return fmt.Errorf("another program took the pipe name first: %w", err)
	}
	return errors.New("the pipe exists already: another program of this user serves it")
}

// Dial connects to the named pipe for path, waiting while every instance
// is busy, until ctx ends. A pipe that is not the current user's is
// refused: anyone on the machine may create a pipe of that name before
// the pool does (it derives from a path others can guess), and would be
// talked to in its place.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	name := PipeName(path)
	me, err := userSID()
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "pipe", Addr: pipeAddr(name), Err: err}
	}
	for {
		h, err := openPipe(name)
		if err == nil {
			if err := checkOwner(h, me); err != nil {
				windows.CloseHandle(h)
				return nil, &net.OpError{Op: "dial", Net: "pipe", Addr: pipeAddr(name), Err: err}
			}
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

// openPipe opens the client end of the pipe name. The server learns who
// the client is, and cannot act as the client (SECURITY_IDENTIFICATION).
func openPipe(name string) (windows.Handle, error) {
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return 0, err
	}
	return windows.CreateFile(n, windows.GENERIC_READ|windows.GENERIC_WRITE, 0, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_OVERLAPPED|windows.SECURITY_SQOS_PRESENT|windows.SECURITY_IDENTIFICATION, 0)
}

// errNotOwner is a pipe that another user's program created.
var errNotOwner = errors.New("the pipe is not the current user's")

// checkOwner refuses the pipe h unless its owner is me. Only a program of
// me can create a pipe that me owns: another user cannot give an object
// an owner other than a SID of their own token (without the restore
// privilege, which is an administrator's).
func checkOwner(h windows.Handle, me *windows.SID) error {
	sd, err := windows.GetSecurityInfo(h, windows.SE_KERNEL_OBJECT, windows.OWNER_SECURITY_INFORMATION)
	if err != nil {
		return fmt.Errorf("the pipe's owner: %w", err)
	}
	owner, _, err := sd.Owner()
	if err != nil {
		return fmt.Errorf("the pipe's owner: %w", err)
	}
	return sameOwner(owner, me)
}

// sameOwner is checkOwner's comparison.
func sameOwner(owner, me *windows.SID) error {
	if owner == nil || !owner.IsValid() {
		return fmt.Errorf("%w: it has no owner", errNotOwner)
	}
	if !owner.Equals(me) {
		return fmt.Errorf("%w: %s owns it, not %s; another user's program may be posing as Switchboard",
			errNotOwner, account(owner), account(me))
	}
	return nil
}

// account names sid for a message: DOMAIN\name (SID), or the SID alone.
func account(sid *windows.SID) string {
	name, domain, _, err := sid.LookupAccount("")
	if err != nil || name == "" {
		return sid.String()
	}
	if domain != "" {
		name = domain + `\` + name
	}
	return name + " (" + sid.String() + ")"
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

// userSID is the current user's SID.
func userSID() (*windows.SID, error) {
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, fmt.Errorf("current user: %w", err)
	}
	return u.User.Sid, nil
}
