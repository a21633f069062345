package pool_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

const legacyInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`

// TestHTTPInitializeGivenUpEndsItsSession: a client that gives up on its
// initialize before the answer (its child is slow to start) never
// learns its session's id, which goes out with the answer: the session
// ends as the POST does, and with "share": "session" its child with it.
// On the first edition the session stayed, for no one to reach, until
// the idle expiry half an hour later, holding its child.
func TestHTTPInitializeGivenUpEndsItsSession(t *testing.T) {
	hold := filepath.Join(t.TempDir(), "hold")
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fake("srv", "-start-while", hold)
	cfg.Share = pool.ShareSession
	tp := newTestPool(t, nil, cfg)
	url := newHTTPFront(t, tp) + "/mcp/srv"
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(legacyInitialize))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	eventually(t, "the session and its child", func() bool {
		snap := tp.Snapshot()
		return len(snap.Sessions) == 1 && len(snap.Backends) == 1
	})
	cancel() // the client gives up
	if err := <-done; err == nil {
		t.Fatal("the initialize was answered")
	}
	eventually(t, "the session no one can reach to end, and its child", func() bool {
		snap := tp.Snapshot()
		return len(snap.Sessions) == 0 && len(snap.Backends) == 0
	}, func() string {
		b, _ := json.Marshal(tp.Snapshot().Sessions)
		return string(b)
	})
	os.Remove(hold)
}

// TestHTTPFailedInitializeKeepsNoSession: an initialize whose server
// cannot start (its command does not exist) is answered with the error
// and no Mcp-Session-Id, and leaves no session. On the first edition it
// was answered with an id, and the session stayed open.
func TestHTTPFailedInitializeKeepsNoSession(t *testing.T) {
	tp := newTestPool(t, nil, pool.ServerConfig{Name: "gone", Command: filepath.Join(t.TempDir(), "no-such-server")})
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/gone"}
	resp := c.post(legacyInitialize)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var m msg
	if err := json.Unmarshal(b, &m); err != nil || m.Error == nil {
		t.Fatalf("initialize: %s %s, want an error", resp.Status, b)
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		t.Fatalf("a failed initialize handed out session id %q", sid)
	}
	eventually(t, "no session left", func() bool { return len(tp.Snapshot().Sessions) == 0 })
}
