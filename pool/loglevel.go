package pool

import (
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// Log levels: each session gets its own.
//
// logging/setLevel sets one level on a server, and a shared child has one.
// So the pool keeps each session's level, sets the child to the most
// verbose level any of its sessions asked for (and back when they leave),
// and gives each session notifications/message at or above its own level
// only, none before it asked.

// logSeverity ranks the syslog levels MCP uses, least severe first.
var logSeverity = map[string]int{"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4,
	"critical": 5, "alert": 6, "emergency": 7}

// quietest is the level the child goes back to when no session wants logs.
const quietest = "emergency"

// setLogLevel takes a session's logging/setLevel. It reports whether the
// pool answered it: for a child that declared logging, the pool sets the
// child's level itself; otherwise the child answers (its own error).
func (s *session) setLogLevel(b *backend, id, params []byte, x *exchange) bool {
	level, ok := jsonrpc.String(params, jsonrpc.Member(params, "level"))
	if _, known := logSeverity[level]; !ok || !known {
		return false // the child explains the bad params
	}
	if !b.declares("logging") {
		return false
	}
	s.mu.Lock()
	s.logs, s.logLevel = true, logSeverity[level]
	s.mu.Unlock()
	b.syncLogLevel()
	s.replyTo(x, id, []byte("{}"))
	return true
}

// noteLogLevel records the level of a setLevel the child answers itself
// (it did not declare logging), so that the session gets the messages it
// asked for and no others. A level the pool does not know changes
// nothing: the child refuses it (the first edition took it for debug,
// and the session got every message).
func (s *session) noteLogLevel(params []byte) {
	level, _ := jsonrpc.String(params, jsonrpc.Member(params, "level"))
	sev, known := logSeverity[level]
	if !known {
		return
	}
	s.mu.Lock()
	s.logs, s.logLevel = true, sev
	s.mu.Unlock()
}

// admitsLog reports whether a message at level reaches this session.
func (s *session) admitsLog(level string) bool {
	sev, ok := logSeverity[level]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs && (!ok || sev >= s.logLevel)
}

// wantedLogLevel is the session's level, if it asked for logs.
func (s *session) wantedLogLevel() (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logLevel, s.logs
}

// syncLogLevel sets the child to the most verbose level its live sessions
// asked for, when that changed. The setLevel is queued under the lock
// that records the level: the child hears the levels in the order they
// were decided, and a child not yet ready hears the last of them from
// becomeReady, once.
func (b *backend) syncLogLevel() {
	b.levelSync.Lock()
	defer b.levelSync.Unlock()
	want, any := len(logSeverity), false
	for _, s := range b.sessions() {
		if !s.alive() {
			continue
		}
		if lvl, ok := s.wantedLogLevel(); ok {
			want, any = min(want, lvl), true
		}
	}
	level := quietest
	if any {
		for name, sev := range logSeverity {
			if sev == want {
				level = name
			}
		}
	}
	b.mu.Lock()
	if b.childLevel == level || (b.childLevel == "" && !any) {
		b.mu.Unlock()
		return
	}
	b.childLevel = level
	var err error
	if b.state == StateReady {
		err = b.queueLocked(b.newInternal("logging/setLevel", logLevelParams(level)))
	}
	b.mu.Unlock()
	if err == nil {
		b.signal()
	}
}

func logLevelParams(level string) []byte {
	out, _ := json.Marshal(map[string]string{"level": level})
	return out
}

// declares reports whether the child's handshake declared a server
// capability.
func (b *backend) declares(capability string) bool {
	b.mu.Lock()
	hs := b.hs
	b.mu.Unlock()
	return hs != nil && jsonrpc.Member(hs.capabilities, capability).Present()
}
