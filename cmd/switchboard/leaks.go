package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchboard-mcp/switchboard/app"
	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/leaks"
)

type leaksCmd struct {
	JSON   bool   `name:"json" help:"Print JSON (stable; see the README)."`
	Config string `help:"Config file to match orphans against when no pool is running (default: $SWITCHBOARD_HOME/config.json)." type:"path"`
}

func (c *leaksCmd) Run(ctx context.Context) error {
	ls, err := app.ListLeaks(ctx, c.Config, warn)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(os.Stdout, ls)
	}
	return printLeaks(os.Stdout, ls, time.Now())
}

// printLeaks renders the leaks as a table, or says there are none.
func printLeaks(w io.Writer, ls []leaks.Leak, now time.Time) error {
	if len(ls) == 0 {
		_, err := fmt.Fprintln(w, "no leaked backends")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tSERVER\tRSS\tSTARTED\tCOMMAND\tWHY")
	for _, l := range ls {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s ago\t%s\t%s\n", l.PID, term(l.Server), mib(l.RSSBytes),
			now.Sub(l.StartedAt).Round(time.Second), clip(term(strings.Join(l.Command, " ")), 60), term(l.Reason))
	}
	proven := 0
	for _, l := range ls {
		if l.Proven {
			proven++
		}
	}
	fmt.Fprintf(tw, "\n%d leaked; kill one with `switchboard kill PID`, all with `switchboard kill --all-leaked`\n", proven)
	if n := len(ls) - proven; n > 0 {
		fmt.Fprintf(tw, "%d suspect (an orphan without a Switchboard run marker, a process a live child detached, or one an earlier version marked without its home): listed, not killed by Switchboard\n", n)
	}
	return tw.Flush()
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

type killCmd struct {
	PID       int    `arg:"" optional:"" help:"PID of a leaked backend (see switchboard leaks), or of a running child of the pool (a hung one: the pool starts a new one)."`
	AllLeaked bool   `name:"all-leaked" help:"Kill every leaked backend."`
	Config    string `help:"Config file to match orphans against when no pool is running (default: $SWITCHBOARD_HOME/config.json)." type:"path"`
}

// Validate makes PID and --all-leaked exclusive (kong calls it).
func (c *killCmd) Validate() error {
	if (c.PID > 0) == c.AllLeaked {
		return errors.New("give either a PID or --all-leaked")
	}
	return nil
}

func (c *killCmd) Run(ctx context.Context) error {
	res, err := app.KillLeaked(ctx, c.Config, control.KillRequest{PID: c.PID, AllLeaked: c.AllLeaked}, warn)
	if err != nil {
		return err
	}
	return reportKills(os.Stdout, os.Stderr, res, c.AllLeaked)
}

// reportKills prints one line per killed PID, and per PID that is no
// longer running, on out. A single PID's
// failure is returned for main to print (a refusal Is leaks.ErrRefused);
// with --all-leaked each failure goes to errOut and a summary is
// returned. Either way the exit code is non-zero unless everything asked
// for was killed.
func reportKills(out, errOut io.Writer, res []control.KillResult, all bool) error {
	if all && len(res) == 0 {
		fmt.Fprintln(out, "no leaked backends")
		return nil
	}
	var failed []error
	for _, r := range res {
		err := r.Err()
		if err != nil {
			failed = append(failed, err)
			if all {
				fmt.Fprintf(errOut, "switchboard: %v\n", err)
			}
			continue
		}
		if r.Skipped {
			fmt.Fprintf(errOut, "switchboard: not killing PID %d (%s): %s\n", r.PID, r.Server, r.Note)
			continue
		}
		if r.NotRunning {
			fmt.Fprintf(out, "PID %d is not running: nothing to kill\n", r.PID)
			continue
		}
		line := fmt.Sprintf("killed PID %d", r.PID)
		if r.Server != "" {
			line += " (" + r.Server + ")"
		}
		if r.Note != "" {
			line += ": " + r.Note
		}
		fmt.Fprintln(out, line)
	}
	switch {
	case len(failed) == 0:
		return nil
	case !all:
		return failed[0]
	}
	return fmt.Errorf("%d of %d leaked backends were not killed", len(failed), len(res))
}

func warn(msg string) { fmt.Fprintf(os.Stderr, "switchboard: warning: %s\n", msg) }
