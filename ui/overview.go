package ui

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// overview is what the Overview view shows: one card per server and a
// line that sums them up. It is a pure function of a snapshot, each
// server's rolling figures and the sampler's measurements, computed off
// the UI goroutine.
type overview struct {
	Header string // "1 request hung · 5 sessions · 2 children · 212 MiB saved by sharing"
	Sub    string // what the figures mean, and over how long
	Cards  []serverCard
}

// serverCard is one server's card.
type serverCard struct {
	Name  string
	State string
	Level level // how much the state stands out
	Share pool.Share
	// Note is the server's error, or why it is not running.
	Note string
	// Sessions is how many sessions use the server, Children how many
	// child processes serve them (one per roots partition, or per
	// session).
	Sessions, Children int
	// ChildLines name each child: "PID 4242 · 48.2 MiB", with its roots
	// when the server has several partitions.
	ChildLines []string
	// Memory is the children's process trees together; Measured says
	// the sampler has measured every child. Saved is what the same
	// sessions would cost with a child each, at the measured child size.
	Memory, Saved uint64
	Measured      bool
	InFlight      int
	Hung          int
	Figures       serverFigures
}

// maxChildLines bounds the children a card names; the rest are counted.
const maxChildLines = 3

// overviewFor builds the overview of s at now. figures gives a server's
// rolling figures; stats are the sampler's measurements by PID.
func overviewFor(s pool.Snapshot, now time.Time, hang time.Duration, figures func(server string) serverFigures,
	stats map[int]procStat) overview {
	var ov overview
	sessions := map[string]int{}
	for _, ss := range s.Sessions {
		sessions[ss.Server]++
	}
	inflight, hung := map[string]int{}, map[string]int{}
	for _, r := range s.InFlight {
		inflight[r.Server]++
		if hang > 0 && requestAge(r, s.TakenAt, now) >= hang {
			hung[r.Server]++
		}
	}
	totalSessions, totalChildren := 0, 0
	var totalSaved uint64
	for _, sv := range s.Servers {
		c := serverCard{Name: sv.Name, State: sv.State, Share: sv.Share, Note: sv.Error,
			Sessions: sessions[sv.Name], InFlight: inflight[sv.Name], Hung: hung[sv.Name], Figures: figures(sv.Name)}
		switch {
		case sv.Disabled:
			// The pool's reason (a ${VAR} it needs is not set), else the user's.
			c.State, c.Note = "disabled", cmp.Or(sv.Error, "disabled in the config")
		case sv.Draining:
			c.Note = "draining: removed from the config, finishing what it has in flight"
		}
		c.Level = stateLevel(c.State)
		if c.Hung > 0 {
			c.Level = levelHung
		}
		var backends []pool.BackendInfo
		for _, b := range s.Backends {
			if b.Server == sv.Name && b.PID > 0 && b.State != pool.StateStopped {
				backends = append(backends, b)
			}
		}
		slices.SortFunc(backends, func(a, b pool.BackendInfo) int { return a.PID - b.PID })
		c.Children = len(backends)
		c.Measured = len(backends) > 0
		partitions := len(backends) > 1 && sv.Share != pool.ShareSession
		for i, b := range backends {
			line := "PID " + strconv.Itoa(b.PID)
			switch {
			case sv.Share == pool.ShareSession && b.Session != "":
				line += " (session " + b.Session + ")"
			case partitions && len(b.Roots) > 0:
				line += " (" + rootsLabel(b.Roots) + ")"
			case partitions:
				line += " (no roots)"
			}
			st, ok := stats[b.PID]
			if ok {
				c.Memory += st.tree()
				line += " · " + st.memoryText()
			} else {
				c.Measured = false
				line += " · measuring…"
			}
			if b.State != pool.StateReady {
				line += " · " + b.State
			}
			if i < maxChildLines {
				c.ChildLines = append(c.ChildLines, line)
			}
		}
		if n := len(backends) - maxChildLines; n > 0 {
			c.ChildLines[maxChildLines-1] = fmt.Sprintf("… and %d more children", n+1)
		}
		if c.Measured && c.Sessions > c.Children {
			c.Saved = c.Memory * uint64(c.Sessions-c.Children) / uint64(c.Children)
		}
		totalSessions += c.Sessions
		totalChildren += c.Children
		totalSaved += c.Saved
		ov.Cards = append(ov.Cards, c)
	}
	// Hung requests first: a narrow window cuts the end of the line.
	var parts []string
	if n := sumValues(hung); n > 0 {
		parts = append(parts, plural(n, "request")+" hung")
	}
	parts = append(parts, plural(totalSessions, "session"), plural(totalChildren, "child", "children"))
	if totalSaved > 0 {
		parts = append(parts, formatBytes(totalSaved)+" saved by sharing")
	}
	ov.Header = strings.Join(parts, " · ")
	window := statWindow
	if len(ov.Cards) > 0 {
		window = ov.Cards[0].Figures.Window
	}
	ov.Sub = "Calls, latency and errors over the last " + formatWindow(window) +
		". Memory is each child's process tree; saved is what the same sessions would cost with a child each."
	return ov
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// stateLevel is how much a server's state stands out.
func stateLevel(state string) level {
	switch state {
	case pool.StateFailed:
		return levelHung
	case pool.StateStarting, pool.StateRestart, pool.StateStopping:
		return levelWarn
	}
	return levelNormal
}

// stat is one figure of a card: a value over its caption.
type stat struct{ Value, Caption string }

// stats are the card's figures, left to right; the window they cover is
// in the view's header.
func (c serverCard) stats() []stat {
	mem := stat{"—", "memory"}
	if c.Children > 0 {
		mem.Value = "…"
		if c.Measured {
			mem.Value = formatBytes(c.Memory)
		}
	}
	saved := stat{"—", "saved"}
	switch {
	case c.Saved > 0:
		saved.Value = formatBytes(c.Saved)
	case c.Children > 0 && !c.Measured:
		saved.Value = "…"
	}
	f := c.Figures
	calls := stat{rate(f.PerMinute()), "calls/min"}
	p50, p99 := stat{"—", "p50"}, stat{"—", "p99"}
	if f.P50 > 0 {
		p50.Value, p99.Value = formatDuration(f.P50), formatDuration(f.P99)
	}
	errs := stat{"0", "errors"}
	if f.Errors > 0 {
		errs.Value = fmt.Sprintf("%d (%.1f%%)", f.Errors, 100*float64(f.Errors)/float64(max(f.Calls, 1)))
	}
	return []stat{mem, saved, calls, p50, p99, errs}
}

// sessionsLine says who uses the server: "3 sessions share 1 child".
func (c serverCard) sessionsLine() string {
	switch {
	case c.State == pool.StateFailed:
		return plural(c.Sessions, "session") + "; requests fail fast until you restart it"
	case c.State == "disabled":
		return "Disabled: clients asking for it get an error"
	case c.Sessions == 0 && c.Children == 0:
		return "No session yet: a child starts with the first one"
	case c.Sessions == 0:
		return "No session; " + plural(c.Children, "child", "children") + " idle"
	case c.Share == pool.ShareSession:
		return plural(c.Sessions, "session") + ", one child each"
	case c.Children == 1 && c.Sessions > 1:
		return fmt.Sprintf("%d sessions share 1 child", c.Sessions)
	}
	s := plural(c.Sessions, "session") + " on " + plural(c.Children, "child", "children")
	if c.Children > 1 {
		s += " (one per roots partition)"
	}
	return s
}

// activityLine says what is in flight now.
func (c serverCard) activityLine() string {
	switch {
	case c.Hung > 0:
		return fmt.Sprintf("%d in flight, %d hung", c.InFlight, c.Hung)
	case c.InFlight > 0:
		return fmt.Sprintf("%d in flight", c.InFlight)
	}
	return "idle"
}

// rate shows a call rate: "0", "0.4", "12", "1.2k".
func rate(perMin float64) string {
	switch {
	case perMin == 0:
		return "0"
	case perMin < 10:
		return strconv.FormatFloat(perMin, 'f', 1, 64)
	case perMin < 10_000:
		return strconv.FormatFloat(perMin, 'f', 0, 64)
	}
	return strconv.FormatFloat(perMin/1000, 'f', 1, 64) + "k"
}

// formatWindow says how far back the figures look: "15 minutes", "40 s".
func formatWindow(d time.Duration) string {
	if d < time.Minute {
		return strconv.Itoa(int(d.Seconds())) + " s"
	}
	return plural(int(d.Round(time.Minute).Minutes()), "minute")
}
