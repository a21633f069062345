package pool_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// notificationsIn lists the methods and subscription tags of the
// notifications among msgs.
func notificationsIn(msgs []msg) []string {
	var out []string
	for _, m := range msgs {
		if m.Method == "" {
			continue
		}
		var p struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		_ = json.Unmarshal(m.Params, &p)
		out = append(out, m.Method+" "+string(p.Meta["io.modelcontextprotocol/subscriptionId"]))
	}
	return out
}

// TestListenOnLegacyChild: modern clients' subscriptions/listen on a
// legacy child. Each listen is acknowledged with the filter the child can
// honour; each gets exactly the change notifications it asked for, tagged
// with its id; a legacy session of the same child still gets its own,
// untagged; the child sees one resources/subscribe for a listened
// resource, and the unsubscribe when the listen is cancelled.
func TestListenOnLegacyChild(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	m1, m2, old := tp.dial(t, "srv"), tp.dial(t, "srv"), tp.dial(t, "srv")
	old.initialize("old", "")
	m1.send(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fake://counter"]},` + modernMeta + `}}`)
	ack := m1.recv()
	if ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(string(ack.Params), `"io.modelcontextprotocol/subscriptionId":"L"`) ||
		!strings.Contains(string(ack.Params), `"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fake://counter"]}`) {
		t.Fatalf("ack: %s", ack.raw)
	}
	m2.send(`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"promptsListChanged":true},` + modernMeta + `}}`)
	if ack := m2.recv(); ack.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("ack: %s", ack.raw)
	}
	// after collects what a session received before the answer to a
	// sentinel call sent now.
	after := func(c *client, id string) []string {
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"s"},` + modernMeta + `}}`)
		_, before := c.recvID(id)
		return notificationsIn(before)
	}
	for _, kind := range []string{"tools", "prompts", "updated"} {
		old.call(`"n-`+kind+`"`, "notify", `{"kind":"`+kind+`"}`)
		_, oldGot := old.recvID(`"n-` + kind + `"`)
		got1, got2 := after(m1, `"s1-`+kind+`"`), after(m2, `"s2-`+kind+`"`)
		want1, want2, wantOld := map[string][]string{
			"tools":   {"notifications/tools/list_changed \"L\""},
			"updated": {"notifications/resources/updated \"L\""},
		}[kind], map[string][]string{
			"prompts": {"notifications/prompts/list_changed 7"},
		}[kind], map[string][]string{
			"tools": {"notifications/tools/list_changed "}, "prompts": {"notifications/prompts/list_changed "},
		}[kind]
		if strings.Join(got1, ";") != strings.Join(want1, ";") || strings.Join(got2, ";") != strings.Join(want2, ";") ||
			strings.Join(notificationsIn(oldGot), ";") != strings.Join(wantOld, ";") {
			t.Fatalf("notify %s: listen L got %q (want %q), listen 7 got %q (want %q), legacy got %q (want %q)",
				kind, got1, want1, got2, want2, notificationsIn(oldGot), wantOld)
		}
	}
	if n := countInLog(t, logPath, "resources/subscribe"); n != 1 {
		t.Fatalf("child saw %d resources/subscribe, want 1", n)
	}
	m1.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L"}}`)
	eventually(t, "the child's resources/unsubscribe", func() bool {
		return countInLog(t, logPath, "resources/unsubscribe") == 1
	})
	old.call(`"n-again"`, "notify", `{"kind":"tools"}`)
	old.recvID(`"n-again"`)
	if got := after(m1, `"s1-again"`); len(got) != 0 {
		t.Fatalf("a cancelled listen still got %q", got)
	}
}

