//go:build unix

package config

import (
	"errors"
	"os"
	"path/filepath"
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
