package ui

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// tracker turns the pool's event stream into what the overview and the
// live waterfall show: each server's rolling figures, the requests of the
// last liveRetain as bars, the children's lives and the markers. It is
// owned by the event loop's goroutine; what it publishes (a wfSource) is
// immutable and shared with the painter.
type tracker struct {
	since   time.Time // when tracking began: the overview's window is shorter before statWindow has passed
	retain  time.Duration
	maxDone int
	// from is the oldest moment the live waterfall knows: since, until
	// the history filled in the retention before it (fillStart).
	from time.Time

	stats map[string]*serverStats

	open     map[uint64]*wfReq
	done     reqList // ended, in the order they ended; published sources share its chunks
	markers  []wfMarker
	sessions map[string]*trackedSession
	children map[int]*wfChild
	servers  []string // the configured servers, in config order, from the last snapshot
	// past are the lanes of earlier runs' sessions fillStart read back;
	// each goes once trim let its requests go.
	past []wfLane
	// unfilled are markers of child exits still waiting for the stderr
	// tail the next snapshot shows.
	unfilled []int
	// dropped is when the newest ended request trim let go ended: before
	// it, done may miss requests (the count cap drops them inside the
	// retention).
	dropped time.Time
	reloads uint64 // the last config reload made a marker
	// noHistory says the history records no requests: those trim lets go
	// are kept nowhere.
	noHistory bool
	changed   bool // something to publish
}

// trackedSession is what the tracker knows of a session.
type trackedSession struct {
	id, server                 string
	client, version, transport string
	firstSeen                  time.Time
	closed                     time.Time // zero while connected
	open, mostOpen             int       // requests in flight now, and the most at once
}

// Live retention: the bars the live waterfall keeps; older ones are read
// from history.db.
const (
	liveRetain  = statWindow
	liveMaxDone = 50_000
)

func newTracker(now time.Time) *tracker {
	return &tracker{since: now, from: now, retain: liveRetain, maxDone: liveMaxDone,
		stats: map[string]*serverStats{}, open: map[uint64]*wfReq{},
		sessions: map[string]*trackedSession{}, children: map[int]*wfChild{}}
}

func (t *tracker) serverStats(name string) *serverStats {
	s := t.stats[name]
	if s == nil {
		s = &serverStats{}
		t.stats[name] = s
	}
	return s
}

func (t *tracker) session(id, server string, at time.Time) *trackedSession {
	s := t.sessions[id]
	if s == nil {
		s = &trackedSession{id: id, server: server, firstSeen: at}
		t.sessions[id] = s
	}
	if s.server == "" {
		s.server = server
	}
	return s
}

// start takes in the subscription's snapshot: what is in flight now, the
// sessions and the children. After a lagging subscription, requests that
// ended unseen are closed as statusUnseen.
func (t *tracker) start(s pool.Snapshot) {
	now := s.TakenAt
	if now.IsZero() {
		now = time.Now()
	}
	live := make(map[uint64]bool, len(s.InFlight))
	for _, r := range s.InFlight {
		live[r.PoolID] = true
	}
	for id, r := range t.open {
		if !live[id] {
			t.finish(id, r, now, statusUnseen, "", "the UI fell behind the pool's events; its end was not seen")
		}
	}
	for _, r := range s.InFlight {
		if _, ok := t.open[r.PoolID]; ok {
			continue
		}
		rcv := r.ReceivedAt
		if rcv.IsZero() {
			rcv = now.Add(-time.Duration(r.AgeMs) * time.Millisecond)
		}
		t.received(pool.Event{Kind: pool.EventRequestReceived, Time: rcv, Server: r.Server, Session: r.Session,
			PoolID: r.PoolID, Method: r.Method, Name: r.Name, PID: r.PID})
		if r.WrittenToChild {
			t.open[r.PoolID].Written = cmpOr(r.WrittenAt, rcv)
		}
	}
	for _, b := range s.Backends {
		if b.PID > 0 && t.children[b.PID] == nil {
			t.children[b.PID] = &wfChild{Server: b.Server, Session: b.Session, PID: b.PID, Roots: b.Roots, Started: b.StartedAt}
		}
	}
	t.sync(s)
	t.changed = true
}

