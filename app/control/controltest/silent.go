// Package controltest stands in, for tests, for a pool that runs but does
// not answer (stopped with SIGSTOP, or stuck): a listener on one of its
// sockets that takes connections and never reads or answers them. Only
// tests import it.
package controltest

import (
	"net"
	"sync"
	"testing"
)

// Silent is a Unix socket listener that takes connections and holds them,
// never read and never answered, until it is closed.
type Silent struct {
	done  chan struct{} // closed when the accept loop has returned
	close func()

	mu    sync.Mutex
	conns []net.Conn
}

// ListenSilent listens on the Unix socket at path (a pool's control or
// pool socket) until it is closed or the test ends.
func ListenSilent(t testing.TB, path string) *Silent {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := &Silent{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c) // held, never read
			s.mu.Unlock()
		}
	}()
	s.close = sync.OnceFunc(func() {
		ln.Close()
		<-s.done
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			c.Close()
		}
	})
	t.Cleanup(s.close)
	return s
}

// Conns returns how many connections it has taken.
func (s *Silent) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close stops listening and closes the connections it holds, with
// whatever their clients sent on them (file descriptors included). It
// may be called more than once.
func (s *Silent) Close() { s.close() }
