package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The duplicate-key attacks against the real
// @modelcontextprotocol/server-everything, whose JavaScript decoder takes
// the last of duplicate keys where the first edition's pool took the
// first. Two "_meta" objects (or two progressTokens), the last holding
// another session's pool token, made the child send its progress to that
// session; two "name"s ran one tool while history recorded another. Pool
// progress tokens are small sequential numbers, so the attacker tries them
// all. Each such message now gets -32600 for the attacker alone, and the
// victim sees only its own progress.
func TestDuplicateKeysAgainstServerEverything(t *testing.T) {
	if os.Getenv("SWITCHBOARD_NPX") == "" {
		t.Skip("SWITCHBOARD_NPX is not set")
	}
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("npx not found")
	}
	in := serve(t, `{"mcpServers":{"everything":{"command":"npx","args":["-y","@modelcontextprotocol/server-everything"]}}}`)
	victim, attacker := in.connect(t, "everything"), in.connect(t, "everything")
	victim.initialize("victim")
	attacker.initialize("attacker")

	const steps = 4
	victim.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":2,"steps":%d},"_meta":{"progressToken":"mine"}}}`, steps))
	var attacks []string
	for tok := 1; tok <= 40; tok++ {
		attacks = append(attacks,
			fmt.Sprintf(`{"jsonrpc":"2.0","id":"m%d","method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":1,"steps":2},"_meta":{"progressToken":"a"},"_meta":{"progressToken":%d}}}`, tok, tok),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":"t%d","method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":1,"steps":2},"_meta":{"progressToken":"a","progressToken":%d}}}`, tok, tok))
	}
	attacks = append(attacks, `{"jsonrpc":"2.0","id":"n","method":"tools/call","params":{"name":"get-sum","name":"echo","arguments":{"a":1,"b":2,"message":"ran echo"}}}`)
	for _, a := range attacks {
		attacker.send(a)
		var id struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal([]byte(a[:strings.Index(a, `,"method"`)]+"}"), &id)
		if r := attacker.recvID(string(id.ID)); !strings.Contains(string(r.Error), `"code":-32600`) {
			t.Fatalf("attack %s: want -32600, got %s", a, r.raw)
		}
	}

	// The victim's call ends with exactly its own progress.
	var progress []string
	for {
		line, err := victim.out.ReadString('\n')
		if err != nil {
			t.Fatalf("victim: %v", err)
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"params"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("victim got invalid JSON %q", line)
		}
		if m.Method == "notifications/progress" {
			progress = append(progress, string(m.Params.ProgressToken))
			continue
		}
		if string(m.ID) == "1" {
			if !strings.Contains(string(m.Result), "Long running operation completed") {
				t.Fatalf("victim's call: %s", line)
			}
			break
		}
	}
	if len(progress) != steps {
		t.Errorf("victim got %d progress notifications, want its %d: %q", len(progress), steps, progress)
	}
	for _, tok := range progress {
		if tok != `"mine"` {
			t.Errorf("foreign progress reached the victim: token %s", tok)
		}
	}
}
