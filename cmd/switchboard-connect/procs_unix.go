//go:build unix

package main

import (
	"os"
	"syscall"

	"github.com/switchboard-mcp/switchboard/app/shim"
)

// oneProc runs this program again with one P (shim.OneProcEnv), unless it
// was started so, by itself or by `switchboard connect`, or the user set
// GOMAXPROCS. It returns when there is nothing to do or the exec failed:
// the shim then runs as it is.
func oneProc() {
	if shim.RestoreProcs() {
		return
	}
	env := os.Environ()
	one := shim.OneProcEnv(env)
	if len(one) == len(env) {
		return
	}
	if self, err := os.Executable(); err == nil {
		_ = syscall.Exec(self, os.Args, one)
	}
}
