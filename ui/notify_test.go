package ui

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/mcptest"
)

// slowCalls is a snapshot at now of a session of server that sends a
// call every `every` from start; each takes `took` (0: never answered).
func slowCalls(server string, start, now time.Time, every, took time.Duration) pool.Snapshot {
	s := pool.Snapshot{TakenAt: now}
	id := uint64(0)
	for at := start; !at.After(now); at = at.Add(every) {
		id++
		if took > 0 && !at.Add(took).After(now) {
			continue
		}
		s.InFlight = append(s.InFlight, pool.RequestInfo{PoolID: id, Server: server, Session: "s1", Method: "tools/call",
			Name: "search", PID: 4242, ReceivedAt: at, WrittenToChild: true})
	}
	return s
}

func noteTitles(ns []*fyne.Notification) []string {
	var out []string
	for _, x := range ns {
		out = append(out, x.Title)
	}
	return out
}

// TestNotifierOnceWhileAServerStaysHung: a stuck server keeps getting
// calls, and each one passes the threshold in turn; the user hears about
// it once, not once a second.
func TestNotifierOnceWhileAServerStaysHung(t *testing.T) {
	n := newNotifier()
	hang := 5 * time.Second
	var got []string
	for sec := range 27 {
		now := t0.Add(time.Duration(sec) * time.Second)
		got = append(got, noteTitles(n.check(slowCalls("notes", t0, now, 330*time.Millisecond, 0), now, hang))...)
	}
	if d := cmp.Diff([]string{"Request hung on notes"}, got); d != "" {
		t.Errorf("26 s of a stuck server (-want +got):\n%s", d)
	}
}

// TestNotifierHungServerRecoversAndHangsAgain: a server that recovered
// and hangs again is announced again, but not more often than
// hangNoteEvery; the bubble counts the requests hung.
func TestNotifierHungServerRecoversAndHangsAgain(t *testing.T) {
	n := newNotifier()
	hang := 5 * time.Second
	hung := func(server string, at time.Time, k int) pool.Snapshot {
		s := pool.Snapshot{TakenAt: at}
		for i := range k {
			s.InFlight = append(s.InFlight, pool.RequestInfo{PoolID: uint64(at.Unix())*10 + uint64(i), Server: server, Session: "s1",
				Method: "tools/call", Name: "search", ReceivedAt: at.Add(-hang - time.Duration(i)*time.Second)})
		}
		return s
	}
	steps := []struct {
		why  string
		s    pool.Snapshot
		at   time.Duration
		want []string
	}{
		{"first hang", hung("notes", t0, 1), 0, []string{"Request hung on notes"}},
		{"recovered", pool.Snapshot{}, time.Minute, nil},
		{"hangs again a minute later", hung("notes", t0.Add(2*time.Minute), 1), 2 * time.Minute, nil},
		{"recovered again", pool.Snapshot{}, 3 * time.Minute, nil},
		{"hangs again past the quiet time", hung("notes", t0.Add(hangNoteEvery+time.Minute), 3), hangNoteEvery + time.Minute,
			[]string{"3 requests hung on notes"}},
	}
	for _, st := range steps {
		if d := cmp.Diff(st.want, noteTitles(n.check(st.s, t0.Add(st.at), hang))); d != "" {
			t.Errorf("%s (-want +got):\n%s", st.why, d)
		}
	}
}

// TestNotifierHungServersEachOnce: servers that hang together get a
// bubble each, up to maxServerNotes; beyond, one bubble names them all.
func TestNotifierHungServersEachOnce(t *testing.T) {
	hang := 5 * time.Second
	now := t0.Add(time.Minute)
	snap := func(servers int) pool.Snapshot {
		s := pool.Snapshot{TakenAt: now}
		for i := range servers * 2 {
			s.InFlight = append(s.InFlight, pool.RequestInfo{PoolID: uint64(i + 1), Server: fmt.Sprintf("server-%d", i%servers),
				Session: "s1", Method: "tools/call", ReceivedAt: t0})
		}
		return s
	}
	want := []string{"2 requests hung on server-0", "2 requests hung on server-1"}
	if d := cmp.Diff(want, noteTitles(newNotifier().check(snap(2), now, hang))); d != "" {
		t.Errorf("two servers (-want +got):\n%s", d)
	}
	n := newNotifier()
	got := n.check(snap(maxServerNotes+1), now, hang)
	if d := cmp.Diff([]string{fmt.Sprintf("%d requests hung on %d servers", 2*(maxServerNotes+1), maxServerNotes+1)}, noteTitles(got)); d != "" {
		t.Errorf("many servers (-want +got):\n%s", d)
	} else if !strings.Contains(got[0].Content, "server-0") || !strings.Contains(got[0].Content, fmt.Sprintf("server-%d", maxServerNotes)) {
		t.Errorf("the shared bubble does not name the servers: %q", got[0].Content)
	}
	if got := n.check(snap(maxServerNotes+1), now.Add(time.Second), hang); len(got) != 0 {
		t.Errorf("still hung, notified again: %v", noteTitles(got))
	}
}

