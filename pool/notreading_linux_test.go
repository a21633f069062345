package pool

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A request queued behind a write its child does not take, and ended
// then, never ran: it is answered mayHaveExecuted false, and never
// written after its end, though the writer had taken it for the write
// that stalled. Three requests go to the writer together; the child's
// pipe takes the first whole and part of the second. (The writer used to
// write all three with one Write that waited, every one of them being
// written, may have run, until it returned; and then wrote the third,
// already answered as may have run, to the child.)
func TestRequestTheChildTookNothingOfDidNotRun(t *testing.T) {
	rig := newEndingRig(t)
	b := rig.b
	probe, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	size, err := unix.FcntlInt(pw.Fd(), unix.F_GETPIPE_SZ, 0) // (Fd makes it blocking: a pipe for the size alone)
	probe.Close()
	pw.Close()
	if err != nil {
		t.Fatal(err)
	}
	if size*15/8 > 256<<10 {
		t.Skipf("a pipe holds %d bytes: three requests of 5/8 of it do not go in one write", size)
	}
	c, pr, pw := pipedChild(t)

	var reqs []*pending
	b.mu.Lock()
	for i := range 3 {
		id := uint64(11 + i)
		head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t","arguments":{"text":"`, id)
		tail := `"}}}`
		line := []byte(head + strings.Repeat("a", size*5/8-len(head)-len(tail)) + tail)
		pe := &pending{id: id, sess: rig.s, b: b, origID: []byte(fmt.Sprintf(`"c%d"`, i)), method: "tools/call", name: "t", line: line}
		if r, _, _ := b.reqs.register(pe, 100, 0); r != registered {
			t.Fatalf("register: %v", r)
		}
		rig.s.mu.Lock()
		rig.s.trackLocked(string(pe.origID), pe.origID, pe)
		rig.s.mu.Unlock()
		b.queue = append(b.queue, outItem{p: pe, line: line})
		reqs = append(reqs, pe)
	}
	b.mu.Unlock()

	go b.writeLoop(c)
	defer func() {
		close(c.exited) // the writer's wait ends, for room or for lines
		pw.Close()
		<-c.writerDone
	}()
	rc, err := pr.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	first := len(reqs[0].line) + 1
	waitUntil(t, "the pipe to hold part of the second request", func() bool {
		held := 0
		if err := rc.Control(func(fd uintptr) { held, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil {
			t.Fatal(err)
		}
		return held > first
	})
	state := func(p *pending) (st reqState) {
		b.reqs.update(func(*inFlight) { st = p.state })
		return st
	}
	waitUntil(t, "the third request, none of which the child took, to be queued, not being written", func() bool {
		return state(reqs[2]) == stQueued
	})
	if st := state(reqs[1]); st != stWriting {
		t.Errorf("the second request, which the child has part of, is %v; want writing", st)
	}

	b.expire(reqs[2]) // its timeout
	got := rig.answers()
	if len(got) != 1 || !strings.Contains(got[0], `"id":"c2"`) || !strings.Contains(got[0], `"mayHaveExecuted":false`) {
		t.Fatalf("the third request's timeout: %q; want its error with mayHaveExecuted false", got)
	}

	// The child reads again: it gets the first two, then whatever is sent
	// next, and never the third.
	b.sendRaw([]byte(`{"jsonrpc":"2.0","method":"notifications/marker"}`))
	r := bufio.NewReaderSize(pr, 1<<20)
	var ids []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading what the child was sent: %v (so far %v)", err, ids)
		}
		if strings.Contains(line, "notifications/marker") {
			break
		}
		ids = append(ids, line[:strings.Index(line, `,"method"`)])
	}
	if want := []string{`{"jsonrpc":"2.0","id":11`, `{"jsonrpc":"2.0","id":12`}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("the child got %v, want %v", ids, want)
	}
}
