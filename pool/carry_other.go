//go:build !unix

package pool

import (
	"errors"
	"os"
)

// Children are carried over an exec only where descriptors are inherited
// by number (Unix); Handover refuses without Options.StartOn anyway.

func reopenInherited(fd int, name string) *os.File {
	return os.NewFile(uintptr(fd), name)
}

func dupInheritable(int) (int, error) {
	return -1, errors.New("descriptors cannot be carried over an exec here")
}
