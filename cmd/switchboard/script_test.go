package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the CLI scripts in testdata/script: each a txtar of
// commands and their expected output against the built binary, with
// SWITCHBOARD_HOME in the script's own work directory. $FAKEMCP is the
// fake MCP server; `waitfor pool` polls `switchboard status` until the
// pool answers, and `waitfor status REGEXP` until its JSON matches, with a
// deadline.
func TestScripts(t *testing.T) {
	bin := filepath.Dir(sbBin)
	watchRaces(t)
	if raceBuild {
		// After every script, and so every process a script started, has
		// ended.
		t.Cleanup(func() {
			for _, r := range newRaceReports("script-") {
				t.Errorf("DATA RACE in a process a script started: %s", r)
			}
		})
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			if raceBuild {
				env.Setenv("GORACE", scriptRaceLog(filepath.Base(env.WorkDir)))
			}
			env.Setenv("PATH", bin+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("SWITCHBOARD_HOME", filepath.Join(env.WorkDir, "home"))
			env.Setenv("FAKEMCP", fakeBin)
			env.Setenv("SWITCHBOARD_BIN", sbBin)
			return os.MkdirAll(filepath.Join(env.WorkDir, "home"), 0o700)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfor": waitforCmd,
		},
	})
}

// waitforCmd is `waitfor pool`: it polls `switchboard status` until the
// pool answers (or, negated, until none does); or `waitfor status REGEXP`:
// it polls `switchboard status --json` until its output matches REGEXP
// (or, negated, until it does not). Each for at most 20 s.
func waitforCmd(ts *testscript.TestScript, neg bool, args []string) {
	var match *regexp.Regexp
	switch {
	case len(args) == 1 && args[0] == "pool":
	case len(args) == 2 && args[0] == "status":
		match = regexp.MustCompile(args[1])
	default:
		ts.Fatalf("usage: waitfor pool | waitfor status REGEXP")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		cmd := exec.Command(sbBin, "status")
		if match != nil {
			cmd.Args = append(cmd.Args, "--json")
		}
		cmd.Env = append(os.Environ(), "SWITCHBOARD_HOME="+ts.Getenv("SWITCHBOARD_HOME"))
		out, err := cmd.Output()
		ok := err == nil
		if match != nil {
			ok = ok && match.Match(out)
		}
		if ok != neg {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfor %s: still %s after 20 s", strings.Join(args, " "), map[bool]string{false: "not", true: "so"}[neg])
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}
