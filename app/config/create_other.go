//go:build !linux && !darwin

package config

// placeNew puts tmp in place at path unless path exists (fs.ErrExist
// then), by a hard link: this system's rename replaces.
func placeNew(tmp, path string) error { return linkNew(tmp, path) }
