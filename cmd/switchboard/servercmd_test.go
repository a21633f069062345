package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// `switchboard restart NAME` gives the server a new child; `stop NAME`
// stops it (status then shows no pid: omitted, not 0); an unknown name
// is an error.
func TestRestartAndStopFromTheCLI(t *testing.T) {
	in := serve(t, fakeConfig(t))
	s := in.connect(t, "fake")
	s.initialize("c")
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pid","arguments":{}}}`)
	first := toolText(s.recvID("1"))
	if out, err := in.run("restart", "fake"); err != nil {
		t.Fatalf("restart: %v %s", err, out)
	}
	waitFor(t, "a new child", func() bool {
		st := in.status()
		return len(st.Backends) == 1 && st.Backends[0].PID != 0 && st.Backends[0].State == "ready" &&
			strings.TrimSpace(first) != "" && st.Backends[0].Restarts == 1
	})
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pid","arguments":{}}}`)
	if second := toolText(s.recvID("2")); second == first {
		t.Fatalf("same child %s after restart", second)
	}
	if out, err := in.run("stop", "fake"); err != nil {
		t.Fatalf("stop: %v %s", err, out)
	}
	waitFor(t, "no child", func() bool {
		out, _ := in.run("status", "--json")
		return !strings.Contains(out, `"pid": 0`) && len(in.status().Backends) == 0
	})
	cmd := exec.Command(sbBin, "restart", "nope")
	cmd.Env = append(os.Environ(), "SWITCHBOARD_HOME="+in.home)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), `"nope"`) {
		t.Fatalf("restart of an unknown server: %v %s", err, out)
	}
}
