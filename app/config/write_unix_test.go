//go:build unix

package config

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWriteFileRefusesAHardLinkedFile: the rename would give the file's
// name the new content and leave its other names the old one.
func TestWriteFileRefusesAHardLinkedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "client.json")
	if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(path, filepath.Join(dir, "other-name.json")); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(path, []byte("new\n"), 0o600)
	if !errors.Is(err, ErrHardLinked) {
		t.Fatalf("err = %v, want ErrHardLinked", err)
	}
	for _, name := range []string{"client.json", "other-name.json"} {
		if got, _ := os.ReadFile(filepath.Join(dir, name)); string(got) != "old\n" {
			t.Errorf("%s = %q", name, got)
		}
	}
}

// TestWriteFileKeepsTheOwner: a file of another user's that root (sudo)
// rewrites stays theirs; it became root's, which its owner's client
// could then not read.
func TestWriteFileKeepsTheOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can give a file to another user")
	}
	path := filepath.Join(t.TempDir(), "client.json")
	if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 4321, 4322); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 4321 || st.Gid != 4322 || fi.Mode().Perm() != 0o600 {
		t.Errorf("owner %d:%d mode %v, want 4321:4322 0600", st.Uid, st.Gid, fi.Mode())
	}
}

// TestWriteFileRefusesToChangeTheOwner: a user who may write another
// user's file, and its directory, but not give a file to them, is
// refused rather than left to replace it with a file of their own, which
// its owner could then not read (0600). It runs the write as another
// user, in a copy of this test binary.
func TestWriteFileRefusesToChangeTheOwner(t *testing.T) {
	if path := os.Getenv("SWITCHBOARD_TEST_WRITE"); path != "" {
		if err := WriteFile(path, []byte("new\n"), 0o600); err != nil {
			fmt.Print(err)
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("only root can run a write as another user")
	}
	dir, err := os.MkdirTemp("", "owner-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "config.test")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "client.json")
	if err := os.WriteFile(path, []byte("old\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{dir: 0o777, path: 0o666} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(path, 4321, 4321); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestWriteFileRefusesToChangeTheOwner$")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SWITCHBOARD_TEST_WRITE="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 4322, Gid: 4322}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), ErrOwner.Error()) {
		t.Errorf("the write as another user said %q, want %q", out, ErrOwner)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old\n" || fi.Sys().(*syscall.Stat_t).Uid != 4321 {
		t.Errorf("the file is now %q, owned by %d", got, fi.Sys().(*syscall.Stat_t).Uid)
	}
}
