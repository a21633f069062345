package ui

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// This file turns a snapshot into the rows each view shows. Everything
// here is a pure function of its arguments, so it is table-tested and runs
// on the event loop's goroutine, never on the UI goroutine.

// level says how much a row stands out.
type level uint8

const (
	levelNormal level = iota
	levelWarn         // worth a look: restarting, not yet written, an error
	levelHung         // past the hang threshold, or a failed server
)

// row is one line of a table: the text of its data cells, how it stands
// out, and what its buttons act on.
type row struct {
	cells []string
	level level
	// The targets of the row's buttons: backend is a Backends row's child
	// slot (pool.BackendInfo.ID), which its Restart restarts alone.
	server  string
	poolID  uint64
	pid     int
	backend uint64
	// proven is a Leaks row's leak that Switchboard proves its own: only
	// those have a Kill (app/leaks refuses a suspect).
	proven bool
	// what names the target for a confirmation ("fake (PID 4242)",
	// "tools/call sleep from s2 (cursor) on fake"); state, age and
	// inflight say what acting on it does.
	what     string
	state    string
	age      string
	inflight int
	// detail is shown under the table when the row is selected (a
	// backend's stderr tail, a history row's error).
	detail string
	// hist is the history row a row shows, for its timeline.
	hist HistoryRow
}

// column is one column of a table. A column with a button shows that
// button in every row instead of text, but in rows show refuses (nil:
// every row). Button columns come first: they stay in view, the other
// columns scroll under them. Widths fit the content (table.go).
type column struct {
	title  string
	button string
	show   func(r row) bool
	// max caps a column of free text (stderr, errors, commands) so that
	// the columns after it stay in view; the cell shows the rest on
	// selection. Zero: the table's cap.
	max float32
	// fit are the widest texts a column of ticking figures (ages, memory)
	// takes: it is as wide as them from the start, so that it does not
	// widen as they tick.
	fit []string
}

// Widest texts of ticking figures, for column.fit: formatAge's forms,
// clockAndAge's, formatBytes' and a CPU share.
var (
	fitAge   = []string{"00m00s", "00h00m", "00d00h"}
	fitClock = []string{"00:00:00 (00m00s ago)", "00:00:00 (00h00m ago)", "Mmm 00 00:00 (00d00h ago)"}
	fitBytes = []string{"0000 KiB", "000.0 MiB", "00.00 GiB"}
	fitCPU   = []string{"000%"}
)

// displayZone is the zone times are shown in; tests pin it.
var displayZone = time.Local

var sessionColumns = []column{
	{title: "Client"},
	{title: "Version"},
	{title: "Transport"},
	{title: "Server"},
	{title: "Since", fit: fitClock},
	{title: "In flight"},
	{title: "Session"},
	{title: "Client PID"},
}

// sessionRows lists sessions, oldest first (the snapshot's order).
func sessionRows(s pool.Snapshot, now time.Time) []row {
	out := make([]row, 0, len(s.Sessions))
	for _, ss := range s.Sessions {
		name := ss.ClientName
		if name == "" {
			name = "(unnamed client)"
		}
		transport := ss.Transport
		if ss.ReattachedFrom != "" {
			transport += " (reattached)" // kept across a pool restart
		}
		since := ss.ConnectedAt
		if !ss.BeganAt.IsZero() {
			since = ss.BeganAt // the client's session, not its reattach
		}
		r := row{server: ss.Server, pid: ss.PID, detail: reattachedDetail(ss, now), cells: []string{
			name, ss.ClientVersion, transport, ss.Server,
			clockAndAge(since, now), strconv.Itoa(ss.InFlight), ss.ID, pidText(ss.PID),
		}}
		out = append(out, r)
	}
	return out
}

// reattachedDetail says where a session kept across a pool restart came
// from, and when it reattached.
func reattachedDetail(ss pool.SessionInfo, now time.Time) string {
	if ss.ReattachedFrom == "" {
		return ""
	}
	return "kept across a pool restart: was " + ss.ReattachedFrom + ", reattached " + clockAndAge(ss.ConnectedAt, now)
}

