//go:build unix

package pool_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// initRoots initializes a client that declares roots, and answers the
// pool's roots/list with uris.
func (c *client) initRoots(name string, uris ...string) {
	c.t.Helper()
	c.answerRootsAsk(c.initRootsAsked(name), uris...)
}

// initRootsAsked initializes a client that declares roots and returns the
// pool's roots/list request, left for the test to answer (or not).
func (c *client) initRootsAsked(name string) msg {
	c.t.Helper()
	c.initialize(name, `{"roots":{"listChanged":true}}`)
	return c.rootsAsk()
}

// rootsAsk reads the next message, which must be the pool's roots/list.
func (c *client) rootsAsk() msg {
	c.t.Helper()
	req := c.recv()
	if req.Method != "roots/list" {
		c.t.Fatalf("want the pool's roots/list, got %s", req.raw)
	}
	return req
}

// answerRoots reads the pool's roots/list request and answers it.
func (c *client) answerRoots(uris ...string) {
	c.t.Helper()
	c.answerRootsAsk(c.rootsAsk(), uris...)
}

// answerRootsAsk answers the pool's roots/list request ask with uris
// (none: an empty list).
func (c *client) answerRootsAsk(ask msg, uris ...string) {
	c.t.Helper()
	roots := make([]map[string]string, 0, len(uris))
	for _, u := range uris {
		roots = append(roots, map[string]string{"uri": u, "name": filepath.Base(u)})
	}
	res, _ := json.Marshal(map[string]any{"roots": roots})
	c.sendf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, ask.ID, res)
}

// changeRoots tells the pool the client's roots changed, and answers its
// roots/list with uris.
func (c *client) changeRoots(uris ...string) {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	c.answerRoots(uris...)
}

// pidOf asks the session's child its PID.
func (c *client) pidOf(id string) string {
	c.t.Helper()
	return c.askChild(id, "pid")
}

// askChild calls the child's tool (no arguments) as id and returns the
// answer's text, failing if a child's roots/list reached the client
// meanwhile.
func (c *client) askChild(id, tool string) string {
	c.t.Helper()
	c.call(id, tool, `{}`)
	m, other := c.recvID(id)
	for _, o := range other {
		if o.Method == "roots/list" {
			c.t.Fatalf("the pool handed a child's roots/list to a client: %s", o.raw)
		}
	}
	return m.text()
}

// childRoots asks the session's child which roots it was given.
func (c *client) childRoots(id string) string {
	c.t.Helper()
	c.call(id, "ask", `{"kind":"roots"}`)
	m, other := c.recvID(id)
	if len(other) > 0 {
		c.t.Fatalf("the child's roots/list reached the client: %s", other[0].raw)
	}
	return m.text()
}

// A shared child is one per roots partition: sessions with the same roots
// share a PID, different roots (or none) get their own, and each child is
// told only its partition's roots, by the pool, never by another client.
// On the first edition every session reached one child, and its roots/list
// went to whichever client answered first.
func TestRootsPartitionChildren(t *testing.T) {
	tp := newTestPool(t, nil, fake("fs"))
	a, b, a2, none := tp.dial(t, "fs"), tp.dial(t, "fs"), tp.dial(t, "fs"), tp.dial(t, "fs")
	a.initRoots("a", "file:///work/a")
	b.initRoots("b", "file:///work/b")
	a2.initRoots("a2", "file:///work/a") // same roots as a
	none.initialize("none", "")

	pa, pb, pa2, pn := a.pidOf("1"), b.pidOf("1"), a2.pidOf("1"), none.pidOf("1")
	if pa != pa2 {
		t.Errorf("same roots, different children: %s and %s", pa, pa2)
	}
	if pa == pb || pn == pa || pn == pb {
		t.Errorf("different roots share a child: a %s, b %s, none %s", pa, pb, pn)
	}
	for _, tc := range []struct {
		c    *client
		want string
	}{{a, "file:///work/a"}, {b, "file:///work/b"}, {a2, "file:///work/a"}} {
		got := tc.c.childRoots("2")
		if !strings.Contains(got, tc.want) || strings.Contains(got, "file:///work/"+map[string]string{"file:///work/a": "b", "file:///work/b": "a"}[tc.want]) {
			t.Errorf("child of %s was given roots %s, want only %s", tc.want, got, tc.want)
		}
	}
	if got := none.childRoots("2"); strings.Contains(got, "file://") {
		t.Errorf("the no-roots child was given roots: %s", got)
	}
	st := tp.Snapshot()
	var parts []string
	for _, be := range st.Backends {
		parts = append(parts, fmt.Sprintf("%v:%d", be.Roots, be.Sessions))
	}
	if strings.Join(parts, " ") != "[]:1 [file:///work/a]:2 [file:///work/b]:1" {
		t.Errorf("status partitions (roots:sessions) = %v", parts)
	}

	// A child that restarts asks roots/list again: the pool answers from
	// the partition, so b's roots never reach a's child.
	a.call("3", "crash", `{}`)
	a.recvID("3")
	eventually(t, "a's child to restart", func() bool {
		for _, be := range tp.Snapshot().Backends {
			if len(be.Roots) == 1 && be.Roots[0] == "file:///work/a" && be.PID != 0 && fmt.Sprint(be.PID) != pa && be.State == pool.StateReady {
				return true
			}
		}
		return false
	})
	if got := a.childRoots("4"); !strings.Contains(got, "file:///work/a") || strings.Contains(got, "/b") {
		t.Errorf("after a restart a's child was given %s", got)
	}
}

