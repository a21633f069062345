package pool

import (
	"encoding/json"
	"fmt"
	"slices"

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
// child answers itself, before the child accepted it). A child that
// declared no logging may still take setLevel: a session's goes to it,
// for its answer, but naming the pool's level, as the pool's own would
// (sendLevel), never the session's alone, which would lower what the
// other sessions get. A level that does not exist is the pool's to
// refuse: a child never hears one. Such a child's
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
// it cannot take. A level that does not exist the pool refuses for any
// child: passed on to a shared child, it would set the one level all its
// sessions share (the first edition let the child explain it). Otherwise
// the child answers, sent the pool's level (sendLevel), and its
// acceptance sets the session's (levelEnded). An answer of the pool's
// ends the request's wait for the handshake, if it waited.
func (s *session) setLogLevel(b *backend, hs *handshake, w *handshakeWait, params []byte) bool {
	level, ok := jsonrpc.String(params, jsonrpc.Member(params, "level"))
	sev, known := logSeverity[level]
	modern := hs.era == EraModern
	switch {
	case !ok || !known:
		w.refuse(s, newError(errBadParams, false, "", "logging/setLevel", fmt.Errorf("unknown level %q", level)))
		return true
	case !jsonrpc.Member(hs.capabilities, "logging").Present() && modern:
		w.refuse(s, newError(errNoLogging, false, "", b.srv.name))
		return true
	case !jsonrpc.Member(hs.capabilities, "logging").Present():
		return false // the child answers the pool's level in its place (sendLevel)
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
	return uint8(sev + 1), withMetaMember(meta, member)
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
	member := logLevelMember(levelName(sev))
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

// levelTry is a session's logging/setLevel that its child answers (a
// legacy child that declared no logging), from its send (sendLevel) to
// its end (levelEnded): the level it asks for counts meanwhile.
type levelTry struct {
	p *pending

	// Set under the backend's levelSync as well.
	queued bool   // sendLevel queued it
	gen    uint64 // the backend's levelGen it was queued as
	prev   string // the backend's childLevel before it
}

// sendLevel queues p, a session's logging/setLevel that its child
// answers (a legacy child that declared no logging), as syncLogLevel
// queues the pool's own, under the same lock: naming the most verbose
// level the child's sessions ask for, the session's new level in place
// of its old one, and in the order the levels were decided. Its answer
// is the session's (on a child of its own, the level it asked is the one
// the child hears). Its end sets the session's level, and the child's
// again as it needs (levelEnded).
func (b *backend) sendLevel(p *pending) error {
	s := p.sess
	b.levelSync.Lock()
	defer b.levelSync.Unlock()
	s.tryLevel(p)
	level, _ := b.levelWanted(s)
	carryLevel(p.line, level) // nobody reads it yet: it is queued below
	b.mu.Lock()
	prev := b.childLevel
	err := b.queueLocked(p)
	if err == nil {
		b.childLevel = level
		b.levelGen++
	}
	gen := b.levelGen
	b.mu.Unlock()
	if err != nil {
		s.untryLevel(p)
		return err
	}
	s.queuedLevel(p, gen, prev)
	b.signal()
	return nil
}

// levelEnded takes the end of a session's logging/setLevel that its
// child answered (sendLevel): a level the child accepted is the
// session's from now on; one it refused changes nothing (the first
// edition took the level as it was sent, and a session the child refused
// got every message). Then the child is set to what its sessions ask,
// when that changed: after a refusal it is at the level it was at before
// (when no level was decided since), and after an end with no answer (a
// timeout, a cancel, its child's death) it may or may not have taken the
// one it carried, so it is set again. (A child the session moved to
// meanwhile, new roots, counted the level as it came: it is as verbose.)
func (b *backend) levelEnded(s *session, p *pending, o *outcome) {
	answered := o.kind == endAnswered
	if answered && o.answer.Result.Present() {
		s.setLevel(int(p.logs) - 1) // before its try leaves: the level counts throughout
	}
	b.settleLevel(s, p, answered && !o.answer.Result.Present(), !answered)
}

// settleLevel is levelEnded's work on p's own child, under levelSync:
// refused, the child refused p; unknown, it ended unanswered.
func (b *backend) settleLevel(s *session, p *pending, refused, unknown bool) {
	b.levelSync.Lock()
	defer b.levelSync.Unlock()
	c, _ := s.untryLevel(p)
	force := false
	if c.queued && c.gen == b.levelGen {
		switch {
		case refused:
			b.mu.Lock()
			b.childLevel = c.prev
			b.mu.Unlock()
		case unknown:
			force = true
		}
	}
	b.syncLevelLocked(force)
}

// tryLevel counts the level p, the session's setLevel its child answers,
// asks for, until it ends (untryLevel): the level the child is set to
// meanwhile is as verbose, whatever the child answers.
func (s *session) tryLevel(p *pending) {
	s.mu.Lock()
	s.levelTries = append(s.levelTries, levelTry{p: p})
	s.mu.Unlock()
}

// queuedLevel records that p's try was queued as the backend's levelGen
// gen, its childLevel prev before it. The caller holds levelSync.
func (s *session) queuedLevel(p *pending, gen uint64, prev string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.levelTryLocked(p); i >= 0 {
		s.levelTries[i].queued, s.levelTries[i].gen, s.levelTries[i].prev = true, gen, prev
	}
}

// untryLevel forgets p's try, and returns it, if it is counted.
func (s *session) untryLevel(p *pending) (levelTry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.levelTryLocked(p)
	if i < 0 {
		return levelTry{}, false
	}
	t := s.levelTries[i]
	s.levelTries = slices.Delete(s.levelTries, i, i+1)
	return t, true
}

// levelTryLocked is the index of p's try in levelTries, -1 if none.
func (s *session) levelTryLocked(p *pending) int {
	return slices.IndexFunc(s.levelTries, func(t levelTry) bool { return t.p == p })
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
			s.deliver(line, notice(msg.Method))
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
	to.relate(x, line, msg.Method)
}

// wantedLogLevel is the most verbose level the session asks of its
// child, if it asks for logs: the level it set (unless set is false),
// and those of its setLevels the child has not answered yet (tryLevel).
func (s *session) wantedLogLevel(set bool) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	want, ok := len(logSeverity), false
	if set && s.logs {
		want, ok = s.logLevel, true
	}
	for _, t := range s.levelTries {
		want, ok = min(want, int(t.p.logs)-1), true
	}
	return want, ok
}

// levelWanted is the most verbose level the backend's live sessions ask
// for (quietest when none does), any whether one does; of except, the
// level it set does not count (its setLevel on its way replaces it).
// The caller holds levelSync.
func (b *backend) levelWanted(except *session) (level string, any bool) {
	want := len(logSeverity)
	for _, s := range b.sessions() {
		if !s.alive() {
			continue
		}
		if lvl, ok := s.wantedLogLevel(s != except); ok {
			want, any = min(want, lvl), true
		}
	}
	if !any {
		return quietest, false
	}
	return levelName(want), true
}

// syncLogLevel sets a legacy child to the most verbose level its live
// sessions asked for, when that changed; a modern child has no level of
// its own. The setLevel is queued under the lock that records the level:
// the child hears the levels in the order they were decided, and a child
// not yet ready hears the last of them from becomeReady, once.
func (b *backend) syncLogLevel() {
	b.levelSync.Lock()
	defer b.levelSync.Unlock()
	b.syncLevelLocked(false)
}

// syncLevelLocked is syncLogLevel under levelSync; force sets the child
// even when the pool set it to that level last.
func (b *backend) syncLevelLocked(force bool) {
	level, any := b.levelWanted(nil)
	b.mu.Lock()
	modern := b.state == StateReady && b.hs != nil && b.hs.era == EraModern // (one not ready yet: becomeReady decides)
	if modern || (b.childLevel == level && !force) || (b.childLevel == "" && !any) {
		b.mu.Unlock()
		return
	}
	b.childLevel = level
	b.levelGen++
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
