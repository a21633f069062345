//go:build !unix

package config

import (
	"io/fs"
	"os"
)

// hardLinks is how many names the file has: not known here (Windows'
// hard links are rare in a user's config), so one.
func hardLinks(fs.FileInfo) uint64 { return 1 }

// keepOwner does nothing where files have no Unix owner: the replacement
// is made by the same user, in the same directory, and inherits its
// permissions.
func keepOwner(*os.File, fs.FileInfo, fs.FileMode) error { return nil }
