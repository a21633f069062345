//go:build !unix

package main

// execSmallShim relays in-process where exec cannot replace a process.
func execSmallShim(string) {}