// TestListenOnLegacyChildAcknowledgedOnceSubscribed: a modern client's
// listen for resources on a legacy child is acknowledged once the child
// answered the pool's resources/subscribe for each, and promises those
// the child took: the child takes its time (-subscribe-delay), and
// refuses one resource (-refuse-subscribe). An update made once the
// listen is acknowledged reaches it. (Acknowledged at once, the listen
// missed the updates made before the child subscribed, and was promised
// the refused resource.)
func TestListenOnLegacyChildAcknowledgedOnceSubscribed(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv", "-subscribe-delay", "300ms", "-refuse-subscribe", "fake://gone"))
	l, other := tp.dial(t, "srv"), tp.dial(t, "srv")
	l.send(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fake://counter","fake://gone"]},` + modernMeta + `}}`)
	if ack := l.recv(); ack.Method != "notifications/subscriptions/acknowledged" ||
		!strings.Contains(ack.raw, `"notifications":{"resourceSubscriptions":["fake://counter"]}`) {
		t.Errorf("ack: %s, want one promising fake://counter", ack.raw)
	}
	callModern(other, `"n"`, "notify", `{"kind":"updated"}`)
	other.recvID(`"n"`)
	if got := notifiedBefore(l, `"s"`); !slices.Equal(got, []string{`notifications/resources/updated "L"`}) {
		t.Errorf("an update made after the acknowledgement: the listen got %q", got)
	}
}

// TestListenOverHTTP: a stateless HTTP client's listen is an SSE stream
// that starts with the acknowledgement and carries the tagged
// notifications it asked for.
func TestListenOverHTTP(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	resp := c.post(`{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("listen: %s %q", resp.Status, ct)
	}
	sc := bufio.NewScanner(resp.Body)
	next := func() msg {
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m msg
				if err := json.Unmarshal([]byte(data), &m); err != nil {
					t.Fatalf("event %q: %v", data, err)
				}
				m.raw = data
				return m
			}
		}
		t.Fatalf("stream ended: %v", sc.Err())
		return msg{}
	}
	if ack := next(); ack.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first event: %s", ack.raw)
	}
	c.call(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"},` + modernMeta + `}}`)
	if n := next(); n.Method != "notifications/tools/list_changed" || !strings.Contains(n.raw, `"io.modelcontextprotocol/subscriptionId":3`) {
		t.Fatalf("second event: %s", n.raw)
	}
}

// countInLog counts the complete lines of a child's -log file that carry
// method, while the child may still be writing it.
func countInLog(t *testing.T, path, method string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	lines := strings.Split(string(b), "\n")
	for _, l := range lines[:len(lines)-1] { // the last is unfinished or empty
		if strings.Contains(l, `"method":"`+method+`"`) {
			n++
		}
	}
	return n
}

// TestListenOnModernChild: a modern child gets one subscriptions/listen
// from the pool whatever the number of listening clients, asking for the
// union of their filters (reopened when it changes, the old one
// cancelled, so one is open at a time), and closed after the last; each
// client gets only the kinds it asked for, tagged with its own id, and a
// session without a listen gets nothing.
func TestListenOnModernChild(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-log", logPath))
	tools, prompts, tools2, other := tp.dial(t, "srv"), tp.dial(t, "srv"), tp.dial(t, "srv"), tp.dial(t, "srv")
	open := func(c *client, id, filter string) {
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"subscriptions/listen","params":{"notifications":` + filter + `,` + modernMeta + `}}`)
		if ack := c.recv(); ack.Method != "notifications/subscriptions/acknowledged" ||
			!strings.Contains(ack.raw, `"io.modelcontextprotocol/subscriptionId":`+id) {
			t.Fatalf("ack: %s", ack.raw)
		}
	}
	open(tools, `"t"`, `{"toolsListChanged":true}`)
	open(prompts, `"p"`, `{"promptsListChanged":true}`)
	open(tools2, `"t2"`, `{"toolsListChanged":true}`)
	// Wait for the reopened upstream listen to be acknowledged by the
	// child, and the first to be cancelled: one open at a time.
	eventually(t, "one upstream listen for tools and prompts", func() bool {
		return countInLog(t, logPath, "subscriptions/listen") == 2 && countInLog(t, logPath, "notifications/cancelled") == 1
	})
	after := func(c *client, id string) []string {
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"s"},` + modernMeta + `}}`)
		_, before := c.recvID(id)
		return notificationsIn(before)
	}
	for _, kind := range []string{"tools", "prompts"} {
		// The child writes the notification before its answer to notify,
		// and the pool reads in order: once other has its answer, the
		// listeners' queues hold what they will get.
		other.send(`{"jsonrpc":"2.0","id":"n","method":"tools/call","params":{"name":"notify","arguments":{"kind":"` + kind + `"},` + modernMeta + `}}`)
		if _, before := other.recvID(`"n"`); len(before) != 0 {
			t.Fatalf("a session without a listen got %s", before[0].raw)
		}
		got := strings.Join(append(append(after(tools, `"a"`), after(prompts, `"a"`)...), after(tools2, `"a"`)...), ";")
		want := map[string]string{
			"tools":   `notifications/tools/list_changed "t";notifications/tools/list_changed "t2"`,
			"prompts": `notifications/prompts/list_changed "p"`,
		}[kind]
		if got != want {
			t.Fatalf("notify %s: listeners got %q, want %q", kind, got, want)
		}
	}
	for _, c := range []*client{tools, prompts, tools2} {
		c.close()
	}
	eventually(t, "the upstream listen to close with the last listener", func() bool {
		return countInLog(t, logPath, "subscriptions/listen") == countInLog(t, logPath, "notifications/cancelled")
	})
}

