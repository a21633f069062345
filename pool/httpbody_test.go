package pool_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// unfinishedBody opens a POST to url with a chunked body, sends n bytes
// of it and never ends it.
func unfinishedBody(t *testing.T, url string, n int) net.Conn {
	t.Helper()
	host := strings.TrimPrefix(url, "http://")
	host, path, _ := strings.Cut(host, "/")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n", path, host)
	fmt.Fprintf(conn, "%x\r\n%s\r\n", n, strings.Repeat(" ", n))
	return conn
}

// A token holder that opens POSTs and sends each most of a large body,
// never finishing it, made the pool hold every one of them while it read
// (40 bodies of 60 MiB held 3.7 GB). What the front door holds for the
// large bodies it reads now has a budget across connections (four
// largest messages' worth): a body that would pass it is answered 503 at
// once and its connection closed; the budget comes back as bodies end;
// and a client sending ordinary requests meanwhile is not affected.
func TestHTTPUnfinishedLargeBodiesAreBounded(t *testing.T) {
	const max = 1 << 20
	tp := newTestPool(t, &pool.Options{MaxMessageBytes: max}, fake("srv"))
	h := tp.HTTPHandler()
	url := newHTTPFrontOf(t, h) + "/mcp/srv"
	full := pool.HTTPBodyBudgetLeft(h)
	if full != 4*max {
		t.Fatalf("budget %d, want %d", full, 4*max)
	}
	c := &httpClient{t: t, url: url}
	c.initialize("bystander")

	// Each unfinished body of 900 KiB holds a buffer of 1 MiB, of which
	// all but the first 64 KiB count.
	var held []net.Conn
	for range 4 {
		held = append(held, unfinishedBody(t, url, 900<<10))
	}
	eventually(t, "the four bodies read", func() bool { return pool.HTTPBodyBudgetLeft(h) == full-4*(max-64<<10) })
	over := unfinishedBody(t, url, 900<<10)
	_ = over.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatalf("a fifth unfinished body: %v; want it refused at once", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close {
		t.Fatalf("a fifth unfinished body: %s, close %v; want 503 and the connection closed", resp.Status, resp.Close)
	}

	// Meanwhile an ordinary request is answered.
	m := c.call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	if !strings.Contains(m.text(), "hi") {
		t.Fatalf("the bystander's call: %s", m.raw)
	}

	for _, conn := range held {
		conn.Close()
	}
	eventually(t, "the budget back once the bodies ended", func() bool { return pool.HTTPBodyBudgetLeft(h) == full })
}
