//go:build linux

package main

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// An attached session's pool reads the client's pipe itself, so it may
// hold the head of a request line (the client writes a large message, or
// writes in pieces) when it is killed: the head is gone from the pipe.
// The pool keeps what it read of the line in memory its `connect` shares,
// and `connect` gives it to the next pool ahead of the rest: the line
// arrives whole and runs there, once. So again when that pool too is
// killed before the client finishes the line: it took the head from
// `connect` and kept it the same way. A pool stopped on purpose hands the
// head back instead, and `connect` gives it to the next pool once, not
// once from each.
func TestAttachedHalfLineSurvivesPoolKill(t *testing.T) {
	const head = `{"jsonrpc":"2.0","id":"half","method":"tools/call",`
	const rest = `"params":{"name":"echo","arguments":{"text":"whole"}}}`
	for _, tc := range []struct {
		name  string
		kills []bool // how each pool goes: killed, or stopped on purpose
	}{
		{"killed", []bool{true}},
		{"killed twice", []bool{true, true}},
		{"stopped", []bool{false}},
		{"stopped, then killed", []bool{false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := serve(t, historyOffConfig(t))
			s := connectAs(t, in, "fake", false)
			s.initialize("half-line")
			answers := readAnswers(s)
			writeHead(t, s, head)
			for _, kill := range tc.kills {
				goAway(t, in, kill)
				in = serveHome(t, in.home)
				waitFor(t, "the session to be back", func() bool { return len(in.status().Sessions) == 1 })
			}
			s.send(rest)
			waitFor(t, "the half line's answer", func() bool { _, ok := answers.get(`"half"`); return ok })
			if a, _ := answers.get(`"half"`); !strings.Contains(a.line, `"text":"whole"`) || strings.HasPrefix(a.line, "DUPLICATE") {
				t.Errorf("the request split across the kill was answered %s; want its result, once", a.line)
			}
			s.send(`{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`)
			waitFor(t, "the next call's answer", func() bool { _, ok := answers.get(`"after"`); return ok })
			if n := answers.count(); n != 2 { // half, after
				t.Errorf("the client read %d answers; want 2 (no parse error for a torn line)", n)
			}
			stillConnected(t, s, answers)
		})
	}
}

// writeHead writes head, the start of a request line, to s's client pipe
// and waits until the pool holding the pipe has read it all.
func writeHead(t *testing.T, s *shim, head string) {
	t.Helper()
	if _, err := s.stdin.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	fd := int(s.stdin.(*os.File).Fd())
	waitFor(t, "the pool to read the head", func() bool {
		n, err := unix.IoctlGetInt(fd, unix.TIOCINQ) // FIONREAD
		return err == nil && n == 0
	})
}
