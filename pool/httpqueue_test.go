package pool_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// untilEOF reads the stream to its end, within 15 s, and counts its
// events.
func (st *getStream) untilEOF() (events int) {
	st.t.Helper()
	_ = st.conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		line, err := st.r.ReadString('\n')
		if errors.Is(err, io.EOF) {
			return events
		}
		if err != nil {
			st.t.Fatalf("the GET stream did not end (%d events read): %v", events, err)
		}
		if strings.HasPrefix(line, "data: ") {
			events++
		}
	}
}

// TestHTTPGetStreamQueueIsBoundedInBytes: what waits for a legacy
// session's GET stream is bounded in bytes, as a POST's stream is. A
// client that opens its stream and reads nothing while a chatty child
// logs has its stream ended once more than the message limit waits for
// it, and what waited is dropped; a stream that ends leaves the next
// only EndedStreamBytes of notifications. On the first edition only the
// count was bounded (4096 messages of any size): a stalled client held
// hundreds of megabytes, on its stream and then, for the session's idle
// half hour, for a next stream that might never come.
func TestHTTPGetStreamQueueIsBoundedInBytes(t *testing.T) {
	const limit = 2 << 20
	tp := newTestPool(t, &pool.Options{MaxMessageBytes: limit}, fake("srv"))
	h, base := newStallFront(t, tp)
	c := &httpClient{t: t, url: base + "/mcp/srv"}
	c.initialize("c")
	if m := c.call(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`); m.Error != nil {
		t.Fatalf("setLevel: %s", m.raw)
	}
	chunk := strings.Repeat("x", 64<<10)
	logs := func(from, n int) (most int) {
		t.Helper()
		for i := range n {
			if m := c.call(logCall(from+i, chunk)); m.Error != nil {
				t.Fatalf("log: %.200s", m.raw)
			}
			most = max(most, pool.HTTPStreamQueuedBytes(h, c.sid))
		}
		return most
	}

	st := openStalledStream(t, c.url, c.sid)
	if most := logs(10, 48); most > limit || most < limit/2 { // 3 MiB logged
		t.Fatalf("%d bytes waited for a stream that reads nothing, want at most the limit, %d", most, limit)
	}
	if n := st.untilEOF(); n >= 48 {
		t.Fatalf("the stream that fell behind carried all %d logs", n)
	}

	st = openStalledStream(t, c.url, c.sid)
	if most := logs(100, 24); most <= pool.EndedStreamBytes { // 1.5 MiB logged: under the limit
		t.Fatalf("only %d bytes waited", most)
	}
	st.conn.Close()
	eventually(t, "the ended stream's notifications cut to what the next one gets", func() bool {
		return pool.HTTPStreamQueuedBytes(h, c.sid) <= pool.EndedStreamBytes
	}, func() string { return fmt.Sprintf("%d bytes queued", pool.HTTPStreamQueuedBytes(h, c.sid)) })
}
