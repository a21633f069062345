//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A client that stops reading is evicted (evictSlowClientsAfter), and its
// connect tells it nothing more and exits 1 with the reason, whether it
// handed the client's pipes to the pool or relays them (a terminal,
// Windows). A relaying connect's stream was full, so no Farewell reached
// it: on the first edition it took the closed stream for a crash of a
// pool that was still running, resumed the evicted session there, ended
// the answer it had cut off with a newline (a broken line that looked
// whole), answered both calls with -32003 "Switchboard restarted" and
// never exited.
func TestEvictedSessionEndsItsConnect(t *testing.T) {
	for _, mode := range []string{"attached", "relayed"} {
		t.Run(mode, func(t *testing.T) { testEvictedSessionEndsItsConnect(t, mode == "relayed") })
	}
}

func testEvictedSessionEndsItsConnect(t *testing.T, relay bool) {
	in := serve(t, noClientStarts(fmt.Sprintf(`{"evictSlowClientsAfter": "2s", "mcpServers":{"fake":{"command":%q}}}`, fakeBin)))
	s := connectAs(t, in, "fake", relay)
	s.initialize("stops-reading")
	s.send(`{"jsonrpc":"2.0","id":"level","method":"logging/setLevel","params":{"level":"debug"}}`)
	s.recvID(`"level"`)
	s.send(`{"jsonrpc":"2.0","id":"sub","method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
	s.recvID(`"sub"`)
	// Two answers of 1 MB: more than the client's pipe, connect's buffer
	// and the socket hold. The client reads nothing until the eviction.
	for id := 1; id <= 2; id++ {
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{"bytes":1000000}}}`, id))
	}
	waitFor(t, "the eviction", func() bool { return in.status().Counters.Evicted > 0 })

	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(s.out)
		read <- b
	}()
	var exitErr error
	select {
	case exitErr = <-s.done:
		s.done <- exitErr
	case <-time.After(20 * time.Second):
		s.stdout.Close() // the client goes away; what it read so far comes back
		t.Errorf("connect did not exit after the eviction; the client read: %s", describeOutput(<-read))
		return
	}
	out := <-read
	var exit *exec.ExitError
	if !errors.As(exitErr, &exit) || exit.ExitCode() != 1 || !strings.Contains(s.errb.String(), "evicted: the client stopped reading its messages") {
		t.Errorf("connect exited %v with stderr %q; want exit 1 naming the eviction", exitErr, s.errb.String())
	}
	// What the client read is what the pool had written, nothing made up:
	// each whole line an answer or a notification of the session, none an
	// error; a line the eviction cut off stays unfinished.
	lines := bytes.Split(out, []byte("\n"))
	for _, line := range lines[:len(lines)-1] {
		var m struct {
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil || m.Error != nil {
			t.Errorf("the client read a line it was not sent whole, or an error: %.200q (of %s)", line, describeOutput(out))
		}
	}
	if log := in.log.String(); strings.Contains(log, "session reattached") {
		t.Errorf("the pool took the evicted session back:\n%s", log)
	}
	t.Logf("connect exited %v (%s); the client read %d whole lines and %d bytes of a line cut off",
		exitErr, strings.TrimSpace(s.errb.String()), len(lines)-1, len(lines[len(lines)-1]))
}

// describeOutput sums up what a client read: its lines, each shortened.
func describeOutput(out []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d bytes:", len(out))
	for line := range bytes.SplitSeq(out, []byte("\n")) {
		if len(line) > 120 {
			fmt.Fprintf(&b, "\n  %.100s… (%d bytes)", line, len(line))
		} else {
			fmt.Fprintf(&b, "\n  %s", line)
		}
	}
	return b.String()
}
