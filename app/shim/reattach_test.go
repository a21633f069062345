//go:build unix

package shim

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/app/home"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// TestReattachPassesAPoolThatIsStopping: a session handed back by one
// pool whose reattach reaches a pool that is itself stopping (upgrades
// back to back) is told so, and reattaches to the next one, with the same
// session; it does not fail its client. Both kinds of shim: attached
// (the pool holds the client's pipes) and relaying.
func TestReattachPassesAPoolThatIsStopping(t *testing.T) {
	for _, tc := range resumingShims(t) {
		t.Run(tc.name, func(t *testing.T) {
			paths, hellos := poolsThatWelcome(t,
				`{"error":"pool is closed","stopping":true}`,
				`{"session":"s9","attached":`+strconv.FormatBool(tc.attach)+`,"run":"r2"}`)
			conn, session, run, err := tc.reattach(paths)
			if err != nil {
				t.Fatalf("reattach: %v", err)
			}
			conn.Close()
			if session != "s9" || run != "r2" {
				t.Errorf("reattached as %s of run %s, want s9 of r2", session, run)
			}
			var got []wire.Hello
			for range 2 {
				got = append(got, <-hellos)
			}
			for i, h := range got {
				if h.Attach != tc.attach || h.Resume == nil || h.Resume.Session != "s1" || h.Resume.Run != "r1" {
					t.Errorf("hello %d: %+v, want session s1 of run r1 resumed", i+1, h)
				}
			}
		})
	}
}

// quietClient makes this process's stdin, which an attached shim reads as
// its client's input, a pipe that stays open and sends nothing, as a live
// idle client's does (the test's own may be at its end: a client gone).
func quietClient(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved, err := unix.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup2(int(r.Fd()), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = unix.Dup2(saved, 0)
		unix.Close(saved)
		r.Close()
		w.Close()
	})
}

// poolsThatWelcome listens on a pool socket in a new home and answers the
// hello of each connection in turn with the next of welcomes, sending
// each hello it read on the channel.
func poolsThatWelcome(t *testing.T, welcomes ...string) (home.Paths, <-chan wire.Hello) {
	dir, err := os.MkdirTemp("", "sbs") // a short path: a Unix socket's name is short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	paths := home.Paths{Run: dir, Config: dir + "/config.json"}
	ln, err := net.Listen("unix", paths.PoolSocket())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	hellos := make(chan wire.Hello, len(welcomes))
	go func() {
		defer close(done)
		for _, welcome := range welcomes {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if hello, err := readHelloMsg(c.(*net.UnixConn)); err == nil {
				hellos <- hello
				_, _ = c.Write([]byte(welcome + "\n"))
			}
			c.Close()
		}
	}()
	return paths, hellos
}

// readHelloMsg reads a hello line and closes the descriptors sent with it.
func readHelloMsg(c *net.UnixConn) (wire.Hello, error) {
	var h wire.Hello
	buf, oob := make([]byte, 4096), make([]byte, syscall.CmsgSpace(4*4))
	var line []byte
	for !bytes.Contains(line, []byte("\n")) {
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil {
			return h, err
		}
		line = append(line, buf[:n]...)
		if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				fds, _ := syscall.ParseUnixRights(&m)
				for _, fd := range fds {
					syscall.Close(fd)
				}
			}
		}
	}
	line, _, _ = bytes.Cut(line, []byte("\n"))
	err := json.Unmarshal(line, &h)
	return h, err
}

// resumingShim is one kind of shim resuming session s1 of run r1 on a
// pool that welcomes it after a planned stop: reattach returns the new
// connection and the session and run it resumed as.
type resumingShim struct {
	name     string
	reattach func(home.Paths) (conn net.Conn, session, run string, err error)
	attach   bool
}

// resumingShims are both kinds: attached (the pool holds the client's
// pipes) and relaying.
func resumingShims(t *testing.T) []resumingShim {
	return []resumingShim{
		{"attached", func(paths home.Paths) (net.Conn, string, string, error) {
			quietClient(t)
			a := &attached{paths: paths, name: "fake", run: "r1", session: "s1", kept: kept{init: []byte(`{}`)}}
			conn, _, err := a.reattach(true)
			return conn, a.session, a.run, err
		}, true},
		{"relayed", func(paths home.Paths) (net.Conn, string, string, error) {
			r := &relayed{paths: paths, name: "fake", run: "r1", session: "s1", kept: kept{init: []byte(`{}`)},
				fromClient: make(chan []byte), clientErr: make(chan error, 1), count: newUnanswered()}
			conn, _, err := r.reconnect(true)
			return conn, r.session, r.run, err
		}, false},
	}
}
