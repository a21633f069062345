//go:build !linux

package store

import (
	"os"
	"testing"
)

// readOnlyView is dir with its write bits off. Root writes any directory
// whatever its mode: there the test cannot run (Linux mounts instead).
func readOnlyView(t *testing.T, dir string) string {
	t.Helper()
	if os.Geteuid() == 0 {
		t.Skip("needs a directory its user cannot write (root writes any)")
	}
	return chmodReadOnly(t, dir)
}
