//go:build unix

package pool_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestUnfinishedLinesShareABudget: each session may hold a line of up to
// the message limit unfinished for 30 s, so thousands of sessions doing
// so at once would take all the machine's memory. The lines past 1 MiB
// share one budget (Options.MaxUnfinishedBytes): a session whose line
// would take the pool past it is closed, for good, saying why; the
// others are not affected; and what a line held is given back as its
// session closes or the line ends.
func TestUnfinishedLinesShareABudget(t *testing.T) {
	const budget = 10 << 20
	tp := newTestPool(t, &pool.Options{MaxUnfinishedBytes: budget}, fake("srv"))
	normal := tp.dial(t, "srv")
	normal.initialize("normal", "")
	// 3 MiB is read into a buffer of 4 MiB. A Write returns once the
	// pool has read all of it but what a socket buffer holds: past 2 MiB,
	// so the pool holds the 4 MiB buffer by then.
	head := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`
	text := strings.Repeat("x", 3<<20)
	unfinished := func(r *relayedSession) error {
		_, err := r.conn.Write([]byte(head + text))
		return err
	}
	var holders []*relayedSession
	for range 2 {
		r := tp.relay(t, "srv")
		if err := unfinished(r); err != nil {
			t.Fatal(err)
		}
		holders = append(holders, r)
	}

	past := tp.relay(t, "srv")
	wrote := make(chan error, 1)
	go func() { wrote <- unfinished(past) }() // the pool may close it before it took all
	m, bye := past.next()
	<-wrote
	if bye == nil || !strings.Contains(bye.End, "unfinished") || !strings.Contains(bye.End, fmt.Sprint(budget>>20)+" MiB") {
		t.Fatalf("the session past the budget: got %q, Farewell %+v; want a Farewell saying the budget of unfinished messages is spent", m.raw, bye)
	}
	if held := tp.UnfinishedHeld(); held > budget {
		t.Fatalf("the unfinished lines hold %d bytes, past the budget of %d", held, budget)
	}
	normal.call("3", "echo", `{"text":"still"}`)
	if m, _ := normal.recvID("3"); m.text() != "still" {
		t.Fatalf("another session, after the close: %.200s", m.raw)
	}

	for _, r := range holders {
		r.conn.Close()
	}
	eventually(t, "the budget given back by the closed sessions", func() bool { return tp.UnfinishedHeld() == 0 },
		func() string { return fmt.Sprintf("%d bytes held", tp.UnfinishedHeld()) })
	r := tp.relay(t, "srv")
	if err := unfinished(r); err != nil {
		t.Fatal(err)
	}
	if held := tp.UnfinishedHeld(); held == 0 {
		t.Fatalf("a line of 3 MiB, read but unfinished, holds nothing of the budget")
	}
	r.send(`"}}}`)
	if m, bye := r.next(); bye != nil || len(m.Result) == 0 || !strings.Contains(m.raw, text) {
		t.Fatalf("a large line once the budget was given back: %.200s, Farewell %+v", m.raw, bye)
	}
	eventually(t, "the budget given back by a line that ended", func() bool { return tp.UnfinishedHeld() == 0 },
		func() string { return fmt.Sprintf("%d bytes held", tp.UnfinishedHeld()) })
}
