//go:build unix

package pool

import (
	"encoding/json"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// readHello reads the shim's hello line from conn, with the file
// descriptors a shim that attaches sends along with it (SCM_RIGHTS). It
// returns the line without its newline (at most limit bytes) and any
// bytes read after it.
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
		n, oobn, _, _, err := uc.ReadMsgUnix(buf[len(buf):cap(buf)], oob)
		// With an error (a deadline, a close) the counts can be -1.
		n, oobn = max(n, 0), max(oobn, 0)
		seen := len(buf)
		buf = buf[:len(buf)+n]
		files = append(files, wire.Rights(oob[:oobn], "client", true)...)
		if i := indexNL(buf[seen:]); i >= 0 {
			return buf[:seen+i], buf[seen+i+1:], files, nil
		}
		if err != nil {
			closeFiles(files)
			return nil, nil, nil, err
		}
	}
}

// writeLineWith writes v as one JSON line to a shim's connection, as
// writeLine does, with f's descriptor along with it (SCM_RIGHTS) when f
// is set: a Welcome's head mirror (wire.Welcome.Head).
func writeLineWith(conn net.Conn, v any, f *os.File) error {
	uc, ok := conn.(*net.UnixConn)
	if f == nil || !ok {
		return writeLine(conn, v)
	}
	b, _ := json.Marshal(v)
	b = append(b, '\n')
	_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	defer conn.SetWriteDeadline(time.Time{})
	n, _, err := uc.WriteMsgUnix(b, syscall.UnixRights(int(f.Fd())), nil)
	if err == nil && n < len(b) {
		_, err = conn.Write(b[n:])
	}
	return err
}