// roots/list_changed from a session makes the pool ask it again and move
// it to the child of its new roots; the children keep their own roots.
func TestRootsChangeMovesTheSession(t *testing.T) {
	tp := newTestPool(t, nil, fake("fs"))
	a, b := tp.dial(t, "fs"), tp.dial(t, "fs")
	a.initRoots("a", "file:///work/a")
	b.initRoots("b", "file:///work/b")
	pa, pb := a.pidOf("1"), b.pidOf("1")
	a.changeRoots("file:///work/b")
	if got := a.pidOf("2"); got != pb || got == pa {
		t.Fatalf("after moving to b's roots a reaches %s (a's child %s, b's %s)", got, pa, pb)
	}
	if got := b.childRoots("3"); strings.Contains(got, "/a") {
		t.Fatalf("b's child was given a's roots: %s", got)
	}
}

// A root URI holding a line break (a JSON "\n", which no URI may hold)
// neither joins the partition of the URIs it seems to list nor reaches a
// child. On the first edition the partition key was the URIs joined by
// line breaks: b's roots "file:///work/a\nfile:///work/b" and
// "file:///work/c" named the partition of a's three, a shared b's child,
// and a's child was told b's roots.
func TestRootsWithALineBreakShareNoChild(t *testing.T) {
	tp := newTestPool(t, nil, fake("fs"))
	b := tp.dial(t, "fs")
	b.initRoots("b", "file:///work/a\nfile:///work/b", "file:///work/c")
	pb := b.pidOf("1")
	a := tp.dial(t, "fs")
	a.initRoots("a", "file:///work/a", "file:///work/b", "file:///work/c")
	if pa := a.pidOf("1"); pa == pb {
		t.Errorf("a's three roots and b's two, one with a line break, share the child %s", pa)
	}
	if got := a.childRoots("2"); strings.Contains(got, `\n`) || strings.Count(got, "file:///work/") != 3 {
		t.Errorf("a's child was given %s, want a's three roots", got)
	}
	if got := b.childRoots("2"); strings.Contains(got, `\n`) || strings.Contains(got, "/work/a") || !strings.Contains(got, "file:///work/c") {
		t.Errorf("b's child was given %s, want only file:///work/c", got)
	}
}

// share "global": one child whatever the roots, told of none, and the
// pool does not ask clients for roots.
func TestShareGlobalIgnoresRoots(t *testing.T) {
	cfg := fake("g")
	cfg.Share = pool.ShareGlobal
	tp := newTestPool(t, nil, cfg)
	a, b := tp.dial(t, "g"), tp.dial(t, "g")
	a.initialize("a", `{"roots":{}}`)
	b.initialize("b", `{"roots":{}}`)
	if pa, pb := a.pidOf("1"), b.pidOf("1"); pa != pb {
		t.Fatalf("global server: two children %s %s", pa, pb)
	}
	if got := a.childRoots("2"); strings.Contains(got, "file://") {
		t.Fatalf("global child was given roots: %s", got)
	}
}

