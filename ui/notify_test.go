package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
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
// bubble each, up to maxHangNotes; beyond, one bubble names them all.
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
	got := n.check(snap(maxHangNotes+1), now, hang)
	if d := cmp.Diff([]string{fmt.Sprintf("%d requests hung on %d servers", 2*(maxHangNotes+1), maxHangNotes+1)}, noteTitles(got)); d != "" {
		t.Errorf("many servers (-want +got):\n%s", d)
	} else if !strings.Contains(got[0].Content, "server-0") || !strings.Contains(got[0].Content, fmt.Sprintf("server-%d", maxHangNotes)) {
		t.Errorf("the shared bubble does not name the servers: %q", got[0].Content)
	}
	if got := n.check(snap(maxHangNotes+1), now.Add(time.Second), hang); len(got) != 0 {
		t.Errorf("still hung, notified again: %v", noteTitles(got))
	}
}
