package pool_test

import (
	"bufio"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestLocalSessionsAreBounded: every connection to the local socket, from
// its accept (before its hello) to its session's end, holds descriptors
// and memory of the pool's, so a local process opening connection after
// connection could take every descriptor the pool has, and no client
// could connect. Past Options.MaxLocalSessions a new connection is told
// why in its Welcome, which says the pool is busy (its shim tries again),
// and closed; once one ends, a client connects again.
func TestLocalSessionsAreBounded(t *testing.T) {
	tp := newTestPool(t, &pool.Options{MaxLocalSessions: 3}, fake("srv"))
	silent, err := net.Dial("unix", tp.sock) // no hello: it counts all the same
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	a := tp.dial(t, "srv")
	a.initialize("a", "")
	tp.dial(t, "srv")

	conn, err := net.Dial("unix", tp.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte(`{"server":"srv"}` + "\n"))
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	var w pool.Welcome
	if err != nil || json.Unmarshal(line, &w) != nil || w.Error == "" || !strings.Contains(w.Error, "sessions") {
		t.Fatalf("a connection past the limit of local sessions: want a Welcome saying why, got %q, %v", line, err)
	}
	if w.Stopping || w.Ended {
		t.Errorf("the refusal says the pool is stopping or the session ended: %s", line)
	}
	if !w.Busy {
		t.Errorf("the refusal does not say the pool is busy (a resuming shim would end its session): %s", line)
	}
	a.call("1", "echo", `{"text":"open"}`)
	if m, _ := a.recvID("1"); m.text() != "open" {
		t.Fatalf("a session already open, after the refusal: %.200s", m.raw)
	}
	silent.Close()
	eventually(t, "a session once another connection ended", func() bool {
		c, err := tp.tryDial(t, "srv")
		if err != nil {
			return false
		}
		c.close()
		return true
	})
}

// TestUnfinishedLineIsBounded: a client writes a whole message at once,
// so a line that stays unfinished past 1 MiB holds the pool's memory for
// nothing (forty sessions each holding 60 MB without a newline once held
// 2.4 GB for good). Such a session is closed once its line has waited
// unfinished (no more of it) for the timeout; a large message written
// whole is taken.
func TestUnfinishedLineIsBounded(t *testing.T) {
	t.Cleanup(pool.SetUnfinishedLineTimeout(time.Second)) // after the pool closed
	tp := newTestPool(t, nil, fake("srv"))
	whole := tp.dial(t, "srv")
	whole.initialize("whole", "")
	text := strings.Repeat("w", 3<<20)
	whole.call("1", "echo", `{"text":"`+text+`"}`)
	if m, _ := whole.recvID("1"); m.text() != text {
		t.Fatalf("a large message written whole was not answered: %.200s", m.raw)
	}

	c := tp.dial(t, "srv")
	c.initialize("partial", "")
	if _, err := c.conn.Write([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("x", 2<<20))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("a session whose 2 MiB line stayed unfinished was not closed")
	}
	whole.call("3", "echo", `{"text":"still"}`)
	if m, _ := whole.recvID("3"); m.text() != "still" {
		t.Fatalf("another session after the close: %.200s", m.raw)
	}
}

// TestUnfinishedLineThatKeepsComingIsTaken: a large message that takes
// longer than the timeout to arrive, but keeps coming (eight 60 MB
// messages at once on a loaded machine took a minute), is taken and
// answered; one that stops coming after a while is closed as before.
func TestUnfinishedLineThatKeepsComingIsTaken(t *testing.T) {
	const timeout = 2 * time.Second
	t.Cleanup(pool.SetUnfinishedLineTimeout(timeout)) // after the pool closed
	tp := newTestPool(t, nil, fake("srv"))
	start := strings.Repeat("s", 1<<20+100<<10) // past keepBuf
	chunk := strings.Repeat("k", 350<<10)       // three make more than keepBuf
	head := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`

	// Eight chunks per timeout where three are enough: a sender or a
	// reader that a loaded machine holds up for most of a timeout still
	// keeps the line coming, and one held up longer catches up.
	const perTimeout = 8
	writeChunks := func(c *client, n int) {
		t.Helper()
		next := time.Now()
		for range n {
			next = next.Add(timeout / perTimeout)
			pace := time.NewTimer(time.Until(next))
			<-pace.C
			if _, err := c.conn.Write([]byte(chunk)); err != nil {
				t.Fatalf("a line that kept coming: %v", err)
			}
		}
	}

	slow := tp.dial(t, "srv")
	slow.initialize("slow", "")
	if _, err := slow.conn.Write([]byte(head + start)); err != nil {
		t.Fatal(err)
	}
	const chunks = 2 * perTimeout // for two timeouts
	writeChunks(slow, chunks)
	if _, err := slow.conn.Write([]byte("\"}}}\n")); err != nil {
		t.Fatal(err)
	}
	if m, _ := slow.recvID("1"); m.text() != start+strings.Repeat(chunk, chunks) {
		t.Fatalf("a line that kept coming for %d timeouts was not answered whole: %.200s", chunks/perTimeout, m.raw)
	}

	stalled := tp.dial(t, "srv")
	stalled.initialize("stalled", "")
	if _, err := stalled.conn.Write([]byte(head + start)); err != nil {
		t.Fatal(err)
	}
	writeChunks(stalled, 4)
	select {
	case <-stalled.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("a session whose line stopped coming was not closed")
	}
}