// openListen opens a modern client's subscriptions/listen with id and
// filter, and waits for its acknowledgement.
func openListen(t *testing.T, c *client, id, filter string) {
	t.Helper()
	c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"subscriptions/listen","params":{"notifications":` + filter + `,` + modernMeta + `}}`)
	if ack := c.recv(); ack.Method != "notifications/subscriptions/acknowledged" ||
		!strings.Contains(ack.raw, `"io.modelcontextprotocol/subscriptionId":`+id) {
		t.Fatalf("ack: %s", ack.raw)
	}
}

// notifiedBefore is what c was sent before the answer to an echo sent
// now: the notifications it holds, as notificationsIn lists them.
func notifiedBefore(c *client, id string) []string {
	c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"s"},` + modernMeta + `}}`)
	_, before := c.recvID(id)
	return notificationsIn(before)
}

// TestListenReopenLosesNoChange: a listener joins asking for something
// new, so the pool replaces its upstream listen on the modern child. The
// child (-notify-on-listen) changes its tools just before it acknowledges
// the new listen, while only the old one is open, and again just after,
// while both are. The listener that was there gets each change once: the
// old listen stays the pool's source until the child acknowledges the new
// one. (Made current as it was sent, the new listen lost the first change
// for everyone, the old one's notifications being dropped as replaced.)
func TestListenReopenLosesNoChange(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-log", logPath, "-notify-on-listen", "tools"))
	a, b := tp.dial(t, "srv"), tp.dial(t, "srv")
	openListen(t, a, `"a"`, `{"toolsListChanged":true}`)
	// The change right after the child acknowledged the first upstream
	// listen: it is open on the child, and the pool's source.
	if n := a.recv(); n.Method != "notifications/tools/list_changed" || !strings.Contains(n.raw, `"io.modelcontextprotocol/subscriptionId":"a"`) {
		t.Fatalf("after the first upstream listen: %s", n.raw)
	}
	openListen(t, b, `"b"`, `{"promptsListChanged":true}`)
	// The pool cancels the old listen once it read the new one's
	// acknowledgement, and the child handles that cancellation only after
	// it wrote both changes (under one lock): an echo sent now is answered
	// after them.
	eventually(t, "the first upstream listen cancelled", func() bool {
		return countInLog(t, logPath, "subscriptions/listen") == 2 && countInLog(t, logPath, "notifications/cancelled") == 1
	})
	got, want := notifiedBefore(a, `"s"`), []string{`notifications/tools/list_changed "a"`, `notifications/tools/list_changed "a"`}
	if !slices.Equal(got, want) {
		t.Errorf("the listener that was there got %q across the reopen, want %q (each change once)", got, want)
	}
	if got := notifiedBefore(b, `"s"`); len(got) != 0 {
		t.Errorf("the prompts listener got %q", got)
	}
}

// TestListenReopenRefusedKeepsTheOld: the child refuses the reopened
// upstream listen (a listener asks for a resource it does not have). The
// old one stays open and the pool's source: the listener that was there
// still gets its changes. (Made current as it was sent, the refused
// listen left every listener with nothing.) The new listener is
// acknowledged then, promised what the old one covers. (Acknowledged at
// once, it was promised the resource.)
func TestListenReopenRefusedKeepsTheOld(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-log", logPath, "-notify-on-listen", "tools", "-refuse-subscribe", "fake://gone"))
	a, b, other := tp.dial(t, "srv"), tp.dial(t, "srv"), tp.dial(t, "srv")
	openListen(t, a, `"a"`, `{"toolsListChanged":true}`)
	if n := a.recv(); n.Method != "notifications/tools/list_changed" { // the first upstream listen is open
		t.Fatalf("after the first upstream listen: %s", n.raw)
	}
	// b is acknowledged once the child refused the listen that asks for
	// its resource, promising what the open one covers: nothing.
	b.send(`{"jsonrpc":"2.0","id":"b","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fake://gone"]},` + modernMeta + `}}`)
	if ack := b.recv(); ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(ack.raw, `"notifications":{}`) {
		t.Errorf("b's ack: %s, want one promising nothing", ack.raw)
	}
	// The child says so on stderr once it wrote the refusal: the pool
	// reads that before the answer to a call sent from now on.
	eventually(t, "the child to refuse the reopened listen", func() bool {
		bs := tp.Snapshot().Backends
		return len(bs) == 1 && slices.ContainsFunc(bs[0].StderrTail, func(l string) bool { return strings.Contains(l, "refused subscriptions/listen") })
	})
	other.send(`{"jsonrpc":"2.0","id":"n","method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"},` + modernMeta + `}}`)
	other.recvID(`"n"`)
	if got := notifiedBefore(a, `"s"`); !slices.Equal(got, []string{`notifications/tools/list_changed "a"`}) {
		t.Errorf("after the child refused the reopened listen, the listener that was there got %q", got)
	}
	if n := countInLog(t, logPath, "notifications/cancelled"); n != 0 {
		t.Errorf("the child was told to cancel %d listens, want none: the old one is all the pool has", n)
	}
}

