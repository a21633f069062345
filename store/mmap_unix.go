//go:build unix

package store

import (
	"os"
	"syscall"
)

// mapFile maps the first size bytes of f, shared: stores reach the file
// (the page cache) as they are made, and stay there if the process dies.
func mapFile(f *os.File, size int) ([]byte, func() error, error) {
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return mem, func() error { return syscall.Munmap(mem) }, nil
}
