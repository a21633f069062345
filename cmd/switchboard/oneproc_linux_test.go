package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// environOf is the environment process pid was started with.
func environOf(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// gomaxprocsOf is the GOMAXPROCS entries of env.
func gomaxprocsOf(env []string) []string {
	var got []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOMAXPROCS=") || strings.HasPrefix(kv, "SWITCHBOARD_SHIM_GOMAXPROCS=") {
			got = append(got, kv)
		}
	}
	return got
}

// A shim runs with one P, whether `switchboard connect` started it or the
// client started switchboard-connect itself; a GOMAXPROCS the user set is
// left as it is. The pool a shim starts, which inherits its environment,
// runs with every CPU: a GOMAXPROCS=1 that reached it would halve the
// pool on two cores.
func TestShimRunsOnOneProcAndThePoolItStartsOnAll(t *testing.T) {
	home := coldHome(t, `{"idleExit": "1m"}`)
	viaConnect := coldShim(t, home)
	viaConnect.initialize("via-connect") // starts the pool
	pools := poolsOf(home)
	if len(pools) != 1 {
		t.Fatalf("pools: %v", pools)
	}
	if got := gomaxprocsOf(environOf(t, pools[0])); len(got) != 0 {
		t.Errorf("the pool a shim started has %v in its environment", got)
	}

	cmd := exec.Command(filepath.Join(filepath.Dir(sbBin), "switchboard-connect"), "fake")
	cmd.Env = clientEnv(home)
	direct := startShimCmd(t, cmd)
	direct.initialize("direct")
	user := startShim(t, "fake", append(clientEnv(home), "GOMAXPROCS=2"))
	user.initialize("user-set")

	for _, tc := range []struct {
		name string
		s    *shim
		want []string
	}{
		{"switchboard connect", viaConnect, []string{"GOMAXPROCS=1", "SWITCHBOARD_SHIM_GOMAXPROCS=1"}},
		{"switchboard-connect", direct, []string{"GOMAXPROCS=1", "SWITCHBOARD_SHIM_GOMAXPROCS=1"}},
		{"GOMAXPROCS=2 switchboard connect", user, []string{"GOMAXPROCS=2"}},
	} {
		if got := gomaxprocsOf(environOf(t, tc.s.cmd.Process.Pid)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: the shim started with %v, want %v", tc.name, got, tc.want)
		}
	}
}
