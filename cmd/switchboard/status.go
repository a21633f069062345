package main

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/pool"
)

// stderrLines is how many of a failed server's last stderr lines the
// text status shows: enough for a stack trace's head, short enough to
// keep the table in view.
const stderrLines = 5

// printStatus writes `switchboard status` as text: the backends' table,
// with a row for each server that has no child (not started yet, or
// disabled), then, for each failed server, why it failed and what its
// child last wrote on stderr (the table alone says only "failed"), for
// each server not started for an unset ${VAR}, why, and for each server
// whose state has a reason (starting while its package is resolved), that,
// and for each server removed from the config whose children still finish
// calls (its rows marked draining), what that means.
func printStatus(w io.Writer, st control.Status, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if st.ConfigError != nil {
		fmt.Fprintf(tw, "CONFIG ERROR: %s\n\n", term(*st.ConfigError)) // it may quote the file
	}
	if st.ConfigWatchError != nil {
		fmt.Fprintf(tw, "CONFIG NOT WATCHED: %s; edits to the file are applied once it is watched again (tried every 30s) or at the next start\n\n",
			term(*st.ConfigWatchError))
	}
	if len(st.RestartNeeded) > 0 {
		fmt.Fprintf(tw, "RESTART NEEDED: the config file changed %s; %s when Switchboard restarts\n\n",
			term(strings.Join(st.RestartNeeded, ", ")), plural(len(st.RestartNeeded), "it takes effect", "they take effect"))
	}
	draining := map[string]bool{}
	for _, s := range st.Servers {
		draining[s.Name] = s.Draining
	}
	fmt.Fprintln(tw, "SERVER\tSTATE\tPID\tSESSIONS\tIN FLIGHT\tRESTARTS\tSTARTED")
	for _, b := range st.Backends {
		started := ""
		if !b.StartedAt.IsZero() {
			started = now.Sub(b.StartedAt).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", term(b.Server), stateText(b.State, draining[b.Server]),
			pidText(b.PID), b.Sessions, b.InFlight, b.Restarts, started)
	}
	for _, s := range st.Servers {
		if !slices.ContainsFunc(st.Backends, func(b pool.BackendInfo) bool { return b.Server == s.Name }) {
			fmt.Fprintf(tw, "%s\t%s\t-\t0\t0\t0\t\n", term(s.Name), stateText(s.State, s.Draining))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range st.Servers {
		switch {
		case s.State == pool.StateFailed:
			writeFailure(w, s, st.Backends)
		case s.Disabled && s.Error != "":
			// Not started: a ${VAR} it needs is not set.
			fmt.Fprintf(w, "\n%s: %s\n", term(s.Name), term(s.Error))
		case s.Draining:
			n := 0
			for _, r := range st.InFlight {
				if r.Server == s.Name {
					n++
				}
			}
			fmt.Fprintf(w, "\n%s: removed from the config, draining: it takes no new requests, finishes the %d in flight (each by its timeout at most), then stops\n",
				term(s.Name), n)
		case s.StateReason != "":
			// Starting for longer than a client may wait: npm resolving
			// its package, a child that does not answer its handshake.
			fmt.Fprintf(w, "\n%s: %s: %s\n", term(s.Name), s.State, term(s.StateReason))
		}
	}
	_, err := fmt.Fprintf(w, "\n%d %s, %d %s in flight\n", len(st.Sessions), plural(len(st.Sessions), "session", "sessions"),
		len(st.InFlight), plural(len(st.InFlight), "request", "requests"))
	return err
}

// stateText is a state as the table shows it: a removed server's
// children, which finish their calls and stop, are marked draining.
func stateText(state string, draining bool) string {
	if draining {
		return state + ", draining"
	}
	return state
}

// writeFailure says why server s failed: the pool's reason (else its
// failed child's last error) and that child's last stderr lines.
func writeFailure(w io.Writer, s pool.ServerInfo, backends []pool.BackendInfo) {
	reason, tail := s.Error, []string(nil)
	for _, b := range backends {
		if b.Server == s.Name && b.State == pool.StateFailed {
			if reason == "" {
				reason = b.LastError
			}
			tail = b.StderrTail
			break
		}
	}
	if reason == "" {
		reason = "no reason recorded"
	}
	fmt.Fprintf(w, "\n%s: %s\n", term(s.Name), term(rpcCode.ReplaceAllString(reason, "")))
	if len(tail) > stderrLines {
		tail = tail[len(tail)-stderrLines:]
	}
	if len(tail) > 0 {
		fmt.Fprintln(w, "  last stderr:")
	}
	for _, line := range tail {
		fmt.Fprintf(w, "    %s\n", term(line))
	}
}

// rpcCode is the "jsonrpc -32000: " a server's error starts with (it is
// the error its clients get): the code means nothing to a reader.
var rpcCode = regexp.MustCompile(`^jsonrpc -?\d+: `)
