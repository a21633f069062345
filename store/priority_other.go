//go:build !linux

package store

// lowerWriterPriority does nothing where threads do not have a priority
// of their own (macOS and Windows set it per process or need more than a
// nice value); the writer runs at the process's priority.
func lowerWriterPriority() {}
