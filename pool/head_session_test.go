//go:build linux

package pool_test

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// attachOfferingHead attaches a session as a shim that offers to take a
// head mirror (wire.Hello.Head) does, with a ledger, and returns it with
// the memfd that came with the Welcome (nil if none did).
func (tp *testPool) attachOfferingHead(t *testing.T, server string) (*attached, *os.File) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", tp.sock)
	if err != nil {
		t.Fatal(err)
	}
	conn := c.(*net.UnixConn)
	ledger, _ := newLedger(t)
	hello := fmt.Sprintf(`{"server":%q,"attach":true,"ledger":true,"head":true}`+"\n", server)
	if _, _, err := conn.WriteMsgUnix([]byte(hello), syscall.UnixRights(int(inR.Fd()), int(outW.Fd()), int(ledger.Fd())), nil); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	// The Welcome is short: one read takes it, with its descriptor.
	buf, oob := make([]byte, 4<<10), make([]byte, syscall.CmsgSpace(4))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	line, rest, _ := strings.Cut(string(buf[:n]), "\n")
	var w pool.Welcome
	if json.Unmarshal([]byte(line), &w) != nil || !w.Attached {
		t.Fatalf("welcome: %q", line)
	}
	var head *os.File
	if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
		if fds, err := syscall.ParseUnixRights(&msgs[0]); err == nil && len(fds) == 1 {
			head = os.NewFile(uintptr(fds[0]), "head")
			t.Cleanup(func() { head.Close() })
		}
	}
	if w.Head != (head != nil) {
		t.Fatalf("the Welcome says head %t, and came with %v", w.Head, head)
	}
	a := &attached{t: t, conn: conn, shim: bufio.NewReader(io.MultiReader(strings.NewReader(rest), conn)), in: inW,
		out: bufio.NewReader(outR), outFile: outR}
	t.Cleanup(a.close)
	return a, head
}

// headIn is the head the memfd f holds, as a shim reads it.
func headIn(t *testing.T, f *os.File) string {
	t.Helper()
	var word [wire.HeadOffset]byte
	if _, err := f.ReadAt(word[:], 0); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, binary.LittleEndian.Uint32(word[:]))
	if _, err := f.ReadAt(b, wire.HeadOffset); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// An attached session's pool keeps what it read of a line its client has
// not ended, in the memfd it sent with its Welcome, for a shim whose
// pool is killed to give the next pool: the head, however many reads it
// came in, and what follows the last whole line of a read that ended
// some; nothing once the line ends. A shim that did not offer to take
// one gets none (it could not read the Welcome's descriptors).
func TestPoolKeepsTheHeadOfALineForItsShim(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	a, head := tp.attachOfferingHead(t, "srv")
	if head == nil {
		t.Fatal("no head mirror came with the Welcome")
	}
	a.initialize()
	if got := headIn(t, head); got != "" {
		t.Fatalf("after a whole line the head is %q; want none", got)
	}
	call := `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	wantHead := func(want string) {
		t.Helper()
		eventually(t, fmt.Sprintf("the head to be %q", want), func() bool { return headIn(t, head) == want },
			func() string { return fmt.Sprintf("it is %q", headIn(t, head)) })
	}
	write := func(s string) {
		t.Helper()
		if _, err := a.in.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	write(call[:10])
	wantHead(call[:10])
	write(call[10:40])
	wantHead(call[:40])
	write(call[40:] + "\n" + call[:25])
	wantHead(call[:25])
	write(call[25:] + "\n")
	wantHead("")
	for range 2 {
		if line, err := a.out.ReadString('\n'); err != nil || !strings.Contains(line, `"id":"c"`) {
			t.Fatalf("the call's answer: %q %v", line, err)
		}
	}

	// A last line the client ends with its input, not a newline, is
	// handled: it is not the head of one for the next pool.
	write(`{"jsonrpc":"2.0","id":"last","method":"ping"}`)
	wantHead(`{"jsonrpc":"2.0","id":"last","method":"ping"}`)
	a.in.Close()
	wantHead("")

	old := tp.attach(t, "srv") // the hello of a shim from before heads: the Welcome says none
	old.initialize()
}
