//go:build !unix

package safefile

// openNonBlock: Windows has no FIFOs in the file system to block on.
const openNonBlock = 0