func cmpOr(t, def time.Time) time.Time {
	if t.IsZero() {
		return def
	}
	return t
}

// event takes in one pool event.
func (t *tracker) event(e pool.Event) {
	switch e.Kind {
	case pool.EventRequestReceived:
		t.received(e)
	case pool.EventRequestWritten:
		if r := t.open[e.PoolID]; r != nil {
			r.Written, r.PID = e.Time, e.PID
		}
	case pool.EventRequestDone:
		r := t.open[e.PoolID]
		if r == nil {
			// Received before the subscription's snapshot: all we know is
			// its end.
			r = &wfReq{PoolID: e.PoolID, Server: e.Server, Session: e.Session, Method: e.Method, Name: e.Name,
				Received: e.Time, Status: statusInFlight}
			t.session(e.Session, e.Server, e.Time)
			t.serverStats(e.Server).ended(e.Time, -1, e.Status, false)
			t.archive(r, e.Time, e.Status, e.Err, e.PID)
			return
		}
		t.finish(e.PoolID, r, e.Time, e.Status, e.Err, "")
		if e.PID != 0 {
			r.PID = e.PID
		}
	case pool.EventSessionOpened:
		s := t.session(e.Session, e.Server, e.Time)
		s.transport, s.closed = e.Transport, time.Time{}
		// The pool sends it again once the client named itself: a
		// session that ends before the next snapshot has no other name.
		if e.ClientName != "" {
			s.client, s.version = e.ClientName, e.ClientVersion
		}
	case pool.EventSessionClosed:
		if s := t.sessions[e.Session]; s != nil {
			s.closed = e.Time
		}
	case pool.EventBackendStarted:
		t.childStarted(e)
	case pool.EventBackendState:
		// Only a stop or a user's restart names a running child's PID with
		// these states (after a crash the state comes with no PID): its
		// exit is planned, not a crash.
		if c := t.children[e.PID]; c != nil {
			switch e.State {
			case pool.StateStopping, pool.StateStopped:
				c.Stopping = true
			case pool.StateRestart:
				c.Stopping, c.Restarting = true, true
			}
		}
	case pool.EventBackendExited:
		t.childExited(e)
	default:
		return
	}
	t.changed = true
}

func (t *tracker) received(e pool.Event) {
	if _, dup := t.open[e.PoolID]; dup {
		return
	}
	r := &wfReq{PoolID: e.PoolID, Server: e.Server, Session: e.Session, Method: e.Method, Name: e.Name,
		Received: e.Time, Status: statusInFlight, PID: e.PID}
	t.open[e.PoolID] = r
	s := t.session(e.Session, e.Server, e.Time)
	s.open++
	s.mostOpen = max(s.mostOpen, s.open)
	t.serverStats(e.Server).started(e.Time)
}

// finish ends open request id at `at`.
func (t *tracker) finish(id uint64, r *wfReq, at time.Time, status, errText, why string) {
	delete(t.open, id)
	if s := t.sessions[r.Session]; s != nil {
		s.open = max(s.open-1, 0)
	}
	if status != statusUnseen {
		t.serverStats(r.Server).ended(at, at.Sub(r.Received), status, true)
	} else {
		t.serverStats(r.Server).inFlight = max(t.serverStats(r.Server).inFlight-1, 0)
	}
	if why != "" {
		errText = why
	}
	t.archive(r, at, status, errText, r.PID)
}

// archive appends an ended request to done.
func (t *tracker) archive(r *wfReq, at time.Time, status, errText string, pid int) {
	r.Answered, r.Status, r.Err = at, status, errText
	if pid != 0 {
		r.PID = pid
	}
	t.done.add(*r)
}