// TestListenAcknowledgedOnceTheChildWatches: a client holds a listen for
// tools changes (a) on a modern child and opens one for prompts changes
// (b), which the pool's upstream listen does not cover: the pool reopens
// it. b's acknowledgement comes once the child acknowledged the reopened
// listen: the child (-notify-on-listen tools) changes its tools just
// before that and just after, and on the client's one stream a's two
// changes come on either side of b's acknowledgement. A prompts change
// made once b is acknowledged reaches it. The child takes a while to
// acknowledge a listen (-subscribe-delay). (Acknowledged at once, b was
// acknowledged before the child watched prompts for the pool: a change
// made in between never reached it.)
func TestListenAcknowledgedOnceTheChildWatches(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-notify-on-listen", "tools", "-subscribe-delay", "300ms"))
	c, other := tp.dial(t, "srv"), tp.dial(t, "srv")
	openListen(t, c, `"a"`, `{"toolsListChanged":true}`)
	if n := c.recv(); n.Method != "notifications/tools/list_changed" { // right after the child acknowledged the first upstream listen
		t.Fatalf("after the first upstream listen: %s", n.raw)
	}
	c.send(`{"jsonrpc":"2.0","id":"b","method":"subscriptions/listen","params":{"notifications":{"promptsListChanged":true},` + modernMeta + `}}`)
	const ackB = `notifications/subscriptions/acknowledged "b"`
	var got []string
	for !slices.Contains(got, ackB) {
		got = append(got, notificationsIn([]msg{c.recv()})...)
	}
	callModern(other, `"n"`, "notify", `{"kind":"prompts"}`)
	other.recvID(`"n"`)
	got = append(got, notifiedBefore(c, `"s"`)...)
	want := []string{`notifications/tools/list_changed "a"`, ackB, `notifications/tools/list_changed "a"`, `notifications/prompts/list_changed "b"`}
	if !slices.Equal(got, want) {
		t.Errorf("the client got %q, want %q: b acknowledged once the child acknowledged the listen that asks for prompts, and then the prompts change", got, want)
	}
}

// TestListenChangesWhileItWaitsAreSaidOnce: a listen for tools and
// prompts waits for its acknowledgement while the child (-subscribe-delay)
// takes its time over the upstream listen that adds prompts; the tools
// changes the current one carries meanwhile follow the acknowledgement,
// the same change said once: what waits stays bounded however long the
// child takes.
func TestListenChangesWhileItWaitsAreSaidOnce(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-log", logPath, "-subscribe-delay", "300ms"))
	a, b, other := tp.dial(t, "srv"), tp.dial(t, "srv"), tp.dial(t, "srv")
	openListen(t, a, `"a"`, `{"toolsListChanged":true}`)
	b.send(`{"jsonrpc":"2.0","id":"b","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"promptsListChanged":true},` + modernMeta + `}}`)
	eventually(t, "the child to have the reopened listen", func() bool { return countInLog(t, logPath, "subscriptions/listen") == 2 })
	for i := range 3 {
		id := `"n` + strconv.Itoa(i) + `"`
		callModern(other, id, "notify", `{"kind":"tools"}`)
		other.recvID(id)
	}
	if ack := b.recv(); ack.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("b's first message: %s", ack.raw)
	}
	if got := notifiedBefore(b, `"s"`); !slices.Equal(got, []string{`notifications/tools/list_changed "b"`}) {
		t.Errorf("after its acknowledgement b got %q, want the tools change once", got)
	}
}

// TestListenAcknowledgedWhenItsChildDies: a listen whose acknowledgement
// waits for the child's (which takes its time: -subscribe-delay) is
// acknowledged anyway when the child dies, with what the child declares
// it can do: the restarted child is asked for it again.
func TestListenAcknowledgedWhenItsChildDies(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-log", logPath, "-subscribe-delay", "1m"))
	c, other := tp.dial(t, "srv"), tp.dial(t, "srv")
	c.send(`{"jsonrpc":"2.0","id":"b","method":"subscriptions/listen","params":{"notifications":{"promptsListChanged":true},` + modernMeta + `}}`)
	eventually(t, "the child to have the pool's listen", func() bool { return countInLog(t, logPath, "subscriptions/listen") == 1 })
	callModern(other, `"c"`, "crash", `{}`)
	other.recvID(`"c"`)
	if ack := c.recv(); ack.Method != "notifications/subscriptions/acknowledged" ||
		!strings.Contains(ack.raw, `"notifications":{"promptsListChanged":true}`) {
		t.Fatalf("after the child died: %s", ack.raw)
	}
}

