package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// 16 sessions through `switchboard connect` to the real
// @modelcontextprotocol/server-everything and server-memory list and call
// tools concurrently; each gets its own answers, and each server runs as
// one child. Needs npx and the npm registry (make test sets
// SWITCHBOARD_NPX=1 when npx is there).
func TestRealServersThroughConnect(t *testing.T) {
	if os.Getenv("SWITCHBOARD_NPX") == "" {
		t.Skip("SWITCHBOARD_NPX is not set")
	}
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("npx not found")
	}
	in := serve(t, `{"mcpServers":{
		"everything":{"command":"npx","args":["-y","@modelcontextprotocol/server-everything"]},
		"memory":{"command":"npx","args":["-y","@modelcontextprotocol/server-memory"],"env":{"MEMORY_FILE_PATH":"`+homeDir(t)+`/memory.jsonl"}}}}`)
	const perServer = 8
	var wg sync.WaitGroup
	for _, server := range []string{"everything", "memory"} {
		for i := range perServer {
			s := in.connect(t, server)
			wg.Go(func() {
				s.initialize(fmt.Sprintf("%s-client-%d", server, i))
				s.send(`{"jsonrpc":"2.0","id":"list","method":"tools/list"}`)
				r := s.recvID(`"list"`)
				var tl struct {
					Tools []struct {
						Name string `json:"name"`
					} `json:"tools"`
				}
				if err := json.Unmarshal(r.Result, &tl); err != nil || len(tl.Tools) == 0 {
					t.Errorf("%s session %d: tools/list: %s", server, i, r.raw)
					return
				}
				mine := fmt.Sprintf("session-%s-%d", server, i)
				switch server {
				case "everything":
					s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":%q}}}`, mine))
					if got := toolText(s.recvID("1")); !strings.Contains(got, mine) {
						t.Errorf("everything session %d: echo answered %q", i, got)
					}
				case "memory":
					s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_entities","arguments":{"entities":[{"name":%q,"entityType":"test","observations":["x"]}]}}}`, mine))
					// The answer lists the entities this call created: ours
					// only. (Reading the graph back is not a routing check:
					// server-memory's file updates race among concurrent
					// writers, pooled or not.)
					if got := toolText(s.recvID("1")); !strings.Contains(got, mine) || strings.Contains(got, "session-memory-") && strings.Count(got, "session-memory-") != 1 {
						t.Errorf("memory session %d: create_entities answered %q", i, got)
					}
					s.send(`{"jsonrpc":"2.0","id":"2","method":"tools/call","params":{"name":"read_graph","arguments":{}}}`)
					if r := s.recvID(`"2"`); r.Error != nil {
						t.Errorf("memory session %d: read_graph: %s", i, r.raw)
					}
				}
			})
		}
	}
	wg.Wait()
	st := in.status()
	if len(st.Backends) != 2 || len(st.Sessions) != 2*perServer {
		t.Fatalf("want 2 children for %d sessions, status: %+v", 2*perServer, st)
	}
}