func (t *tracker) childStarted(e pool.Event) {
	c := &wfChild{Server: e.Server, Session: e.Session, PID: e.PID, Roots: slices.Clone(e.Roots), Started: e.Time}
	restart := false
	for _, o := range t.children {
		if o.Server == e.Server && o.Session == e.Session && slices.Equal(o.Roots, e.Roots) && !o.Exited.IsZero() &&
			(!o.Stopping || o.Restarting) {
			restart = true
		}
	}
	t.children[e.PID] = c
	title := fmt.Sprintf("%s: child PID %d started", e.Server, e.PID)
	switch {
	case e.Carried:
		title = fmt.Sprintf("%s: child PID %d carried over an upgrade", e.Server, e.PID)
	case restart:
		title = fmt.Sprintf("%s: child restarted as PID %d", e.Server, e.PID)
	}
	var detail []string
	if cmd := e.ResolvedCommand; len(cmd) > 0 {
		detail = append(detail, "started as: "+strings.Join(cmd, " "))
	} else if len(e.Command) > 0 {
		detail = append(detail, "command: "+strings.Join(e.Command, " "))
	}
	if len(e.Roots) > 0 {
		detail = append(detail, "roots: "+strings.Join(e.Roots, ", "))
	}
	t.markers = append(t.markers, wfMarker{At: e.Time, Kind: markChildStart, Server: e.Server, Session: e.Session,
		PID: e.PID, Title: title, Detail: strings.Join(detail, "\n")})
}

func (t *tracker) childExited(e pool.Event) {
	c := t.children[e.PID]
	if c == nil {
		c = &wfChild{Server: e.Server, Session: e.Session, PID: e.PID, Started: e.Time}
		t.children[e.PID] = c
	}
	c.Exited = e.Time
	how := e.Err
	if how == "" {
		how = fmt.Sprintf("exit code %d", e.ExitCode)
	}
	m := wfMarker{At: e.Time, Kind: markChildCrash, Server: e.Server, Session: e.Session, PID: e.PID,
		Title: fmt.Sprintf("%s: child PID %d crashed (%s)", e.Server, e.PID, how)}
	switch {
	case c.Restarting:
		m.Kind = markChildStop
		m.Title = fmt.Sprintf("%s: child PID %d stopped for a restart (%s)", e.Server, e.PID, how)
	case c.Stopping:
		m.Kind = markChildStop
		m.Title = fmt.Sprintf("%s: child PID %d stopped (%s)", e.Server, e.PID, how)
	}
	t.markers = append(t.markers, m)
	t.unfilled = append(t.unfilled, len(t.markers)-1)
}

// reloaded adds a marker for each config reload after the last one seen.
func (t *tracker) reloaded(rs []ConfigReload) {
	for _, r := range rs {
		if r.Seq <= t.reloads {
			continue
		}
		t.reloads = r.Seq
		t.markers = append(t.markers, reloadMarker(r))
		t.changed = true
	}
}

// reloadMarker is the waterfall's marker of a config reload, live or
// from the history.
func reloadMarker(r ConfigReload) wfMarker {
	m := wfMarker{At: r.At, Kind: markReload, Title: "config reloaded", Detail: r.Changes}
	if r.Err != "" {
		m.Kind, m.Title, m.Detail = markReloadFailed, "config not applied", r.Err
	}
	return m
}

// sync takes from a fresh snapshot what events do not carry: the
// sessions' client names, the configured servers, and the stderr tail of
// children that exited since the last one.
func (t *tracker) sync(s pool.Snapshot) {
	t.servers = t.servers[:0]
	for _, sv := range s.Servers {
		t.servers = append(t.servers, sv.Name)
	}
	for _, ss := range s.Sessions {
		ts := t.session(ss.ID, ss.Server, ss.ConnectedAt)
		if ts.client != ss.ClientName || ts.version != ss.ClientVersion || ts.transport != ss.Transport {
			ts.client, ts.version, ts.transport = ss.ClientName, ss.ClientVersion, ss.Transport
			t.changed = true
		}
	}
	for _, i := range t.unfilled {
		m := &t.markers[i]
		c := t.children[m.PID]
		for _, b := range s.Backends {
			if b.Server == m.Server && b.Session == m.Session && (c == nil || slices.Equal(b.Roots, c.Roots)) {
				m.Detail = stderrDetail(b)
				t.changed = true
				break
			}
		}
	}
	t.unfilled = t.unfilled[:0]
}

