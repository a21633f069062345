//go:build !cgo

package store

// isCorrupt: without cgo there is no SQLite (go-sqlite3 is a stub that
// fails every open), so nothing is classified as corrupt.
func isCorrupt(error) bool { return false }

// isReadOnly: nothing is classified without cgo (see isCorrupt).
func isReadOnly(error) bool { return false }

// IsBusy: nothing is classified without cgo (see isCorrupt).
func IsBusy(error) bool { return false }
