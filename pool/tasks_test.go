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

// tasksMeta is a 2026-07-28 request's _meta declaring the tasks extension.
const tasksMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// declaredTasks is what of tasks a request a child got declared in its
// _meta's client capabilities: 2025-11-25's member, or the extension.
func declaredTasks(line map[string]any) string {
	params, _ := line["params"].(map[string]any)
	meta, _ := params["_meta"].(map[string]any)
	caps, _ := meta["io.modelcontextprotocol/clientCapabilities"].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	switch {
	case caps["tasks"] != nil:
		return "tasks"
	case ext["io.modelcontextprotocol/tasks"] != nil:
		return "the tasks extension"
	}
	return ""
}

// A 2026-07-28 client declares the tasks extension in each request's own
// _meta, and a modern server may answer any call of a client that did
// with a task. Declared to a shared child, the task, which every session
// of the child could name, became the client's answer. So for a shared
// child the pool takes the declaration out of what the child gets, as it
// keeps it out of a legacy client's capabilities it declares for it: the
// call is answered with its plain result, and bob reaches no task of
// alice's. Before, the declaration reached the child and alice got its
// task.
func TestSharedModernChildsTasksDoNotLeak(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("tasks", "-era", "modern", "-tasks", "-log", logPath))
	alice, bob := tp.dial(t, "tasks"), tp.dial(t, "tasks")
	alice.send(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + tasksMeta + `}}`)
	if m, _ := alice.recvID("1"); strings.Contains(string(m.Result), "io.modelcontextprotocol/tasks") {
		t.Errorf("a shared child's tasks extension offered in server/discover: %s", m.raw)
	}
	alice.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"alice-secret"},` + tasksMeta + `}}`)
	m, _ := alice.recvID("2")
	if m.text() != "alice-secret" {
		t.Errorf("alice's call declaring the tasks extension: want its plain result, got %s", m.raw)
	}
	taskID := "task-1" // the fake's first task, had one been made
	var r struct {
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(m.Result, &r) == nil && r.TaskID != "" {
		taskID = r.TaskID
	}
	bob.send(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"` + taskID + `",` + tasksMeta + `}}`)
	m, other := bob.recvID("3")
	if m.Error == nil || m.Error.Code != -32601 {
		t.Errorf("bob's tasks/get of alice's task: want -32601, got %s", m.raw)
	}
	for _, o := range append(other, m) {
		if strings.Contains(o.raw, "alice-secret") {
			t.Errorf("bob saw alice's task: %s", o.raw)
		}
	}

	// A legacy client of the modern child: what its initialize declared
	// goes with its requests, without tasks.
	carol := tp.dial(t, "tasks")
	carol.initialize("carol", `{"tasks":{"requests":{"tools":{"call":{}}}},"extensions":{"io.modelcontextprotocol/tasks":{}}}`)
	carol.call("4", "echo", `{"text":"carol-secret"}`)
	if m, _ := carol.recvID("4"); m.text() != "carol-secret" {
		t.Errorf("a legacy client's call on the shared modern child: want its plain result, got %s", m.raw)
	}

	// The stateless HTTP session's child is every modern HTTP client's.
	h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/tasks"}
	if m := h.call(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"dave-secret"},` + tasksMeta + `}}`); m.text() != "dave-secret" {
		t.Errorf("a stateless HTTP client's call declaring the tasks extension: want its plain result, got %s", m.raw)
	}

	for _, line := range childLog(t, logPath) {
		if d := declaredTasks(line); d != "" {
			t.Errorf("the shared child was declared %s: %v", d, line)
		}
	}
}

// A child that answers with a task a call that asked for none (2026-07-28
// forbids it; 2025-11-25 runs a call without its task as a plain one)
// would give a client of a shared child a task that is no one's to
// follow: tasks/* are refused there. The client gets an error saying so,
// whichever era the child speaks. Before, the task went to the client.
func TestSharedChildsUnaskedTaskIsRefused(t *testing.T) {
	tp := newTestPool(t, nil, fake("legacy", "-tasks", "-tasks-unasked"),
		fake("modern", "-era", "modern", "-tasks", "-tasks-unasked"))
	legacy, modern := tp.dial(t, "legacy"), tp.dial(t, "modern")
	legacy.initialize("alice", "")
	legacy.call("1", "echo", `{"text":"alice-secret"}`)
	modern.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bob-secret"},` + modernMeta + `}}`)
	for c, name := range map[*client]string{legacy: "legacy", modern: "modern"} {
		m, _ := c.recvID("1")
		if m.Error == nil || m.Error.Code != -32603 || !strings.Contains(m.Error.Message, "task") || strings.Contains(m.raw, "taskId") {
			t.Errorf("a call the %s child answered with a task no one asked: want -32603 saying so, got %s", name, m.raw)
		}
	}
}

// A 2026-07-28 client's own child (share "session") may answer its call
// with a task when it declared the tasks extension, which it follows
// with tasks/get: they pass through.
func TestOwnModernChildsTasksPassThrough(t *testing.T) {
	cfg := fake("tasks", "-era", "modern", "-tasks")
	cfg.Share = pool.ShareSession
	tp := newTestPool(t, nil, cfg)
	alice := tp.dial(t, "tasks")
	alice.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"alice-secret"},` + tasksMeta + `}}`)
	m, _ := alice.recvID("1")
	var r struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
		Status     string `json:"status"`
		Result     *struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if json.Unmarshal(m.Result, &r); r.ResultType != "task" || r.TaskID == "" {
		t.Fatalf("alice's call on her own child declaring the tasks extension: want its task, got %s", m.raw)
	}
	taskID := r.TaskID
	eventually(t, "alice's task completed", func() bool {
		alice.send(`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"` + taskID + `",` + tasksMeta + `}}`)
		m, _ := alice.recvID("2")
		r.Status, r.Result = "", nil
		if json.Unmarshal(m.Result, &r); m.Error != nil || r.Status == "" {
			t.Fatalf("alice's tasks/get: %s", m.raw)
		}
		return r.Status == "completed"
	})
	if r.Result == nil || len(r.Result.Content) == 0 || r.Result.Content[0].Text != "alice-secret" {
		t.Errorf("alice's completed task: want her result, got %+v", r)
	}
}