var inflightColumns = []column{
	{title: "", button: "Cancel"},
	{title: "Method"},
	{title: "Tool"},
	{title: "Session"},
	{title: "Server"},
	{title: "Child PID"},
	{title: "Age", fit: fitAge},
	{title: "Written"},
	{title: "Why it waits", max: 320}, // the request's stateReason: the rest on selection
}

// inflightRows lists requests in flight, oldest first. Ages run from
// ReceivedAt to now, so they tick between snapshots; a request older than
// hang is levelHung, one not yet written to its child levelWarn. Why one
// waits, when the pool knows (its child does not read its input, its
// session's roots are asked for), is its last cell and its detail.
func inflightRows(s pool.Snapshot, now time.Time, hang time.Duration) []row {
	clients := make(map[string]string, len(s.Sessions))
	for _, ss := range s.Sessions {
		clients[ss.ID] = ss.ClientName
	}
	out := make([]row, 0, len(s.InFlight))
	for _, r := range s.InFlight {
		age := requestAge(r, s.TakenAt, now)
		lv := levelNormal
		switch {
		case hang > 0 && age >= hang:
			lv = levelHung
		case !r.WrittenToChild:
			lv = levelWarn
		}
		sess := r.Session
		if c := clients[r.Session]; c != "" {
			sess += " (" + c + ")"
		}
		what := requestWhat(r.Method, r.Name) + " from " + sess + " on " + r.Server
		out = append(out, row{level: lv, server: r.Server, poolID: r.PoolID, pid: r.PID, detail: what + "\n\n" + waitsFor(r),
			what: what, age: formatAge(age), cells: []string{
				r.Method, r.Name, sess, r.Server, pidText(r.PID), formatAge(age), yesNo(r.WrittenToChild), r.StateReason,
			}})
	}
	return out
}

// waitsFor says what a request in flight waits for: its stateReason when
// it has one, else what writtenToChild means.
func waitsFor(r pool.RequestInfo) string {
	switch {
	case r.StateReason != "":
		return r.StateReason
	case r.WrittenToChild:
		return "written to child PID " + pidText(r.PID) + ": waiting for its answer"
	}
	return "not yet written to a child: its child is starting or restarting"
}

// maxWhy is how much of why a hung request waits its bubble and the
// tooltip show: the pool's reasons fit whole.
const maxWhy = 140

// hungWhy is why r waits, short, for its hang bubble and the tooltip: its
// stateReason, or while no child has it, its child's (resolving its
// package, waiting for its handshake); "" when the pool does not say.
func hungWhy(s pool.Snapshot, r pool.RequestInfo) string {
	why := r.StateReason
	if why == "" && !r.WrittenToChild {
		why = childOf(s, r).StateReason
	}
	return truncate(why, maxWhy)
}