// stderrDetail is what a backend's exit marker shows on hover.
func stderrDetail(b pool.BackendInfo) string {
	var parts []string
	if b.LastError != "" {
		parts = append(parts, "last error: "+b.LastError)
	}
	if len(b.StderrTail) > 0 {
		parts = append(parts, "stderr:\n"+strings.Join(b.StderrTail, "\n"))
	} else {
		parts = append(parts, "nothing on stderr")
	}
	return strings.Join(parts, "\n")
}

// trim forgets what is older than the retention at now: ended requests
// (whole chunks of them: published sources keep theirs), markers, exited
// children and closed sessions without requests left.
func (t *tracker) trim(now time.Time) {
	cut := now.Add(-t.retain)
	n := t.done.Len()
	before := n
	t.done.dropWhile(func(r *wfReq) bool {
		if r.Answered.Before(cut) || n > t.maxDone {
			n--
			if r.Answered.After(t.dropped) {
				t.dropped = r.Answered
			}
			return true
		}
		return false
	})
	i := slices.IndexFunc(t.markers, func(m wfMarker) bool { return !m.At.Before(cut) })
	if i < 0 {
		i = len(t.markers)
	}
	if i > 0 {
		t.markers = slices.Clone(t.markers[i:])
		for j := range t.unfilled {
			t.unfilled[j] -= i
		}
		t.unfilled = slices.DeleteFunc(t.unfilled, func(k int) bool { return k < 0 })
	}
	for pid, c := range t.children {
		if !c.Exited.IsZero() && c.Exited.Before(cut) {
			delete(t.children, pid)
		}
	}
	if len(t.past) > 0 && t.done.Len() < before {
		left := map[laneKey]bool{}
		t.done.each(func(_ int, r *wfReq) {
			if r.Run != 0 {
				left[laneKey{r.Run, r.Session}] = true
			}
		})
		t.past = slices.DeleteFunc(t.past, func(l wfLane) bool { return !left[laneKey{l.Run, l.Session}] })
	}
	// Closed sessions past the cut are dropped once no ended request of
	// theirs is left; the requests are read only when there is one.
	var gone map[string]bool
	for id, s := range t.sessions {
		if !s.closed.IsZero() && s.closed.Before(cut) && s.open == 0 {
			if gone == nil {
				gone = map[string]bool{}
			}
			gone[id] = true
		}
	}
	if gone != nil {
		t.done.each(func(_ int, r *wfReq) { delete(gone, r.Session) })
		for id := range gone {
			delete(t.sessions, id)
		}
	}
}

// figures are server's rolling figures at now.
func (t *tracker) figures(server string, now time.Time) serverFigures {
	s := t.stats[server]
	if s == nil {
		s = &serverStats{}
	}
	return s.figures(now, t.since)
}

// setHistory tells the tracker whether the history records requests
// (Controller.HistoryOn), which decides what its gap mark says.
func (t *tracker) setHistory(on bool) {
	if t.noHistory == on {
		t.noHistory, t.changed = !on, true
	}
}

