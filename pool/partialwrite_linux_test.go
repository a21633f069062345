package pool

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// A large request is written by a Write of its own, and its newline by the
// next: the child can hold the whole JSON object when the newline's write
// fails (a restart's shutdown closed its stdin). A server that parses with
// a streaming decoder may run it: it may have run, and is never sent
// again as if it had not. The request here is exactly as large as the
// pipe, which the child does not read: the request's Write fills the
// pipe, and the child goes away while the newline's Write waits.
func TestWriteLoopNewlineRefusedMayHaveRun(t *testing.T) {
	probe, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	size, err := unix.FcntlInt(pw.Fd(), unix.F_GETPIPE_SZ, 0)
	probe.Close()
	pw.Close()
	if err != nil {
		t.Fatal(err)
	}
	if size < gatherInPlace {
		t.Skipf("a pipe holds %d bytes, less than a request written by itself", size)
	}
	writeTakenInPart(t, size, func(t *testing.T, r *os.File) {
		rc, err := r.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		held := 0
		waitUntil(t, "the whole request in the pipe", func() bool {
			if err := rc.Control(func(fd uintptr) { held, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil {
				t.Fatal(err)
			}
			return held == size
		})
		if err := r.Close(); err != nil { // the whole object is in the pipe; the newline is not
			t.Fatal(err)
		}
	})
}
