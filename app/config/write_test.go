package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// appendLine is an edit: the file with one more line.
func appendLine(line string) EditFunc {
	return func(cur []byte, exists bool) ([]byte, error) {
		return append(append([]byte{}, cur...), line+"\n"...), nil
	}
}

// TestEditFileKeepsAWriteMadeMeanwhile: a write by someone else between
// the edit's read and its rename is kept, with the edit made on top.
func TestEditFileKeepsAWriteMadeMeanwhile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "client.json")
	if err := os.WriteFile(path, []byte("start\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writes := 0
	testHookBeforeCheck = func(p string) {
		if writes < editTries-1 {
			writes++
			if err := os.WriteFile(path, []byte("start\n"+strings.Repeat("client\n", writes)), 0o600); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(func() { testHookBeforeCheck = nil })
	if err := EditFile(path, 1<<20, 0o600, appendLine("edit")); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if want := "start\n" + strings.Repeat("client\n", editTries-1) + "edit\n"; string(got) != want {
		t.Errorf("file = %q, want %q", got, want)
	}
	if m, _ := filepath.Glob(path + ".tmp-*"); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

// TestEditFileGivesUp: a file written under every try is left as it was
// last written, and the error says why.
func TestEditFileGivesUp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "client.json")
	if err := os.WriteFile(path, []byte("start\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writes := 0
	testHookBeforeCheck = func(p string) {
		writes++
		if err := os.WriteFile(path, []byte(strings.Repeat("client\n", writes)), 0o600); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { testHookBeforeCheck = nil })
	err := EditFile(path, 1<<20, 0o600, appendLine("edit"))
	if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), path+" changed while it was being edited") {
		t.Fatalf("err = %v, want ErrChanged naming the file", err)
	}
	got, _ := os.ReadFile(path)
	if want := strings.Repeat("client\n", editTries); string(got) != want {
		t.Errorf("file = %q, want %q", got, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left: %v", entries)
	}
}

// TestEditFileMakesAFile: an edit of a file that does not exist makes
// it, and one that returns nil leaves the file alone.
func TestEditFileMakesAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.json")
	if err := EditFile(path, 1<<20, 0o640, func(cur []byte, exists bool) ([]byte, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a nil edit made the file: %v", err)
	}
	if err := EditPrivateFile(path, 1<<20, func(cur []byte, exists bool) ([]byte, error) {
		if exists || cur != nil {
			t.Errorf("exists %v, cur %q", exists, cur)
		}
		return []byte("new\n"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "new\n" {
		t.Errorf("file = %q", got)
	}
}
