//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// A connect of a release from before the seal sends a ledger the pool
// refuses (it could shrink under the pool's mapping), and yet says, when
// it resumes its session after a crash, that its ledger lists what was
// owed: it lists nothing, as no pool wrote it. The next pool does not
// take the word of a ledger it refuses too: what the session owed comes
// from the history, and every call in flight at the kill gets the
// at-most-once error. On the first edition none was answered, while
// `hangs` listed them as abandoned.
func TestRefusedLedgerIsAnsweredFromTheHistory(t *testing.T) {
	first := serve(t, noClientStarts(fakeConfig(t)))
	initParams := `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"old-shim","version":"1.0"}}`
	c := newPipeClient(t)
	w := c.attach(t, first.home, wire.Hello{Server: "fake", Attach: true, Ledger: true})
	if w.Ledger {
		t.Fatalf("the pool took a ledger that could shrink under it: %+v", w)
	}
	waitFor(t, "the pool to log that it refused the ledger", func() bool { return strings.Contains(first.log.String(), "ledger is unusable") })
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + initParams + `}`)
	c.recv(t, "0")
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	const calls = 5
	for i := 1; i <= calls; i++ {
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"sleep_echo","arguments":{"ms":60000,"text":"never"}}}`, i))
	}
	waitFor(t, "the calls to be journaled as written to the child", func() bool {
		h := first.status().History
		return h.Journaled == calls && h.JournaledWritten == calls
	})
	goAway(t, first, true)

	serveHome(t, first.home)
	// As that connect resumes: its ledger again, and "ledger": true with
	// nothing lost.
	c.attach(t, first.home, wire.Hello{Server: "fake", Attach: true, Ledger: true,
		Resume: &wire.Resume{Run: w.Run, Session: w.Session, Initialize: []byte(initParams), Ledger: true}})
	c.send(`{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"echo","arguments":{"text":"same session"}}}`)
	got := c.until(t, `"after"`)
	for i := 1; i <= calls; i++ {
		if a := got[fmt.Sprint(i)]; !strings.Contains(a, `"code":-32003`) || !strings.Contains(a, `"mayHaveExecuted":true`) {
			t.Errorf("call %d, in flight at the kill: %q", i, a)
		}
	}
}

// pipeClient is a client's pipes and an old connect's unsealed ledger,
// attached to a pool by hand as that connect attaches them.
type pipeClient struct {
	inR, inW, outR, outW, ledger *os.File
	out                          *bufio.Reader
}

func newPipeClient(t *testing.T) *pipeClient {
	t.Helper()
	c := &pipeClient{}
	var err error
	if c.inR, c.inW, err = os.Pipe(); err != nil {
		t.Fatal(err)
	}
	if c.outR, c.outW, err = os.Pipe(); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.MemfdCreate("old-ledger", unix.MFD_CLOEXEC) // no seals
	if err != nil {
		t.Fatal(err)
	}
	c.ledger = os.NewFile(uintptr(fd), "old-ledger")
	if err := c.ledger.Truncate(wire.LedgerSize); err != nil {
		t.Fatal(err)
	}
	c.out = bufio.NewReader(c.outR)
	t.Cleanup(func() {
		for _, f := range []*os.File{c.inR, c.inW, c.outR, c.outW, c.ledger} {
			f.Close()
		}
	})
	return c
}

// attach sends hello with the pipes and the ledger to the pool of home,
// and returns its welcome.
func (c *pipeClient) attach(t *testing.T, home string, hello wire.Hello) wire.Welcome {
	t.Helper()
	conn, err := net.Dial("unix", filepath.Join(home, "run", "pool.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	line, _ := json.Marshal(hello)
	fds := syscall.UnixRights(int(c.inR.Fd()), int(c.outW.Fd()), int(c.ledger.Fd()))
	if _, _, err := conn.(*net.UnixConn).WriteMsgUnix(append(line, '\n'), fds, nil); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	wl, err := bufio.NewReader(conn).ReadString('\n')
	var w wire.Welcome
	if err != nil || json.Unmarshal([]byte(wl), &w) != nil || !w.Attached {
		t.Fatalf("welcome %q: %v", wl, err)
	}
	return w
}

func (c *pipeClient) send(line string) {
	_, _ = c.inW.WriteString(line + "\n")
}

// recv reads the client's output up to the answer to id.
func (c *pipeClient) recv(t *testing.T, id string) string {
	t.Helper()
	return c.until(t, id)[id]
}

// until reads the client's output up to the answer to id, and returns
// the answers read by id.
func (c *pipeClient) until(t *testing.T, id string) map[string]string {
	t.Helper()
	got := map[string]string{}
	_ = c.outR.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		line, err := c.out.ReadString('\n')
		if err != nil {
			t.Fatalf("read the client's output: %v (answered %v)", err, got)
		}
		var r reply
		if json.Unmarshal([]byte(line), &r) != nil || r.Method != "" {
			continue
		}
		got[string(r.ID)] = line
		if string(r.ID) == id {
			return got
		}
	}
}