// childOf is the child a request not yet written waits for: the one with
// its PID, or, before a process runs (PID 0), the one child of its server
// without a process that may serve its session; none when that is not
// one.
func childOf(s pool.Snapshot, r pool.RequestInfo) pool.BackendInfo {
	var found []pool.BackendInfo
	for _, b := range s.Backends {
		if b.Server == r.Server && b.PID == r.PID && (r.PID > 0 || b.Session == "" || b.Session == r.Session) {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		return pool.BackendInfo{}
	}
	return found[0]
}

// requestAge is how old a request is at now. ReceivedAt is the truth; a
// snapshot without it (a decoded status) falls back to AgeMs plus the time
// since the snapshot.
func requestAge(r pool.RequestInfo, taken, now time.Time) time.Duration {
	if !r.ReceivedAt.IsZero() {
		return max(now.Sub(r.ReceivedAt), 0)
	}
	return time.Duration(r.AgeMs)*time.Millisecond + max(now.Sub(taken), 0)
}

// procStat is what the sampler measured of one child process.
type procStat struct {
	RSS uint64  // the child's own resident memory
	CPU float64 // percent of one core, over the last sample interval
	// TreeRSS is the resident memory of the child and every process under
	// it (TreeProcs of them): what the child costs.
	TreeRSS   uint64
	TreeProcs int
}

// tree is the memory of the child's tree (its own, when the tree was not
// measured).
func (st procStat) tree() uint64 { return max(st.TreeRSS, st.RSS) }

// memoryText shows a child's memory: its tree's, and how many processes
// that is when more than one.
func (st procStat) memoryText() string {
	if st.TreeProcs > 1 {
		return fmt.Sprintf("%s (%d procs)", formatBytes(st.tree()), st.TreeProcs)
	}
	return formatBytes(st.tree())
}

// rowRestart is a Backends row's Restart: that row's child alone. The
// overview card's and the tray's Restart act on the whole server.
const rowRestart = "Restart child"

var backendColumns = []column{
	{title: "", button: rowRestart, show: restartable},
	{title: "", button: "Kill", show: hasProcess},
	{title: "Server", max: 260}, // with its session or roots: the rest on selection
	{title: "Era"},
	{title: "PID"},
	{title: "State"},
	{title: "Uptime", fit: fitAge},
	{title: "Memory", fit: fitBytes},
	{title: "CPU", fit: fitCPU},
	{title: "Sessions"},
	{title: "Restarts"},
	{title: "Stderr (last line)", max: 220},
}

// hasProcess: a Backends row's Kill needs a process to kill.
func hasProcess(r row) bool { return r.pid > 0 }

// restartable: a Backends row's Restart child restarts its process, or
// starts a failed slot's again (with a fresh restart budget) or a slot
// waiting out its backoff at once.
func restartable(r row) bool {
	return r.pid > 0 || r.state == pool.StateFailed || r.state == pool.StateRestart
}

// backendRows lists child slots by server. stats holds the sampler's
// memory and CPU figures by PID; a PID it has not measured yet shows "…".
func backendRows(s pool.Snapshot, now time.Time, stats map[int]procStat) []row {
	out := make([]row, 0, len(s.Backends))
	for _, b := range s.Backends {
		lv := levelNormal
		switch b.State {
		case pool.StateFailed:
			lv = levelHung
		case pool.StateRestart, pool.StateStarting:
			lv = levelWarn
		}
		uptime, mem, cpu := "", "", ""
		if b.PID > 0 && !b.StartedAt.IsZero() {
			uptime = formatAge(now.Sub(b.StartedAt))
		}
		if b.PID > 0 {
			mem, cpu = "…", "…"
			if st, ok := stats[b.PID]; ok {
				mem, cpu = st.memoryText(), fmt.Sprintf("%.0f%%", st.CPU)
			}
		}
		name := b.Server
		if b.Session != "" {
			name += " [" + b.Session + "]"
		}
		if len(b.Roots) > 0 {
			name += " (" + rootsLabel(b.Roots) + ")" // one child per roots partition
		}
		last := ""
		if n := len(b.StderrTail); n > 0 {
			last = b.StderrTail[n-1]
		}
		detail := strings.Join(b.StderrTail, "\n")
		if b.LastError != "" {
			last = b.LastError
			detail = "last error: " + b.LastError + "\n" + detail
		}
		if b.StateReason != "" {
			last = b.StateReason
			detail = b.State + ": " + b.StateReason + "\n" + detail
		}
		if len(b.ResolvedCommand) > 0 {
			detail = "configured: " + strings.Join(b.Command, " ") + "\nstarted as: " + strings.Join(b.ResolvedCommand, " ") +
				"\n" + b.ResolveNote + "\n\n" + detail
		} else if b.ResolveNote != "" {
			detail = "command: " + strings.Join(b.Command, " ") + " (" + b.ResolveNote + ")\n\n" + detail
		}
		pid := pidText(b.PID)
		if b.CarriedOver {
			pid += " (carried over)" // started by the program this one upgraded
			detail = "carried over an in-place upgrade: the process kept running\n\n" + detail
		}
		what := name
		if b.PID > 0 {
			what += " (PID " + strconv.Itoa(b.PID) + ")"
		}
		out = append(out, row{level: lv, server: b.Server, pid: b.PID, backend: b.ID, detail: strings.TrimSpace(detail),
			what: what, state: b.State, inflight: b.InFlight, cells: []string{
				name, b.Era, pid, b.State, uptime, mem, cpu,
				strconv.Itoa(b.Sessions), strconv.Itoa(b.Restarts), last,
			}})
	}
	return out
}

// rootsLabel names a roots partition briefly: the last path element of
// each root.
func rootsLabel(roots []string) string {
	names := make([]string, len(roots))
	for i, r := range roots {
		names[i] = path.Base(strings.TrimRight(r, "/"))
	}
	return strings.Join(names, ", ")
}

var leakColumns = []column{
	{title: "", button: "Kill", show: func(r row) bool { return r.proven }},
	{title: "PID"},
	{title: "Server"},
	{title: "Memory", fit: fitBytes},
	{title: "Started", fit: fitClock},
	{title: "Why it is a leak", max: 260},
	{title: "Command", max: 240},
}

// leakRows lists leaked backends in the order the detector gave them. A
// suspect has no Kill, and its row says why.
func leakRows(leaks []Leak, now time.Time) []row {
	out := make([]row, 0, len(leaks))
	for _, l := range leaks {
		lv, why := levelWarn, l.Reason
		detail := fmt.Sprintf("PID %d (%s): %s\n\ncommand: %s", l.PID, l.Server, l.Reason, l.Command)
		if !l.Proven {
			lv, why = levelNormal, "Suspect, never killed: "+l.Reason
			detail += fmt.Sprintf("\n\nA suspect: it may be a leaked backend, but Switchboard cannot prove it its own "+
				"(it may be another program's), so it lists it and never kills it. If you know it is one, end it yourself (kill %d).", l.PID)
		}
		out = append(out, row{level: lv, server: l.Server, pid: l.PID, proven: l.Proven, detail: detail,
			what: fmt.Sprintf("leaked %s (PID %d)", l.Server, l.PID), cells: []string{
				strconv.Itoa(l.PID), l.Server, formatBytes(l.RSSBytes), clockAndAge(l.StartedAt, now), why, l.Command,
			}})
	}
	return out
}

var historyColumns = []column{
	{title: "Received"},
	{title: "Server"},
	{title: "Session"},
	{title: "Method"},
	{title: "Name"},
	{title: "Status"},
	{title: "Duration"},
	{title: "PID"},
	{title: "Error", max: 300},
}

// historyRows lists recorded requests as the store returned them. Session
// ids start again with each app start: when the rows come from more than
// one, each session names its run, so that s3 of today is not taken for
// yesterday's s3.
func historyRows(h []HistoryRow) []row {
	out := make([]row, 0, len(h))
	manyRuns := slices.ContainsFunc(h, func(r HistoryRow) bool { return r.Run != h[0].Run })
	for _, r := range h {
		session := r.Session
		if manyRuns {
			session = fmt.Sprintf("%s (run %d)", r.Session, r.Run)
		}
		lv := levelNormal
		switch r.Status {
		case pool.StatusTimeout, "abandoned":
			lv = levelHung
		case "in-flight", pool.StatusError, pool.StatusFailed, pool.StatusCancelled, pool.StatusOrphaned:
			lv = levelWarn
		}
		dur := ""
		if r.Duration > 0 {
			dur = formatDuration(r.Duration)
		}
		out = append(out, row{level: lv, server: r.Server, pid: r.PID, hist: r, detail: r.Error, cells: []string{
			r.ReceivedAt.In(displayZone).Format("2006-01-02 15:04:05"), r.Server, session, r.Method, r.Name,
			r.Status, dur, pidText(r.PID), r.Error,
		}})
	}
	return out
}

// summary is the one-line state of the pool the dashboard's status bar
// and the tray menu show. Leaks is -1 when leak detection failed or is not
// available; Killable counts the proven ones among them, which "Kill
// leaked backends" and "Kill all" kill (the suspects are only listed).
type summary struct {
	Sessions, InFlight, Hung, Children, Leaks int
	Killable                                  int
	Failed                                    []string
	// StartAtLogin is the tray's "Start at login" checkbox.
	StartAtLogin bool
	// The oldest hung request: where a click on a hung tray icon leads.
	HungServer string
	HungKey    wfKey
	HungWhat   string // "tools/call sleep on browser, 1m35s"
	HungWhy    string // why it waits, when the pool says (hungWhy)
}

// leakCount shows the number of proven leaks and of suspects, or
// "unknown".
func (s summary) leakCount() string {
	switch {
	case s.Leaks < 0:
		return "unknown"
	case s.suspects() > 0:
		return fmt.Sprintf("%d, suspects: %d", s.Killable, s.suspects())
	}
	return strconv.Itoa(s.Killable)
}

// suspects counts the leaks found that are not proven: listed, never
// killed.
func (s summary) suspects() int { return max(s.Leaks-s.Killable, 0) }

// killCount shows the number of leaks Kill would kill, or "unknown".
func (s summary) killCount() string {
	if s.Leaks < 0 {
		return "unknown"
	}
	return strconv.Itoa(s.Killable)
}

func summarize(s pool.Snapshot, now time.Time, hang time.Duration, leaks int) summary {
	sum := summary{Sessions: len(s.Sessions), InFlight: len(s.InFlight), Leaks: leaks}
	var oldest time.Duration
	for _, r := range s.InFlight {
		age := requestAge(r, s.TakenAt, now)
		if hang <= 0 || age < hang {
			continue
		}
		sum.Hung++
		if age > oldest {
			oldest = age
			sum.HungServer, sum.HungKey = r.Server, wfKey{PoolID: r.PoolID}
			sum.HungWhat = requestWhat(r.Method, r.Name) + " on " + r.Server + ", " + formatAge(age)
			sum.HungWhy = hungWhy(s, r)
		}
	}
	for _, b := range s.Backends {
		if b.PID > 0 && b.State != pool.StateStopped {
			sum.Children++
		}
	}
	for _, sv := range s.Servers {
		if sv.State == pool.StateFailed {
			sum.Failed = append(sum.Failed, sv.Name)
		}
	}
	return sum
}

func (s summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s · %d in flight", plural(s.Sessions, "session"), s.InFlight)
	if s.Hung > 0 {
		fmt.Fprintf(&b, " (%d hung)", s.Hung)
	}
	fmt.Fprintf(&b, " · %s", plural(s.Children, "child", "children"))
	if s.Leaks < 0 {
		b.WriteString(" · leaks unknown")
	} else {
		fmt.Fprintf(&b, " · %s", plural(s.Killable, "leak"))
		if n := s.suspects(); n > 0 {
			fmt.Fprintf(&b, ", %s", plural(n, "suspect"))
		}
	}
	if len(s.Failed) > 0 {
		fmt.Fprintf(&b, " · failed: %s", strings.Join(s.Failed, ", "))
	}
	return b.String()
}

// plural spells "1 session", "2 sessions"; an irregular plural is the
// third argument.
func plural(n int, one string, many ...string) string {
	if n == 1 {
		return "1 " + one
	}
	if len(many) > 0 {
		return strconv.Itoa(n) + " " + many[0]
	}
	return strconv.Itoa(n) + " " + one + "s"
}

// formatAge shows a duration the way a ticking clock reads: 7s, 2m05s,
// 3h04m, 2d05h.
func formatAge(d time.Duration) string {
	d = max(d, 0)
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return strconv.FormatInt(s, 10) + "s"
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	default:
		return fmt.Sprintf("%dd%02dh", s/86400, s%86400/3600)
	}
}

