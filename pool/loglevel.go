package pool

import (
	"encoding/json"
	"fmt"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// Log levels: a log message reaches only the session it belongs to.
//
// A legacy child: logging/setLevel sets one level on a server, and a
// shared child has one. So the pool keeps each session's level, sets the
// child to the most verbose level any of its sessions asked for (and back
// when they leave), and gives each session notifications/message at or
// above its own level only, none before it asked (or, for a setLevel the
// child answers itself, before the child accepted it). Such a child's
// messages name no request: the pool gives none to a 2026-07-28 client,
// which asks per request, and none to anyone while every client request
// the child runs is a 2026-07-28 client's (the message is of one of them).
//
// A modern child has no setLevel: each request asks for its own messages
// in _meta (metaLogLevel), a legacy session's with the level it set, which
// the pool adds. Over stdio the child's notifications/message names no
// request either, so it goes to the one client whose requests in flight
// asked for it (to a stateless HTTP request on its own response stream),
// and to nobody when several clients' could have made it.

// metaLogLevel is a 2026-07-28 request's log level.
const metaLogLevel = "io.modelcontextprotocol/logLevel"

// logSeverity ranks the syslog levels MCP uses, least severe first.
var logSeverity = map[string]int{"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4,
	"critical": 5, "alert": 6, "emergency": 7}

// quietest is the level the child goes back to when no session wants logs.
const quietest = "emergency"

// levelName is the level of a logSeverity.
func levelName(sev int) string {
	for name, s := range logSeverity {
		if s == sev {
			return name
		}
	}
	return quietest
}

// setLogLevel takes a legacy session's logging/setLevel, hs its child's
// handshake. It reports whether the pool answered it: for a child that
// declared logging, the pool keeps the level (a legacy child is set to it,
// a modern one hears it with each of the session's requests); a modern
// child, which has no setLevel, is never sent one: the pool refuses what
// it cannot take. Otherwise the child answers (levelAnswered). An answer
// of the pool's ends the request's wait for the handshake, if it waited.
func (s *session) setLogLevel(b *backend, hs *handshake, w *handshakeWait, params []byte) bool {
	level, ok := jsonrpc.String(params, jsonrpc.Member(params, "level"))
	sev, known := logSeverity[level]
	modern := hs.era == EraModern
	switch {
	case (!ok || !known) && modern:
		w.refuse(s, newError(errBadParams, false, "", "logging/setLevel", fmt.Errorf("unknown level %q", level)))
		return true
	case !ok || !known:
		return false // the child explains the bad params
	case !jsonrpc.Member(hs.capabilities, "logging").Present() && modern:
		w.refuse(s, newError(errNoLogging, false, "", b.srv.name))
		return true
	case !jsonrpc.Member(hs.capabilities, "logging").Present():
		return false // the child answers: its acceptance sets the level (levelAnswered)
	}
	if w.ended() {
		return true // a stop or a user's cancel ended its wait, and answered it: the level stays
	}
	s.setLevel(sev)
	b.syncLogLevel()
	w.answer(s, []byte("{}"))
	return true
}

// logsAsked is what a request asks of the child's log messages, as
// pending.logs: a 2026-07-28 request's own _meta level (passed on as is);
// for a legacy session's (legacy), the level the session set, added to
// meta, the _meta the pool adds for a modern child, when not nil (for a
// legacy child the level is the child's: syncLogLevel; a modern child a
// bare request reaches is told it as the line is fitted: fitLine); for a
// setLevel the child answers itself, the level it names.
func (s *session) logsAsked(msg *jsonrpc.Message, legacy bool, meta []byte) (logs uint8, _ []byte) {
	if level, own := ownLogLevel(msg); own {
		return level, meta
	}
	if !legacy {
		return 0, meta
	}
	s.mu.Lock()
	on, sev, member := s.logs, s.logLevel, s.logMember
	s.mu.Unlock()
	if !on {
		return 0, meta
	}
	if meta == nil {
		return uint8(sev + 1), nil
	}
	return uint8(sev + 1), append(meta[:len(meta):len(meta)], member...)
}

// ownLogLevel is the level a request names itself, as pending.logs: a
// logging/setLevel's, or its own _meta's.
func ownLogLevel(msg *jsonrpc.Message) (logs uint8, own bool) {
	if msg.Method == "logging/setLevel" {
		params := msg.Params.Of(msg.Raw)
		level, _ := jsonrpc.String(params, jsonrpc.Member(params, "level"))
		return logsAt(level), true
	}
	if msg.Meta.Present() {
		m := msg.Meta.Of(msg.Raw)
		if sp := jsonrpc.Member(m, metaLogLevel); sp.Present() {
			level, _ := jsonrpc.String(m, sp)
			return logsAt(level), true
		}
	}
	return 0, false
}

// setLevel makes sev the session's log level, with the _meta member that
// names it to a modern child, built once here rather than per request.
func (s *session) setLevel(sev int) {
	member := []byte(`,"` + metaLogLevel + `":"` + levelName(sev) + `"`)
	s.mu.Lock()
	s.logs, s.logLevel, s.logMember = true, sev, member
	kept := s.keepLocked(wire.State{LogLevel: levelName(sev)}) // for a resume with another pool, in the order of the changes
	s.mu.Unlock()
	kept()
}

// asksLogs reports whether a 2026-07-28 request asks for log messages.
func asksLogs(msg *jsonrpc.Message) bool {
	if !msg.Meta.Present() {
		return false
	}
	m := msg.Meta.Of(msg.Raw)
	level, _ := jsonrpc.String(m, jsonrpc.Member(m, metaLogLevel))
	return logsAt(level) != 0
}

// logsAt is pending.logs for a request that asks for level: 0 for a
// level that is none.
func logsAt(level string) uint8 {
	if sev, ok := logSeverity[level]; ok {
		return uint8(sev + 1)
	}
	return 0
}

// levelAnswered takes the child's answer to a session's logging/setLevel
// that the child answered itself (it declared no logging): a level it
// accepted is the session's from now on; one it refused changes nothing
// (the first edition took the level as it was sent, and a session the
// child refused got every message).
func (s *session) levelAnswered(p *pending, answer *jsonrpc.Message) {
	if !answer.Result.Present() || p.logs == 0 {
		return
	}
	s.setLevel(int(p.logs) - 1)
}

// admitsLog reports whether a legacy child's message at level reaches
// this session.
func (s *session) admitsLog(level string) bool {
	sev, ok := logSeverity[level]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs && (!ok || sev >= s.logLevel)
}

// routeLog takes a child's notifications/message, params its params.
func (b *backend) routeLog(msg *jsonrpc.Message, params []byte) {
	level, _ := jsonrpc.String(params, jsonrpc.Member(params, "level"))
	if b.childIsLegacy() {
		// Who would take it first: most such messages nobody asked for,
		// and the requests in flight need no look for those.
		sessions := b.sessions() // a fresh slice: ours to filter
		to := sessions[:0]
		for _, s := range sessions {
			if s.admitsLog(level) {
				to = append(to, s)
			}
		}
		if len(to) == 0 {
			return
		}
		if b.reqs.runsOnlyModern() {
			b.log.Debug("dropping a log message made during 2026-07-28 clients' requests only", "level", level)
			return
		}
		line := append([]byte(nil), msg.Raw...)
		for _, s := range to {
			s.deliver(line)
		}
		return
	}
	line := append([]byte(nil), msg.Raw...)
	sev, ok := logSeverity[level]
	if !ok {
		sev = len(logSeverity) // a level of its own: every level that asked admits it
	}
	to, x, ok := b.reqs.logOwner(sev)
	if !ok {
		b.log.Debug("dropping a log message no one request asked for", "level", level)
		return
	}
	to.relate(x, line)
}

// wantedLogLevel is the session's level, if it asked for logs.
func (s *session) wantedLogLevel() (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logLevel, s.logs
}

// syncLogLevel sets a legacy child to the most verbose level its live
// sessions asked for, when that changed; a modern child has no level of
// its own. The setLevel is queued under the lock that records the level:
// the child hears the levels in the order they were decided, and a child
// not yet ready hears the last of them from becomeReady, once.
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
		level = levelName(want)
	}
	b.mu.Lock()
	modern := b.state == StateReady && b.hs != nil && b.hs.era == EraModern // (one not ready yet: becomeReady decides)
	if modern || b.childLevel == level || (b.childLevel == "" && !any) {
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

// unloggedView is a legacy child's capabilities as a 2026-07-28 client of
// it may rely on them: without logging, whose messages such a child never
// ties to a request, so the pool gives that client none (the first edition
// offered it, and the client waited for messages that never came).
func unloggedView(caps json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(caps, &m) != nil || m["logging"] == nil {
		return caps
	}
	delete(m, "logging")
	out, err := json.Marshal(m)
	if err != nil {
		return caps
	}
	return out
}