// TestListenOnModernChildSurvivesRestart: a restarted modern child gets
// the pool's upstream listen again, and the listener its changes.
func TestListenOnModernChildSurvivesRestart(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-log", logPath, "-notify-on-listen", "tools"))
	a, other := tp.dial(t, "srv"), tp.dial(t, "srv")
	openListen(t, a, `"a"`, `{"toolsListChanged":true}`)
	if n := a.recv(); n.Method != "notifications/tools/list_changed" {
		t.Fatalf("after the first upstream listen: %s", n.raw)
	}
	other.send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"crash","arguments":{},` + modernMeta + `}}`)
	other.recvID(`"c"`)
	// The new child's change right after it acknowledged the listen.
	if n := a.recv(); n.Method != "notifications/tools/list_changed" || !strings.Contains(n.raw, `"io.modelcontextprotocol/subscriptionId":"a"`) {
		t.Fatalf("after the restart: %s", n.raw)
	}
	if n := countInLog(t, logPath, "subscriptions/listen"); n != 2 {
		t.Errorf("the children heard %d listens, want one each", n)
	}
}

// TestSubscribeDuringRestartReachesTheChildOnce: the attack is a session
// subscribing while its child restarts. The new child is told of every
// subscription when it becomes ready; had the subscribe also been
// forwarded (queued for the new child), the child would hear it twice
// (and a later unsubscribe once, leaving it subscribed).
func TestSubscribeDuringRestartReachesTheChildOnce(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath, "-startup-delay", "400ms"))
	a, b := tp.dial(t, "srv"), tp.dial(t, "srv")
	a.initialize("a", "")
	b.initialize("b", "")
	a.send(`{"jsonrpc":"2.0","id":"sub","method":"resources/subscribe","params":{"uri":"fake://x"}}`)
	a.recvID(`"sub"`)
	pid := tp.Snapshot().Backends[0].PID
	a.send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"crash","arguments":{}}}`)
	a.recvID(`"c"`)
	eventually(t, "the child restarting", func() bool {
		bs := tp.Snapshot().Backends
		return len(bs) == 1 && bs[0].PID != pid && bs[0].State != pool.StateReady
	})
	b.send(`{"jsonrpc":"2.0","id":"sub","method":"resources/subscribe","params":{"uri":"fake://y"}}`)
	if r, _ := b.recvID(`"sub"`); r.Error != nil {
		t.Fatalf("subscribe during the restart: %s", r.raw)
	}
	// A call through the new child after everything queued for it.
	b.send(`{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`)
	b.recvID(`"e"`)
	b.send(`{"jsonrpc":"2.0","id":"unsub","method":"resources/unsubscribe","params":{"uri":"fake://y"}}`)
	b.recvID(`"unsub"`)
	b.send(`{"jsonrpc":"2.0","id":"e2","method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`)
	b.recvID(`"e2"`)
	// The log holds both children's lines: x once each, y once (the new
	// child), and y's unsubscribe once.
	got := map[string]int{}
	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		for _, m := range []string{"resources/subscribe", "resources/unsubscribe"} {
			for _, uri := range []string{"fake://x", "fake://y"} {
				if strings.Contains(l, `"method":"`+m+`"`) && strings.Contains(l, uri) {
					got[m+" "+uri]++
				}
			}
		}
	}
	want := map[string]int{"resources/subscribe fake://x": 2, "resources/subscribe fake://y": 1, "resources/unsubscribe fake://y": 1}
	if !maps.Equal(got, want) {
		t.Errorf("the children heard %v, want %v", got, want)
	}
}

