package pool_test

import (
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// emfileListener fails its first fails accepts as a listener of a process
// out of descriptors does (fails < 0: every accept).
type emfileListener struct {
	net.Listener
	mu     sync.Mutex
	fails  int
	failed int
}

func (l *emfileListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	fail := l.fails != 0
	if l.fails > 0 {
		l.fails--
	}
	if fail {
		l.failed++
	}
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "unix", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// serveOn serves p's stdio front door on l until the test ends; ServeStdio's
// result comes on the channel returned.
func serveOn(t *testing.T, p *pool.Pool, l net.Listener) <-chan error {
	served := make(chan error, 1)
	go func() { served <- p.ServeStdio(l) }()
	t.Cleanup(func() {
		p.Close()
		l.Close()
	})
	return served
}

// TestAcceptOutOfDescriptorsRetries: a pool out of descriptors (a flood
// of connections on its socket) keeps serving once it has some again,
// and does not stop.
func TestAcceptOutOfDescriptorsRetries(t *testing.T) {
	dir := shortTempDir(t)
	p := pool.New(nil)
	if err := p.Apply([]pool.ServerConfig{fake("a")}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "pool.sock"))
	if err != nil {
		t.Fatal(err)
	}
	fl := &emfileListener{Listener: ln, fails: 5}
	served := serveOn(t, p, fl)
	tp := &testPool{Pool: p, sock: ln.Addr().String(), dir: dir}

	dialed := make(chan error, 1)
	var c *client
	go func() {
		var err error
		c, err = tp.tryDial(t, "a")
		dialed <- err
	}()
	select {
	case err := <-served:
		t.Fatalf("ServeStdio returned on EMFILE: %v", err)
	case err := <-dialed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no welcome within 15 s")
	}
	c.initialize("after-emfile", "")
	select {
	case err := <-served:
		t.Fatalf("ServeStdio returned: %v", err)
	default:
	}
	p.Close()
	if err := <-served; err != nil {
		t.Fatalf("ServeStdio after Close: %v", err)
	}
}

// TestAcceptOutOfDescriptorsStops: a pool that closes while it waits to
// accept again stops serving without an error.
func TestAcceptOutOfDescriptorsStops(t *testing.T) {
	dir := shortTempDir(t)
	p := pool.New(nil)
	ln, err := net.Listen("unix", filepath.Join(dir, "pool.sock"))
	if err != nil {
		t.Fatal(err)
	}
	fl := &emfileListener{Listener: ln, fails: -1}
	served := serveOn(t, p, fl)
	eventually(t, "three failed accepts", func() bool {
		select {
		case err := <-served:
			t.Fatalf("ServeStdio returned on EMFILE: %v", err)
		default:
		}
		fl.mu.Lock()
		defer fl.mu.Unlock()
		return fl.failed >= 3
	})
	p.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("ServeStdio after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeStdio still running 5 s after Close")
	}
}
