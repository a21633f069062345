package pool

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// A task (2025-11-25; a 2026-07-28 extension) is its server's, listed,
// read and cancelled by id for whoever asks: a server tells its clients'
// tasks apart by session, or by who authenticated, and a child shared by
// several clients through the pool has one client, the pool. So a shared
// child's tasks are offered to no client, and what would reach them is
// kept from it: a task-augmented request runs as a plain one (a server
// that offers no tasks ignores the augmentation), a request declares no
// tasks to it (2026-07-28 declares the extension in each request's
// _meta, and a server may answer any call of a client that did with a
// task), a task it answers with all the same is an error, and a tasks/
// request is refused. A session's own child (share "session") serves one
// client, whose tasks they all are: they pass through, as do its
// notifications/tasks/status, and a task-augmented call's progress goes
// on reaching its client once the call is answered with its task, as
// 2025-11-25 keeps its token valid for the task's life (taskTokens). The
// stateless HTTP session's own child serves every 2026-07-28 HTTP
// client: shared.

// tasksExtension is the 2026-07-28 tasks extension's key in
// capabilities.extensions.
const tasksExtension = "io.modelcontextprotocol/tasks"

// offersTasks reports whether the session's child's tasks are offered to
// it: only when the child is its own, and the session one client's.
func (s *session) offersTasks() bool { return s.ownChild && !s.stateless }

// offersTasks is session.offersTasks of the child's one session; false
// for a shared child.
func (b *backend) offersTasks() bool { return b.owner != nil && b.owner.offersTasks() }

// untasked is a client's request as the child gets it: one for a child
// whose tasks are not offered without its task (withoutTask) and without
// tasks in the client capabilities its _meta declares
// (withoutTasksDeclared), or, a tasks/ request, refused.
func (b *backend) untasked(msg *jsonrpc.Message) (*jsonrpc.Message, error) {
	if b.offersTasks() {
		return msg, nil
	}
	if strings.HasPrefix(msg.Method, "tasks/") {
		return nil, newError(errNoTasks, false, "", b.srv.name)
	}
	if msg.Task.Present() {
		msg = withoutTask(msg)
	}
	if declaresTasks(msg) {
		msg = withoutTasksDeclared(msg)
	}
	return msg, nil
}

// declaresTasks reports whether a request's _meta may declare tasks in
// its client capabilities: they name "tasks", or have an escape that
// could spell it. A look at the capabilities alone, as every 2026-07-28
// request to a shared child has some.
func declaresTasks(msg *jsonrpc.Message) bool {
	if !msg.Meta.Present() || msg.Raw[msg.Meta.Start] != '{' {
		return false
	}
	m := msg.Meta.Of(msg.Raw)
	sp := jsonrpc.Member(m, metaClientCapabilities)
	if !sp.Present() {
		return false
	}
	caps := sp.Of(m)
	return bytes.Contains(caps, []byte("tasks")) || bytes.IndexByte(caps, '\\') >= 0
}

// quotedTask is what every task a child answers with names: 2026-07-28's
// resultType "task", 2025-11-25's "task" member.
var quotedTask = []byte(`"task"`)

// unaskedTask is the error a client gets for a request that a child whose
// tasks are not offered answered with a task all the same: a
// CreateTaskResult, 2026-07-28's (resultType "task") or 2025-11-25's
// (a task member with its taskId), though the request it got asked for
// none (untasked). No one could follow that task (tasks/ requests are
// refused), and the client must not take another client's task for its
// own. nil: the answer is not such a task.
func (b *backend) unaskedTask(method string, answer *jsonrpc.Message) *jsonrpc.Error {
	if !answer.Result.Present() || b.offersTasks() {
		return nil
	}
	res := answer.Result.Of(answer.Raw)
	if !bytes.Contains(res, quotedTask) { // most results: one quick look
		return nil
	}
	if rt, _ := jsonrpc.String(res, jsonrpc.Member(res, "resultType")); rt != "task" {
		task := jsonrpc.Member(res, "task")
		if !task.Present() || !jsonrpc.Member(task.Of(res), "taskId").Present() {
			return nil
		}
	}
	return newError(errUnaskedTask, true, b.srv.name, b.srv.name, method)
}

