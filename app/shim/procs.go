package shim

import (
	"os"
	"strings"
)

// procsMark says that the GOMAXPROCS=1 beside it was set for the shim by
// the program that started it (OneProcEnv), not by the user.
const procsMark = "SWITCHBOARD_SHIM_GOMAXPROCS"

// OneProcEnv is env, for a shim about to be exec'd, with GOMAXPROCS=1
// unless the user set GOMAXPROCS. A shim whose client's pipes the pool
// took only waits; with one P its runtime keeps one set of per-P caches,
// about 15% of an idle shim's memory (a client keeps one per session).
// GOMAXPROCS is read only as a process starts, hence the exec.
func OneProcEnv(env []string) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOMAXPROCS=") {
			return env
		}
	}
	return append(env[:len(env):len(env)], "GOMAXPROCS=1", procsMark+"=1")
}

// RestoreProcs takes OneProcEnv's GOMAXPROCS out of this process's
// environment, once its runtime has read it: a pool the shim starts, and
// that pool's children, inherit the environment and must run on every
// CPU. It reports whether it did, that is whether this process was
// started with OneProcEnv.
func RestoreProcs() bool {
	if os.Getenv(procsMark) == "" {
		return false
	}
	_ = os.Unsetenv(procsMark)
	_ = os.Unsetenv("GOMAXPROCS")
	return true
}
