package config

import (
	"errors"

	"golang.org/x/sys/unix"
)

// placeNew renames tmp to path unless path exists (fs.ErrExist then), in
// one step: path never has a second name, as it has for a moment when
// hard-linked into place. A file system without that rename gets the
// link.
func placeNew(tmp, path string) error {
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return linkNew(tmp, path)
	}
	return err
}
