package pool

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// A batch's write that the client's pipe takes only part of releases the
// ledger slots of the answers it wrote whole, and keeps those of the
// others until the drain has written them: a pool that dies meanwhile
// leaves owed what the client has not read whole, and nothing it has.
func TestBatchShortWriteOwesWhatItDidNotWrite(t *testing.T) {
	r := newBatchRig(t)
	led := &ledger{mem: make([]byte, wire.LedgerSize), drop: func() {}}
	r.s.ledger = led
	listed := func() (ids []string) {
		led.mu.Lock()
		defer led.mu.Unlock()
		for _, l := range wire.ReadLedger(led.mem) {
			ids = append(ids, l.ID)
		}
		slices.Sort(ids)
		return ids
	}
	// Fill the client's pipe but for a page and a half: the batch's
	// write takes the first answer whole and part of the second.
	fill := r.fillPipeBut(t, 2*os.Getpagesize())
	pad := `,"pad":"` + strings.Repeat("p", 3000) + `"`
	bt := &outBatch{}
	var ps []*pending
	for i := range 4 {
		ps = append(ps, r.add(uint64(10+i), fmt.Sprint(i), stWritten, true))
	}
	for i, pe := range ps {
		r.answerPadded(t, bt, pe, i < len(ps)-1, pad)
	}
	bt.flush()

	// The pipe is full: what the batch wrote stays in it, and the drain
	// waits for the client.
	wrote := unread(t, r.client) - (fill + 1)
	var owed []string
	for i, end := 0, 0; i < len(ps); i++ {
		end += len(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"n":%d%s}}`, i, 10+i, pad)) + 1
		if end > wrote {
			owed = append(owed, fmt.Sprint(i))
		}
	}
	if len(owed) == 0 || len(owed) == len(ps) {
		t.Fatalf("the batch wrote %d bytes: want some answers whole and some not", wrote)
	}
	if got := listed(); !slices.Equal(got, owed) {
		t.Errorf("with %d bytes of the batch written, the ledger lists %v, want the answers not written whole: %v", wrote, got, owed)
	}
	r.readLines(t, 1+len(ps))
	waitUntil(t, "the answers' ledger slots released", func() bool { return len(listed()) == 0 })
}

// unread is how many bytes wait in the pipe f reads.
func unread(t *testing.T, f *os.File) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil {
		t.Fatal(err)
	}
	if ierr != nil {
		t.Fatalf("FIONREAD: %v", ierr)
	}
	return n
}
