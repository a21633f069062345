//go:build !linux

package mainthread

// IsMain says no where the main thread cannot be told (and children are
// then not carried over an exec).
func IsMain() bool { return false }
