package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the CLI scripts in testdata/script: each a txtar of
// commands and their expected output against the built binary, with
// SWITCHBOARD_HOME in the script's own work directory. $FAKEMCP is the
// fake MCP server; `waitfor pool` polls `switchboard status` until the
// pool answers, with a deadline.
func TestScripts(t *testing.T) {
	bin := filepath.Dir(sbBin)
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
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
// pool answers (or, negated, until none does), for at most 20 s.
func waitforCmd(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || args[0] != "pool" {
		ts.Fatalf("usage: waitfor pool")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		cmd := exec.Command(sbBin, "status")
		cmd.Env = append(os.Environ(), "SWITCHBOARD_HOME="+ts.Getenv("SWITCHBOARD_HOME"))
		err := cmd.Run()
		if (err == nil) != neg {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfor pool: %s after 20 s", map[bool]string{false: "no pool answers", true: "a pool still answers"}[neg])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
