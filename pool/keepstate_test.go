//go:build unix

package pool_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// An attached session's shim is told, in order, what the client sets up
// in the session (its initialize, its log level, each subscription it
// takes and lets go of), then, at a stop, the Farewell: what it keeps to
// resume the session with another pool. Each line says what the client
// sent, though the session's reader reads on into the same buffer before
// the line is written (a line was first queued as the reader's bytes,
// which the next messages overwrote: the shim kept a broken initialize,
// and a resume failed).
func TestAttachedShimIsToldWhatTheClientSetUp(t *testing.T) {
	resume, restore := pool.PauseShimLines() // until the reader has read on
	t.Cleanup(restore)
	tp := newTestPool(t, &pool.Options{StopGrace: time.Second}, fake("srv"))
	t.Cleanup(resume) // before the pool closes
	a := tp.attach(t, "srv")
	const params = `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"keeps","version":"1"}}`
	send := func(lines ...string) {
		t.Helper()
		if _, err := a.in.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	answers := func(n int) {
		t.Helper()
		for range n {
			if _, err := a.out.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":`+params+`}`, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	answers(1)
	// The reader reads these into the buffer it read the initialize in.
	var pings []string
	for i := range 200 {
		pings = append(pings, fmt.Sprintf(`{"jsonrpc":"2.0","id":"p%d","method":"ping","params":{"pad":%q}}`, i, strings.Repeat("x", 200)))
	}
	send(pings...)
	answers(len(pings))
	resume()
	send(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"fake://a"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"fake://b"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"resources/unsubscribe","params":{"uri":"fake://a"}}`)
	answers(4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tp.Close() // a stop: the session is handed back
	}()
	defer func() { <-done }()

	_ = a.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(a.conn)
	var got []string
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("the shim's connection ended before the Farewell (%v), after %q", err, got)
		}
		var msg struct {
			End *string `json:"end"`
			wire.State
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			t.Fatalf("the shim was sent %q: %v", line, err)
		}
		switch {
		case msg.End != nil:
			got = append(got, "farewell "+*msg.End)
		case msg.Initialize != nil:
			got = append(got, "initialize "+string(msg.Initialize))
		case msg.LogLevel != "":
			got = append(got, "level "+msg.LogLevel)
		case msg.Subscribed != nil:
			got = append(got, "subscribed "+*msg.Subscribed)
		case msg.Unsubscribed != nil:
			got = append(got, "unsubscribed "+*msg.Unsubscribed)
		default:
			got = append(got, "? "+string(line))
		}
		if msg.End != nil {
			break
		}
	}
	want := []string{"initialize " + params, "level debug", "subscribed fake://a", "subscribed fake://b",
		"unsubscribed fake://a", "farewell " + wire.EndPoolStopping}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the shim was told:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
