//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Eight clients that each send one 60 MB message must not leave the pool
// holding their buffers: once the messages are answered, the pool's
// resident memory is back under 200 MB. On the first edition each
// session's line buffer kept the capacity of its largest message for its
// whole life, and the same attack took the pool from 244 MB to 1.0 GB.
func TestBigLinesDoNotStayResident(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 480 MB through the pool")
	}
	in := servePlain(t, fakeConfig(t)) // its RSS is measured: no race detector
	const clients, size = 8, 60 << 20
	shims := make([]*shim, clients)
	for i := range shims {
		shims[i] = in.connect(t, "fake")
		shims[i].initialize(fmt.Sprint("big-", i))
	}
	pid := in.cmd.Process.Pid
	t.Logf("pool RSS before: %d MB", rssMB(t, pid))

	// A real call whose arguments are 60 MB: the pool reads, checks and
	// rewrites it, the child refuses the unknown tool with a short error.
	filler := strings.Repeat("x", size)
	var wg sync.WaitGroup
	for _, s := range shims {
		wg.Go(func() {
			s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"no-such-tool","arguments":{"text":"%s"}}}`, filler))
		})
	}
	wg.Wait()
	peak := 0
	for i, s := range shims {
		r := s.recvID("1")
		if r.Error == nil && !strings.Contains(r.raw, "isError") {
			t.Fatalf("client %d: the child answered an unknown tool: %s", i, r.raw)
		}
		peak = max(peak, rssMB(t, pid))
	}
	// The sessions stay open and idle: their buffers must go anyway.
	s := shims[0]
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`)
	if got := toolText(s.recvID("2")); got != "after" {
		t.Fatalf("echo after the big lines: %q", got)
	}
	var last int
	waitFor(t, "the pool's RSS back under 200 MB", func() bool {
		last = rssMB(t, pid)
		return last < 200
	})
	t.Logf("pool RSS: peak seen %d MB, after %d MB", peak, last)
}

// rssMB reads a process's resident set size from /proc, in MiB.
func rssMB(t *testing.T, pid int) int { return rssKB(t, pid) >> 10 }

// rssKB reads a process's resident set size from /proc, in KiB.
func rssKB(t *testing.T, pid int) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:")); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(string(v)), " kB"))
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}
