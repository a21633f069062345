//go:build unix

package pool_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

const keptInitParams = `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"kept","version":"1"}}`

// A client that has its initialize answer has a shim that was told the
// initialize, with its id: a pool killed right after the answer leaves
// a shim that resumes the session initialized. The pool told the shim
// after the answer (an attached shim's line was queued for another
// goroutine to write, even later): a pool SIGKILLed in between left a
// client that had initialized and a shim that resumed a session that
// had not, whose every request the next pool refused ("initialize
// first"). The attached shim's writer is held up here, as a loaded
// machine holds it up: the line must be written all the same.
func TestInitializeReachesTheShimBeforeItsAnswer(t *testing.T) {
	const initReq = `{"jsonrpc":"2.0","id":"init-1","method":"initialize","params":` + keptInitParams + `}`
	t.Run("attached", func(t *testing.T) {
		resume, restore := pool.PauseShimLines()
		t.Cleanup(restore)
		tp := newTestPool(t, nil, fake("srv"))
		t.Cleanup(resume) // before the pool closes
		a := tp.attach(t, "srv")
		if got := a.roundTrip(initReq); !strings.Contains(got, `"id":"init-1","result"`) {
			t.Fatalf("initialize answered %q", got)
		}
		// Written before the answer: in the connection's buffer already.
		_ = a.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		line, err := a.shim.ReadBytes('\n')
		if err != nil {
			t.Fatalf("the client had its initialize answer; its shim had not been told the initialize: %v", err)
		}
		checkKeptInit(t, line)
	})
	t.Run("relayed", func(t *testing.T) {
		tp := newTestPool(t, nil, fake("srv"))
		conn, err := net.Dial("unix", tp.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, `{"server":"srv","resumable":true}`+"\n")
		br := bufio.NewReader(conn)
		if line, err := br.ReadBytes('\n'); err != nil || !strings.Contains(string(line), `"session"`) {
			t.Fatalf("welcome: %q, %v", line, err)
		}
		if _, err := conn.Write([]byte(initReq + "\n")); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		if len(line) == 0 || line[0] != wire.Control {
			t.Fatalf("the stream carried %q before the initialize's State line", line)
		}
		checkKeptInit(t, line[1:])
		if line, err = br.ReadBytes('\n'); err != nil || !strings.Contains(string(line), `"id":"init-1","result"`) {
			t.Fatalf("after the State line: %q, %v; want the initialize's answer", line, err)
		}
	})
}

// checkKeptInit checks that line is the State line of the initialize
// sent with keptInitParams as id "init-1".
func checkKeptInit(t *testing.T, line []byte) {
	t.Helper()
	var st wire.State
	if err := json.Unmarshal(line, &st); err != nil || string(st.Initialize) != keptInitParams || st.InitializeID != `"init-1"` {
		t.Fatalf("the shim was told %q (%v), want the initialize's params and id", line, err)
	}
}

// A resumed session whose shim carries its initialize, and lists that
// initialize as owed (the earlier pool told the shim, then was killed
// before its answer was written, or before it released the request's
// ledger slot), has it answered with its result, and is initialized:
// the client's next call is served. It was answered with the
// at-most-once error, as any request owed: a client that had not had
// the answer was refused an initialize the pool took as done. Other
// owed requests still get that error. The initialize is known by the
// id the shim kept, or, from a shim that keeps none, by the history.
func TestResumeAnswersTheInitializeItOwes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		initID  string
		history []pool.Unanswered
	}{
		{"by the id the shim kept", "0", nil},
		{"by the history", "", []pool.Unanswered{{OriginalID: "0", Method: "initialize"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The history's shim of the session is this process: the
			// socket's word on the test's own shim.
			opts := &pool.Options{RunID: "later", Unanswered: func(context.Context, string, string) (pool.Owed, error) {
				return pool.Owed{PeerPID: os.Getpid(), Requests: tc.history}, nil
			}}
			tp := newTestPool(t, opts, fake("srv"))
			hello, _ := json.Marshal(wire.Hello{Server: "srv", PID: os.Getpid(), Attach: true, Resume: &wire.Resume{
				Run: "earlier", Session: "s1", Initialize: []byte(keptInitParams), InitializeID: tc.initID,
				Lost: []wire.Lost{{ID: "0"}, {ID: "5", Written: true}},
			}})
			a := tp.attachHello(t, hello, nil, nil)
			_ = a.outFile.SetReadDeadline(time.Now().Add(30 * time.Second))
			got := map[string]string{}
			for range 2 {
				line, err := a.out.ReadString('\n')
				if err != nil {
					t.Fatalf("the owed answers: %v (so far %v)", err, got)
				}
				var m struct{ ID json.RawMessage }
				_ = json.Unmarshal([]byte(line), &m)
				got[string(m.ID)] = line
			}
			if init := got["0"]; !strings.Contains(init, `"result"`) || !strings.Contains(init, `"protocolVersion":"2025-11-25"`) {
				t.Errorf("the owed initialize was answered %q, want its result", init)
			}
			if call := got["5"]; !strings.Contains(call, `"mayHaveExecuted":true`) {
				t.Errorf("the owed call was answered %q, want the at-most-once error", call)
			}
			call := a.roundTrip(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"text":"same session"}}}`)
			if !strings.Contains(call, `"text":"same session"`) {
				t.Errorf("the call after the resume: %q", call)
			}
		})
	}
}
