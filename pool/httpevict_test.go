package pool_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

const evictTestList = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

// initializeStatus POSTs a legacy initialize to url and returns the
// status it got, for a test's goroutine (which may not fail the test).
func initializeStatus(url, name string) (int, error) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":%q,"version":"1"}}}`, name)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestHTTPEvictionHoldsUpNoOtherInitialize: a legacy session the cap
// evicts is closed out of the lock that every initialize on every server
// takes. Its own child (share "session") here ignores both its stdin
// closing and SIGTERM, and takes its stop's graces (seconds) to exit; on
// the first edition the eviction closed it under that lock, and an
// initialize on an unrelated server waited until the child had exited.
// Now it is answered while the evicted child is still stopping.
func TestHTTPEvictionHoldsUpNoOtherInitialize(t *testing.T) {
	defer pool.SetHTTPEvictQuiet(0)() // the first session, just opened, may be evicted
	own := fake("own", "-exit-on-stdin-eof=false", "-ignore-sigterm")
	own.Share = pool.ShareSession
	var rec recorder
	tp := newTestPool(t, &pool.Options{MaxHTTPSessions: 1, Record: rec.record}, own, fake("other"))
	base := newHTTPFront(t, tp)
	first := &httpClient{t: t, url: base + "/mcp/own"}
	first.initialize("first")
	pid := 0
	for _, b := range tp.Snapshot().Backends {
		if b.Server == "own" {
			pid = b.PID
		}
	}
	if pid == 0 {
		t.Fatal("the first session's own child is not running")
	}
	type result struct {
		status int
		err    error
		at     time.Time // when it was answered
	}
	newcomer := make(chan result, 1)
	go func() {
		st, err := initializeStatus(base+"/mcp/own", "newcomer")
		newcomer <- result{st, err, time.Now()}
	}()
	rec.waitFor(t, "the evicted session's child to begin stopping", func(e pool.Event) bool {
		return e.Kind == pool.EventBackendState && e.State == pool.StateStopping && e.PID == pid
	})
	other := &httpClient{t: t, url: base + "/mcp/other"}
	other.initialize("other")
	otherAt := time.Now()
	other.call(evictTestList)
	got := <-newcomer
	if got.err != nil || got.status != http.StatusOK {
		t.Fatalf("the newcomer's initialize: %d, %v", got.status, got.err)
	}
	// Events are recorded in the background: the exit's time orders it.
	exit := rec.waitFor(t, "the evicted session's child to exit", func(e pool.Event) bool {
		return e.Kind == pool.EventBackendExited && e.PID == pid
	})
	if !exit.Time.After(otherAt) {
		t.Error("the initialize on another server was answered only once the evicted session's child had exited")
	}
	if got.at.Before(exit.Time) {
		t.Error("the newcomer's initialize was answered before the child of the session evicted for it had exited")
	}
	r := first.post(evictTestList)
	r.Body.Close()
	if r.StatusCode != http.StatusNotFound {
		t.Fatalf("the evicted session's request: %s, want 404", r.Status)
	}
}

// TestHTTPCapEvictsTheQuietestClient: at the cap the session evicted
// for a newcomer is the one whose client has sent no request for the
// longest, whether or not it holds a GET stream open. On the first
// edition a session with an open stream never counted as idle: a client
// holding every other slot with a stream it never read, and never
// calling, had the one client that had just called evicted (404), and
// that client's initialize refused (503) for as long as the streams
// stayed open.
func TestHTTPCapEvictsTheQuietestClient(t *testing.T) {
	defer pool.SetHTTPEvictQuiet(0)() // the stream holders are quiet at once
	const capacity = 4
	tp := newTestPool(t, &pool.Options{MaxHTTPSessions: capacity}, fake("srv"))
	url := newHTTPFront(t, tp) + "/mcp/srv"
	victim := &httpClient{t: t, url: url}
	victim.initialize("victim")
	var holders []*httpClient
	var streams []*getStream
	for i := range capacity - 1 {
		c := &httpClient{t: t, url: url}
		c.initialize(fmt.Sprintf("holder%d", i))
		holders = append(holders, c)
		streams = append(streams, openedGetStream(t, url, c.sid)) // never read
	}
	victim.call(evictTestList) // its client calls; theirs stay quiet
	newcomer := &httpClient{t: t, url: url}
	newcomer.initialize("newcomer")
	victim.call(evictTestList)
	newcomer.call(evictTestList)
	// The quietest, the first stream holder, was evicted: its stream ends.
	streams[0].untilEOF()
	r := holders[0].post(evictTestList)
	r.Body.Close()
	if r.StatusCode != http.StatusNotFound {
		t.Fatalf("the quietest session's request: %s, want 404", r.Status)
	}
	for _, c := range holders[1:] {
		c.call(evictTestList)
	}
}

// TestHTTPCapRefusesWhileEveryClientIsBusy: at the cap with every
// session's client having called within evictQuiet, a newcomer's
// initialize is refused (503) rather than cutting a busy client off.
func TestHTTPCapRefusesWhileEveryClientIsBusy(t *testing.T) {
	defer pool.SetHTTPEvictQuiet(time.Hour)()
	tp := newTestPool(t, &pool.Options{MaxHTTPSessions: 2}, fake("srv"))
	url := newHTTPFront(t, tp) + "/mcp/srv"
	a, b := &httpClient{t: t, url: url}, &httpClient{t: t, url: url}
	a.initialize("a")
	b.initialize("b")
	st, err := initializeStatus(url, "newcomer")
	if err != nil || st != http.StatusServiceUnavailable {
		t.Fatalf("the newcomer's initialize: %d, %v; want 503", st, err)
	}
	a.call(evictTestList)
	b.call(evictTestList)
}
