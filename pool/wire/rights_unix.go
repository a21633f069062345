//go:build unix

package wire

import (
	"os"
	"syscall"
)

// Rights turns the descriptors an SCM_RIGHTS control message carries into
// files named name, each close-on-exec. Both ends of an attach take
// descriptors so: the pool its client's stdin and stdout, the shim the
// pool's head memfd. nonblock sets them non-blocking first, so that
// os.NewFile puts them on the runtime's poller (reads and writes that
// Close and deadlines can interrupt). A message it cannot parse carries
// no files.
func Rights(oob []byte, name string, nonblock bool) []*os.File {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			syscall.CloseOnExec(fd)
			if nonblock {
				_ = syscall.SetNonblock(fd, true)
			}
			files = append(files, os.NewFile(uintptr(fd), name))
		}
	}
	return files
}
