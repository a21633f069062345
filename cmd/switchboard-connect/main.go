// Command switchboard-connect is the small twin of `switchboard connect
// NAME`: the same relay (package shim) without the GUI and SQLite code
// the full binary links, so each of the many per-session shim processes
// stays small. `switchboard connect` runs it when it sits next to the
// switchboard binary; clients may also start it directly.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/switchboard-mcp/switchboard/app/shim"
)

func main() {
	oneProc()
	if len(os.Args) != 2 || os.Args[1] == "" || os.Args[1][0] == '-' {
		fmt.Fprintln(os.Stderr, "usage: switchboard-connect NAME\n\nRelays stdin and stdout to server NAME of the running Switchboard pool.")
		os.Exit(2)
	}
	if err := shim.Connect(os.Args[1], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "switchboard: %v\n", err)
		if errors.Is(err, shim.ErrNoPool) {
			os.Exit(3)
		}
		os.Exit(1)
	}
}
