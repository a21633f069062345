package app

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// failingListener fails its first fails accepts with errno, as the
// listener of a process or system out of buffers or memory does.
type failingListener struct {
	net.Listener
	errno syscall.Errno
	mu    sync.Mutex
	fails int
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	fail := l.fails > 0
	if fail {
		l.fails--
	}
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", l.errno)}
	}
	return l.Listener.Accept()
}

// TestServeHTTPOutOfBuffersRetries: the HTTP front door and the control
// API go on serving after their listener fails for want of buffers or
// memory, which net/http alone would take for the listener's end (and
// Run for the pool's).
func TestServeHTTPOutOfBuffersRetries(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOBUFS, syscall.ENOMEM} {
		t.Run(errno.Error(), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() }) // a request still waiting ends
			fl := &failingListener{Listener: ln, errno: errno, fails: 3}
			var logged syncBuffer
			srv := &http.Server{
				Handler:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "served") }),
				ErrorLog: serverLog(slog.New(slog.NewTextHandler(&logged, nil)), "HTTP front door"),
			}
			served := make(chan error, 1)
			go func() { served <- serveHTTP(srv, fl, "HTTP front door") }()

			type reply struct {
				body string
				err  error
			}
			got := make(chan reply, 1)
			client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			go func() {
				resp, err := client.Get("http://" + ln.Addr().String() + "/")
				if err != nil {
					got <- reply{err: err}
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				got <- reply{string(b), err}
			}()
			select {
			case err := <-served:
				t.Fatalf("serveHTTP returned on %v: %v", errno, err)
			case r := <-got:
				if r.err != nil || r.body != "served" {
					t.Fatalf("after %v: body %q, err %v", errno, r.body, r.err)
				}
			}
			fl.mu.Lock()
			left := fl.fails
			fl.mu.Unlock()
			if left != 0 {
				t.Errorf("%d accepts were not failed", left)
			}
			srv.Close()
			if err := <-served; err != nil {
				t.Fatalf("serveHTTP after Close: %v", err)
			}
			// The retries are in the app's log, naming the server.
			if out := logged.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, `server="HTTP front door"`) ||
				!strings.Contains(out, errno.Error()) || !strings.Contains(out, "retrying") {
				t.Errorf("the app's log says of the retries:\n%s", out)
			}
		})
	}
}
