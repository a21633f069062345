package pool

import "net/http"

// OpenHTTPSession opens a legacy HTTP session of server name on front
// door h, as an initialize does before it reaches the session.
func OpenHTTPSession(h http.Handler, name string) error {
	f := h.(*httpFront)
	_, _, err := f.open(name, f.token())
	return err
}

// SinkToNewSessions hands line, as the session's server would, to each
// session of server name of p that takes its client's messages through
// a sink and is not in seen, and adds it there. It reports how many it
// reached.
func SinkToNewSessions(p *Pool, name string, line []byte, seen map[string]bool) int {
	srv, err := p.server(name)
	if err != nil {
		return 0
	}
	var sinks []func([]byte)
	srv.mu.Lock()
	for s := range srv.sessions {
		if s.sink != nil && !seen[s.id] {
			seen[s.id] = true
			sinks = append(sinks, s.sink)
		}
	}
	srv.mu.Unlock()
	for _, sink := range sinks {
		sink(line)
	}
	return len(sinks)
}
