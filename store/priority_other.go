//go:build !linux

package store

// runAtLowerPriority runs f at the process's priority where threads do
// not have a priority of their own (macOS and Windows set it per process
// or need more than a nice value).
func runAtLowerPriority(f func()) { f() }