// publish builds the immutable source the live waterfall draws at now.
func (t *tracker) publish(now time.Time) *wfSource {
	src := &wfSource{live: true, Since: now.Add(-t.retain), Done: t.done.snapshot(), NoHistory: t.noHistory, Trimmed: true}
	src.Open = make([]wfReq, 0, len(t.open))
	for _, r := range t.open {
		src.Open = append(src.Open, *r)
	}
	slices.SortFunc(src.Open, func(a, b wfReq) int { return a.Received.Compare(b.Received) })
	src.Markers = slices.Clone(t.markers)
	// Until the history filled in what came before tracking began (an
	// upgrade, a restart, a crash left it blank), the source knows from
	// then on only, and marks it.
	if t.from.After(src.Since) {
		src.Since = t.from
		src.Markers = append(src.Markers, t.startMarker())
	}
	// Under load the count cap lets requests go well inside the
	// retention: the source knows only from the newest one's end, and
	// the waterfall marks there where its bars stop.
	if t.dropped.After(src.Since) {
		src.Since, src.Trimmed = t.dropped, true
		m := wfMarker{At: t.dropped, Kind: markGap, Title: "older requests are in History",
			Detail: fmt.Sprintf("The live waterfall keeps the last %d requests; those that ended before %s are read from the history "+
				"(History in the mode list).", t.maxDone, t.dropped.In(displayZone).Format("15:04:05.000"))}
		if t.noHistory {
			m.Title = "older requests are not kept"
			m.Detail = fmt.Sprintf("The live waterfall keeps the last %d requests; those that ended before %s are not kept: "+
				"the history is off, and records none.", t.maxDone, t.dropped.In(displayZone).Format("15:04:05.000"))
		}
		src.Markers = append(src.Markers, m)
	}
	pids := map[string][]int{}
	for _, c := range t.children {
		src.Children = append(src.Children, *c)
		if c.Exited.IsZero() {
			pids[c.Server] = append(pids[c.Server], c.PID)
		}
	}
	slices.SortFunc(src.Children, func(a, b wfChild) int { return a.Started.Compare(b.Started) })
	src.Lanes = t.lanes(pids)
	t.changed = false
	return src
}

// startMarker marks where the live waterfall begins when that is where
// tracking began: what came before is in the history, or kept nowhere.
func (t *tracker) startMarker() wfMarker {
	seen := "The live waterfall shows what this run of Switchboard has seen, since " + t.from.In(displayZone).Format("15:04:05.000")
	m := wfMarker{At: t.from, Kind: markGap, Title: "not seen by this run: what came before is in History",
		Detail: seen + "; what came before (an earlier run's requests) is read from the history (History in the mode list)."}
	if t.noHistory {
		m.Title = "not seen by this run: what came before is not kept"
		m.Detail = seen + "; what came before is not kept: the history is off, and records none."
	}
	return m
}

// lanes orders the lanes: the configured servers in config order, then
// any other server seen; each server's header, then earlier runs'
// sessions, then its sessions by first sight.
func (t *tracker) lanes(pids map[string][]int) []wfLane {
	bySrv := map[string][]*trackedSession{}
	var extra []string
	for _, s := range t.sessions {
		if _, ok := bySrv[s.server]; !ok && !slices.Contains(t.servers, s.server) {
			extra = append(extra, s.server)
		}
		bySrv[s.server] = append(bySrv[s.server], s)
	}
	for srv := range pids {
		if _, ok := bySrv[srv]; !ok && !slices.Contains(t.servers, srv) && !slices.Contains(extra, srv) {
			extra = append(extra, srv)
		}
	}
	for _, l := range t.past {
		if !slices.Contains(t.servers, l.Server) && !slices.Contains(extra, l.Server) {
			extra = append(extra, l.Server)
		}
	}
	slices.Sort(extra)
	var out []wfLane
	for _, srv := range append(slices.Clone(t.servers), extra...) {
		ps := pids[srv]
		slices.Sort(ps)
		out = append(out, wfLane{Server: srv, Title: srv, Sub: pidList(ps), Rows: 1})
		for _, l := range t.past {
			if l.Server == srv {
				out = append(out, l)
			}
		}
		ss := bySrv[srv]
		slices.SortFunc(ss, func(a, b *trackedSession) int {
			if c := a.firstSeen.Compare(b.firstSeen); c != 0 {
				return c
			}
			return strings.Compare(a.id, b.id)
		})
		for _, s := range ss {
			sub := s.id
			if s.transport != "" {
				sub += " · " + s.transport
			}
			out = append(out, wfLane{Server: srv, Session: s.id, Title: laneTitle(s.client, s.version, s.id), Sub: sub,
				Rows: min(max(s.mostOpen, 1), maxLaneRows), Closed: !s.closed.IsZero()})
		}
	}
	return out
}
