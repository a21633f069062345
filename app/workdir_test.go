//go:build linux

package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestServerStartsInHomeWhateverThePoolsDir: a server without cwd starts
// in the user's home directory, and a relative cwd is taken from there,
// wherever the pool itself runs (here a shell's project directory). On
// the first edition such a server ran in the pool's directory: the
// project of whichever client happened to start the pool, serving that
// folder to every client (`server-filesystem .`).
func TestServerStartsInHomeWhateverThePoolsDir(t *testing.T) {
	paths := sbHome(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	bin, err := fakeBin() // built from the module's directory
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // the pool's own directory: a project's
	if err := os.Mkdir(filepath.Join(home, "tools"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"plain":    map[string]any{"command": bin},
		"relative": map[string]any{"command": bin, "cwd": "tools"},
	}})
	if err := os.WriteFile(paths.Config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	inst, _ := startIn(t, Options{})
	stopInstance(t, inst)
	for server, want := range map[string]string{"plain": home, "relative": filepath.Join(home, "tools")} {
		pid := dialSession(t, inst.Paths.PoolSocket(), server).pid()
		if got, err := os.Readlink("/proc/" + pid + "/cwd"); err != nil || got != want {
			t.Errorf("%s runs in %q (%v), want %q", server, got, err, want)
		}
	}
}
