package ui

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// This file keeps the overview's figures and the live waterfall true
// across a lag. When a burst outruns the loop, the pool drops its
// subscription (EventLagged, then the close) and the loop subscribes
// again: the events in between are lost. Requests in flight before and
// still in flight after are in the new snapshot; the ones that ended in
// between are read back from the history, which records every event, and
// the gap is marked in the waterfall. The stretch before the process
// began (an upgrade, a restart, a crash) is such a gap too (startGap).

// eventBuffer is the loop's subscription buffer: what arrives while the
// loop draws a frame must fit. A burst of 100 sessions sending 100 calls
// at once is 30,000 events (received, written, done); 1,024 overflowed
// several times per burst. At about 400 bytes an event, 6 MiB.
const eventBuffer = 16 << 10

// gapReads are when the history is read for a gap, after the gap: its
// records reach the database within a fraction of a second, later under
// a burst; the second read finds what the first was too early for. A
// read adds only what is missing, so reading again is harmless. Tests
// shorten them.
var gapReads = []time.Duration{2 * time.Second, 10 * time.Second}

// gapSlack widens a gap backwards: an event stamped just before the one
// that lagged may have been emitted just after it, and lost.
const gapSlack = time.Second

// gapKept is how long the loop keeps a gap the history has filled in:
// an event is stamped before it is sent, and under load one the history
// already had can reach the next subscription late. The gap knows it
// counted that request.
const gapKept = time.Minute

// gap is a stretch of the pool's events the loop missed: from the
// EventLagged (every event before it was read) to the snapshot of the
// next subscription. Owned by the loop's goroutine.
type gap struct {
	from, until time.Time
	// held are the requests in flight at from that the next snapshot no
	// longer had: they ended in the gap. They wait, out of the waterfall
	// and the figures, for the history to tell how.
	held map[uint64]wfReq
	// done are the requests whose end the gap has taken in; filled how
	// many of them the history told.
	done   map[uint64]bool
	filled int
	// sessions and children are those the next snapshot no longer had:
	// they closed or exited in the gap. They end at until, then when the
	// history says.
	sessions []string
	children []int
	reads    int  // history reads started
	closed   bool // read for the last time
	start    bool // the stretch before tracking began (startGap)
}

// gapRead is a history read for a gap, handed back to the loop.
type gapRead struct {
	g   *gap
	w   HistoryWindow
	err error
}

// openGap starts a gap from from to until and marks it in the
// waterfall. It is called before the tracker takes in the new
// subscription's snapshot s: the requests s no longer has are held
// until the history tells how they ended.
func (t *tracker) openGap(from, until time.Time, s pool.Snapshot) *gap {
	if from.IsZero() || from.After(until) {
		from = until
	}
	g := &gap{from: from, until: until, held: map[uint64]wfReq{}, done: map[uint64]bool{}}
	live := make(map[uint64]bool, len(s.InFlight))
	for _, r := range s.InFlight {
		live[r.PoolID] = true
	}
	for id, r := range t.open {
		if live[id] {
			continue
		}
		g.held[id] = *r
		delete(t.open, id)
		if s := t.sessions[r.Session]; s != nil {
			s.open = max(s.open-1, 0)
		}
		st := t.serverStats(r.Server)
		st.inFlight = max(st.inFlight-1, 0)
	}
	t.endMissing(g, s)
	t.markers = append(t.markers, wfMarker{At: from, Kind: markGap, Title: "the dashboard fell behind the pool's events",
		Detail: g.note("Requests that ended then are being read back from the history.")})
	t.changed = true
	return g
}

// endMissing ends the sessions and children s no longer has at g's end:
// their close or exit was in the gap. Else they would stay connected,
// and alive in their server's header, for good (trim keeps them).
func (t *tracker) endMissing(g *gap, s pool.Snapshot) {
	sessions := make(map[string]bool, len(s.Sessions))
	for _, ss := range s.Sessions {
		sessions[ss.ID] = true
	}
	for id, ts := range t.sessions {
		if ts.closed.IsZero() && !sessions[id] {
			ts.closed = g.until
			g.sessions = append(g.sessions, id)
		}
	}
	pids := make(map[int]bool, len(s.Backends))
	for _, b := range s.Backends {
		pids[b.PID] = true
	}
	for pid, c := range t.children {
		if c.Exited.IsZero() && !pids[pid] {
			c.Exited = g.until
			g.children = append(g.children, pid)
		}
	}
}

