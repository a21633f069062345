package shim

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/app/home"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// TestReattachBacksOffAPoolThatClosesTheHello: a pool that takes the
// connection and closes it without a Welcome (it went away as the hello
// came, or it could not take it) is tried again after a wait that grows,
// not at once, and after maxFailedStarts such pools in a row the shim
// gives up: it answers the request the dead pool owed with -32003 and
// returns why. Both kinds of shim. On the first edition each tried again
// at once and for ever, at full CPU, its client answered nothing.
func TestReattachBacksOffAPoolThatClosesTheHello(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reattach func(t *testing.T, paths home.Paths) (out func() []byte, err error)
	}{
		{"attached", func(t *testing.T, paths home.Paths) (func() []byte, error) {
			quietClient(t)
			out := clientStdout(t)
			a := &attached{paths: paths, name: "fake", run: "r1", session: "s1", kept: kept{init: []byte(`{}`)}, ledger: ledgerOwing(t, "7")}
			_, _, err := a.reattach(false)
			return out, err
		}},
		{"relayed", func(t *testing.T, paths home.Paths) (func() []byte, error) {
			var out bytes.Buffer
			r := &relayed{paths: paths, name: "fake", run: "r1", session: "s1", kept: kept{init: []byte(`{}`)}, out: &out,
				fromClient: make(chan []byte), clientErr: make(chan error, 1), count: newUnanswered()}
			r.count.sent([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}` + "\n"))
			_, _, err := r.reconnect(false)
			return out.Bytes, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paths, hellos, refuse := poolThatClosesHellos(t)
			type result struct {
				err error
				out func() []byte
			}
			done := make(chan result, 1)
			go func() {
				out, err := tc.reattach(t, paths)
				done <- result{err, out}
			}()
			var res result
			select {
			case res = <-done:
			case <-time.After(20 * time.Second):
				refuse() // a shim that tries for ever ends at a refusal
				res = <-done
				t.Errorf("the shim was still trying after 20 s")
			}
			out := res.out()
			if n := hellos.Load(); n != maxFailedStarts {
				t.Errorf("%d hellos, want %d: one per pool, a wait between them", n, maxFailedStarts)
			}
			if res.err == nil || !strings.Contains(res.err.Error(), "did not answer the session's hello") {
				t.Errorf("reattach = %v, want an error saying the pools did not answer the hello", res.err)
			}
			var a struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			line, _, _ := bytes.Cut(out, []byte("\n"))
			if json.Unmarshal(line, &a) != nil || string(a.ID) != "7" || a.Error.Code != -32003 || !strings.Contains(a.Error.Message, "did not answer the session's hello") {
				t.Errorf("the client got %q, want request 7 answered with -32003 and why", out)
			}
		})
	}
}

// poolThatClosesHellos listens on a pool socket in a new home, and closes
// each connection once it has read its hello, counting them, until
// refuse is called: from then on it refuses the session.
func poolThatClosesHellos(t *testing.T) (paths home.Paths, hellos *atomic.Int32, refuse func()) {
	dir, err := os.MkdirTemp("", "sbc") // a short path: a Unix socket's name is short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	paths = home.Paths{Run: dir, Config: dir + "/config.json"}
	ln, err := net.Listen("unix", paths.PoolSocket())
	if err != nil {
		t.Fatal(err)
	}
	hellos = new(atomic.Int32)
	var refusing atomic.Bool
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if _, err := readHelloMsg(c.(*net.UnixConn)); err == nil {
				if refusing.Load() {
					_, _ = c.Write([]byte(`{"error":"refused"}` + "\n"))
				} else {
					hellos.Add(1)
				}
			}
			c.Close()
		}
	}()
	return paths, hellos, func() { refusing.Store(true) }
}

// ledgerOwing is a session's ledger that lists request id as written to
// a child: what a killed pool owed.
func ledgerOwing(t *testing.T, id string) *os.File {
	f := newLedger()
	if f == nil {
		t.Fatal("no ledger")
	}
	t.Cleanup(func() { f.Close() })
	slot := make([]byte, wire.LedgerSlotSize)
	binary.LittleEndian.PutUint32(slot, wire.LedgerWritten)
	binary.LittleEndian.PutUint32(slot[4:], uint32(len(id)))
	copy(slot[8:], id)
	if _, err := f.WriteAt(slot, 0); err != nil {
		t.Fatal(err)
	}
	return f
}

// clientStdout makes this process's stdout, where an attached shim writes
// the answers it gives its client itself, a pipe the test reads. The
// returned func puts stdout back and returns what was written.
func clientStdout(t *testing.T) func() []byte {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved, err := unix.Dup(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup2(int(w.Fd()), 1); err != nil {
		t.Fatal(err)
	}
	w.Close() // fd 1 is the pipe's only writer: putting stdout back ends it
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		r.Close()
		got <- b
	}()
	restore := sync.OnceFunc(func() {
		_ = unix.Dup2(saved, 1)
		unix.Close(saved)
	})
	t.Cleanup(restore)
	return sync.OnceValue(func() []byte {
		restore()
		return <-got
	})
}

// TestResumeClaimsALedgerThePoolTook: a shim says its ledger lists what
// a dead pool owed only when that pool said it took the ledger: a pool
// that refused it (or could not map it) wrote nothing there, and the next
// pool must go by the history. On the first edition a shim claimed its
// ledger whenever it had one, and after a crash its calls in flight went
// unanswered.
func TestResumeClaimsALedgerThePoolTook(t *testing.T) {
	quietClient(t)
	paths, hellos := poolsThatWelcome(t,
		`{"session":"s2","attached":true,"run":"r2"}`, // took the pipes, not the ledger
		`{"session":"s3","attached":true,"run":"r3","ledger":true}`,
		`{"session":"s4","attached":true,"run":"r4"}`)
	a := &attached{paths: paths, name: "fake", run: "r1", session: "s1", kept: kept{init: []byte(`{}`)}, ledger: ledgerOwing(t, "7"), ledgerTaken: true}
	for range 3 {
		conn, _, err := a.reattach(true)
		if err != nil {
			t.Fatalf("reattach: %v", err)
		}
		conn.Close()
	}
	for i, want := range []bool{true, false, true} {
		h := <-hellos
		if !h.Ledger || h.Resume == nil || h.Resume.Ledger != want {
			t.Errorf("hello %d: %+v, want the ledger sent and claimed: %v", i+1, h, want)
		}
	}
}
