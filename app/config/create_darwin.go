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
	err := unix.RenamexNp(tmp, path, unix.RENAME_EXCL)
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EINVAL) {
		return linkNew(tmp, path)
	}
	return err
}
