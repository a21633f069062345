package ui

import (
	"slices"
	"strings"
	"time"
)

// This file is the waterfall's data: requests as bars, the markers of
// children starting and exiting and of config reloads, and the lanes they
// are drawn in. A wfSource is immutable once built: the live one is
// published by the event loop, a history one is built from history.db, and
// the waterfall's painter reads either without a lock.

// Statuses a bar can have besides the pool's.
const (
	statusInFlight  = "in-flight"
	statusAbandoned = "abandoned" // its run ended (or crashed) without an answer
	statusUnseen    = "unseen"    // it ended while the UI was behind the pool's events
)

// wfKey names a request: its run (0 for the live one) and pool id.
type wfKey struct {
	Run    int64
	PoolID uint64
}

// wfReq is one request: a bar from Received to Written to Answered (zero
// while in flight).
type wfReq struct {
	Run                         int64 // 0: the live run
	PoolID                      uint64
	Server, Session             string
	Method, Name                string
	Received, Written, Answered time.Time
	Status                      string // statusInFlight while it waits
	Err                         string
	PID                         int
}

func (r *wfReq) key() wfKey { return wfKey{r.Run, r.PoolID} }

// open says the request waits for its answer.
func (r *wfReq) open() bool { return r.Status == statusInFlight }

// end is where the bar ends at now: its answer, or now while it waits.
func (r *wfReq) end(now time.Time) time.Time {
	if r.Answered.IsZero() {
		return now
	}
	return r.Answered
}

// timing says where the request's time went: "12 ms: 0.1 ms in the pool,
// 11.9 ms at the child".
func (r *wfReq) timing(now time.Time) string {
	total := r.end(now).Sub(r.Received)
	s := formatDuration(total)
	if r.open() {
		s = formatDuration(total) + " so far"
	}
	if r.Written.IsZero() {
		return s + ", all of it in the pool (never written to a child)"
	}
	return s + ": " + formatDuration(r.Written.Sub(r.Received)) + " in the pool, " +
		formatDuration(r.end(now).Sub(r.Written)) + " at the child"
}

// what is "tools/call search" or "tools/list".
func (r *wfReq) what() string { return requestWhat(r.Method, r.Name) }

// requestWhat names a request by its method and the tool, prompt or
// resource it names: "tools/call search", or "tools/list".
func requestWhat(method, name string) string {
	if name == "" {
		return method
	}
	return method + " " + name
}

// markerKind says what a marker marks.
type markerKind uint8

const (
	markChildStart   markerKind = iota + 1 // a child started (or restarted)
	markChildStop                          // a child stopped because it was asked to
	markChildCrash                         // a child exited on its own
	markReload                             // the config was reloaded and applied
	markReloadFailed                       // the config changed but could not be applied
	markAppStart                           // Switchboard started (history)
	markAppStop                            // Switchboard stopped (history)
	markAppCrash                           // Switchboard's run ended without a stop (history)
	markGap                                // the live waterfall missed the pool's events (gap.go)
)

// crash says the marker is worth "the two minutes before".
func (k markerKind) crash() bool { return k == markChildCrash || k == markAppCrash }

// wfMarker is a moment worth a vertical line: Server empty spans every
// lane.
type wfMarker struct {
	At      time.Time
	Kind    markerKind
	Server  string
	Session string // the owning session of a share: session child
	PID     int
	Title   string // one line: "PID 4242 exited: exit status 1"
	Detail  string // shown on hover: the child's stderr tail, the config changes
}

// wfChild is one child's life, drawn in its server's header lane.
type wfChild struct {
	Server, Session string
	PID             int
	Roots           []string
	Started, Exited time.Time // Exited zero while it runs
	Stopping        bool      // asked to stop: its exit is not a crash
	Restarting      bool      // asked to restart (Stopping too): the next child of its slot is a restart
}

// wfLane is one row of the waterfall: a server's header (Session empty),
// or one session of that server.
type wfLane struct {
	Run             int64 // history: the run of the session (ids are unique within a run)
	Server, Session string
	Title, Sub      string
	// Rows is how many requests of the session the lane shows side by
	// side: its most in flight at once, capped.
	Rows   int
	Closed bool
}

// maxLaneRows caps the rows of one lane; more requests at once share the
// last row.
const maxLaneRows = 6

// wfSource is what a waterfall draws. Immutable once built.
type wfSource struct {
	live bool
	// Since is the oldest moment it knows (live: what is kept; history:
	// the window's start); Until the newest (zero for live: now).
	Since, Until time.Time
	Done         reqList // ended requests, in no particular order
	Open         []wfReq // requests in flight
	Markers      []wfMarker
	Children     []wfChild
	Lanes        []wfLane
	// Truncated says the window held more requests than were loaded;
	// Trimmed that a source lacks requests older than Since: a live one
	// always does (let go, or before this run began).
	Truncated, Trimmed bool
	// NoHistory says, of a live source, that the history records no
	// requests: those it let go are kept nowhere.
	NoHistory bool
	// Note explains an empty or partial source (history is off, ...).
	Note string
}

