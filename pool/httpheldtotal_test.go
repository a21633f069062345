package pool_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A legacy HTTP session that opens many POSTs and reads none of their
// responses cannot make the pool hold each one's bound: what its
// responses hold unread together is bounded too (twice the message
// limit), and a response whose answer or related message would pass it
// is ended as one that falls past its own bound is. Another session on
// the same server is answered as ever meanwhile. Before, each stalled
// POST held its answer, or its stream's backlog up to the message limit,
// until its write timed out: 48 of them held 48 answers (6 MiB where the
// total is 512 KiB), for 30 s, and the client could open more.
func TestHTTPStalledPostsOfOneSessionAreBoundedTogether(t *testing.T) {
	const (
		limit = 256 << 10 // Options.MaxMessageBytes
		total = 2 * limit // what a session's POSTs may hold together
		posts = 48
	)
	cases := []struct {
		name string
		call func(id int) string
	}{
		// Each POST's answer is half the message limit: within its own
		// bound, 6 MiB for all.
		{"large answers", func(id int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{"bytes":%d}}}`, id, limit/2)
		}},
		// Each POST's stream carries 1,500 progress notifications
		// (about 170 KiB): within its own bound, 8 MiB for all.
		{"chatty streams", func(id int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"progress","arguments":{"steps":1500,"ms":0},"_meta":{"progressToken":"p%d"}}}`, id, id)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(pool.SetStreamWriteTimeout(time.Minute)) // no stalled write ends while the test looks
			var calls atomic.Int32                             // calls ended: only the stalled session's, until it is measured
			record := func(e pool.Event) {
				if e.Kind == pool.EventRequestDone && e.Method == "tools/call" {
					calls.Add(1)
				}
			}
			tp := newTestPool(t, &pool.Options{MaxMessageBytes: limit, Record: record}, fake("srv"))
			h, base := newStallFront(t, tp)
			url := base + "/mcp/srv"
			hostile := &httpClient{t: t, url: url}
			hostile.initialize("hostile")
			good := &httpClient{t: t, url: url}
			good.initialize("good")

			before := heapAlloc()
			conns := make([]net.Conn, posts)
			for i := range conns {
				conns[i], _ = rawPost(t, url, hostile.sid, tc.call(10+i))
			}
			// Every call answered at the child and handed to its POST:
			// what the pool holds for the session is what it keeps.
			eventually(t, "the stalled session's calls answered", func() bool {
				return calls.Load() == posts && inFlightOf(tp, "hostile") == 0 && sessionOf(tp, "hostile")
			}, func() string { return fmt.Sprintf("%d calls ended", calls.Load()) })
			held := pool.HTTPPostsHeld(h, hostile.sid)
			grew := heapAlloc() - before
			t.Logf("%d stalled POSTs: %d KiB counted held, the heap grew by %d KiB (the session's bound: %d KiB)",
				posts, held>>10, grew>>10, total>>10)
			if held > total {
				t.Errorf("the session's stalled POSTs hold %d KiB, want at most %d KiB", held>>10, total>>10)
			}
			const slack = 3 << 20 // the 48 connections' buffers, the child's reader's: measured 0.4 to 1.3 MiB
			if grew > total+slack {
				t.Errorf("the heap grew by %d KiB for one session's stalled POSTs, want at most %d KiB", grew>>10, (total+slack)>>10)
			}

			// The well-behaved session is answered at once.
			start := time.Now()
			for i := range 5 {
				text := fmt.Sprintf("good %d", i)
				m := good.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, 100+i, text))
				if m.Error != nil || m.text() != text {
					t.Fatalf("the other session's call: %s", m.raw)
				}
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the other session's 5 calls took %v", d)
			}

			// The responses past the bound were ended, each with the
			// reason when nothing had been written, or as an event
			// stream ends; the others are whole.
			type outcome struct {
				status int
				body   string
				err    error
			}
			outcomes := make([]outcome, posts)
			var wg sync.WaitGroup
			for i, c := range conns { // read at once, each as a client back to it would
				wg.Go(func() {
					o := &outcomes[i]
					o.status, o.body, o.err = readStalled(c)
				})
			}
			wg.Wait()
			ended := 0
			for i, o := range outcomes {
				switch {
				case o.err != nil:
					t.Errorf("POST %d: %v", i, o.err)
				case o.status == http.StatusServiceUnavailable:
					if !strings.Contains(o.body, "hold more than") {
						t.Errorf("POST %d ended with %q, want the session's bound named", i, o.body)
					}
					ended++
				case o.status == http.StatusOK && strings.HasPrefix(o.body, "event: message") && !strings.Contains(o.body, fmt.Sprintf(`"id":%d`, 10+i)):
					ended++ // an event stream cut short: no answer
				case o.status != http.StatusOK:
					t.Errorf("POST %d: %d %q", i, o.status, o.body)
				}
			}
			t.Logf("%d of %d stalled POSTs ended past the session's bound", ended, posts)
			if ended == 0 {
				t.Errorf("no stalled POST was ended past the session's bound")
			}
		})
	}
}

// readStalled reads the response a rawPost left unread, whole.
func readStalled(conn net.Conn) (status int, body string, err error) {
	_ = conn.(*net.TCPConn).SetReadBuffer(1 << 20)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, "", fmt.Errorf("reading a stalled POST's response: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", fmt.Errorf("reading a stalled POST's body: %w", err)
	}
	return resp.StatusCode, string(b), nil
}

// inFlightOf is how many requests the session of client name has in
// flight.
func inFlightOf(tp *testPool, name string) int {
	for _, s := range tp.Snapshot().Sessions {
		if s.ClientName == name {
			return s.InFlight
		}
	}
	return 0
}

// sessionOf reports whether the pool has a session of client name.
func sessionOf(tp *testPool, name string) bool {
	for _, s := range tp.Snapshot().Sessions {
		if s.ClientName == name {
			return true
		}
	}
	return false
}

// heapAlloc is the live heap after a collection.
func heapAlloc() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