// TestListenSurvivesRestart: a restarted legacy child is subscribed again
// (once) to the resources its listeners and legacy sessions hold, and
// their updates keep coming.
func TestListenSurvivesRestart(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	l, other, old := tp.dial(t, "srv"), tp.dial(t, "srv"), tp.dial(t, "srv")
	old.initialize("old", "")
	old.send(`{"jsonrpc":"2.0","id":"sub","method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
	old.recvID(`"sub"`)
	l.send(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fake://counter"]},` + modernMeta + `}}`)
	if ack := l.recv(); ack.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("ack: %s", ack.raw)
	}
	pid := tp.Snapshot().Backends[0].PID
	other.send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"crash","arguments":{},` + modernMeta + `}}`)
	other.recvID(`"c"`)
	eventually(t, "a new child, subscribed again", func() bool {
		b := tp.Snapshot().Backends
		return len(b) == 1 && b[0].PID != 0 && b[0].PID != pid && countInLog(t, logPath, "resources/subscribe") == 2
	})
	other.send(`{"jsonrpc":"2.0","id":"n","method":"tools/call","params":{"name":"notify","arguments":{"kind":"updated"},` + modernMeta + `}}`)
	other.recvID(`"n"`)
	if n := l.recv(); n.Method != "notifications/resources/updated" || !strings.Contains(n.raw, `"io.modelcontextprotocol/subscriptionId":"L"`) {
		t.Fatalf("after the restart: %s", n.raw)
	}
	if n := old.recv(); n.Method != "notifications/resources/updated" || strings.Contains(n.raw, "subscriptionId") {
		t.Fatalf("legacy session after the restart: %s", n.raw)
	}
}

// TestSubscriptionTogglesReachTheChildInOrder: two sessions subscribe to
// and unsubscribe from one resource over and over at once. The child
// hears a subscribe whenever the count goes from none to one and an
// unsubscribe whenever it goes back, so what it hears alternates, and it
// ends unsubscribed. (Counted first and queued after, as the pool once
// did, one session's last unsubscribe and the other's first subscribe
// could reach the child the wrong way round, leaving it unsubscribed
// while a session still held the resource.)
func TestSubscriptionTogglesReachTheChildInOrder(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	const rounds = 300
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		c := tp.dial(t, "srv")
		c.initialize(name, "")
		wg.Go(func() {
			for i := range rounds {
				for _, m := range []string{"resources/subscribe", "resources/unsubscribe"} {
					c.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"` + m + `","params":{"uri":"fake://x"}}`)
					c.recvID(strconv.Itoa(i))
				}
			}
		})
	}
	wg.Wait()
	// A call after everything the sessions sent: the log is complete.
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	c.send(`{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`)
	c.recvID(`"e"`)
	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	subscribed, heard := false, 0
	for _, l := range strings.Split(string(raw), "\n") {
		var sub bool
		switch {
		case strings.Contains(l, `"method":"resources/subscribe"`):
			sub = true
		case strings.Contains(l, `"method":"resources/unsubscribe"`):
		default:
			continue
		}
		heard++
		if sub == subscribed {
			t.Fatalf("change %d: the child hears a second %s in a row", heard, map[bool]string{true: "subscribe", false: "unsubscribe"}[sub])
		}
		subscribed = sub
	}
	if subscribed || heard == 0 {
		t.Errorf("the child heard %d changes and ends subscribed=%v; want it to end unsubscribed", heard, subscribed)
	}
}

// A listen's acknowledgement is the first message of its subscription,
// even while changes keep coming: 2026-07-28 says no notification may be
// sent on a subscription before it. On the first edition a change that
// came between the listen's registration and its acknowledgement went
// first.
func TestListenAcknowledgedBeforeItsNotifications(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	old, m := tp.dial(t, "srv"), tp.dial(t, "srv")
	old.initialize("old", "")
	const listens = 5
	for i := range listens { // changes keep coming while each listen opens
		for j := range 40 {
			old.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"n%d-%d","method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"}}}`, i, j))
		}
		m.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+modernMeta+`}}`, 1000+i))
	}
	first := map[string]string{}
	for len(first) < listens {
		got := m.recv()
		var p struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		_ = json.Unmarshal(got.Params, &p)
		sub := string(p.Meta["io.modelcontextprotocol/subscriptionId"])
		if _, seen := first[sub]; sub != "" && !seen {
			first[sub] = got.Method
		}
	}
	for sub, method := range first {
		if method != "notifications/subscriptions/acknowledged" {
			t.Errorf("the first message of subscription %s was %s, not its acknowledgement", sub, method)
		}
	}
}

// A change that reaches a listen between its registration and its
// acknowledgement goes after the acknowledgement: 2026-07-28 says no
// notification may be sent on a subscription before it. The hook holds
// the listen in that gap while a change comes: on a legacy child, one
// the pool broadcasts; on a modern one, one the pool's upstream listen
// (open for another listener) carries.
func TestListenChangeBeforeItsAcknowledgementFollowsIt(t *testing.T) {
	for _, era := range []string{"legacy", "modern"} {
		t.Run(era, func(t *testing.T) {
			registered, proceed := make(chan struct{}), make(chan struct{})
			t.Cleanup(pool.SetListenHook(func(id string) {
				if id == `"L"` {
					close(registered)
					<-proceed
				}
			}))
			tp := newTestPool(t, nil, fake("srv", "-era", era))
			release := sync.OnceFunc(func() { close(proceed) })
			t.Cleanup(release) // before the pool closes, if the test ends early
			other, m := tp.dial(t, "srv"), tp.dial(t, "srv")
			listen := func(c *client, id string) {
				c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`)
			}
			// notify has the child send a tools list change; the child
			// writes it before its answer, and the pool reads in order:
			// once other has the answer, every listen has the change.
			notify := func(id string) []string {
				other.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"},` + modernMeta + `}}`)
				_, before := other.recvID(id)
				return notificationsIn(before)
			}
			listen(other, `"O"`)
			if ack := other.recv(); ack.Method != "notifications/subscriptions/acknowledged" {
				t.Fatalf("ack: %s", ack.raw)
			}
			n := 0
			eventually(t, "a change on the first listen (a modern child's upstream listen is open)", func() bool {
				n++
				return slices.Contains(notify(`"n`+strconv.Itoa(n)+`"`), `notifications/tools/list_changed "O"`)
			})

			listen(m, `"L"`)
			select {
			case <-registered:
			case <-time.After(15 * time.Second):
				t.Fatal("the listen did not reach its acknowledgement")
			}
			notify(`"in the gap"`)
			release()
			got := notificationsIn([]msg{m.recv(), m.recv()})
			if want := []string{`notifications/subscriptions/acknowledged "L"`, `notifications/tools/list_changed "L"`}; !slices.Equal(got, want) {
				t.Errorf("the listen was sent %q, want %q", got, want)
			}
		})
	}
}

