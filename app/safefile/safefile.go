// Package safefile reads a file that someone else may have replaced with
// something hostile: a symlink to /dev/zero (endless), a FIFO (a read that
// never returns, and a hot reload and a shutdown stuck behind it), a huge
// file. Read follows symlinks, accepts only a regular file, never blocks
// on opening or reading it, and refuses more than a size limit.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrNotRegular means the path (after symlinks) is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge means the file is over the limit.
var ErrTooLarge = errors.New("file too large")

// Read returns the content of the regular file at path, at most max
// bytes.
func Read(path string, max int64) ([]byte, error) {
	// Non-blocking: opening a FIFO with no writer would wait for one.
	f, err := os.OpenFile(path, os.O_RDONLY|openNonBlock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, fi.Mode().Type())
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s: %w (%d bytes, the limit is %d)", path, ErrTooLarge, fi.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: %w (it grew past %d bytes while read)", path, ErrTooLarge, max)
	}
	return data, nil
}
