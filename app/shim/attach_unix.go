//go:build unix

package shim

import (
	"errors"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// attachable reports whether the client's stdin and stdout are pipes or
// sockets the pool can take over. A terminal or a file keeps the relay.
func attachable(in, out any) bool {
	if in != os.Stdin || out != os.Stdout || os.Getenv("SWITCHBOARD_NO_ATTACH") != "" {
		return false
	}
	for _, fd := range []int{0, 1} {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return false
		}
		if m := st.Mode & syscall.S_IFMT; m != syscall.S_IFIFO && m != syscall.S_IFSOCK {
			return false
		}
	}
	return true
}

// writeHello sends the hello line, with stdin and stdout attached
// (SCM_RIGHTS) when attach is set, and the ledger after them when there
// is one.
func writeHello(conn net.Conn, hello []byte, attach bool, ledger *os.File) error {
	uc, ok := conn.(*net.UnixConn)
	if !attach || !ok {
		_, err := conn.Write(hello)
		return err
	}
	fds := []int{0, 1}
	if ledger != nil {
		fds = append(fds, int(ledger.Fd()))
	}
	n, _, err := uc.WriteMsgUnix(hello, syscall.UnixRights(fds...), nil)
	if err == nil && n < len(hello) {
		_, err = conn.Write(hello[n:]) // a long hello: what the socket did not take at once
	}
	return err
}

// ownStdio puts this process's stdin and stdout back in blocking mode,
// for the shim to read and write its client itself with no pool holding
// them. A pool that took the client's pipes made them non-blocking (the
// flag is on the open pipe, which this process shares), and they stay so
// after it is gone: os.Stdin and os.Stdout, opened blocking, would fail
// at once where the pipe is empty or full, and cut the answers short.
func ownStdio() {
	for _, fd := range []int{0, 1} {
		_ = unix.SetNonblock(fd, false)
	}
}

// clientGone reports whether the client stopped reading its stdout (our
// fd 1): a pipe whose reader closed polls as an error.
func clientGone() bool {
	fds := []unix.PollFd{{Fd: 1, Events: unix.POLLOUT}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
}

// takeClientInput reads, without waiting, the first of what the client
// has sent that no pool has read (our fd 0), for the next pool to read
// first; eof says the client closed its end with nothing left to read.
func takeClientInput() (in []byte, eof bool) {
	fds := []unix.PollFd{{Fd: 0, Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 0); err != nil || n == 0 {
		return nil, false
	}
	buf := make([]byte, bufSize)
	n, err := unix.Read(0, buf)
	if n > 0 {
		return buf[:n], false
	}
	return nil, n == 0 && err == nil // else not readable after all, or broken
}

// readWaiting reads what the client has sent that no pool has read (our
// fd 0), without waiting for more, up to max bytes: when the shim gives
// up, it answers the requests there.
func readWaiting(max int) []byte {
	var out []byte
	buf := make([]byte, bufSize)
	for len(out) < max {
		fds := []unix.PollFd{{Fd: 0, Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 0); err != nil || n == 0 || fds[0].Revents&unix.POLLIN == 0 {
			break
		}
		n, err := unix.Read(0, buf)
		if n <= 0 || err != nil {
			break
		}
		out = append(out, buf[:n]...)
	}
	return out
}

// readUntilRequest reads what the client sends that no pool has read (our
// fd 0) until it holds a request, the client closes it, max bytes are read
// or deadline passes; then what else is waiting, without waiting more.
func readUntilRequest(max int, deadline time.Time) []byte {
	var out []byte
	buf := make([]byte, bufSize)
	for len(out) < max && !hasRequest(out) {
		wait := time.Until(deadline)
		if wait <= 0 {
			break
		}
		fds := []unix.PollFd{{Fd: 0, Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(wait.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			break
		}
		n, err = unix.Read(0, buf)
		if n <= 0 || err != nil {
			break // closed (a hang-up polls readable, and reads 0), or broken
		}
		out = append(out, buf[:n]...)
	}
	return append(out, readWaiting(max-len(out))...)
}