// maxTaskTokens bounds the task progress tokens a child's session keeps:
// past it, the expired ones, else the one kept longest, are let go.
const maxTaskTokens = 256

// taskTokens are the progress tokens of the tasks a session's own child
// made of its calls, by pool token: each call's ended with the
// CreateTaskResult that answered it, and its progress goes on. One is let
// go when its task reaches a terminal status (notifications/tasks/status),
// its ttl has passed, or room is needed (maxTaskTokens); a child that
// dies takes them with it. Its own lock: a leaf.
type taskTokens struct {
	mu sync.Mutex
	m  map[uint64]taskToken
}

// taskToken is a task's progress token as its client gave it.
type taskToken struct {
	origToken []byte
	taskID    string
	kept      time.Time
	until     time.Time // zero: no ttl
}

// keepTaskToken keeps p's progress token for the task the child answered
// it with, if the answer is a CreateTaskResult.
func (b *backend) keepTaskToken(p *pending, answer *jsonrpc.Message) {
	if !answer.Result.Present() || p.origToken == nil {
		return
	}
	var r struct {
		Task *struct {
			TaskID string `json:"taskId"`
			TTL    *int64 `json:"ttl"`
		} `json:"task"`
	}
	if json.Unmarshal(answer.Result.Of(answer.Raw), &r) != nil || r.Task == nil || r.Task.TaskID == "" {
		return
	}
	now := time.Now()
	t := taskToken{origToken: p.origToken, taskID: r.Task.TaskID, kept: now}
	if r.Task.TTL != nil && *r.Task.TTL > 0 {
		t.until = now.Add(time.Duration(*r.Task.TTL) * time.Millisecond)
	}
	b.tasks.mu.Lock()
	defer b.tasks.mu.Unlock()
	if b.tasks.m == nil {
		b.tasks.m = map[uint64]taskToken{}
	}
	if len(b.tasks.m) >= maxTaskTokens {
		b.tasks.makeRoomLocked(now)
	}
	b.tasks.m[p.token] = t
}

// makeRoomLocked lets go of the expired tokens, and if that leaves no
// room, of the one kept longest.
func (t *taskTokens) makeRoomLocked(now time.Time) {
	var oldest uint64
	for k, v := range t.m {
		switch {
		case !v.until.IsZero() && !now.Before(v.until):
			delete(t.m, k)
		case oldest == 0 || v.kept.Before(t.m[oldest].kept):
			oldest = k
		}
	}
	if len(t.m) >= maxTaskTokens {
		delete(t.m, oldest)
	}
}

// taskProgress is where progress under the pool token token goes once
// its call was answered with a task: its session, with the client's own
// token. nil: no task's token.
func (b *backend) taskProgress(token uint64) (to *session, origToken []byte) {
	if !b.offersTasks() {
		return nil, nil
	}
	b.tasks.mu.Lock()
	defer b.tasks.mu.Unlock()
	t, ok := b.tasks.m[token]
	if !ok {
		return nil, nil
	}
	if !t.until.IsZero() && !time.Now().Before(t.until) {
		delete(b.tasks.m, token)
		return nil, nil
	}
	return b.owner, t.origToken
}

// taskStatus delivers a notifications/tasks/status to the child's
// session, if its tasks are offered (else it is no one's), and lets go of
// the task's progress token once the task reached a terminal status.
func (b *backend) taskStatus(msg *jsonrpc.Message, params []byte) {
	if !b.offersTasks() {
		return
	}
	b.owner.deliver(append([]byte(nil), msg.Raw...), notice(msg.Method))
	switch status, _ := jsonrpc.String(params, jsonrpc.Member(params, "status")); status {
	case "completed", "failed", "cancelled":
		id, _ := jsonrpc.String(params, jsonrpc.Member(params, "taskId"))
		b.tasks.mu.Lock()
		for k, t := range b.tasks.m {
			if t.taskID == id {
				delete(b.tasks.m, k)
			}
		}
		b.tasks.mu.Unlock()
	}
}
