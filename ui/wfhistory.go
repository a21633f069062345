package ui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// historySource turns what history.db holds about a window into what the
// waterfall draws: requests of runs that crashed end, abandoned, where
// their run ended; children's exits are crashes unless they look like a
// stop; runs starting, stopping and crashing, and config reloads, are
// markers. Pure, so it is
// table-tested and runs off the UI goroutine.
func historySource(w HistoryWindow, now time.Time) *wfSource {
	src := &wfSource{Since: w.From, Until: w.Until, Truncated: w.Truncated}
	runs := map[int64]HistoryRun{}
	for _, r := range w.Runs {
		runs[r.ID] = r
	}
	// runEnd is where a run's unanswered requests and live children end.
	runEnd := func(id int64) time.Time {
		r, ok := runs[id]
		switch {
		case !ok:
			return w.Until
		case !r.Ended.IsZero():
			return r.Ended
		case r.Crashed && !r.LastSeen.IsZero():
			return r.LastSeen
		case r.Crashed:
			return w.Until
		}
		return time.Time{} // the live run: still going
	}
	multiRun := len(w.Runs) > 1
	laneOf := map[string]int{} // lane key -> index in src.Lanes
	type srvLanes struct {
		header   wfLane
		sessions []wfLane
	}
	bySrv := map[string]*srvLanes{}
	var order []string
	server := func(name string) *srvLanes {
		s := bySrv[name]
		if s == nil {
			s = &srvLanes{header: wfLane{Server: name, Title: name, Rows: 1}}
			bySrv[name] = s
			order = append(order, name)
		}
		return s
	}
	sessions := map[string]HistorySession{}
	for _, s := range w.Sessions {
		sessions[strconv.FormatInt(s.Run, 10)+"/"+s.ID] = s
	}
	var reqs []wfReq
	for _, h := range w.Requests {
		r := wfReq{Run: h.Run, PoolID: h.PoolID, Server: h.Server, Session: h.Session, Method: h.Method, Name: h.Name,
			Received: h.ReceivedAt, Written: h.WrittenAt, Answered: h.AnsweredAt, Status: h.Status, Err: h.Error, PID: h.PID}
		if r.Answered.IsZero() {
			end := runEnd(h.Run)
			switch {
			case r.Status == statusAbandoned || (!end.IsZero() && r.Status == statusInFlight):
				r.Status, r.Answered = statusAbandoned, end
				if r.Answered.Before(r.Received) {
					r.Answered = r.Received
				}
			case r.Status == statusInFlight:
			default:
				if h.Duration > 0 {
					r.Answered = r.Received.Add(h.Duration)
				} else {
					r.Answered = r.Received
				}
			}
		}
		reqs = append(reqs, r)
	}
	rows := laneRows(reqs, now)
	var done []wfReq
	for _, r := range reqs {
		if r.open() {
			src.Open = append(src.Open, r)
		} else {
			done = append(done, r)
		}
		key := strconv.FormatInt(r.Run, 10) + "/" + r.Session
		if _, ok := laneOf[key]; ok {
			continue
		}
		laneOf[key] = 0
		sl := server(r.Server)
		l := wfLane{Run: r.Run, Server: r.Server, Session: r.Session, Rows: max(rows[r.Session], 1)}
		if s, ok := sessions[key]; ok {
			l.Title, l.Sub = laneTitle(s.ClientName, s.ClientVersion, s.ID), s.ID
			if s.Transport != "" {
				l.Sub += " · " + s.Transport
			}
			l.Closed = !s.Disconnected.IsZero() && !s.Disconnected.After(w.Until)
		} else {
			l.Title, l.Sub = laneTitle("", "", r.Session), ""
		}
		if multiRun {
			l.Sub = strings.TrimPrefix(l.Sub+" · run "+strconv.FormatInt(r.Run, 10), " · ")
		}
		sl.sessions = append(sl.sessions, l)
	}
	src.Done = listOf(done)
	// Lanes whose rows a run's requests count against each other share
	// a session id across runs: count rows per lane instead.
	if multiRun {
		perLane := map[string][]wfReq{}
		for _, r := range reqs {
			k := strconv.FormatInt(r.Run, 10) + "/" + r.Session
			perLane[k] = append(perLane[k], r)
		}
		for _, s := range bySrv {
			for i := range s.sessions {
				l := &s.sessions[i]
				k := strconv.FormatInt(l.Run, 10) + "/" + l.Session
				l.Rows = max(laneRows(perLane[k], now)[l.Session], 1)
			}
		}
	}

	livePIDs := map[string][]int{}
	for _, c := range w.Children {
		server(c.Server)
		exited := c.Exited
		if exited.IsZero() {
			exited = runEnd(c.Run)
		}
		src.Children = append(src.Children, wfChild{Server: c.Server, Session: c.Session, PID: c.PID, Roots: c.Roots,
			Started: c.Started, Exited: exited})
		if !c.Started.Before(w.From) && !c.Started.After(w.Until) {
			m := wfMarker{At: c.Started, Kind: markChildStart, Server: c.Server, Session: c.Session, PID: c.PID,
				Title: fmt.Sprintf("%s: child PID %d started", c.Server, c.PID)}
			if len(c.Roots) > 0 {
				m.Detail = "roots: " + strings.Join(c.Roots, ", ")
			}
			src.Markers = append(src.Markers, m)
		}
		if c.Exited.IsZero() {
			if exited.IsZero() || exited.After(w.Until) {
				livePIDs[c.Server] = append(livePIDs[c.Server], c.PID)
			}
			continue
		}
		if c.Exited.Before(w.From) || c.Exited.After(w.Until) {
			continue
		}
		how := c.ExitReason
		if how == "" {
			how = fmt.Sprintf("exit code %d", c.ExitCode)
		}
		m := wfMarker{At: c.Exited, Kind: markChildStop, Server: c.Server, Session: c.Session, PID: c.PID,
			Title: fmt.Sprintf("%s: child PID %d exited (%s)", c.Server, c.PID, how), Detail: "exit: " + how}
		if crashedExit(c) {
			m.Kind = markChildCrash
			m.Title = fmt.Sprintf("%s: child PID %d crashed (%s)", c.Server, c.PID, how)
		}
		src.Markers = append(src.Markers, m)
	}
	for _, r := range w.Runs {
		in := func(t time.Time) bool { return !t.IsZero() && !t.Before(w.From) && !t.After(w.Until) }
		name := fmt.Sprintf("Switchboard %s (run %d, PID %d)", r.Version, r.ID, r.PID)
		if in(r.Started) {
			src.Markers = append(src.Markers, wfMarker{At: r.Started, Kind: markAppStart, Title: name + " started"})
		}
		switch {
		case in(r.Ended):
			src.Markers = append(src.Markers, wfMarker{At: r.Ended, Kind: markAppStop, Title: name + " stopped"})
		case r.Crashed && in(r.LastSeen):
			src.Markers = append(src.Markers, wfMarker{At: r.LastSeen, Kind: markAppCrash, Title: name + " crashed",
				Detail: "Its last recorded moment; requests it had in flight are abandoned."})
		}
	}
	for _, r := range w.Reloads {
		src.Markers = append(src.Markers, reloadMarker(r))
	}
	slices.SortStableFunc(src.Markers, func(a, b wfMarker) int { return a.At.Compare(b.At) })
	slices.SortFunc(src.Children, func(a, b wfChild) int { return a.Started.Compare(b.Started) })
	slices.Sort(order)
	for _, name := range order {
		s := bySrv[name]
		ps := livePIDs[name]
		slices.Sort(ps)
		s.header.Sub = pidList(ps)
		src.Lanes = append(src.Lanes, s.header)
		slices.SortFunc(s.sessions, func(a, b wfLane) int {
			if a.Run != b.Run {
				return int(a.Run - b.Run)
			}
			return strings.Compare(a.Session, b.Session)
		})
		src.Lanes = append(src.Lanes, s.sessions...)
	}
	return src
}

// crashedExit tells a crash from a stop in a recorded exit: the pool
// stops a child by closing its stdin (exit 0), then SIGTERM, then
// SIGKILL; anything else is the child's own doing.
func crashedExit(c HistoryChild) bool {
	if c.ExitCode == 0 && !strings.Contains(c.ExitReason, "signal") {
		return false
	}
	for _, planned := range []string{"terminated", "killed", "stopped", "idle"} {
		if strings.Contains(c.ExitReason, planned) {
			return false
		}
	}
	return true
}

// requestStatus is what a status reads as in the details.
func requestStatus(status string) string {
	switch status {
	case pool.StatusOK:
		return "answered"
	case pool.StatusError:
		return "answered with an error"
	case pool.StatusFailed:
		return "failed (the pool answered with an error)"
	case pool.StatusTimeout:
		return "timed out"
	case pool.StatusCancelled:
		return "cancelled"
	case pool.StatusOrphaned:
		return "orphaned"
	case statusInFlight:
		return "in flight"
	case statusAbandoned:
		return "abandoned: its run ended without an answer"
	case statusUnseen:
		return "ended unseen"
	}
	return status
}