// The pool declares to a child only what its sessions can do: no
// sampling, elicitation or roots for a session that declared none.
func TestChildCapabilitiesFollowTheSession(t *testing.T) {
	dir := shortTempDir(t)
	logPath := filepath.Join(dir, "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	c := tp.dial(t, "srv")
	c.initialize("plain", "")
	c.pidOf("1")
	var caps string
	for _, m := range childLog(t, logPath) {
		if m["method"] == "initialize" || m["method"] == "server/discover" {
			raw, _ := json.Marshal(m["params"])
			caps += string(raw)
		}
	}
	for _, cap := range []string{"sampling", "elicitation", "roots"} {
		if strings.Contains(caps, `"`+cap+`"`) {
			t.Errorf("the pool declared %s to the child of a session without it: %s", cap, caps)
		}
	}
}

// A child's sampling request never goes to an HTTP session that cannot
// receive it (no GET stream open): asked during that session's own call,
// it gets -32006 at once, not a timeout; a capable stdio session's own
// call is asked, and answered. A question given to the HTTP session
// would wait the question grace, an hour here, for its stream: a -32006
// within the client's patience was not.
func TestChildRequestOnlyToSessionsThatCanReceive(t *testing.T) {
	tp := newTestPool(t, &pool.Options{QuestionGrace: time.Hour}, fake("srv"))
	// An HTTP client that declared sampling and opened no stream.
	h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	h.initializeWith("h", `{"sampling":{}}`)
	m := h.call(legacyAskCall(1, "sampling"))
	if !strings.Contains(m.raw, "no connected client") || !strings.Contains(m.raw, "32006") {
		t.Fatalf("want -32006 from the pool, got %s", m.raw)
	}
	sampler := tp.dial(t, "srv")
	sampler.initialize("sampler", `{"sampling":{}}`)
	sampler.call("2", "ask", `{"kind":"sampling"}`)
	q := sampler.recv()
	if q.Method != "sampling/createMessage" {
		t.Fatalf("sampler got %s", q.raw)
	}
	sampler.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"42"},"model":"m"}}`, q.ID)
	if m, _ := sampler.recvID("2"); !strings.Contains(m.text(), "42") {
		t.Fatalf("answered by the stdio session: %s", m.raw)
	}
}

// Two sessions at different log levels each receive exactly the messages
// their level admits; one that never asked receives none; the child runs
// at the most verbose level asked for, and goes back when that session
// leaves. On the first edition the last setLevel won for everyone.
func TestLogLevelPerSession(t *testing.T) {
	dir := shortTempDir(t)
	logPath := filepath.Join(dir, "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	verbose, quiet, silent := tp.dial(t, "srv"), tp.dial(t, "srv"), tp.dial(t, "srv")
	for _, c := range []*client{verbose, quiet, silent} {
		c.initialize("c", "")
	}
	verbose.send(`{"jsonrpc":"2.0","id":"lv","method":"logging/setLevel","params":{"level":"debug"}}`)
	if m, _ := verbose.recvID(`"lv"`); m.Error != nil {
		t.Fatal(m.raw)
	}
	quiet.send(`{"jsonrpc":"2.0","id":"lv","method":"logging/setLevel","params":{"level":"emergency"}}`)
	if m, _ := quiet.recvID(`"lv"`); m.Error != nil {
		t.Fatal(m.raw)
	}
	levels := []string{"debug", "info", "error", "emergency"}
	for i, lvl := range levels {
		verbose.call(fmt.Sprint(i+1), "log", fmt.Sprintf(`{"level":%q,"data":%q}`, lvl, lvl))
	}
	received := func(c *client, barrier string) []string {
		c.send(`{"jsonrpc":"2.0","id":"` + barrier + `","method":"ping"}`)
		_, other := c.recvID(`"` + barrier + `"`)
		var got []string
		for _, m := range other {
			if m.Method == "notifications/message" {
				var p struct {
					Level string `json:"level"`
				}
				_ = json.Unmarshal(m.Params, &p)
				got = append(got, p.Level)
			}
		}
		return got
	}
	// The verbose session sees its own calls' answers (in any order: the
	// child runs calls concurrently) and every message.
	var got []string
	for answered := 0; answered < len(levels); {
		m := verbose.recv()
		switch m.Method {
		case "":
			answered++
		case "notifications/message":
			var p struct {
				Level string `json:"level"`
			}
			_ = json.Unmarshal(m.Params, &p)
			got = append(got, p.Level)
		}
	}
	slices.SortFunc(got, func(a, b string) int { return levelIndex(a) - levelIndex(b) })
	if strings.Join(got, ",") != "debug,info,error,emergency" {
		t.Errorf("debug session received %v", got)
	}
	if got := received(quiet, "b1"); strings.Join(got, ",") != "emergency" {
		t.Errorf("emergency session received %v", got)
	}
	if got := received(silent, "b1"); len(got) != 0 {
		t.Errorf("a session that never set a level received %v", got)
	}
	// The verbose session leaves: the child goes back to emergency.
	verbose.close()
	eventually(t, "the child set back to emergency", func() bool {
		return strings.Join(childLevels(t, logPath), ",") == "debug,emergency"
	}, func() string { return fmt.Sprintf("the child was set to %v", childLevels(t, logPath)) })
}

// Sessions that set their levels and leave all at once leave the child
// at the level the remaining ones need. The attack: two level changes
// decided in one order and queued in the other, which left the child at
// a stale level while the pool believed it had set another. A child
// that declares no logging, whose answer to a session's setLevel is the
// session's, is set the same way: on the first edition it heard each
// session's level as it came, and ended at whichever came last.
func TestConcurrentLevelChangesLeaveTheChildRight(t *testing.T) {
	for _, mode := range []string{"declared", "undeclared"} {
		t.Run(mode, func(t *testing.T) { concurrentLevelChanges(t, mode) })
	}
}

func concurrentLevelChanges(t *testing.T, mode string) {
	levels := []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}
	for round := range 4 {
		dir := shortTempDir(t)
		logPath := filepath.Join(dir, "child.log")
		tp := newTestPool(t, nil, fake("srv", "-logging", mode, "-log", logPath))
		clients := make([]*client, 12)
		for i := range clients {
			clients[i] = tp.dial(t, "srv")
			clients[i].initialize("c", "")
		}
		// The leavers ask for the most verbose levels: the child must go
		// back from them when they leave.
		level := func(i int) string { return levels[(i+round)%4+(i%2)*4] }
		setAll := make(chan struct{})
		done := make(chan struct{}, len(clients))
		for i, c := range clients {
			go func() {
				defer func() { done <- struct{}{} }()
				<-setAll
				c.send(`{"jsonrpc":"2.0","id":"lv","method":"logging/setLevel","params":{"level":"` + level(i) + `"}}`)
				c.recvID(`"lv"`)
				if i%2 == 0 {
					c.close()
				}
			}()
		}
		close(setAll)
		for range clients {
			<-done
		}
		want := len(levels) - 1
		for i := range clients {
			if i%2 == 1 {
				want = min(want, levelIndex(level(i)))
			}
		}
		eventually(t, "the leavers gone and the child at "+levels[want], func() bool {
			seen := childLevels(t, logPath)
			return len(tp.Snapshot().Sessions) == len(clients)/2 && len(seen) > 0 && seen[len(seen)-1] == levels[want]
		}, func() string { return fmt.Sprintf("round %d: the child was set to %v", round, childLevels(t, logPath)) })
		// And it stays there: a call the child answers after that went to
		// it after any level change still queued for it.
		clients[1].call(`"after"`, "echo", `{"text":"after"}`)
		if m, _ := clients[1].recvID(`"after"`); m.Error != nil {
			t.Fatalf("round %d: the call after: %s", round, m.raw)
		}
		if seen := childLevels(t, logPath); seen[len(seen)-1] != levels[want] {
			t.Errorf("round %d: the child was set to %v after it was at %s", round, seen, levels[want])
		}
	}
}

// A child that restarts is set, once, to the level its sessions asked
// for, and a level set while it restarts is the one it ends at.
func TestRestartedChildHearsTheSessionsLevel(t *testing.T) {
	dir := shortTempDir(t)
	logPath := filepath.Join(dir, "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	a, b := tp.dial(t, "srv"), tp.dial(t, "srv")
	a.initialize("a", "")
	b.initialize("b", "")
	a.send(`{"jsonrpc":"2.0","id":"lv","method":"logging/setLevel","params":{"level":"info"}}`)
	a.recvID(`"lv"`)
	pid := a.pidOf("1")
	a.call("2", "crash", `{}`)
	a.recvID("2")
	b.send(`{"jsonrpc":"2.0","id":"lv","method":"logging/setLevel","params":{"level":"debug"}}`)
	if m, _ := b.recvID(`"lv"`); m.Error != nil {
		t.Fatal(m.raw)
	}
	eventually(t, "the new child", func() bool {
		for _, be := range tp.Snapshot().Backends {
			if be.PID != 0 && fmt.Sprint(be.PID) != pid && be.State == pool.StateReady {
				return true
			}
		}
		return false
	})
	eventually(t, "the new child at debug", func() bool {
		seen := childLevels(t, logPath)
		return strings.Join(seen, ",") == "info,debug" || strings.Join(seen, ",") == "info,info,debug"
	}, func() string { return fmt.Sprintf("the children were set to %v", childLevels(t, logPath)) })
}

func levelIndex(l string) int {
	return slices.Index([]string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}, l)
}

// With trustAnnotations the pool lists a new child's tools itself, so a
// read-only call is retried after a crash even when no client listed
// tools; the retried call's progress does not go back: the client sees
// nothing until the new run passes the last value it was sent.
func TestTrustedRetryWithoutAClientToolsList(t *testing.T) {
	cfg := fake("srv")
	cfg.TrustAnnotations = true
	tp := newTestPool(t, nil, cfg)
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ro_progress","arguments":{"steps":6,"ms":150},"_meta":{"progressToken":"tok"}}}`)
	var seen []float64
	for len(seen) < 3 {
		m := c.recv()
		if m.Method != "notifications/progress" {
			t.Fatalf("before the crash: %s", m.raw)
		}
		var p struct {
			Progress float64 `json:"progress"`
		}
		_ = json.Unmarshal(m.Params, &p)
		seen = append(seen, p.Progress)
	}
	if err := syscall.Kill(tp.Snapshot().Backends[0].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for {
		m := c.recv()
		if m.Method == "" {
			if m.Error != nil || m.text() != "done" {
				t.Fatalf("the retried read-only call: %s", m.raw)
			}
			break
		}
		var p struct {
			Progress float64 `json:"progress"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Progress <= seen[len(seen)-1] {
			t.Fatalf("progress went back: %v then %v", seen, p.Progress)
		}
		seen = append(seen, p.Progress)
	}
	if seen[len(seen)-1] != 6 {
		t.Errorf("progress seen %v, want it to end at 6", seen)
	}
	if r := tp.Snapshot().Backends[0].Restarts; r != 1 {
		t.Errorf("restarts = %d", r)
	}
}

// A client that changes its roots over and over cannot start child after
// child: past the server's share (MaxRootsChildren), a new set of roots
// first takes the place of a child no session is in any more, however
// recently started, and when every child has sessions its requests are
// refused (-32004) while the sessions already there go on.
func TestRootsChildrenAreBounded(t *testing.T) {
	tp := newTestPool(t, &pool.Options{MaxRootsChildren: 2}, fake("fs"))
	hostile, settled := tp.dial(t, "fs"), tp.dial(t, "fs")
	settled.initRoots("settled", "file:///work/settled")
	settledPID := settled.pidOf("1")
	hostile.initRoots("hostile", "file:///work/0")
	for i := 1; i <= 5; i++ {
		hostile.pidOf(fmt.Sprint(i))
		hostile.changeRoots(fmt.Sprintf("file:///work/%d", i))
		if n := len(tp.Snapshot().Backends); n > 2 {
			t.Fatalf("after %d changes of roots the server runs %d children, past its limit of 2", i, n)
		}
	}
	if got := settled.pidOf("2"); got != settledPID {
		t.Fatalf("the settled session's child was replaced: %s, was %s", got, settledPID)
	}
	// With a child for the hostile session's latest roots, every child has
	// a session: a third set of roots is refused.
	hostile.pidOf("6")
	third := tp.dial(t, "fs")
	third.initRoots("third", "file:///work/third")
	third.call("1", "pid", `{}`)
	m, _ := third.recvID("1")
	if m.Error == nil || m.Error.Code != -32004 || !strings.Contains(m.Error.Message, "roots") {
		t.Fatalf("a third set of roots past the limit: %s", m.raw)
	}
	if got := settled.pidOf("3"); got != settledPID {
		t.Fatalf("the settled session after the refusal: %s, want %s", got, settledPID)
	}
	// Once the hostile client goes, its child makes room.
	hostile.close()
	eventually(t, "the third session's child", func() bool {
		third.call("2", "pid", `{}`)
		m, _ := third.recvID("2")
		return m.Error == nil
	})
}

// A client that does not answer the pool's roots/list cannot pile up
// messages in the pool meanwhile: what waits for the answer counts
// against its bytes (MaxSessionBytes), a request past them is refused
// (-32004) at once, and what was held goes on once the client answers.
func TestMessagesHeldForRootsAreBounded(t *testing.T) {
	const limit = 4 << 10
	tp := newTestPool(t, &pool.Options{MaxSessionBytes: limit}, fake("fs"))
	c := tp.dial(t, "fs")
	ask := c.initRootsAsked("slow") // the pool's roots/list, left unanswered for now
	text := strings.Repeat("x", 1<<10)
	for i := range 3 { // about 3.3 KiB: held
		c.call(fmt.Sprint(i), "echo", fmt.Sprintf(`{"text":%q}`, text))
	}
	c.call("9", "echo", fmt.Sprintf(`{"text":%q}`, text))
	m, _ := c.recvID("9")
	if m.Error == nil || m.Error.Code != -32004 || !strings.Contains(m.Error.Message, "roots/list") {
		t.Fatalf("a message past the held bytes: %s", m.raw)
	}
	c.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"roots":[{"uri":"file:///work/a"}]}}`, ask.ID)
	answered := map[string]bool{}
	for range 3 { // the held calls, answered in any order
		m := c.recv()
		answered[string(m.ID)] = m.text() == text
	}
	if want := map[string]bool{"0": true, "1": true, "2": true}; !maps.Equal(answered, want) {
		t.Fatalf("the held calls after the answer: %v, want %v", answered, want)
	}
}

// A child no session is in any more may still owe an answer to a session
// that moved to other roots: when new roots need room, an idle child
// without sessions goes first, and the moved session's call gets its
// answer. Before, the oldest child without sessions was stopped to make
// room, and the call was answered "stopped, with no session left, to make
// room".
func TestRootsChildrenLetAMovedSessionsCallFinish(t *testing.T) {
	tp := newTestPool(t, &pool.Options{MaxRootsChildren: 3}, fake("fs"))
	mover, visitor, third := tp.dial(t, "fs"), tp.dial(t, "fs"), tp.dial(t, "fs")
	mover.initialize("mover", `{"roots":{"listChanged":true},"sampling":{}}`)
	mover.answerRoots("file:///work/a")
	mover.call(`"slow"`, "ask", `{"kind":"sampling"}`)
	question := mover.recv() // the child of a waits for this answer
	if question.Method != "sampling/createMessage" {
		t.Fatalf("want the child's sampling request, got %s", question.raw)
	}
	mover.changeRoots("file:///work/b")
	mover.pidOf("1")
	// A visitor's child, younger than a's, is left with no session and
	// nothing to answer.
	visitor.initRoots("visitor", "file:///work/d")
	visitorPID := visitor.pidOf("1")
	visitor.close()
	eventually(t, "the visitor's leaving", func() bool { return len(tp.Snapshot().Sessions) == 2 })

	third.initRoots("third", "file:///work/c")
	if third.pidOf("1") == visitorPID {
		t.Fatal("the third session was served by the visitor's child")
	}
	mover.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m"}}`, question.ID)
	answer, _ := mover.recvID(`"slow"`)
	if answer.Error != nil || !strings.Contains(answer.text(), "sampled") {
		t.Fatalf("the moved session's call: %s", answer.raw)
	}
}

// The attack on the rule above: a session that leaves a call hanging on
// each child it leaves cannot keep the other sessions' new roots out.
// When every child without sessions owes an answer, the oldest makes room
// anyway, and only the hanging call's own session pays for it: its call
// gets the at-most-once error, saying the pool stopped the child and why
// (not that the child exited, as it said before), and the child's
// question its call waited on is withdrawn at its client.
func TestHangingCallsDoNotHoldChildrenAgainstNewRoots(t *testing.T) {
	tp := newTestPool(t, &pool.Options{MaxRootsChildren: 2}, fake("fs"))
	hostile, settled := tp.dial(t, "fs"), tp.dial(t, "fs")
	hostile.initialize("hostile", `{"roots":{"listChanged":true},"sampling":{}}`)
	hostile.answerRoots("file:///work/0")
	ended := map[string]msg{} // the hanging calls' answers, whenever they come
	var asked, gone []msg     // the children's questions, and their withdrawals
	hanging := func(m msg) bool {
		switch {
		case m.Method == "" && strings.HasPrefix(string(m.ID), `"hang`):
			ended[string(m.ID)] = m
		case m.Method == "notifications/cancelled":
			gone = append(gone, m)
		default:
			return false
		}
		return true
	}
	next := func(what string, want func(msg) bool) msg {
		t.Helper()
		for {
			m := hostile.recv()
			if hanging(m) {
				continue
			}
			if !want(m) {
				t.Fatalf("want %s, got %s", what, m.raw)
			}
			return m
		}
	}
	for i := 1; i <= 3; i++ { // a call left hanging on the child of each roots it leaves
		hostile.call(fmt.Sprintf(`"hang%d"`, i), "ask", `{"kind":"sampling"}`)
		asked = append(asked, next("the child's sampling request", func(m msg) bool { return m.Method == "sampling/createMessage" }))
		hostile.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
		ask := next("the pool's roots/list", func(m msg) bool { return m.Method == "roots/list" })
		hostile.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"roots":[{"uri":"file:///work/%d"}]}}`, ask.ID, i)
		hostile.call(fmt.Sprint(i), "pid", `{}`)
		next("the pid", func(m msg) bool { return string(m.ID) == fmt.Sprint(i) && m.Error == nil })
	}
	settled.initRoots("settled", "file:///work/settled")
	settled.call("1", "pid", `{}`)
	m, _ := settled.recvID("1")
	if m.Error != nil {
		t.Fatalf("new roots while every child without sessions owes a hanging call: %s", m.raw)
	}
	if n := len(tp.Snapshot().Backends); n > 2 {
		t.Fatalf("the server runs %d children, past its limit of 2", n)
	}
	for len(ended) < 3 {
		if m := hostile.recv(); !hanging(m) {
			t.Fatalf("want the hanging calls' ends, got %s", m.raw)
		}
	}
	for id, m := range ended {
		if m.Error == nil || m.Error.Code != -32003 || !strings.Contains(m.Error.Message, "was stopped (") ||
			!strings.Contains(m.Error.Message, "its place went to the child of other roots") || !strings.Contains(string(m.Error.Data), `"mayHaveExecuted":true`) {
			t.Errorf("hanging call %s: %s", id, m.raw)
		}
	}
	var want []string // a stopped child's question is withdrawn before its call fails
	for _, q := range asked {
		want = append(want, string(q.ID))
	}
	if ids := withdrawn(gone); !slices.Equal(slices.Sorted(slices.Values(ids)), slices.Sorted(slices.Values(want))) {
		t.Errorf("questions %v withdrawn as %v, want each once", want, ids)
	}
}

// The first child a server starts is told the capabilities of the client
// it was started for: it is started while that client's initialize is
// being answered, and on the first edition before the pool had read the
// client's capabilities, so the child was told {} and a spec-following
// server refused sampling and elicitation for its whole life.
func TestFirstChildHearsTheClientsCapabilities(t *testing.T) {
	for _, share := range []pool.Share{pool.ShareShared, pool.ShareSession} {
		t.Run(string(share), func(t *testing.T) {
			logPath := filepath.Join(shortTempDir(t), "child.log")
			cfg := fake("s", "-log", logPath)
			cfg.Share = share
			tp := newTestPool(t, nil, cfg)
			c := tp.dial(t, "s")
			c.initialize("c", `{"sampling":{},"elicitation":{}}`)
			c.pidOf("1")
			var told []any
			for _, m := range childLog(t, logPath) {
				if m["method"] == "initialize" {
					caps, _ := m["params"].(map[string]any)["capabilities"].(map[string]any)
					told = append(told, caps)
					if _, ok := caps["sampling"]; !ok {
						t.Errorf("the child was told capabilities %v, without the client's sampling", caps)
					}
					if _, ok := caps["elicitation"]; !ok {
						t.Errorf("the child was told capabilities %v, without the client's elicitation", caps)
					}
				}
			}
			if len(told) != 1 {
				t.Fatalf("the child heard %d initializes, want 1", len(told))
			}
		})
	}
}

// A session's own child (share "session") is told that session's roots,
// and follows them when they change: the child starts while the client's
// initialize is answered, before the pool asks the client its roots, and on
// the first edition it was told no roots at all, ever.
func TestOwnChildFollowsItsSessionsRoots(t *testing.T) {
	logPath := filepath.Join(shortTempDir(t), "child.log")
	cfg := fake("own", "-log", logPath)
	cfg.Share = pool.ShareSession
	tp := newTestPool(t, nil, cfg)
	a := tp.dial(t, "own")
	a.initRoots("a", "file:///work/a")
	if got := a.childRoots("1"); !strings.Contains(got, "file:///work/a") {
		t.Fatalf("the session's own child was given %s, want file:///work/a", got)
	}
	// It heard one already if it started before its session's roots were
	// known: it may have asked them then.
	told := countMethod(childLog(t, logPath), "notifications/roots/list_changed")
	a.changeRoots("file:///work/b")
	eventually(t, "the child to hear that its roots changed", func() bool {
		return countMethod(childLog(t, logPath), "notifications/roots/list_changed") == told+1
	})
	if got := a.childRoots("2"); !strings.Contains(got, "file:///work/b") || strings.Contains(got, "file:///work/a") {
		t.Fatalf("after the roots changed, the child was given %s, want file:///work/b only", got)
	}
}

// movedToAFreshChild starts a pool of server fs (its children logging to
// logPath) and a session a of roots file:///work/a; once a's call 1 has
// started a child, it runs before(a, logPath), moves a to roots
// file:///work/b, and returns when a's call 3 has started another child.
func movedToAFreshChild(t *testing.T, before func(a *client, logPath string)) (a *client, logPath string) {
	t.Helper()
	logPath = filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, nil, fake("fs", "-log", logPath))
	a = tp.dial(t, "fs")
	a.initRoots("a", "file:///work/a")
	first := a.pidOf("1")
	before(a, logPath)
	a.changeRoots("file:///work/b")
	if second := a.pidOf("3"); second == first {
		t.Fatalf("new roots, same child %s", second)
	}
	return a, logPath
}

// A session's subscriptions follow it to the child of its new roots: the
// child of the roots it left is unsubscribed (when nobody else holds the
// resource there), the child of its new roots subscribed, so updates keep
// coming; and its unsubscribe, after the move, releases what it holds. On
// the first edition the unsubscribe went to the new child, which held
// nothing; the old child stayed subscribed for good, and the session got
// no update from the new one.
func TestSubscriptionsFollowTheSessionsRoots(t *testing.T) {
	a, logPath := movedToAFreshChild(t, func(a *client, _ string) { subscribeCounter(t, a, "2") })
	a.call("4", "notify", `{"kind":"updated"}`)
	if _, other := a.recvID("4"); !slices.ContainsFunc(other, func(m msg) bool { return m.Method == "notifications/resources/updated" }) {
		t.Errorf("no resources/updated from the child of the session's new roots")
	}
	a.send(`{"jsonrpc":"2.0","id":5,"method":"resources/unsubscribe","params":{"uri":"fake://counter"}}`)
	if m, _ := a.recvID("5"); m.Error != nil {
		t.Fatalf("unsubscribe: %s", m.raw)
	}
	eventually(t, "each subscribe of the children's to be undone", func() bool {
		log := childLog(t, logPath)
		return countMethod(log, "resources/subscribe") == 2 && countMethod(log, "resources/unsubscribe") == 2
	}, func() string {
		log := childLog(t, logPath)
		return fmt.Sprintf("%d subscribes, %d unsubscribes", countMethod(log, "resources/subscribe"), countMethod(log, "resources/unsubscribe"))
	})
}

// A session's log level follows it to the child of its new roots: that
// child then logs what the session asked for (and each session still gets
// only the levels it asked for), and the child it left goes back to what
// its remaining sessions ask. On the first edition the new child stayed
// at its other session's level, and the session's info messages were
// never sent.
func TestLogLevelFollowsTheSessionsRoots(t *testing.T) {
	tp := newTestPool(t, nil, fake("fs"))
	a, b := tp.dial(t, "fs"), tp.dial(t, "fs")
	setLevel := func(c *client, id, level string) {
		t.Helper()
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"logging/setLevel","params":{"level":"` + level + `"}}`)
		if m, _ := c.recvID(id); m.Error != nil {
			t.Fatalf("setLevel: %s", m.raw)
		}
	}
	b.initRoots("b", "file:///work/b")
	setLevel(b, "1", "error")
	a.initRoots("a", "file:///work/a")
	setLevel(a, "1", "debug")
	a.changeRoots("file:///work/b")
	// The child handles the pool's setLevel and a's call on goroutines of
	// their own: a's info message comes once the level is set.
	n := 0
	eventually(t, "a, which asked for debug and moved to b's child, to get an info message from it", func() bool {
		n++
		id := fmt.Sprintf(`"log-%d"`, n)
		a.call(id, "log", `{"level":"info","data":"for a"}`)
		_, other := a.recvID(id)
		return slices.ContainsFunc(other, func(m msg) bool { return m.Method == "notifications/message" })
	})
	b.call("2", "log", `{"level":"info","data":"for b?"}`)
	if _, other := b.recvID("2"); slices.ContainsFunc(other, func(m msg) bool { return m.Method == "notifications/message" }) {
		t.Errorf("b asked for error and got an info message")
	}
}

