package fileid

import (
	"os"
	"path/filepath"
	"testing"
)

// A file put in another's place is another file, stat'ed before and
// after, and the one there is itself, stat'ed twice. (os.Stat on Windows
// said the first was the same: it read both identities at the comparison,
// from the file there then.)
func TestReplacedIsAnotherFile(t *testing.T) {
	p := filepath.Join(tempDir(t), "f")
	if err := os.WriteFile(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, err := Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p+".new", []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
	after, err := Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(before, after) {
		t.Error("the file put in its place is the same as the one before")
	}
	again, err := Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(after, again) {
		t.Error("the file is not itself, stat'ed twice")
	}
	if _, err := Stat(p + ".gone"); !os.IsNotExist(err) {
		t.Errorf("no file: %v, want not exist", err)
	}
}

// A file mapped for writing (the history's journal) is itself, stat'ed
// by its path and through the handle that mapped it. (Under Wine os.Stat
// could not read its identity, and said it was another file.)
func TestMappedIsItself(t *testing.T) {
	p := filepath.Join(tempDir(t), "journal")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(4096); err != nil {
		t.Fatal(err)
	}
	held, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	unmap := mapForWriting(t, f, 4096)
	defer unmap()
	if err := f.Close(); err != nil { // the mapping stays, as the journal's does
		t.Fatal(err)
	}
	fi, err := Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(held, fi) {
		t.Error("the mapped file is not itself")
	}
}

// tempDir is t.TempDir, but for its removal: Wine (where this test runs
// too) lacks what os.RemoveAll uses on Windows.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fileid")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
