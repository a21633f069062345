package store

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// readOnlyView is dir as a reader that may not write it sees it. Root
// writes any directory whatever its mode, so as root (CI) it is a
// read-only bind mount of dir, where root gets EROFS; as another user, dir
// itself with its write bits off.
func readOnlyView(t *testing.T, dir string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return chmodReadOnly(t, dir)
	}
	ro := t.TempDir()
	if err := unix.Mount(dir, ro, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount %s: %v", dir, err)
	}
	t.Cleanup(func() { // after the test's reader is closed, before TempDir's removal
		if err := unix.Unmount(ro, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", ro, err)
		}
	})
	// A bind mount takes MS_RDONLY only in a remount.
	if err := unix.Mount("", ro, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", ro, err)
	}
	if f, err := os.Create(ro + "/probe"); err == nil {
		f.Close()
		t.Fatalf("root wrote in the read-only bind mount %s", ro)
	}
	return ro
}
