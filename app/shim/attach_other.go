//go:build !unix

package shim

import (
	"net"
	"os"
	"time"
)

// attachable: descriptors cannot be passed here; the shim relays.
func attachable(in, out any) bool { return false }

func writeHello(conn net.Conn, hello []byte, _ bool, _ *os.File) error {
	_, err := conn.Write(hello)
	return err
}

// ownStdio: nothing here changes how the client's pipes block.
func ownStdio() {}

// clientGone is never asked where nothing is attached.
func clientGone() bool { return false }

// takeClientInput is never asked where nothing is attached.
func takeClientInput() ([]byte, bool) { return nil, false }

// readWaiting is never asked where nothing is attached.
func readWaiting(int) []byte { return nil }

// readUntilRequest is never asked where nothing is attached.
func readUntilRequest(int, time.Time) []byte { return nil }
