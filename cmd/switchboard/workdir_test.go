package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// A client in a project directory starts the pool, and the project is
// then deleted (a removed git worktree): the pool runs in the user's home
// directory, not the client's, and so do the servers it starts from then
// on. On the first edition the pool and every server without cwd ran in
// the client's directory, and once it was gone each new server failed
// (npx: ENOENT uv_cwd) until the pool restarted.
func TestClientStartedPoolOutlivesTheClientsDir(t *testing.T) {
	home := coldHome(t, `{"idleExit": "1m"}`)
	userHome := t.TempDir()
	project := filepath.Join(t.TempDir(), "worktree")
	if err := os.Mkdir(project, 0o700); err != nil {
		t.Fatal(err)
	}
	s := startShimIn(t, "fake", append(clientEnv(home), "HOME="+userHome), project)
	waitFor(t, "the pool the client starts", func() bool { return len(poolsOf(home)) == 1 })
	if err := os.RemoveAll(project); err != nil {
		t.Fatal(err)
	}
	s.initialize("editor") // starts the child
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pid","arguments":{}}}`)
	child := toolText(s.recvID("1"))
	for what, pid := range map[string]string{"the pool": fmt.Sprint(poolsOf(home)[0]), "its child": child} {
		if dir, err := os.Readlink("/proc/" + pid + "/cwd"); err != nil || dir != userHome {
			t.Errorf("%s (pid %s) runs in %q (%v), want the home directory %s", what, pid, dir, err, userHome)
		}
	}
}

// A client that names its home relative to its working directory
// (SWITCHBOARD_HOME=sb) starts a pool of that same home, though the pool
// runs in the user's home directory: the pool is given the home made
// absolute. Started in the home directory with the name as it was, the
// pool served another home, and the client waited for it in vain.
func TestClientStartedPoolOfARelativeHome(t *testing.T) {
	home := coldHome(t, `{"idleExit": "1m"}`)
	env := append(clientEnv(home), "HOME="+t.TempDir(), "SWITCHBOARD_HOME="+filepath.Base(home))
	s := startShimIn(t, "fake", env, filepath.Dir(home))
	s.initialize("editor")
	if pools := poolsOf(home); len(pools) != 1 {
		t.Fatalf("pools of the client's home: %v", pools)
	}
}