// find returns the request k, or false.
func (s *wfSource) find(k wfKey) (wfReq, bool) {
	if s == nil {
		return wfReq{}, false
	}
	for i := range s.Open {
		if s.Open[i].key() == k {
			return s.Open[i], true
		}
	}
	for i := range s.Done.Len() {
		if r := s.Done.At(i); r.key() == k {
			return *r, true
		}
	}
	return wfReq{}, false
}

// reqChunk is how many requests one chunk of a reqList holds.
const reqChunk = 4096

// reqList is a list of requests in fixed-size chunks: appending never
// moves what is there, and dropping the oldest drops whole chunks, so a
// list published to another goroutine stays valid (it holds its own
// chunk headers and length) while the owner goes on appending. The
// chunks' requests never change once appended.
type reqList struct {
	chunks [][]wfReq // every chunk but the last is full
	skip   int       // requests dropped from the first chunk
}

// listOf is a reqList of one slice (history windows, tests).
func listOf(rs []wfReq) reqList {
	if len(rs) == 0 {
		return reqList{}
	}
	return reqList{chunks: [][]wfReq{rs}}
}

// Len counts the requests.
func (l *reqList) Len() int {
	n := 0
	for _, c := range l.chunks {
		n += len(c)
	}
	return n - l.skip
}

// At is the i-th request, oldest first.
func (l *reqList) At(i int) *wfReq {
	i += l.skip
	for _, c := range l.chunks {
		if i < len(c) {
			return &c[i]
		}
		i -= len(c)
	}
	panic("reqList: index out of range")
}

// each calls fn with every request, oldest first, and its index.
func (l *reqList) each(fn func(i int, r *wfReq)) {
	i := 0
	for ci, c := range l.chunks {
		start := 0
		if ci == 0 {
			start = l.skip
		}
		for j := start; j < len(c); j++ {
			fn(i, &c[j])
			i++
		}
	}
}

// add appends r.
func (l *reqList) add(r wfReq) {
	if n := len(l.chunks); n == 0 || len(l.chunks[n-1]) == reqChunk {
		l.chunks = append(l.chunks, make([]wfReq, 0, reqChunk))
	}
	last := &l.chunks[len(l.chunks)-1]
	*last = append(*last, r)
}

// dropWhile drops the oldest requests while keep says so, a chunk at a
// time where it can.
func (l *reqList) dropWhile(drop func(r *wfReq) bool) {
	for len(l.chunks) > 0 {
		c := l.chunks[0]
		for l.skip < len(c) && drop(&c[l.skip]) {
			l.skip++
		}
		if l.skip < len(c) || len(l.chunks) == 1 && len(c) < reqChunk {
			return
		}
		l.chunks, l.skip = l.chunks[1:], 0
	}
}

// snapshot is the list as it is now, for another goroutine: its own
// chunk headers, capped so that later appends are not in it.
func (l *reqList) snapshot() reqList {
	out := reqList{skip: l.skip, chunks: make([][]wfReq, len(l.chunks))}
	for i, c := range l.chunks {
		out.chunks[i] = c[:len(c):len(c)]
	}
	return out
}

// laneTitle is how a session's lane is labelled: its client, else its id.
func laneTitle(client, version, id string) string {
	switch {
	case client == "":
		return "session " + id
	case version == "":
		return client
	}
	return client + " " + version
}

// pidList is "PID 4242" or "PIDs 4242, 4250".
func pidList(pids []int) string {
	switch len(pids) {
	case 0:
		return "no child"
	case 1:
		return "PID " + pidText(pids[0])
	}
	parts := make([]string, len(pids))
	for i, p := range pids {
		parts[i] = pidText(p)
	}
	return "PIDs " + strings.Join(parts, ", ")
}

// laneRows counts the rows a lane needs: the most requests of the
// session alive at once in reqs (sweeping their starts and ends), capped.
func laneRows(reqs []wfReq, now time.Time) map[string]int {
	type edge struct {
		at    time.Time
		delta int
	}
	bySession := map[string][]edge{}
	for i := range reqs {
		r := &reqs[i]
		bySession[r.Session] = append(bySession[r.Session], edge{r.Received, 1}, edge{r.end(now), -1})
	}
	out := make(map[string]int, len(bySession))
	for s, edges := range bySession {
		slices.SortFunc(edges, func(a, b edge) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return a.delta - b.delta // an end before a start at the same moment
		})
		cur, most := 0, 0
		for _, e := range edges {
			cur += e.delta
			most = max(most, cur)
		}
		out[s] = min(max(most, 1), maxLaneRows)
	}
	return out
}