// callModern sends a 2026-07-28 tools/call of tool with args.
func callModern(c *client, id, tool, args string) {
	c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + modernMeta + `}}`)
}

// awaitChange waits until a change of kind (tools, prompts: the notify
// tool's), made through other, reaches the listen tagged tag on c: the
// pool's upstream listen on a modern child is open and acknowledged.
func awaitChange(t *testing.T, other, c *client, kind, tag string) {
	t.Helper()
	n := 0
	eventually(t, "a "+kind+" change on listen "+tag, func() bool {
		n++
		id := `"wait` + strconv.Itoa(n) + `"`
		callModern(other, id, "notify", `{"kind":"`+kind+`"}`)
		other.recvID(id)
		return slices.Contains(notifiedBefore(c, `"seen`+strconv.Itoa(n)+`"`), `notifications/`+kind+`/list_changed `+tag)
	})
}

// TestListenReopenedAfterTheChildEndsIt: the modern child ends the pool's
// upstream listen itself while a listener remains: it answers it, or it
// names it in notifications/cancelled (on stdio, how a 2026-07-28 server
// tears a listen down). The pool opens it again, and the listener gets
// the next change. (Before, nothing reopened it until a listener came or
// went: every listener silently stopped getting changes; a cancelled
// listen was taken for a question the child withdrew, and stayed so.)
func TestListenReopenedAfterTheChildEndsIt(t *testing.T) {
	for _, how := range []string{"answered", "cancelled"} {
		t.Run(how, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "child.log")
			tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-log", logPath))
			a, other := tp.dial(t, "srv"), tp.dial(t, "srv")
			openListen(t, a, `"a"`, `{"toolsListChanged":true}`)
			awaitChange(t, other, a, "tools", `"a"`)
			args := `{}`
			if how == "cancelled" {
				args = `{"kind":"cancelled"}`
			}
			callModern(other, `"end"`, "end_listens", args)
			if m, before := other.recvID(`"end"`); m.text() != "1" || len(before) != 0 {
				t.Fatalf("end_listens: %s after %d messages, want the one upstream listen ended and nothing told", m.raw, len(before))
			}
			awaitChange(t, other, a, "tools", `"a"`)
			if n := countInLog(t, logPath, "subscriptions/listen"); n != 2 {
				t.Errorf("the child heard %d listens, want 2: the first and the one that replaced it", n)
			}
			if n := countInLog(t, logPath, "notifications/cancelled"); n != 0 {
				t.Errorf("the child was told %d cancels, want none: it ended the listen itself", n)
			}
		})
	}
}

