//go:build !unix

package main

// oneProc does nothing where exec cannot replace a process: the shim
// relays there, and runs with every P.
func oneProc() {}