// endedAsRecorded moves the ends of the sessions and children g ended
// to when the history recorded them, within g.
func (t *tracker) endedAsRecorded(g *gap, w HistoryWindow, run int64) {
	in := func(at time.Time) bool { return !at.IsZero() && !at.After(g.until) }
	for _, hs := range w.Sessions {
		if s := t.sessions[hs.ID]; s != nil && hs.Run == run && in(hs.Disconnected) && slices.Contains(g.sessions, hs.ID) {
			s.closed = hs.Disconnected
		}
	}
	for _, hc := range w.Children {
		if c := t.children[hc.PID]; c != nil && hc.Run == run && c.Server == hc.Server && in(hc.Exited) &&
			slices.Contains(g.children, hc.PID) {
			c.Exited = hc.Exited
		}
	}
}

// note is the detail of g's marker: when the gap was, then what.
func (g *gap) note(what string) string {
	return "From " + g.from.In(displayZone).Format("15:04:05.000") + " to " + g.until.In(displayZone).Format("15:04:05.000") +
		" the dashboard missed the pool's events. " + what
}

// readBack says how many requests the history filled in.
func (g *gap) readBack() string {
	return plural(g.filled, "request that ended then was", "requests that ended then were") + " read back from the history"
}

// releaseLive puts back in flight the requests the gaps hold that s
// shows in flight: they had not reached the pool's table when the
// snapshot after their gap was taken (a request's received event comes
// first), so they had not ended. Called with each fresh snapshot.
func (t *tracker) releaseLive(gaps []*gap, s pool.Snapshot) {
	if len(gaps) == 0 {
		return
	}
	for _, r := range s.InFlight {
		for _, g := range gaps {
			if h, ok := g.held[r.PoolID]; ok {
				delete(g.held, r.PoolID)
				t.reopen(h)
			}
		}
	}
}

// reopen puts a held request back in flight.
func (t *tracker) reopen(r wfReq) {
	t.open[r.PoolID] = &r
	s := t.session(r.Session, r.Server, r.Received)
	s.open++
	s.mostOpen = max(s.mostOpen, s.open)
	t.serverStats(r.Server).inFlight++
	t.changed = true
}

// endHeld ends a request g held: in the figures, and as a bar.
func (t *tracker) endHeld(g *gap, r wfReq, at time.Time, d time.Duration, status, errText string, pid int) {
	delete(g.held, r.PoolID)
	g.done[r.PoolID] = true
	t.serverStats(r.Server).ended(at, d, status, false)
	t.archive(&r, at, status, errText, pid)
	t.changed = true
}

// gapEvent takes in an event about a request of a gap: the end of one
// it holds (it ended between the new subscription and its snapshot), or
// a late event of one it already counted. It says whether e was such an
// event; the tracker must not take it in again.
func (t *tracker) gapEvent(e pool.Event, gaps []*gap) bool {
	if e.Kind != pool.EventRequestReceived && e.Kind != pool.EventRequestDone {
		return false
	}
	for _, g := range gaps {
		if g.done[e.PoolID] {
			return true
		}
		if r, ok := g.held[e.PoolID]; ok && e.Kind == pool.EventRequestDone {
			t.endHeld(g, r, e.Time, e.Time.Sub(r.Received), e.Status, e.Err, e.PID)
			return true
		}
	}
	return false
}

// liveGaps drops from gaps those filled in more than gapKept before now.
func liveGaps(gaps []*gap, now time.Time) []*gap {
	return slices.DeleteFunc(gaps, func(g *gap) bool { return g.closed && now.Sub(g.until) > gapKept })
}

