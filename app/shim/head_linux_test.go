package shim

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// socketPair is a connected pair of Unix stream sockets: the shim's end
// and the pool's.
func socketPair(t *testing.T) (shim, pool *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c.(*net.UnixConn)
		t.Cleanup(func() { c.Close() })
	}
	return conns[0], conns[1]
}

// A shim that offers to take a head mirror reads the Welcome with the
// memfd that comes with it; from a pool that knows no heads (no
// descriptor, the Welcome says none) it gets none, and reads on the
// lines that came in the same write as the Welcome. Either way the State
// line after the Welcome is read whole.
func TestGreetTakesTheHeadMirrorOfferedOrNot(t *testing.T) {
	for _, withHead := range []bool{true, false} {
		shimEnd, poolEnd := socketPair(t)
		ledger := newLedger()
		if ledger == nil {
			t.Skip("no memfd")
		}
		defer ledger.Close()
		mirror := memfdWithHead(t, "{\"jsonrpc\":")
		welcome := `{"session":"s1","attached":true,"ledger":true}` + "\n"
		var oob []byte
		if withHead {
			welcome = `{"session":"s1","attached":true,"ledger":true,"head":true}` + "\n"
			oob = syscall.UnixRights(int(mirror.Fd()))
		}
		answered := make(chan struct{})
		go func() {
			defer close(answered)
			buf := make([]byte, 4<<10)
			_, _, _, _, _ = poolEnd.ReadMsgUnix(buf, make([]byte, 256)) // the hello
			_, _, _ = poolEnd.WriteMsgUnix([]byte(welcome+`{"logLevel":"debug"}`+"\n"), oob, nil)
		}()
		br, w, head, err := greet(shimEnd, []byte(`{"server":"fake","attach":true,"ledger":true,"head":true}`+"\n"), nil, true, ledger, 5*time.Second)
		<-answered
		if err != nil || !w.Attached || w.Head != withHead || (head != nil) != withHead {
			t.Fatalf("with head %t: greet: %+v, head %v, %v", withHead, w, head, err)
		}
		if got := string(takeHead(head)); withHead && got != "{\"jsonrpc\":" {
			t.Errorf("the head mirror holds %q", got)
		}
		if line, err := br.ReadString('\n'); err != nil || line != `{"logLevel":"debug"}`+"\n" {
			t.Errorf("with head %t: the line after the Welcome: %q %v", withHead, line, err)
		}
	}
}

// memfdWithHead is a head mirror as a pool writes it, holding head.
func memfdWithHead(t *testing.T, head string) *os.File {
	t.Helper()
	fd, err := unix.MemfdCreate("test-head", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "test-head")
	t.Cleanup(func() { f.Close() })
	b := make([]byte, wire.HeadOffset+64)
	binary.LittleEndian.PutUint32(b, uint32(len(head)))
	copy(b[wire.HeadOffset:], head)
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return f
}

// A head whose length is more than its memfd holds is none.
func TestTakeHeadRefusesALengthPastTheMemfd(t *testing.T) {
	f := memfdWithHead(t, "abc")
	var word [4]byte
	binary.LittleEndian.PutUint32(word[:], 1<<20)
	if _, err := f.WriteAt(word[:], 0); err != nil {
		t.Fatal(err)
	}
	g, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if got := takeHead(g); got != nil {
		t.Fatalf("takeHead: %q, want none", got)
	}
}
