package app

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/config"
)

// denyReads makes the watcher's reads of path fail with a permission
// error while the returned flag is set, as they do for a user the file's
// mode or owner shuts out; root reads any file, so the tests that must
// run as root too fake it.
func denyReads(t *testing.T, path string) *atomic.Bool {
	t.Helper()
	var deny atomic.Bool
	old := readConfig
	readConfig = func(p string) ([]byte, error) {
		if deny.Load() && p == path {
			return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrPermission}
		}
		return config.ReadFile(p)
	}
	t.Cleanup(func() { readConfig = old })
	return &deny
}

// TestWatchConfigChmodFixesRead: a config the pool could not read (a
// save that left it with the wrong mode or owner) is read again when a
// chmod or chown makes it readable, with no write to wait for.
func TestWatchConfigChmodFixesRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, serversConfig("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	deny := denyReads(t, path)
	ch := watch(t, path, 50*time.Millisecond, nil)
	deny.Store(true)
	if err := os.WriteFile(path, serversConfig("a", "b"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := next(t, ch, time.Second); !errors.Is(r.err, fs.ErrPermission) {
		t.Fatalf("after the save: want a permission error, got %v %v", r.err, r.f)
	}
	// A chmod that leaves it unreadable says nothing new.
	if err := os.Chmod(path, 0o200); err != nil {
		t.Fatal(err)
	}
	quiet(t, ch, 250*time.Millisecond)
	deny.Store(false)
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	r := next(t, ch, 2*time.Second)
	if r.err != nil || !slices.Equal(names(r.f), []string{"a", "b"}) {
		t.Fatalf("after chmod 0600: %v %v", r.err, r.f)
	}
}

// TestWatchConfigChmodDirFixesRead: a config whose directory the pool
// could not enter is read again when a chmod of the directory lets it
// in.
func TestWatchConfigChmodDirFixesRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, serversConfig("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	deny := denyReads(t, path)
	ch := watch(t, path, 50*time.Millisecond, nil)
	deny.Store(true)
	if err := os.WriteFile(path, serversConfig("a", "b"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := next(t, ch, time.Second); !errors.Is(r.err, fs.ErrPermission) {
		t.Fatalf("after the save: want a permission error, got %v %v", r.err, r.f)
	}
	deny.Store(false)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := next(t, ch, 2*time.Second)
	if r.err != nil || !slices.Equal(names(r.f), []string{"a", "b"}) {
		t.Fatalf("after chmod of the directory: %v %v", r.err, r.f)
	}
}

// TestWatchConfigChmodFixesReadReal is TestWatchConfigChmodFixesRead
// with a real mode: it needs a user the mode shuts out.
func TestWatchConfigChmodFixesReadReal(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads a file whatever its mode; TestWatchConfigChmodFixesRead covers this as root")
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, serversConfig("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	ch := watch(t, path, 50*time.Millisecond, nil)
	if err := os.Chmod(path, 0o200); err != nil { // write-only, as a save that sets the mode later leaves it
		t.Fatal(err)
	}
	if err := os.WriteFile(path, serversConfig("a", "b"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := next(t, ch, time.Second); !errors.Is(r.err, fs.ErrPermission) {
		t.Fatalf("after the save: want a permission error, got %v %v", r.err, r.f)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	r := next(t, ch, 2*time.Second)
	if r.err != nil || !slices.Equal(names(r.f), []string{"a", "b"}) {
		t.Fatalf("after chmod 0600: %v %v", r.err, r.f)
	}
}
