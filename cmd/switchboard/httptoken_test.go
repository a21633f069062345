package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The HTTP front door's token: made 0600 at first start, the same after a
// restart (clients store it), printed by `http-token`, replaced by
// `http-token --rotate` with the running pool taking the new one at once.
func TestHTTPTokenLifecycle(t *testing.T) {
	cfg := strings.TrimSuffix(fakeConfig(t), "}") + `, "http": {"listen": "127.0.0.1:0"}}`
	in := serve(t, cfg)
	tokenFile := filepath.Join(in.home, "http-token")
	fi, err := os.Stat(tokenFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v", err, fi.Mode())
	}
	printed, err := in.run("http-token")
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(printed)
	if data, _ := os.ReadFile(tokenFile); strings.TrimSpace(string(data)) != tok || len(tok) < 32 {
		t.Fatalf("http-token printed %q, file has %q", tok, data)
	}
	out, _ := in.run("status", "--json")
	var st struct {
		HTTP struct {
			Listen string `json:"listen"`
		} `json:"http"`
	}
	_ = json.Unmarshal([]byte(out), &st)
	url := "http://" + st.HTTP.Listen + "/mcp/fake"
	call := func(token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := call(""); got != 401 {
		t.Errorf("no token: %d, want 401", got)
	}
	if got := call(tok); got != 200 {
		t.Errorf("the token: %d, want 200", got)
	}
	rotated, err := in.run("http-token", "--rotate")
	if err != nil {
		t.Fatal(err)
	}
	newTok := strings.TrimSpace(rotated)
	if newTok == tok || call(tok) != 401 || call(newTok) != 200 {
		t.Errorf("after --rotate: old %d, new %d", call(tok), call(newTok))
	}
	// Stable across restarts.
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.done:
		in.done <- nil
	case <-time.After(15 * time.Second):
		t.Fatal("the pool did not stop")
	}
	again := serveHome(t, in.home)
	if printed, _ := again.run("http-token"); strings.TrimSpace(printed) != newTok {
		t.Errorf("after a restart the token is %q, want %q", printed, newTok)
	}
}