// formatDuration shows a request's duration: µs below a millisecond, ms
// below a second.
func formatDuration(d time.Duration) string {
	if d < time.Millisecond {
		return strconv.FormatInt(d.Microseconds(), 10) + " µs"
	}
	if d < time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	}
	if d < time.Minute {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return formatAge(d)
}

// clockAndAge shows a start time as "15:04:05 (2m05s ago)", with the date
// when it is not today.
func clockAndAge(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	lt, ln := t.In(displayZone), now.In(displayZone)
	layout := "15:04:05"
	if lt.YearDay() != ln.YearDay() || lt.Year() != ln.Year() {
		layout = "Jan 2 15:04"
	}
	return lt.Format(layout) + " (" + formatAge(now.Sub(t)) + " ago)"
}

func formatBytes(n uint64) string {
	const unit = 1024
	switch {
	case n < unit:
		return strconv.FormatUint(n, 10) + " B"
	case n < unit*unit:
		return fmt.Sprintf("%.0f KiB", float64(n)/unit)
	case n < unit*unit*unit:
		return fmt.Sprintf("%.1f MiB", float64(n)/(unit*unit))
	default:
		return fmt.Sprintf("%.2f GiB", float64(n)/(unit*unit*unit))
	}
}

func pidText(pid int) string {
	if pid <= 0 {
		return "—"
	}
	return strconv.Itoa(pid)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