// failedSessions is a snapshot at now of a share "session" server whose
// sessions' children failed, k of them (ids from first).
func failedSessions(server string, now time.Time, first, k int, state string) pool.Snapshot {
	s := pool.Snapshot{TakenAt: now}
	for i := first; i < first+k; i++ {
		s.Backends = append(s.Backends, pool.BackendInfo{ID: uint64(i), Server: server, Session: fmt.Sprintf("s%d", i),
			State: state, LastError: "exit status 1"})
	}
	return s
}

// TestNotifierOnceWhileAServerFails: a share "session" server whose child
// exits at start fails once per session, and each new session's fails
// too; the user hears about it once, not once per session. Restarted (no
// child failed any more), it is announced again when it fails again, but
// not within failNoteEvery of its last bubble.
func TestNotifierOnceWhileAServerFails(t *testing.T) {
	n := newNotifier()
	steps := []struct {
		why  string
		s    pool.Snapshot
		at   time.Duration
		want []string
	}{
		{"the first session's child failed", failedSessions("notes", t0, 1, 1, pool.StateFailed), 0, []string{"Server notes failed"}},
		{"twelve sessions' children failed", failedSessions("notes", t0, 1, 12, pool.StateFailed), time.Second, nil},
		{"a new session's child failed too", failedSessions("notes", t0, 1, 13, pool.StateFailed), time.Minute, nil},
		{"restarted: every child starting", failedSessions("notes", t0, 1, 13, pool.StateStarting), 2 * time.Minute, nil},
		{"fails again soon after", failedSessions("notes", t0, 1, 13, pool.StateFailed), 3 * time.Minute, nil},
		{"restarted again", failedSessions("notes", t0, 1, 13, pool.StateStarting), failNoteEvery + time.Minute, nil},
		{"fails again past the quiet time", failedSessions("notes", t0, 1, 2, pool.StateFailed), failNoteEvery + 2*time.Minute,
			[]string{"Server notes failed"}},
	}
	for _, st := range steps {
		if d := cmp.Diff(st.want, noteTitles(n.check(st.s, t0.Add(st.at), 5*time.Second))); d != "" {
			t.Errorf("%s (-want +got):\n%s", st.why, d)
		}
	}
}

// TestNotifierFailedServersShareABubble: servers that fail together get a
// bubble each, up to maxServerNotes, as hung ones do; beyond, one bubble
// names them all.
func TestNotifierFailedServersShareABubble(t *testing.T) {
	snap := func(servers int) pool.Snapshot {
		s := pool.Snapshot{TakenAt: t0}
		for i := range servers {
			s.Backends = append(s.Backends, failedSessions(fmt.Sprintf("server-%d", i), t0, 1, 3, pool.StateFailed).Backends...)
		}
		return s
	}
	want := []string{"Server server-0 failed", "Server server-1 failed"}
	if d := cmp.Diff(want, noteTitles(newNotifier().check(snap(2), t0, 0))); d != "" {
		t.Errorf("two servers (-want +got):\n%s", d)
	}
	n := newNotifier()
	got := n.check(snap(maxServerNotes+1), t0, 0)
	if d := cmp.Diff([]string{fmt.Sprintf("%d servers failed", maxServerNotes+1)}, noteTitles(got)); d != "" {
		t.Errorf("many servers (-want +got):\n%s", d)
	} else if !strings.Contains(got[0].Content, "server-0") || !strings.Contains(got[0].Content, fmt.Sprintf("server-%d", maxServerNotes)) {
		t.Errorf("the shared bubble does not name the servers: %q", got[0].Content)
	}
}

