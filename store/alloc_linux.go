package store

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// reserve gives f, size bytes long, every block of the journal's
// journalSize bytes, keeping what it holds (had, its bytes): fallocate,
// or writing them where the file system cannot allocate.
func reserve(f *os.File, had []byte, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, journalSize)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return rewrite(f, had, size)
	}
	if err != nil {
		if size < journalSize {
			_ = f.Truncate(size) // give back what it took: a full disk needs every byte for the database
		}
		return fmt.Errorf("fallocate: %w", err)
	}
	return nil
}