// refill takes in a history read of g; gaps are the gaps the loop
// keeps, g among them. The requests a gap holds end as the history recorded
// them; the live run's requests that ended in g and that the tracker
// never saw are added to the figures and the waterfall. It reports
// whether g should be read again.
func (t *tracker) refill(g *gap, gaps []*gap, w HistoryWindow, err error) (again bool) {
	if g.start {
		return t.fillStart(g, w, err)
	}
	switch {
	case errors.Is(err, ErrUnavailable):
		t.closeGap(g, "the history is not available ("+unavailableReason(err)+")")
		return false
	case err != nil && g.reads < len(gapReads):
		return true
	case err != nil:
		t.closeGap(g, "the history could not be read ("+err.Error()+")")
		return false
	}
	run := liveRun(w.Runs)
	seen := map[uint64]bool{} // requests the waterfall shows ended
	t.done.each(func(_ int, r *wfReq) {
		if r.Run == 0 {
			seen[r.PoolID] = true
		}
	})
	sessions := map[string]HistorySession{}
	for _, s := range w.Sessions {
		if s.Run == run {
			sessions[s.ID] = s
		}
	}
	added := map[string][]wfReq{} // by session, for sessions the tracker did not know
	alive := map[uint64]bool{}    // held requests the history has in flight
rows:
	for _, h := range w.Requests {
		if run == 0 || h.Run != run || h.PoolID == 0 {
			continue
		}
		end, d, ok := recordedEnd(h)
		if !ok {
			if _, held := g.held[h.PoolID]; held && h.Status == statusInFlight {
				alive[h.PoolID] = true
			}
			continue
		}
		for _, o := range gaps {
			if r, ok := o.held[h.PoolID]; ok {
				r.Written = cmpOr(r.Written, h.WrittenAt)
				t.endHeld(o, r, end, d, h.Status, h.Error, h.PID)
				o.filled++
				continue rows
			}
		}
		// Ended in the gap: a later end was seen, or is another gap's.
		if seen[h.PoolID] || g.done[h.PoolID] || t.open[h.PoolID] != nil ||
			end.Before(g.from.Add(-gapSlack)) || end.After(g.until) {
			continue
		}
		g.done[h.PoolID] = true
		g.filled++
		t.serverStats(h.Server).ended(end, d, h.Status, false)
		if _, known := t.sessions[h.Session]; !known || added[h.Session] != nil {
			// A session that came and went in the gap: the snapshot
			// after it did not have it.
			s := t.session(h.Session, h.Server, h.ReceivedAt)
			if hs, ok := sessions[h.Session]; ok {
				s.client, s.version, s.transport = hs.ClientName, hs.ClientVersion, hs.Transport
				s.closed = hs.Disconnected
			}
			if s.closed.Before(end) {
				s.closed = end
			}
			added[h.Session] = append(added[h.Session], wfReq{Session: h.Session, Received: h.ReceivedAt, Answered: end})
		}
		r := wfReq{PoolID: h.PoolID, Server: h.Server, Session: h.Session, Method: h.Method, Name: h.Name,
			Received: h.ReceivedAt, Written: h.WrittenAt}
		t.archive(&r, end, h.Status, h.Error, h.PID)
	}
	for id, reqs := range added {
		s := t.sessions[id]
		s.mostOpen = max(s.mostOpen, laneRows(reqs, g.until)[id])
	}
	if run != 0 {
		t.endedAsRecorded(g, w, run)
	}
	t.changed = true
	if g.reads < len(gapReads) {
		t.noteGap(g, g.readBack()+" so far.")
		return true
	}
	for id := range alive {
		if r, ok := g.held[id]; ok {
			delete(g.held, id)
			t.reopen(r)
		}
	}
	if run == 0 {
		t.closeGap(g, "the history has no record of this run")
		return false
	}
	t.closeGap(g, "")
	return false
}

// startGap is the stretch before tracking began that the live
// waterfall's retention covers: this run before the loop subscribed (s
// is its snapshot), and the run an upgrade, a restart or a crash ended.
// The history fills it in (fillStart); until it has, or without it,
// publish marks it as not seen by this run.
func (t *tracker) startGap(s pool.Snapshot) *gap {
	return &gap{from: t.since.Add(-t.retain), until: cmpOr(s.TakenAt, t.since), start: true,
		held: map[uint64]wfReq{}, done: map[uint64]bool{}}
}

