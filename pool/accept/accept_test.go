package accept

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
)

func acceptError(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

type failing struct {
	net.Listener
	err error
}

func (l failing) Accept() (net.Conn, error) { return nil, l.err }

// TestRetryingMarksTemporary: what Temporary names reaches net/http as a
// temporary net.Error that still unwraps to its errno; anything else
// comes as it was.
func TestRetryingMarksTemporary(t *testing.T) {
	for _, tc := range []struct {
		err       error
		temporary bool
	}{
		{acceptError(syscall.EMFILE), true},
		{acceptError(syscall.ENFILE), true},
		{acceptError(syscall.ENOBUFS), true},
		{acceptError(syscall.ENOMEM), true},
		{acceptError(syscall.ECONNABORTED), true},
		{acceptError(syscall.EINVAL), false},
		{net.ErrClosed, false},
	} {
		_, err := Retrying(failing{err: tc.err}).Accept()
		// As net/http's Server.Serve asks: err.(net.Error).Temporary().
		_, isNetError := err.(net.Error)
		temp, _ := err.(interface{ Temporary() bool })
		if got := isNetError && temp.Temporary(); got != tc.temporary {
			t.Errorf("%v: temporary %v, want %v", tc.err, got, tc.temporary)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("%v: came back as %v", tc.err, err)
		}
	}
}