// logBuffer is a pool's log, as text, for a test to read while the pool
// writes it.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// TestListenAChildEndsAtOnceIsNotReopenedForEver: the modern child ends
// every listen right after acknowledging it. The pool reopens its
// upstream listen a few times in a row, then gives up with a warning
// until a listener comes or goes (and then tries once more): it does not
// loop against the child. (Reopened without a limit, the child hears
// listens as fast as the pipe carries them.)
func TestListenAChildEndsAtOnceIsNotReopenedForEver(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	logs := &logBuffer{}
	tp := newTestPool(t, &pool.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))},
		fake("srv", "-era", "modern", "-log", logPath, "-end-listens"))
	a, b := tp.dial(t, "srv"), tp.dial(t, "srv")
	const warning = "the child keeps ending the pool's listen"
	listens := func() string {
		return fmt.Sprintf("the child heard %d listens", countInLog(t, logPath, "subscriptions/listen"))
	}
	openListen(t, a, `"a"`, `{"toolsListChanged":true}`)
	eventually(t, "the pool to give up reopening", func() bool { return logs.count(warning) == 1 }, listens)
	notifiedBefore(a, `"s1"`) // the child has read everything the pool sent before it gave up
	n := countInLog(t, logPath, "subscriptions/listen")
	// 1 + 3 reopens, each ended at once; more only if one of them lived a
	// second (a very slow machine), which starts the count again (here and
	// below).
	if n < 4 || n > 12 {
		t.Fatalf("the child heard %d listens before the pool gave up, want 4", n)
	}
	openListen(t, b, `"b"`, `{"promptsListChanged":true}`)
	eventually(t, "the pool to give up again", func() bool { return logs.count(warning) == 2 }, listens)
	notifiedBefore(a, `"s2"`)
	if m := countInLog(t, logPath, "subscriptions/listen"); m-n < 1 || m-n > 9 {
		t.Errorf("after a listener came the child heard %d more listens, want 1", m-n)
	}
}

// TestModernToolChangeForgetsHints: a modern child's tool, idempotent
// when the pool learned the hints (trustAnnotations), loses its
// annotation and the child says so (tools/list_changed, on the pool's
// upstream listen). A call of it written when the child dies is not
// repeated. The listener asks for tools changes, or only for prompts:
// the pool's listen asks for tools changes anyway, for the hints, and
// the listener does not get them. (Before, a tagged list_changed never
// reached the hints, and with only a prompts listener the pool never
// heard it: the call ran twice.)
func TestModernToolChangeForgetsHints(t *testing.T) {
	for _, kind := range []string{"tools", "prompts"} {
		t.Run(kind+" listener", func(t *testing.T) {
			counter := filepath.Join(shortTempDir(t), "count")
			cfg := fake("srv", "-era", "modern")
			cfg.TrustAnnotations = true
			tp := newTestPool(t, nil, cfg)
			l, c := tp.dial(t, "srv"), tp.dial(t, "srv")
			openListen(t, l, `"l"`, `{"`+kind+`ListChanged":true}`)
			awaitChange(t, c, l, kind, `"l"`)
			c.send(`{"jsonrpc":"2.0","id":"list","method":"tools/list","params":{` + modernMeta + `}}`)
			if m, _ := c.recvID(`"list"`); !strings.Contains(m.raw, `"idempotentHint":true`) {
				t.Fatalf("tools/list: %s", m.raw)
			}
			// The child writes its list_changed before its answer.
			callModern(c, `"retool"`, "retool", `{}`)
			c.recvID(`"retool"`)
			got := notifiedBefore(l, `"s"`)
			if want := map[string][]string{"tools": {`notifications/tools/list_changed "l"`}}[kind]; !slices.Equal(got, want) {
				t.Errorf("the listener got %q, want %q", got, want)
			}
			callModern(c, "1", "idem_count", fmt.Sprintf(`{"file":%q,"text":"x","ms":5000}`, counter))
			eventually(t, "the call written", func() bool {
				s := tp.Snapshot()
				return len(s.InFlight) == 1 && s.InFlight[0].WrittenToChild
			})
			callModern(l, `"crash"`, "crash", `{}`)
			if m, _ := c.recvID("1"); m.Error == nil || m.Error.Code != -32003 {
				t.Fatalf("a call of a tool no longer idempotent, written to a child that died: %s, want -32003 (not repeated)", m.raw)
			}
		})
	}
}

// TestLegacySessionOfModernChildGetsNoListenChange: a legacy session of a
// modern child is promised no list changes (legacyView), and gets none
// of what the pool's upstream listen carries for the child's listeners.
// (It got each one, with the pool's own subscription tag.)
func TestLegacySessionOfModernChildGetsNoListenChange(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
	l, old := tp.dial(t, "srv"), tp.dial(t, "srv")
	old.initialize("old", "")
	openListen(t, l, `"l"`, `{"toolsListChanged":true}`)
	awaitChange(t, old, l, "tools", `"l"`)
	old.call(`"n"`, "notify", `{"kind":"tools"}`)
	if _, before := old.recvID(`"n"`); len(before) != 0 {
		t.Errorf("the legacy session got %s", before[0].raw)
	}
}
