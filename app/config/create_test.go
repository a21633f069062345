package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestCreatePrivateFileLeavesAnExistingFile: CreatePrivateFile, linked
// into place or (without hard links) created exclusively, writes a new
// file owner-only and fails with fs.ErrExist on one that is there,
// leaving it and no temporary file behind.
func TestCreatePrivateFileLeavesAnExistingFile(t *testing.T) {
	for name, create := range map[string]func(string, []byte) error{
		"linked":      CreatePrivateFile,
		"exclusively": createExclusive,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "config.json")
			if err := create(path, []byte("new")); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, want 0600", fi.Mode().Perm())
			}
			if err := create(path, []byte("again")); !errors.Is(err, fs.ErrExist) {
				t.Errorf("over an existing file: %v, want fs.ErrExist", err)
			}
			if b, err := os.ReadFile(path); err != nil || string(b) != "new" {
				t.Errorf("the file holds %q, %v; want %q", b, err, "new")
			}
			if ents, err := os.ReadDir(dir); err != nil || len(ents) != 1 {
				t.Errorf("left in the directory: %v, %v", ents, err)
			}
		})
	}
}
