//go:build unix

package fileid

import (
	"os"
	"syscall"
	"testing"
)

func mapForWriting(t *testing.T, f *os.File, size int) (unmap func()) {
	t.Helper()
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	return func() { _ = syscall.Munmap(mem) }
}
