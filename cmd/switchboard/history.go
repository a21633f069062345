package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/app"
)

type historyCmd struct {
	JSON    bool   `name:"json" help:"Print JSON (stable; see the README)."`
	Server  string `help:"Only requests to this server."`
	Session string `help:"Only requests of this session (as in status, e.g. s3; each run numbers its sessions from s1 again: add --run)."`
	// RunID is --run: Run is the command's method.
	RunID  int64  `name:"run" placeholder:"ID" help:"Only requests of this run of Switchboard (the run in --json and in the table)."`
	Status string `help:"Only requests with this status: ${historyStatuses}."`
	Method string `help:"Only requests with this method, e.g. tools/call."`
	// Since is a pointer so that --since 0s (a usage error) differs from
	// no --since.
	Since *time.Duration `help:"Only requests received within this long, e.g. 1h or 15m."`
	Limit int            `default:"100" help:"At most this many requests, newest first."`
}

// Validate makes a filter no request can match a usage error (exit 2),
// not an empty list.
func (c *historyCmd) Validate() error {
	if statuses := app.HistoryStatuses(); c.Status != "" && !slices.Contains(statuses, c.Status) {
		return fmt.Errorf("--status %q: want one of %s", c.Status, strings.Join(statuses, ", "))
	}
	if c.RunID < 0 {
		return fmt.Errorf("--run %d: want a run id (1 or more)", c.RunID)
	}
	if c.Limit < 1 {
		return fmt.Errorf("--limit %d: want 1 or more", c.Limit)
	}
	if c.Since != nil && *c.Since <= 0 {
		return fmt.Errorf("--since %s: want a positive duration, e.g. 1h or 15m", *c.Since)
	}
	return nil
}

func (c *historyCmd) Run(ctx context.Context) error {
	q := app.HistoryQuery{Server: c.Server, Session: c.Session, Status: c.Status, Method: c.Method, Run: c.RunID, Limit: c.Limit}
	if c.Since != nil {
		q.Since = *c.Since
	}
	entries, notes, err := app.History(ctx, q)
	for _, n := range notes {
		fmt.Fprintf(os.Stderr, "switchboard: %s\n", n)
	}
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(os.Stdout, entries)
	}
	return printHistory(os.Stdout, entries, time.Now())
}

type hangsCmd struct {
	JSON bool `name:"json" help:"Print JSON (stable; see the README)."`
	// Over is a pointer so that --over 0s (everything, abandoned
	// requests however young) differs from no --over.
	Over *time.Duration `help:"Only requests in flight at least this long (default: the config's hangThreshold, 30s unless set); an abandoned request's age ends with its run."`
}

// Validate makes a negative --over a usage error (exit 2), not the
// threshold in its place.
func (c *hangsCmd) Validate() error {
	if c.Over != nil && *c.Over < 0 {
		return fmt.Errorf("--over %s: want 0s (every request) or more, e.g. 1m", *c.Over)
	}
	return nil
}

func (c *hangsCmd) Run(ctx context.Context) error {
	var entries []app.HistoryEntry
	var threshold time.Duration
	var notes []string
	var err error
	if c.Over != nil {
		threshold = *c.Over
		entries, notes, err = app.Hangs(ctx, threshold)
	} else {
		entries, threshold, notes, err = app.HangsOverThreshold(ctx)
	}
	for _, n := range notes {
		fmt.Fprintf(os.Stderr, "switchboard: %s\n", n)
	}
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(os.Stdout, entries)
	}
	return printHangs(os.Stdout, entries, threshold)
}

func printHistory(w io.Writer, entries []app.HistoryEntry, now time.Time) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "no requests recorded (that match)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECEIVED\tRUN\tSERVER\tSESSION\tMETHOD\tNAME\tSTATUS\tDURATION\tPID\tERROR")
	for _, e := range entries {
		dur := "-"
		switch {
		case e.DurationMs != nil:
			dur = fmtDuration(time.Duration(*e.DurationMs * float64(time.Millisecond)))
		case e.AgeMs != nil && !e.Abandoned:
			dur = fmtDuration(time.Duration(*e.AgeMs)*time.Millisecond) + "…"
		}
		errText := ""
		if e.Error != nil {
			errText = oneLine(*e.Error, 60)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", fmtWhen(e.ReceivedAt, now), e.Run, term(e.Server), term(e.Session),
			methodCell(e.Method), nameCell(e.Name), e.Status, dur, pidText(e.PID), term(errText))
	}
	return tw.Flush()
}

func printHangs(w io.Writer, entries []app.HistoryEntry, over time.Duration) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintf(w, "nothing in flight for %s or more, live or abandoned by an earlier run\n", over)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGE\tSERVER\tSESSION\tMETHOD\tNAME\tPID\tWRITTEN TO CHILD\tSTATE")
	for _, e := range entries {
		age := "-"
		if e.AgeMs != nil {
			age = fmtDuration(time.Duration(*e.AgeMs) * time.Millisecond)
		}
		written := "no"
		if e.WrittenToChild {
			written = "yes"
			if e.WrittenAt != nil {
				written += ", " + e.WrittenAt.Sub(e.ReceivedAt).Round(time.Microsecond).String() + " after receipt"
			}
		}
		state := "in flight"
		if e.Abandoned {
			state = fmt.Sprintf("abandoned (run %d)", e.Run)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", age, term(e.Server), term(e.Session), methodCell(e.Method), nameCell(e.Name),
			pidText(e.PID), written, state)
	}
	return tw.Flush()
}

func fmtWhen(t, now time.Time) string {
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05.000")
	}
	return t.Format("2006-01-02 15:04:05")
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

func pidText(pid int) string {
	if pid == 0 {
		return "-"
	}
	return fmt.Sprint(pid)
}

// The widest a request's method and name are in a table (--json has them
// whole): a session chooses them, and a resources/read of a deep URI
// (kept up to 1 KiB) would otherwise widen every row past the screen.
const (
	methodWidth = 24 // resources/templates/list, the longest method an MCP client sends
	nameWidth   = 40
)

// methodCell is a request's method as a table prints it.
func methodCell(m string) string { return clip(term(m), methodWidth) }

// nameCell is a request's tool, prompt or resource name as a table
// prints it, cut in its middle: a URI's scheme and host, and its file's
// name at the end, tell rows apart better than a long common start. A
// name the history cut (over 1 KiB: it ends with "… [cut from N
// bytes]") has no end to show, and is cut at its end.
func nameCell(n string) string {
	if strings.Contains(n, "… [cut from ") {
		return clip(term(n), nameWidth)
	}
	return dash(clipMiddle(term(n), nameWidth))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string, n int) string { return clip(strings.Join(strings.Fields(s), " "), n) }

// clip is s in at most n characters: cut with an ellipsis at its end.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// clipMiddle is s in at most n characters: cut with an ellipsis in its
// middle.
func clipMiddle(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	tail := (n - 1) / 2
	return string(r[:n-1-tail]) + "…" + string(r[len(r)-tail:])
}
