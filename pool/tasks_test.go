package pool_test

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// tasksCaps is a 2025-11-25 initialize result's tasks capability, if any.
func tasksCaps(t *testing.T, result json.RawMessage) json.RawMessage {
	t.Helper()
	var r struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		t.Fatal(err)
	}
	return r.Capabilities["tasks"]
}

// A 2025-11-25 task is the child's, not a session's: a child shared by
// several sessions lists, reads and cancels every task for whoever asks.
// So the pool offers no tasks to the clients of a shared child: alice's
// task-augmented call runs as a plain one (a server that offers no tasks
// ignores the augmentation), its progress and secret hers alone, and
// bob's tasks/list and tasks/result are refused before they reach the
// child. Before, the child's tasks capability was passed on, bob listed
// alice's task and tasks/result handed him her secret.
func TestSharedChildsTasksDoNotLeak(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("tasks", "-tasks", "-log", logPath))
	alice, bob := tp.dial(t, "tasks"), tp.dial(t, "tasks")
	const caps = `{"tasks":{"list":{},"cancel":{}}}`
	if got := tasksCaps(t, alice.initialize("alice", caps).Result); got != nil {
		t.Errorf("a shared child's tasks offered to a client: %s", got)
	}
	bob.initialize("bob", caps)

	alice.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"alice-secret"},"task":{"ttl":60000}}}`)
	m, _ := alice.recvID("1")
	if m.text() != "alice-secret" {
		t.Errorf("alice's task-augmented call: want its plain result, got %s", m.raw)
	}
	taskID := "task-1" // the fake's first task, had one been made
	var r struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if json.Unmarshal(m.Result, &r) == nil && r.Task.TaskID != "" {
		taskID = r.Task.TaskID
	}
	alice.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":2,"ms":5},"task":{},"_meta":{"progressToken":"a-tok"}}}`)
	m, other := alice.recvID("2")
	if m.text() != "done" || len(other) != 2 {
		t.Errorf("alice's task-augmented progress call: want its result after 2 progress notifications, got %s after %d", m.raw, len(other))
	}
	var seen []string
	for id, req := range map[string]string{
		"10": `{"jsonrpc":"2.0","id":10,"method":"tasks/list"}`,
		"11": `{"jsonrpc":"2.0","id":11,"method":"tasks/get","params":{"taskId":"` + taskID + `"}}`,
		"12": `{"jsonrpc":"2.0","id":12,"method":"tasks/result","params":{"taskId":"` + taskID + `"}}`,
		"13": `{"jsonrpc":"2.0","id":13,"method":"tasks/cancel","params":{"taskId":"` + taskID + `"}}`,
	} {
		bob.send(req)
		m, other := bob.recvID(id)
		if m.Error == nil || m.Error.Code != -32601 {
			t.Errorf("bob's %s: want -32601, got %s", req, m.raw)
		}
		seen = append(seen, m.raw)
		for _, o := range other {
			seen = append(seen, o.raw)
		}
	}
	if all := strings.Join(seen, "\n"); strings.Contains(all, "alice-secret") || strings.Contains(all, `"taskId"`) {
		t.Errorf("bob saw alice's task:\n%s", all)
	}
	for _, line := range childLog(t, logPath) {
		method, _ := line["method"].(string)
		params, _ := line["params"].(map[string]any)
		if _, ok := params["task"]; ok || strings.HasPrefix(method, "tasks/") {
			t.Errorf("the shared child was sent %v", line)
		}
	}

	// A 2026-07-28 client of the shared child is not offered tasks either.
	modern := tp.dial(t, "tasks")
	modern.send(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + modernMeta + `}}`)
	if m, _ := modern.recvID("1"); tasksCaps(t, m.Result) != nil {
		t.Errorf("a shared child's tasks offered in server/discover: %s", m.raw)
	}
}

// A session's own child (share "session") serves one client: its tasks
// are that client's, and pass through: offered, created, read, their
// progress under the call's token for the task's life (2025-11-25), and
// their status notifications reach the session. The stateless HTTP session's
// own child is another matter: every 2026-07-28 HTTP client shares it,
// so it offers none.
func TestOwnChildsTasksPassThrough(t *testing.T) {
	cfg := fake("tasks", "-tasks")
	cfg.Share = pool.ShareSession
	tp := newTestPool(t, nil, cfg)
	alice, bob := tp.dial(t, "tasks"), tp.dial(t, "tasks")
	if got := tasksCaps(t, alice.initialize("alice", `{"tasks":{}}`).Result); got == nil {
		t.Errorf("a session's own child's tasks not offered")
	}
	bob.initialize("bob", "")

	alice.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"alice-secret"},"task":{"ttl":60000}}}`)
	m, _ := alice.recvID("1")
	var r struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if json.Unmarshal(m.Result, &r); r.Task.TaskID == "" {
		t.Fatalf("alice's task-augmented call on her own child: want the task, got %s", m.raw)
	}
	alice.send(`{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"` + r.Task.TaskID + `"}}`)
	m, other := alice.recvID("2")
	if m.text() != "alice-secret" {
		t.Errorf("alice's tasks/result: %s", m.raw)
	}
	status := func() bool {
		for _, o := range other {
			if o.Method == "notifications/tasks/status" && strings.Contains(string(o.Params), r.Task.TaskID) {
				return true
			}
		}
		return false
	}
	for !status() {
		other = append(other, alice.recv())
	}

	// Its progress goes on under alice's token once the call was
	// answered with its task, until the task is done.
	alice.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"progress","arguments":{"steps":3,"ms":5},"task":{},"_meta":{"progressToken":"a-tok"}}}`)
	if m, _ = alice.recvID("5"); !strings.Contains(string(m.Result), `"task"`) {
		t.Fatalf("alice's task-augmented progress call: want its task, got %s", m.raw)
	}
	var progress []string
	for {
		o := alice.recv()
		if o.Method == "notifications/tasks/status" {
			break
		}
		progress = append(progress, string(o.Params))
	}
	if len(progress) != 3 || !strings.Contains(progress[2], `"progressToken":"a-tok"`) {
		t.Errorf("alice's task's progress: want 3 notifications under her token, got %q", progress)
	}

	bob.send(`{"jsonrpc":"2.0","id":3,"method":"tasks/list"}`)
	if m, _ := bob.recvID("3"); m.Error != nil || strings.Contains(m.raw, r.Task.TaskID) {
		t.Errorf("bob's tasks/list on his own child: want his own (none), got %s", m.raw)
	}

	h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/tasks"}
	resp := h.post(`{"jsonrpc":"2.0","id":4,"method":"tasks/list","params":{` + modernMeta + `}}`)
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "-32601") {
		t.Errorf("a stateless HTTP client's tasks/list: want 404 and -32601, got %s %s", resp.Status, b)
	}
}
