package pool

import (
	"net/http"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// OpenHTTPSession opens a legacy HTTP session of server name on front
// door h, as an initialize does before it reaches the session.
func OpenHTTPSession(h http.Handler, name string) error {
	f := h.(*httpFront)
	_, _, err := f.open(name, f.token())
	return err
}

// SinkToNewSessions hands line, a request or a notification, with its
// facts (outFacts) as the session's server would tell them, to each
// session of server name of p that takes its client's messages through
// a sink and is not in seen, and adds it there. It reports how many it
// reached.
func SinkToNewSessions(p *Pool, name string, line []byte, seen map[string]bool) int {
	srv, err := p.server(name)
	if err != nil {
		return 0
	}
	msg, err := jsonrpc.Parse(line) // the test's line: its facts are what it says
	if err != nil {
		return 0
	}
	f := notice(msg.Method)
	if msg.Kind == jsonrpc.KindRequest {
		f.id = wireID{text: string(msg.IDBytes())}
	}
	var sinks []outSink
	srv.mu.Lock()
	for s := range srv.sessions {
		if s.sink != nil && !seen[s.id] {
			seen[s.id] = true
			sinks = append(sinks, s.sink)
		}
	}
	srv.mu.Unlock()
	for _, sink := range sinks {
		sink(line, f)
	}
	return len(sinks)
}
