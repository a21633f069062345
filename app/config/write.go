package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/switchboard-mcp/switchboard/app/safefile"
)

// WriteFile replaces the file at path with data atomically: it writes a
// temporary file in the same directory, syncs it and renames it over
// path, so that a reader (the config watcher, a client starting up) sees
// the old file or the new one, never half of one. The file keeps its
// mode and, where the OS has them, its owner and group (a file whose
// owner this process cannot give the new one is refused, not replaced by
// one its owner may be unable to read: ErrOwner); a new file gets perm.
// A file with more than one hard link is refused (ErrHardLinked): the
// rename would leave the other names with the old content. When path is
// a symlink (dotfile managers), through however many links, the file
// they lead to is replaced, or made when it does not exist yet, and the
// links stay; a link whose target's directory does not exist is an error
// (DanglingLink), not replaced.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return writeFile(path, data, perm, false, nil)
}

// WritePrivateFile is WriteFile for a file of Switchboard's own that
// may hold secrets (the config, whose servers' env an import copies from
// a client's private file): it is left readable by its owner alone, an
// existing file losing its group and other permissions, a new one 0600.
func WritePrivateFile(path string, data []byte) error {
	return writeFile(path, data, 0o600, true, nil)
}

// ErrChanged means a file was written by someone else each time EditFile
// was about to replace it: replacing it would have lost what they wrote.
var ErrChanged = errors.New("changed while it was being edited; nothing written")

// ErrHardLinked means the file has other names (hard links), which a
// replacement by rename would leave with the old content.
var ErrHardLinked = errors.New("has more than one hard link; a replacement would leave the other names with the old content, so it is not written (make it a single file, or a symlink, first)")

// ErrOwner means the file's owner or group could not be given to its
// replacement: the file would change hands, perhaps to one its owner
// cannot read.
var ErrOwner = errors.New("cannot keep its owner and group in the replacement (run this as its owner); nothing written")

// EditFunc returns the new content of a file for its current content
// (cur; exists is false when there is no file), or nil to leave the file
// as it is. EditFile may call it more than once: it must compute the
// result from cur alone, and undo what it did outside the file (a backup)
// when called again.
type EditFunc func(cur []byte, exists bool) ([]byte, error)

// editTries bounds how many times EditFile redoes an edit because the
// file changed under it.
const editTries = 5

// testHookBeforeCheck, when set, runs after the replacement is written
// and synced and before the file is read again to see whether it changed.
var testHookBeforeCheck func(path string)

// EditFile replaces the file at path (as WriteFile) with edit's result
// for its current content, without losing what someone else (a running
// client rewriting its own file) writes to it meanwhile: the replacement
// is written and synced, then the file is read again, and renamed over
// only when it is still what edit was given; when it is not, the edit is
// made again on the new content, at most editTries times, then ErrChanged.
// The file is read with safefile (a regular file of at most max bytes).
// What remains is the moment between that last read and the rename,
// which POSIX cannot close (no rename that fails when the target
// changed): nothing but the comparison runs in it.
func EditFile(path string, max int64, perm fs.FileMode, edit EditFunc) error {
	return editFile(path, max, perm, false, edit)
}

// EditPrivateFile is EditFile for a file of Switchboard's own that may
// hold secrets (see WritePrivateFile).
func EditPrivateFile(path string, max int64, edit EditFunc) error {
	return editFile(path, max, 0o600, true, edit)
}

func editFile(path string, max int64, perm fs.FileMode, private bool, edit EditFunc) error {
	for range editTries {
		cur, exists, err := readCurrent(path, max)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		out, err := edit(cur, exists)
		if err != nil || out == nil {
			return err
		}
		unchanged := func() (bool, error) {
			now, still, err := readCurrent(path, max)
			return still == exists && bytes.Equal(now, cur), err
		}
		err = writeFile(path, out, perm, private, unchanged)
		if !errors.Is(err, errRaced) {
			return err
		}
	}
	return fmt.Errorf("%s %w", path, ErrChanged)
}

// readCurrent reads the file at path, when there is one.
func readCurrent(path string, max int64) (data []byte, exists bool, err error) {
	data, err = safefile.Read(path, max)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	return data, err == nil, err
}

// errRaced means the file changed between the read an edit started from
// and the replacement.
var errRaced = errors.New("changed while it was being edited")

// writeFile writes data over path; when unchanged is set, only if it
// still says so once the new content is synced, just before the rename.
func writeFile(path string, data []byte, perm fs.FileMode, private bool, unchanged func() (bool, error)) error {
	linked := path
	path, err := followLinks(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", linked, err)
	}
	mode := perm
	var old fs.FileInfo
	if fi, err := os.Stat(path); err == nil {
		mode, old = fi.Mode().Perm(), fi
		if hardLinks(fi) > 1 {
			return fmt.Errorf("write %s: %w", path, ErrHardLinked)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if private {
		mode &^= 0o077
	}
	tmp, err := tempBeside(linked, path, "write")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if old != nil {
		if err := keepOwner(tmp, old, mode); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := tmp.Chmod(mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if unchanged != nil {
		if testHookBeforeCheck != nil {
			testHookBeforeCheck(path)
		}
		// From here to the rename, nothing slow: no sync, no write.
		same, err := unchanged()
		if err != nil {
			return fmt.Errorf("read %s again: %w", path, err)
		}
		if !same {
			return errRaced
		}
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	done = true
	syncDir(filepath.Dir(path))
	return nil
}

// tempBeside creates the temporary file that a write (verb) puts in place
// at path, the file linked names (itself, or the end of its symlinks): in
// path's directory, so that a rename moves it there in one step. A
// dangling symlink that makes the directory missing is named as such.
func tempBeside(linked, path, verb string) (*os.File, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		if dangling := DanglingLink(linked); dangling != nil {
			return nil, fmt.Errorf("%s %s: %w", verb, linked, dangling)
		}
		return nil, fmt.Errorf("%s %s: %w", verb, path, err)
	}
	return tmp, nil
}

// syncDir makes the rename durable where the OS allows syncing a
// directory (not on Windows, where opening one fails; then the rename is
// as durable as the OS makes it).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
