package pool

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// Hello is the first line a `switchboard connect` shim sends on the local
// socket, before relaying its client's bytes.
type Hello struct {
	Server string `json:"server"`
	PID    int    `json:"pid,omitempty"` // the shim's PID, shown in status
}

// Welcome is the pool's one-line answer to a Hello. Error set means the
// connection closes; the shim prints it and exits non-zero.
type Welcome struct {
	Session string `json:"session,omitempty"`
	Error   string `json:"error,omitempty"`
}

// ServeStdio accepts shim connections on l until l is closed or the pool
// closes. Each connection names its server in a Hello line and then
// carries newline-delimited JSON-RPC in both directions.
func (p *Pool) ServeStdio(l net.Listener) error {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-p.closing:
			l.Close()
		case <-stop:
		}
	}()
	for {
		conn, err := l.Accept()
		if err != nil {
			if isClosed(p.closing) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		p.wg.Go(func() { p.serveShim(conn) })
	}
}

// serveShim runs one shim connection: hello, then the session's reader in
// this goroutine and its writer in another.
func (p *Pool) serveShim(conn net.Conn) {
	br := bufio.NewReaderSize(conn, 64<<10)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := br.ReadSlice('\n')
	if err != nil {
		conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	var hello Hello
	if err := json.Unmarshal(line, &hello); err != nil || hello.Server == "" {
		writeWelcome(conn, Welcome{Error: "bad hello: expected {\"server\":NAME}"})
		conn.Close()
		return
	}
	s, err := p.newSession(hello.Server, "stdio", hello.PID)
	if err != nil {
		writeWelcome(conn, Welcome{Error: err.Error()})
		conn.Close()
		return
	}
	s.closeConn = func() { conn.Close() }
	if err := writeWelcome(conn, Welcome{Session: s.id}); err != nil {
		s.close(err)
		return
	}
	p.wg.Go(func() { s.writeTo(conn) })
	s.readFrom(br)
}

func writeWelcome(conn net.Conn, w Welcome) error {
	b, _ := json.Marshal(w)
	_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := conn.Write(append(b, '\n'))
	_ = conn.SetWriteDeadline(time.Time{})
	return err
}

// readFrom is the session's reader for a byte stream: one message per
// line. It returns when the client closes or the session ends.
func (s *session) readFrom(r *bufio.Reader) {
	lr := &lineReader{r: r, max: s.p.opts.MaxMessageBytes}
	for {
		line, err := lr.next()
		if err != nil {
			var tl *tooLongError
			if errors.As(err, &tl) && err == error(tl) {
				s.p.parseErrors.Add(1)
				id, _ := findClientID(tl.head)
				s.replyError(id, &jsonrpc.Error{Code: jsonrpc.CodeMessageTooLarge,
					Message: fmt.Sprintf("message of %d bytes exceeds the %d-byte limit", tl.size, s.p.opts.MaxMessageBytes)})
				continue
			}
			s.close(nil)
			return
		}
		s.handle(line)
	}
}

// writeTo is the session's writer for a byte stream. It batches what is
// queued into one write and evicts the session when the client has not
// taken a write within EvictAfter. It exits when the session closes.
func (s *session) writeTo(conn net.Conn) {
	bw := bufio.NewWriterSize(conn, 64<<10)
	for {
		select {
		case line := <-s.out:
			bw.Write(line)
			bw.WriteByte('\n')
			if len(s.out) > 0 && bw.Buffered() < 48<<10 {
				continue
			}
			_ = conn.SetWriteDeadline(time.Now().Add(s.p.opts.EvictAfter))
			if err := bw.Flush(); err != nil {
				if isTimeout(err) {
					s.p.evicted.Add(1)
					s.p.log.Warn("evicting a session that stopped reading", "session", s.id, "server", s.srv.name)
					s.close(errEvicted)
				} else {
					s.close(nil)
				}
				return
			}
		case <-s.closed:
			return
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
