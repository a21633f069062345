//go:build unix

package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// hardLinks is how many names the file has.
func hardLinks(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// keepOwner gives tmp the owner and group of old, the file it replaces.
// When it may not (someone else's file, or a group this user is not in),
// it refuses (ErrOwner), except for a group that mode gives no
// permissions: then the group grants nothing, and tmp keeps its own.
func keepOwner(tmp *os.File, old fs.FileInfo, mode fs.FileMode) error {
	want, ok := old.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	fi, err := tmp.Stat()
	if err != nil {
		return err
	}
	have, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || have.Uid == want.Uid && have.Gid == want.Gid {
		return nil
	}
	err = tmp.Chown(int(want.Uid), int(want.Gid))
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrPermission) {
		return err
	}
	if have.Uid == want.Uid && mode&0o070 == 0 {
		return nil
	}
	return fmt.Errorf("%w (it is owned by %d:%d, this process runs as %d)", ErrOwner, want.Uid, want.Gid, os.Getuid())
}
