package main

import (
	"strings"
	"testing"
	"time"
)

// `switchboard quit` stops the running pool as the tray's Quit does and
// returns once its process has exited (what the Windows uninstaller needs
// before it removes the program); with none running there is nothing to
// quit, and that is no error.
func TestQuitFromTheCLI(t *testing.T) {
	in := serve(t, fakeConfig(t))
	s := in.connect(t, "fake")
	s.initialize("c")
	out, err := in.run("quit")
	if err != nil || !strings.Contains(out, "has quit") {
		t.Fatalf("quit: %v %s", err, out)
	}
	select {
	case err := <-in.done:
		in.done <- err
		if err != nil {
			t.Fatalf("the pool exited with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("quit returned, and the pool's process is still running")
	}
	if log := in.log.String(); !strings.Contains(log, "asked to quit") || !strings.Contains(log, "shutting down") {
		t.Errorf("the pool's log:\n%s", log)
	}
	out, err = in.run("quit")
	if err != nil || !strings.Contains(out, "nothing to quit") {
		t.Fatalf("quit with no pool: %v %s", err, out)
	}
}
