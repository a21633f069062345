package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// CreatePrivateFile writes a new file of Switchboard's own at path (the
// starter config of a first run), readable by its owner alone, and never
// over a file that is there: when path exists, however shortly before,
// it fails with an error matching fs.ErrExist and leaves that file as it
// is. WritePrivateFile renames over whatever is there, and a check before
// it leaves a window in which another writer (an import into the same
// fresh home) would have its file replaced. The file is written whole to
// a temporary file and put in place by a rename that fails on an existing
// file (placeNew), so that a reader sees all of it or none; where the
// file system can do neither that rename nor hard links (FAT, some
// network shares) it is created exclusively and written, and a reader may
// see it partly written for that moment. A symlink at path is followed,
// as WritePrivateFile does, and stays.
func CreatePrivateFile(path string, data []byte) error {
	linked := path
	path, err := followLinks(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", linked, err)
	}
	tmp, err := tempBeside(linked, path, "create")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := writeSynced(tmp, data); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	err = placeNew(tmp.Name(), path)
	if err == nil {
		syncDir(filepath.Dir(path))
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return createExclusive(path, data)
}

// linkNew is placeNew by a hard link, which fails on an existing file
// too, and the removal of tmp: for that moment path has two names, and a
// writer that refuses hard-linked files (WriteFile) refuses it. Where
// the system has a rename that does not replace, placeNew uses that.
func linkNew(tmp, path string) error {
	if err := os.Link(tmp, path); err != nil {
		return err
	}
	return os.Remove(tmp)
}

// writeSynced writes data to f, owner-only, syncs and closes it.
func writeSynced(f *os.File, data []byte) error {
	_, werr := f.Write(data)
	merr := f.Chmod(0o600)
	serr := f.Sync()
	cerr := f.Close()
	return errors.Join(werr, merr, serr, cerr)
}

// createExclusive is CreatePrivateFile where a file cannot be linked into
// place: O_EXCL fails on an existing file just the same.
func createExclusive(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := writeSynced(f, data); err != nil {
		os.Remove(path)
		return fmt.Errorf("create %s: %w", path, err)
	}
	syncDir(filepath.Dir(path))
	return nil
}
