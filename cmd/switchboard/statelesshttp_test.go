package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// 2026-07-28 requests POSTed by two clients, with the same id, are
// exchanges on the server's one stateless HTTP session: `status --json`
// shows that session once, marked stateless, and `history --json` records
// each exchange as one of its requests.
func TestStatelessHTTPInStatusAndHistory(t *testing.T) {
	cfg := strings.TrimSuffix(fakeConfig(t), "}") + `, "http": {"listen": "127.0.0.1:0"}}`
	in := serve(t, cfg)
	token, err := in.run("http-token")
	if err != nil {
		t.Fatal(err)
	}
	out, _ := in.run("status", "--json")
	var st struct {
		HTTP struct {
			Listen string `json:"listen"`
		} `json:"http"`
	}
	_ = json.Unmarshal([]byte(out), &st)
	url := "http://" + st.HTTP.Listen + "/mcp/fake"
	call := func(client, text string) string {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + text + `"},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
			`"io.modelcontextprotocol/clientInfo":{"name":"` + client + `","version":"1"}}}}`
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(token))
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "echo")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	var wg sync.WaitGroup
	for i, client := range []string{"alpha", "beta", "alpha"} {
		wg.Go(func() {
			text := client + string(rune('0'+i))
			if got := call(client, text); !strings.Contains(got, `"text":"`+text+`"`) || !strings.Contains(got, `"id":1`) {
				t.Errorf("%s got %s", text, got)
			}
		})
	}
	wg.Wait()
	http.DefaultClient.CloseIdleConnections()

	out, err = in.run("status", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var status struct {
		Sessions []struct {
			ID              string `json:"id"`
			ClientName      string `json:"clientName"`
			ClientVersion   string `json:"clientVersion"`
			ProtocolVersion string `json:"protocolVersion"`
			Transport       string `json:"transport"`
			Stateless       bool   `json:"stateless"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(out), &status); err != nil {
		t.Fatal(err)
	}
	if len(status.Sessions) != 1 {
		t.Fatalf("sessions: %s", out)
	}
	s := status.Sessions[0]
	if !s.Stateless || s.Transport != "http" || s.ClientName != "stateless HTTP" || s.ClientVersion != "2026-07-28" ||
		s.ProtocolVersion != "2026-07-28" {
		t.Fatalf("the stateless session: %+v", s)
	}
	waitFor(t, "the three exchanges in history, as the stateless session's requests", func() bool {
		out, err := in.run("history", "--json", "--session", s.ID)
		var rows []struct {
			Session    string `json:"session"`
			Method     string `json:"method"`
			OriginalID string `json:"originalId"`
			Status     string `json:"status"`
		}
		if err != nil || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 3 {
			return false
		}
		for _, r := range rows {
			if r.Session != s.ID || r.Method != "tools/call" || r.OriginalID != "1" || r.Status != "ok" {
				t.Fatalf("history row %+v", r)
			}
		}
		return true
	})
}
