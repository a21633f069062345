//go:build !windows

package fileid

import "os"

// Stat is os.Stat of path, which carries the file's identity for
// os.SameFile.
func Stat(path string) (os.FileInfo, error) { return os.Stat(path) }
