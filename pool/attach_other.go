//go:build !unix

package pool

import (
	"net"
	"os"
)

// readHello reads the shim's hello line; descriptors cannot be passed
// here, so every shim relays.
func readHello(conn net.Conn, limit int) (line, rest []byte, files []*os.File, err error) {
	line, rest, err = readLine(conn, limit)
	return line, rest, nil, err
}
