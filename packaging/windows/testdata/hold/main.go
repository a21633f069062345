//go:build windows

// Command hold opens each file it is given without sharing it, as some
// programs do (a virus scanner, a backup tool), says "held", and keeps
// them until its stdin closes.
package main

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/windows"
)

func main() {
	for _, path := range os.Args[1:] {
		p, err := windows.UTF16PtrFromString(path)
		if err == nil {
			_, err = windows.CreateFile(p, windows.GENERIC_READ, 0, nil, windows.OPEN_EXISTING, 0, 0)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "hold %s: %v\n", path, err)
			os.Exit(1)
		}
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, os.Stdin)
}
