//go:build !linux

package store

import "os"

// reserve gives f, size bytes long, every block of the journal's
// journalSize bytes, keeping what it holds (had, its bytes), by writing
// them.
func reserve(f *os.File, had []byte, size int64) error { return rewrite(f, had, size) }
