//go:build unix

package pool

import (
	"net"
	"os"
	"syscall"
)

// readHello reads the shim's hello line from conn, with the file
// descriptors a shim that attaches sends along with it (SCM_RIGHTS). It
// returns the line without its newline (at most limit bytes) and any
// bytes read after it. A hello that passes more descriptors than a shim
// sends (maxHelloFiles), or more in one message than the buffer for them
// takes (the kernel drops the rest), is refused at once and what it
// passed closed: each message may pass more, and a hello may last 10 s.
func readHello(conn net.Conn, limit int) (line, rest []byte, files []*os.File, err error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		line, rest, err = readLine(conn, limit)
		return line, rest, nil, err
	}
	var buf []byte
	oob := make([]byte, syscall.CmsgSpace(4*4))
	for {
		if buf, err = growLine(buf, limit); err != nil {
			closeFiles(files)
			return nil, nil, nil, err
		}
		n, oobn, flags, _, err := uc.ReadMsgUnix(buf[len(buf):cap(buf)], oob)
		// With an error (a deadline, a close) the counts can be -1.
		n, oobn = max(n, 0), max(oobn, 0)
		seen := len(buf)
		buf = buf[:len(buf)+n]
		files = append(files, rightsOf(oob[:oobn])...)
		if len(files) > maxHelloFiles || flags&syscall.MSG_CTRUNC != 0 {
			closeFiles(files)
			return nil, nil, nil, errHelloFiles
		}
		if i := indexNL(buf[seen:]); i >= 0 {
			return buf[:seen+i], buf[seen+i+1:], files, nil
		}
		if err != nil {
			closeFiles(files)
			return nil, nil, nil, err
		}
	}
}

// rightsOf turns the descriptors in a control message into files, set
// non-blocking so that reads and writes go through the runtime's poller
// (and can be interrupted by Close and deadlines).
func rightsOf(oob []byte) []*os.File {
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
			_ = syscall.SetNonblock(fd, true)
			files = append(files, os.NewFile(uintptr(fd), "client"))
		}
	}
	return files
}
