package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile replaces the file at path with data atomically: it writes a
// temporary file in the same directory, syncs it and renames it over
// path, so that a reader (the config watcher, a client starting up) sees
// the old file or the new one, never half of one. The file keeps its
// mode; a new file gets perm. When path is a symlink (dotfile managers),
// through however many links, the file they lead to is replaced, or made
// when it does not exist yet, and the links stay; a link whose target's
// directory does not exist is an error (DanglingLink), not replaced.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return writeFile(path, data, perm, false)
}

// WritePrivateFile is WriteFile for a file of Switchboard's own that
// may hold secrets (the config, whose servers' env an import copies from
// a client's private file): it is left readable by its owner alone, an
// existing file losing its group and other permissions, a new one 0600.
func WritePrivateFile(path string, data []byte) error {
	return writeFile(path, data, 0o600, true)
}

func writeFile(path string, data []byte, perm fs.FileMode, private bool) error {
	linked := path
	path, err := followLinks(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", linked, err)
	}
	mode := perm
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if private {
		mode &^= 0o077
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		if dangling := DanglingLink(linked); dangling != nil {
			return fmt.Errorf("write %s: %w", linked, dangling)
		}
		return fmt.Errorf("write %s: %w", path, err)
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
	if err := tmp.Chmod(mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	done = true
	syncDir(dir)
	return nil
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