// TestNotifierOneBubbleForARealFailingSessionServer: twelve sessions
// connect to a real pool's share "session" server whose child exits at
// start; each session's child fails in turn. Checked on every snapshot
// meanwhile, as the loop does, the notifier sends one bubble.
func TestNotifierOneBubbleForARealFailingSessionServer(t *testing.T) {
	const sessions = 12
	dir, err := os.MkdirTemp("", "sbui")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := pool.New(&pool.Options{Restart: pool.RestartPolicy{MaxRestarts: 1, MinBackoff: time.Millisecond}})
	if err := p.Apply([]pool.ServerConfig{{Name: "broken", Command: "/bin/sh", Args: []string{"-c", "echo no config >&2; exit 1"},
		Share: pool.ShareSession}}); err != nil {
		t.Fatal(err)
	}
	sock := mcptest.Serve(t, p, dir)
	n := newNotifier()
	var titles []string
	check := func() pool.Snapshot {
		s := p.Snapshot()
		for _, x := range n.check(s, time.Now(), 0) {
			titles = append(titles, x.Title)
		}
		return s
	}
	for i := range sessions {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// The session's initialize starts its child, which fails: the
		// error answers it, and the session stays open.
		if err := mcptest.Attach(c, "broken", fmt.Sprintf("client-%d", i)); err == nil {
			t.Fatalf("session %d: the initialize of a failing child succeeded", i)
		}
		waitUntil(t, 10*time.Second, fmt.Sprintf("the child of session %d to fail", i+1), func() bool {
			k := 0
			for _, b := range check().Backends {
				if b.State == pool.StateFailed {
					k++
				}
			}
			return k == i+1
		})
	}
	if d := cmp.Diff([]string{"Server broken failed"}, titles); d != "" {
		t.Errorf("%d sessions' children failed (-want +got):\n%s", sessions, d)
	}
}

// TestHangBubbleSaysWhyItWaits: a hang bubble says why the request waits
// when the pool knows (its stateReason, or, not yet at its child, the
// child's), whole however long the request's name, within the bubble's
// limits: it tells a child that does not read its input, or has not
// started, from a request the child has and does not answer.
func TestHangBubbleSaysWhyItWaits(t *testing.T) {
	const stalled = "being written: the child is not reading its input (nothing taken for 40s; 24576 of its 40112 bytes written)"
	const resolving = "resolving the package to start it without its package-manager wrapper (npm may be downloading it)"
	hang := 5 * time.Second
	now := t0.Add(time.Minute)
	long := strings.Repeat("n", 3*maxNoteContent) // a session names its tool
	req := func(id uint64, server, name string, pid int, written bool, why string) pool.RequestInfo {
		return pool.RequestInfo{PoolID: id, Server: server, Session: "s1", Method: "tools/call", Name: name, PID: pid,
			ReceivedAt: t0, WrittenToChild: written, StateReason: why}
	}
	s := pool.Snapshot{TakenAt: now, Backends: []pool.BackendInfo{
		{Server: "notes", PID: 4242, State: pool.StateReady},
		{Server: "npxed", State: pool.StateStarting, StateReason: resolving}, // no process yet
		{Server: "other", PID: 777, State: pool.StateReady},
	}, InFlight: []pool.RequestInfo{
		req(1, "notes", "search", 4242, false, stalled),
		req(2, "npxed", long, 0, false, ""),
		req(3, "npxed", "b", 0, false, ""),
		req(4, "other", "sleep", 777, true, ""), // the child has it: nothing to say
	}}
	want := map[string]string{"Request hung on notes": stalled, "2 requests hung on npxed": resolving, "Request hung on other": ""}
	got := newNotifier().check(s, now, hang)
	if d := cmp.Diff([]string{"Request hung on notes", "2 requests hung on npxed", "Request hung on other"}, noteTitles(got)); d != "" {
		t.Fatalf("bubbles (-want +got):\n%s", d)
	}
	for _, n := range got {
		shown := desktopNote("linux", n).Content
		if why := want[n.Title]; why == "" && strings.Contains(shown, "Why it waits") {
			t.Errorf("%s: a reason where the pool gives none: %q", n.Title, shown)
		} else if why != "" && !strings.Contains(shown, "Why it waits: "+why+".") {
			t.Errorf("%s: the bubble does not say why the request waits, whole: %q", n.Title, shown)
		}
	}

	tip := trayTooltip(summarize(s, now, hang, 0))
	if !strings.Contains(tip, "Hung: tools/call search on notes, 1m00s. Why it waits: "+stalled+".") {
		t.Errorf("the tooltip does not say why the hung request waits: %q", tip)
	}
}
