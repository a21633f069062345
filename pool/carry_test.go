//go:build linux

package pool_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// oneThread is a pool.StartOn that forks every child on one locked OS
// thread, as the app does on its main thread.
func oneThread(t *testing.T) pool.StartOn {
	calls := make(chan func())
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the children
		for {
			select {
			case f := <-calls:
				f()
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() { close(done) })
	return func(start func()) {
		ran := make(chan struct{})
		calls <- func() { start(); close(ran) }
		<-ran
	}
}

// The carried child of a handed-over pool goes on serving under the next
// pool: same PID, no second handshake, shown as carried over; a request id
// the old pool used is not reused.
func TestCarriedChildServesTheNextPool(t *testing.T) {
	on := oneThread(t)
	logPath := filepath.Join(shortTempDir(t), "child.log")
	cfg := fake("fake", "-log", logPath)
	first := newTestPool(t, &pool.Options{StartOn: on}, cfg)
	c := first.dial(t, "fake")
	c.initialize("before", "")
	c.call("1", "echo", `{"text":"before"}`)
	if m, _ := c.recvID("1"); m.text() != "before" {
		t.Fatalf("call before the hand-over: %s", m.raw)
	}
	pid := first.Snapshot().Backends[0].PID

	carried, err := first.Handover()
	if err != nil {
		t.Fatal(err)
	}
	if len(carried.Children) != 1 || carried.Children[0].PID != pid {
		t.Fatalf("carried: %+v, want the child %d", carried, pid)
	}
	if syscall.Kill(pid, 0) != nil {
		t.Fatalf("the carried child %d is gone", pid)
	}

	second := newTestPool(t, &pool.Options{StartOn: on, Carried: carried}, cfg)
	c2 := second.dial(t, "fake")
	c2.initialize("after", "")
	c2.call("2", "echo", `{"text":"after"}`)
	if m, _ := c2.recvID("2"); m.text() != "after" {
		t.Fatalf("call after the hand-over: %s", m.raw)
	}
	b := second.Snapshot().Backends
	if len(b) != 1 || b[0].PID != pid || !b[0].CarriedOver || b[0].State != pool.StateReady {
		t.Fatalf("backends after the hand-over: %+v", b)
	}
	log := childLog(t, logPath)
	if n := countMethod(log, "initialize"); n != 1 {
		t.Errorf("the child saw %d initialize requests, want 1 (no second handshake)", n)
	}
	var ids []float64
	for _, m := range log {
		if m["method"] == "tools/call" {
			id, _ := m["id"].(float64)
			ids = append(ids, id)
		}
	}
	if len(ids) != 2 || ids[1] <= ids[0] {
		t.Errorf("pool ids the child saw for the two calls: %v, want increasing", ids)
	}
}

// A carried child whose server now starts another process (the config
// changed across the upgrade) is stopped, and the server starts its new
// one.
func TestCarriedChildOfAChangedServerStops(t *testing.T) {
	on := oneThread(t)
	first := newTestPool(t, &pool.Options{StartOn: on}, fake("fake"))
	c := first.dial(t, "fake")
	c.initialize("before", "")
	pid := first.Snapshot().Backends[0].PID
	carried, err := first.Handover()
	if err != nil {
		t.Fatal(err)
	}
	second := newTestPool(t, &pool.Options{StartOn: on, Carried: carried}, fake("fake", "-log", filepath.Join(shortTempDir(t), "changed.log")))
	eventually(t, "the carried child to stop", func() bool { return !processAlive(pid) })
	c2 := second.dial(t, "fake")
	c2.initialize("after", "")
	if b := second.Snapshot().Backends; len(b) != 1 || b[0].PID == pid || b[0].CarriedOver {
		t.Fatalf("backends: %+v", b)
	}
}

// A carried child whose roots hold a URI with a control character (an
// earlier pool took such a root from a client) is stopped, not adopted:
// this pool takes no such root from a session, so none could join it, and
// sessions with the roots it seems to list get a child of their own.
func TestCarriedChildWithAControlCharacterInItsRootsStops(t *testing.T) {
	on := oneThread(t)
	first := newTestPool(t, &pool.Options{StartOn: on}, fake("fake"))
	first.dial(t, "fake").initialize("before", "")
	pid := first.Snapshot().Backends[0].PID
	carried, err := first.Handover()
	if err != nil {
		t.Fatal(err)
	}
	if len(carried.Children) != 1 || carried.Children[0].PID != pid {
		t.Fatalf("carried %+v, want the child %d", carried.Children, pid)
	}
	carried.Children[0].Roots = []string{"file:///work/a\nfile:///work/b"}

	second := newTestPool(t, &pool.Options{StartOn: on, Carried: carried}, fake("fake"))
	eventually(t, "the carried child to stop", func() bool { return !processAlive(pid) })
	c := second.dial(t, "fake")
	c.initRoots("after", "file:///work/a", "file:///work/b")
	if got := c.pidOf("1"); got == strconv.Itoa(pid) {
		t.Fatalf("a session with roots a and b reached the carried child %s", got)
	}
	if got := c.childRoots("2"); strings.Contains(got, `\n`) {
		t.Fatalf("the session's child was given %s", got)
	}
}

// Without StartOn, children die with any exec: Handover refuses.
func TestHandoverNeedsStartOn(t *testing.T) {
	p := newTestPool(t, nil, fake("fake"))
	if _, err := p.Handover(); err == nil {
		t.Fatal("Handover without StartOn succeeded")
	}
}

// processAlive reports whether pid runs (a zombie does not).
func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// A child that stopped reading its stdin, with a line half written to it,
// is not carried (the next pool could not write it a whole line) and does
// not hold the hand-over: it is stopped, and Handover returns. On the
// first edition Handover waited for ever for the blocked writer.
func TestHandoverDoesNotWaitForAChildThatStoppedReading(t *testing.T) {
	on := oneThread(t)
	cfg := fake("fake", "-stop-reading-after", "2")
	p := newTestPool(t, &pool.Options{StartOn: on, StopGrace: 300 * time.Millisecond}, cfg)
	c := p.dial(t, "fake")
	c.initialize("x", "")
	p.applyRequestTimeout(t, &cfg, 500*time.Millisecond)
	pid := p.Snapshot().Backends[0].PID
	c.call("1", "echo", `{"text":"`+strings.Repeat("x", 512<<10)+`"}`)
	if m, _ := c.recvID("1"); m.Error == nil {
		t.Fatalf("a call to a child that does not read was answered: %.200s", m.raw)
	}
	c.close()
	eventually(t, "the session to end", func() bool { return len(p.Snapshot().Sessions) == 0 })
	done := make(chan *pool.Carried, 1)
	go func() {
		carried, _ := p.Handover()
		done <- carried
	}()
	select {
	case carried := <-done:
		if carried != nil && len(carried.Children) != 0 {
			t.Errorf("carried %+v: a child with half a line on its stdin", carried.Children)
		}
	case <-time.After(10 * time.Second):
		syscall.Kill(pid, syscall.SIGKILL) // let the hand-over end, and the test with it
		<-done
		t.Fatal("Handover waited for a child that does not read its stdin")
	}
	eventually(t, "the child not carried to be stopped", func() bool { return !processAlive(pid) })
}

// A restart the user asked for just before a hand-over, still stopping
// the old child, does not leave a new child that nobody carries or stops:
// the hand-over returns, and no child of the server is left running but
// the one carried, if any. On the first edition the restart started a
// new child after the hand-over had begun, and Handover waited for it for
// ever.
func TestHandoverDuringARestart(t *testing.T) {
	on := oneThread(t)
	pidFile := filepath.Join(shortTempDir(t), "pid")
	p := newTestPool(t, &pool.Options{StartOn: on}, fake("fake", "-exit-on-stdin-eof=false", "-pidfile", pidFile))
	c := p.dial(t, "fake")
	c.initialize("x", "")
	first := p.Snapshot().Backends[0].PID
	c.close()
	eventually(t, "the session to end", func() bool { return len(p.Snapshot().Sessions) == 0 })
	if err := p.Restart("fake"); err != nil {
		t.Fatal(err)
	}
	// The old child ignores stdin's end: its stop takes the stdin grace,
	// during which the hand-over begins.
	done := make(chan *pool.Carried, 1)
	go func() {
		carried, _ := p.Handover()
		done <- carried
	}()
	var carried *pool.Carried
	select {
	case carried = <-done:
	case <-time.After(15 * time.Second):
		b, _ := os.ReadFile(pidFile)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid != first {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		<-done
		t.Fatal("Handover did not return")
	}
	b, _ := os.ReadFile(pidFile)
	last, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	kept := map[int]bool{}
	for _, cc := range carried.Children {
		kept[cc.PID] = true
	}
	for _, pid := range []int{first, last} {
		if !kept[pid] {
			eventually(t, fmt.Sprintf("child %d, not carried, to exit", pid), func() bool { return !processAlive(pid) })
		}
	}
	for pid := range kept {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// A child whose session set a log level, or held a subscription, is
// carried like any other: closing the sessions for the hand-over queues
// the pool's own setLevel or unsubscribe, which the hand-over waits for.
// On the first edition they were still in flight when it looked, and the
// child was stopped instead of carried.
func TestHandoverCarriesAChildAfterItsSessionsState(t *testing.T) {
	for _, tc := range []struct{ name, request string }{
		{"log level", `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`},
		{"subscription", `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPool(t, &pool.Options{StartOn: oneThread(t)}, fake("fake"))
			c := p.dial(t, "fake")
			c.initialize("x", "")
			c.send(tc.request)
			if m, _ := c.recvID("2"); m.Error != nil {
				t.Fatalf("%s: %s", tc.name, m.raw)
			}
			pid := p.Snapshot().Backends[0].PID
			carried, err := p.Handover()
			if err != nil {
				t.Fatal(err)
			}
			if len(carried.Children) != 1 || carried.Children[0].PID != pid {
				t.Fatalf("carried %+v, want the child %d", carried.Children, pid)
			}
			syscall.Kill(pid, syscall.SIGKILL)
		})
	}
}

// The hand-over record keeps the elicitation modes the child was told, and
// the next pool reads them back: its own hand-over says the same. On the
// first edition the record said "elicitation" alone, which reads as form
// mode only; on the second a URL-only child's record said form mode too.
func TestHandoverCarriesElicitationModes(t *testing.T) {
	for _, c := range []struct{ declared, want string }{
		{`{"elicitation":{"url":{}}}`, "elicitation.url"},
		{`{"elicitation":{"form":{},"url":{}}}`, "elicitation elicitation.url"},
	} {
		t.Run(c.want, func(t *testing.T) {
			on := oneThread(t)
			cfg := fake("fake")
			first := newTestPool(t, &pool.Options{StartOn: on}, cfg)
			first.dial(t, "fake").initialize("u", c.declared)
			pid := first.Snapshot().Backends[0].PID
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			carried, err := first.Handover()
			if err != nil {
				t.Fatal(err)
			}
			if len(carried.Children) != 1 || strings.Join(carried.Children[0].Caps, " ") != c.want {
				t.Fatalf("carried %+v, want caps %q", carried.Children, c.want)
			}

			second := newTestPool(t, &pool.Options{StartOn: on, Carried: carried}, cfg)
			s := second.dial(t, "fake")
			s.initialize("form", "") // the record, not a later session, says what the child was told
			s.call("1", "echo", `{"text":"after"}`)
			if m, _ := s.recvID("1"); m.text() != "after" {
				t.Fatalf("call after the hand-over: %s", m.raw)
			}
			eventually(t, "the carried child to be ready with nothing in flight", func() bool {
				snap := second.Snapshot()
				b := snap.Backends
				return len(b) == 1 && b[0].PID == pid && b[0].State == pool.StateReady && len(snap.InFlight) == 0
			})
			again, err := second.Handover()
			if err != nil {
				t.Fatal(err)
			}
			if len(again.Children) != 1 || strings.Join(again.Children[0].Caps, " ") != c.want {
				t.Fatalf("carried again %+v, want caps %q", again.Children, c.want)
			}
		})
	}
}