// A setLevel with a level that does not exist sets nothing for its
// session: on the first edition the pool took it for debug, and the
// session got every message another session's level made the shared
// child send.
func TestUnknownLogLevelSetsNothing(t *testing.T) {
	tp := newTestPool(t, nil, fake("fs"))
	a, b := tp.dial(t, "fs"), tp.dial(t, "fs")
	a.initialize("a", "")
	b.initialize("b", "")
	a.send(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"verbose"}}`)
	a.recvID("1")
	b.send(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`)
	if m, _ := b.recvID("1"); m.Error != nil {
		t.Fatalf("setLevel: %s", m.raw)
	}
	a.call("2", "log", `{"level":"debug","data":"for b only"}`)
	if _, other := a.recvID("2"); slices.ContainsFunc(other, func(m msg) bool { return m.Method == "notifications/message" }) {
		t.Errorf("a session whose only setLevel named no level got a debug message")
	}
}

// Stopping a server stops its sessions' own children too (share
// "session"), and a session's next request starts it another. On the
// first edition Stop touched only shared children: the command said it
// stopped the server and the child ran on.
func TestStopStopsSessionsOwnChildren(t *testing.T) {
	cfg := fake("own")
	cfg.Share = pool.ShareSession
	tp := newTestPool(t, nil, cfg)
	a := tp.dial(t, "own")
	a.initialize("a", "")
	first := a.pidOf("1")
	if err := tp.Stop("own"); err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(first)
	eventually(t, "the session's own child to exit", func() bool { return syscall.Kill(pid, 0) != nil })
	if again := a.pidOf("2"); again == first {
		t.Errorf("after Stop the session's call ran on the child that was stopped (%s)", first)
	}
}

