//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"

	smallshim "github.com/switchboard-mcp/switchboard/app/shim"
)

// execSmallShim replaces this process with switchboard-connect from the
// binary's own directory, when it is there: the full binary links the GUI
// and SQLite, and a client keeps one shim per session for hours. It
// returns only if there is no such binary or it cannot run; then the
// caller relays in-process. The small program runs with one P
// (shim.OneProcEnv).
func execSmallShim(name string) {
	if os.Getenv("SWITCHBOARD_INPROCESS_CONNECT") != "" {
		return
	}
	self, err := os.Executable()
	if err != nil {
		return
	}
	small := filepath.Join(filepath.Dir(self), "switchboard-connect")
	if fi, err := os.Stat(small); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return
	}
	_ = syscall.Exec(small, []string{small, name}, smallshim.OneProcEnv(os.Environ()))
}
