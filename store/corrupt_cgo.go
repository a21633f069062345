//go:build cgo

package store

import (
	"errors"

	"github.com/mattn/go-sqlite3"
)

// isCorrupt reports whether SQLite said the file is damaged or is not a
// database at all.
func isCorrupt(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrCorrupt || se.Code == sqlite3.ErrNotADB)
}

// isReadOnly reports whether SQLite refused to write, or to make a file
// it needs (a WAL database's -shm), in a read-only place.
func isReadOnly(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrReadonly || se.Code == sqlite3.ErrCantOpen)
}

// IsBusy reports whether err is SQLite finding the database locked by
// another connection past the store's wait for it (a DB browser's or
// sqlite3's open transaction): a passing state, after which an Open may
// be tried again.
func IsBusy(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked)
}