// fillStart takes in the history read of the start gap g as the History
// view shows it: earlier runs' requests, sessions (closed), children and
// markers under their runs, and this run's requests the tracker did not
// see as live ones. A read that failed, or holds only part of the
// stretch, leaves it marked.
func (t *tracker) fillStart(g *gap, w HistoryWindow, err error) (again bool) {
	if err != nil && !errors.Is(err, ErrUnavailable) && g.reads < len(gapReads) {
		return true
	}
	g.closed = true
	if err != nil || w.Truncated {
		return false
	}
	run := liveRun(w.Runs)
	src := historySource(w, g.until)
	seen := map[uint64]bool{}
	t.done.each(func(_ int, r *wfReq) {
		if r.Run == 0 {
			seen[r.PoolID] = true
		}
	})
	var reqs []wfReq
	first, last := map[string]time.Time{}, map[string]time.Time{} // of this run's sessions' requests
	src.Done.each(func(_ int, r *wfReq) {
		if run == 0 || r.Run != run {
			reqs = append(reqs, *r)
			return
		}
		// One that ended after the snapshot was in it, or came after:
		// the tracker has it, or a later gap holds it.
		if r.PoolID == 0 || r.Answered.After(g.until) || seen[r.PoolID] || t.open[r.PoolID] != nil {
			return
		}
		g.done[r.PoolID] = true // its events may still come
		r.Run = 0
		reqs = append(reqs, *r)
		if !r.Answered.Before(t.since) {
			t.serverStats(r.Server).ended(r.Answered, r.Answered.Sub(r.Received), r.Status, false)
		}
		if f, ok := first[r.Session]; !ok || r.Received.Before(f) {
			first[r.Session] = r.Received
		}
		if r.Answered.After(last[r.Session]) {
			last[r.Session] = r.Answered
		}
	})
	sessions := map[string]HistorySession{}
	var runStart time.Time
	for _, s := range w.Sessions {
		if s.Run == run {
			sessions[s.ID] = s
		}
	}
	for _, r := range w.Runs {
		if r.ID == run {
			runStart = r.Started
		}
	}
	for _, l := range src.Lanes {
		switch {
		case l.Session == "":
		case run == 0 || l.Run != run:
			l.Closed = true // its run is over
			t.past = append(t.past, l)
		default:
			_, known := t.sessions[l.Session]
			if !known && first[l.Session].IsZero() {
				continue
			}
			hs := sessions[l.Session]
			s := t.session(l.Session, l.Server, cmpOr(hs.Connected, first[l.Session]))
			s.mostOpen = max(s.mostOpen, l.Rows)
			if !known { // the snapshot did not have it: it closed before
				s.client, s.version, s.transport = hs.ClientName, hs.ClientVersion, hs.Transport
				s.closed = cmpOr(hs.Disconnected, last[l.Session])
			}
		}
	}
	// Children still running are the snapshot's.
	for _, c := range src.Children {
		if !c.Exited.IsZero() && t.children[c.PID] == nil {
			t.children[c.PID] = &c
		}
	}
	// This run's config reloads come from ConfigReloads, and a child's
	// event the subscription brought is marked already.
	marks := slices.DeleteFunc(src.Markers, func(m wfMarker) bool {
		if (m.Kind == markReload || m.Kind == markReloadFailed) && run != 0 && !m.At.Before(runStart) {
			return true
		}
		return m.PID != 0 && slices.ContainsFunc(t.markers, func(o wfMarker) bool {
			return o.PID == m.PID && o.Server == m.Server && o.At.Equal(m.At)
		})
	})
	t.markers = append(marks, t.markers...)
	for i := range t.unfilled {
		t.unfilled[i] += len(marks)
	}
	// done is in the order requests ended: the stretch's come first.
	slices.SortFunc(reqs, func(a, b wfReq) int { return a.Answered.Compare(b.Answered) })
	var done reqList
	for _, r := range reqs {
		done.add(r)
	}
	t.done.each(func(_ int, r *wfReq) { done.add(*r) })
	t.done, t.from, t.changed = done, g.from, true
	return false
}

// closeGap ends g: the requests it still holds end unseen, as calls
// whose latency and outcome are unknown. why says why the history did
// not fill the gap in; empty when it did.
func (t *tracker) closeGap(g *gap, why string) {
	g.closed = true
	unseen := len(g.held)
	for _, r := range g.held {
		t.endHeld(g, r, g.until, -1, statusUnseen, "the UI fell behind the pool's events; its end was not seen", 0)
	}
	note := g.readBack() + "."
	if unseen > 0 {
		note += " " + plural(unseen, "request", "requests") + " in flight when it began show as ended unseen: the history did not say how."
	}
	if why != "" {
		note = "Requests that began and ended then are missing here and from the overview's figures: " + why +
			". Requests in flight when it began show as ended unseen."
	}
	t.noteGap(g, note)
}

// noteGap sets the detail of g's marker, while the waterfall keeps it.
func (t *tracker) noteGap(g *gap, note string) {
	for i := len(t.markers) - 1; i >= 0; i-- {
		if m := &t.markers[i]; m.Kind == markGap && m.At.Equal(g.from) {
			m.Detail = g.note(note)
			t.changed = true
			return
		}
	}
}

// recordedEnd is when a recorded request ended, and how long it took
// (negative: unknown); false while it has not ended.
func recordedEnd(h HistoryRow) (time.Time, time.Duration, bool) {
	switch h.Status {
	case "", statusInFlight, statusAbandoned:
		return time.Time{}, 0, false
	}
	end := h.AnsweredAt
	if end.IsZero() {
		end = h.ReceivedAt.Add(h.Duration)
	}
	d := h.Duration
	if d <= 0 {
		d = end.Sub(h.ReceivedAt)
	}
	return end, d, true
}

// liveRun is the window's run that is still going: this one. 0 when
// there is none.
func liveRun(runs []HistoryRun) int64 {
	for _, r := range runs {
		if r.Ended.IsZero() && !r.Crashed {
			return r.ID
		}
	}
	return 0
}

// readGap reads g's stretch of the history after its next delay, off
// the loop's goroutine, and hands it to the loop on out. Loop goroutine.
func (u *UI) readGap(ctx context.Context, g *gap, out chan<- gapRead) {
	delay := gapReads[g.reads]
	g.reads++
	from, until := g.from.Add(-gapSlack), g.until
	u.wg.Go(func() {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		w, err := u.ctrl.Window(rctx, from, until)
		cancel()
		select {
		case out <- gapRead{g: g, w: w, err: err}:
		case <-ctx.Done():
		}
	})
}
