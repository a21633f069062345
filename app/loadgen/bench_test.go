package loadgen

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
)

// TestStopKeepsTheHomeOfAPoolThatLeftRequestsUnanswered: a bench pool
// on which a measured run left a request hung or misrouted keeps its
// home, with the end of its log; any other is removed.
func TestStopKeepsTheHomeOfAPoolThatLeftRequestsUnanswered(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  Result
		kept bool
	}{
		{"all answered", Result{Requests: 10, Answered: 10}, false},
		{"hung", Result{Requests: 9, Answered: 9, Hung: 1}, true},
		{"misrouted", Result{Requests: 10, Answered: 10, Misrouted: 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, err := os.MkdirTemp("", "sbbench-test")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(home) })
			cmd := exec.Command("sleep", "60") // stands in for the pool process
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			p := &benchPool{home: home, cmd: cmd, done: make(chan error, 1), stderr: &tailBuffer{max: 1 << 10}}
			go func() { p.done <- cmd.Wait() }()
			_, _ = p.stderr.Write([]byte("the pool's last words\n"))
			if _, err := p.measure(func() (Result, error) { return tc.run, nil }); err != nil {
				t.Fatal(err)
			}
			p.stop()
			p.stop() // stopping again changes nothing
			_, err = os.Stat(home)
			if kept := err == nil; kept != tc.kept {
				t.Fatalf("home kept: %v, want %v", kept, tc.kept)
			}
			if !tc.kept {
				return
			}
			if log, err := os.ReadFile(filepath.Join(home, "pool-stderr.log")); err != nil || string(log) != "the pool's last words\n" {
				t.Fatalf("the kept log: %q, %v", log, err)
			}
		})
	}
}

// TestInspectHangKeepsTheStatusAndStacksOfTheMoment: when a run on a bench
// pool hangs, the hung sessions and the pool's `status --json` and
// `stacks` are written into its home, numbered by hang, and the home is
// kept.
func TestInspectHangKeepsTheStatusAndStacksOfTheMoment(t *testing.T) {
	t.Setenv(fakeSwitchboardEnv, "1") // the test binary stands in for switchboard
	home := t.TempDir()
	p := &benchPool{self: os.Args[0], home: home}
	cfg := p.inspected(Config{})
	hung := []HungSession{{Session: 3, PID: 42, StreamEnded: true, Pending: []HungRequest{{ID: `"7"`, Token: "s3/7"}}}}
	for range 2 {
		cfg.OnHang(hung)
	}
	if !p.kept.Load() {
		t.Fatal("the home of a pool that hung is not kept")
	}
	for n := 1; n <= 2; n++ {
		var got []HungSession
		name := fmt.Sprintf("hang-%d-client.json", n)
		if b, err := os.ReadFile(filepath.Join(home, name)); err != nil || json.Unmarshal(b, &got) != nil || !reflect.DeepEqual(got, hung) {
			t.Errorf("%s: %s, %v; want %+v", name, b, err, hung)
		}
		for file, args := range map[string]string{"status.json": "status --json", "stacks.txt": "stacks"} {
			name := fmt.Sprintf("hang-%d-%s", n, file)
			got, err := os.ReadFile(filepath.Join(home, name))
			if want := "switchboard " + args + " in " + home + "\n"; err != nil || string(got) != want {
				t.Errorf("%s: %q, %v; want %q", name, got, err, want)
			}
		}
	}
}
