package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Configs are often symlinks into a dotfiles directory, sometimes through
// a linked directory, and that directory may not be there yet (a checkout
// still to be made). A write follows the links to the file they lead to,
// as the kernel would, also when that file does not exist yet, so that
// the links stay; the config watcher watches every link on the way.

// MaxLinks bounds the symlinks followed from a path, as the kernel's 40
// do (ELOOP).
const MaxLinks = 40

// SymlinkChain resolves path (absolute and clean) as the kernel does, a
// component at a time, and returns each symlink it goes through, as the
// path it was found at, then the path it reaches; nil when it goes
// through none. A missing component ends nothing: the rest is taken as
// named. Past MaxLinks (a loop) it stops there, without the path
// reached; opening the path then says why.
func SymlinkChain(path string) []string {
	sep := string(filepath.Separator)
	vol := filepath.VolumeName(path)
	cur, rest := vol+sep, strings.Split(path[len(vol):], sep)
	var chain []string
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		target, err := os.Readlink(next)
		if err != nil { // not a link, or not there
			cur = next
			continue
		}
		if len(chain) == MaxLinks {
			return chain
		}
		chain = append(chain, next)
		if filepath.IsAbs(target) {
			v := filepath.VolumeName(target)
			cur, target = v+sep, target[len(v):]
		}
		rest = append(strings.Split(target, sep), rest...)
	}
	if len(chain) == 0 {
		return nil
	}
	return append(chain, cur)
}

// errTooManyLinks is a chain of links that does not end (a loop).
var errTooManyLinks = errors.New("too many levels of symbolic links")

// followLinks is the path a write to path lands on: the end of its
// chain of symlinks (SymlinkChain), which need not exist; path itself
// when it goes through none.
func followLinks(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	chain := SymlinkChain(abs)
	if len(chain) == 0 {
		return path, nil
	}
	end := chain[len(chain)-1]
	if _, err := os.Readlink(end); err == nil { // the chain stopped at a link: a loop
		return "", fmt.Errorf("%s: %w", path, errTooManyLinks)
	}
	return end, nil
}

// DanglingLink reports a symlink on the way to path that leads where a
// directory is missing (a dotfiles link whose checkout is not made yet),
// as an error naming the link, its target and the missing directory; nil
// when there is none. Such a directory is the user's to make (a checkout
// into it would fail once something made it), so Switchboard does not
// make it: a file to be written there waits for it.
func DanglingLink(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil
	}
	chain := SymlinkChain(abs)
	if len(chain) == 0 {
		return nil
	}
	missing := ""
	for d := filepath.Dir(chain[len(chain)-1]); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
		missing = d
		if d == filepath.Dir(d) {
			break
		}
	}
	if missing == "" {
		return nil
	}
	target, _ := os.Readlink(chain[0])
	return fmt.Errorf("%s is a symlink to %s, and %s does not exist", chain[0], target, missing)
}