// A config change reaches the sessions' own children (share "session")
// as it reaches shared ones: one that changes how the child is started
// replaces it (the old one exits, the session's next request runs on a
// child of the new config), disabling the server stops it, and a change
// to a pool-side setting (here requestTimeout) applies to the running
// child. On the first edition they ran on with the old command,
// environment and settings until their sessions ended.
func TestConfigChangeReachesSessionsOwnChildren(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*pool.ServerConfig)
	}{
		{"env", func(c *pool.ServerConfig) { c.Env = map[string]string{"SWITCHBOARD_TEST_RELOAD": "1"} }},
		{"disabled", func(c *pool.ServerConfig) { c.Disabled = true }},
		{"requestTimeout", func(c *pool.ServerConfig) { c.RequestTimeout = 200 * time.Millisecond }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fake("own")
			cfg.Share = pool.ShareSession
			tp := newTestPool(t, nil, cfg)
			a := tp.dial(t, "own")
			a.initialize("a", "")
			first := a.pidOf("1")
			tc.change(&cfg)
			if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
				t.Fatal(err)
			}
			pid, _ := strconv.Atoi(first)
			switch tc.name {
			case "requestTimeout":
				a.call("2", "sleep", `{"ms":60000}`)
				if m, _ := a.recvID("2"); m.Error == nil || !strings.Contains(m.raw, "did not answer tools/call within 200ms") {
					t.Fatalf("a call past the new requestTimeout got %s, want a timeout", m.raw)
				}
				if again := a.pidOf("3"); again != first {
					t.Errorf("a pool-side setting replaced the child: %s, then %s", first, again)
				}
				return
			case "disabled":
				eventually(t, "the session's own child to exit", func() bool { return syscall.Kill(pid, 0) != nil })
				a.call("2", "pid", `{}`)
				if m, _ := a.recvID("2"); m.Error == nil {
					t.Errorf("a call to a disabled server got %s", m.raw)
				}
			default:
				eventually(t, "the session's old child to exit", func() bool { return syscall.Kill(pid, 0) != nil })
				if again := a.pidOf("2"); again == first {
					t.Errorf("after the change the session's call ran on the old child (%s)", first)
				}
			}
		})
	}
}

// The same with a 2026-07-28 child, which refuses a request without its
// _meta: the pool's own tools/list carries one, so the hints it learns
// let a read-only call be retried after a crash. (It went without, was
// refused, and the call got -32003.)
func TestTrustedRetryWithoutAClientToolsListOfAModernChild(t *testing.T) {
	cfg := fake("srv", "-era", "modern")
	cfg.TrustAnnotations = true
	tp := newTestPool(t, nil, cfg)
	c := tp.dial(t, "srv")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ro_progress","arguments":{"steps":6,"ms":150},` +
		`"_meta":{"progressToken":"tok","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	// The pool's tools/list, sent as the child became ready, is answered
	// at once; the call's steps are 150 ms apart.
	for range 3 {
		if m := c.recv(); m.Method != "notifications/progress" {
			t.Fatalf("before the crash: %s", m.raw)
		}
	}
	if err := syscall.Kill(tp.Snapshot().Backends[0].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for {
		m := c.recv()
		if m.Method != "" {
			continue // the retried call's progress
		}
		if m.Error != nil || m.text() != "done" {
			t.Fatalf("a read-only call written to a child that died: %s, want it retried and answered", m.raw)
		}
		break
	}
}
