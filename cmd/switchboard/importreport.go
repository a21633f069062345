package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/switchboard-mcp/switchboard/app/importer"
)

// writeImportReport writes the report `switchboard import` and `setup` print: every entry of
// every file read and what became of it, then exactly what was written.
// Names, commands and reasons come from the client's file, which may be a
// cloned repository's .vscode/mcp.json: the report goes out through
// termLines.
func writeImportReport(w io.Writer, r *importer.Result) error {
	var bw strings.Builder
	fmt.Fprintf(&bw, "Read %s config: %s\n", r.Client, strings.Join(r.Read, ", "))
	if r.DryRun {
		fmt.Fprintln(&bw, "Dry run: nothing was written.")
	}
	file := ""
	for _, e := range r.Entries {
		if e.File != file {
			file = e.File
			fmt.Fprintf(&bw, "\n%s\n", file)
		}
		what := e.Where
		if e.As != "" && e.As != e.Name && e.Outcome == importer.Imported {
			what += fmt.Sprintf(" as %q", e.As)
		}
		fmt.Fprintf(&bw, "  %-10s %s: %s\n", e.Outcome, what, e.Reason)
		for _, n := range e.Notes {
			fmt.Fprintf(&bw, "             - %s\n", n)
		}
	}
	if len(r.Entries) == 0 {
		fmt.Fprintln(&bw, "\nNo servers found.")
	}
	fmt.Fprintln(&bw)

	verb := func(done, would string) string {
		if r.DryRun {
			return would
		}
		return done
	}
	switch {
	case len(r.Added) > 0:
		fmt.Fprintf(&bw, "%s %d %s to %s: %s.", verb("Added", "Would add"), len(r.Added), plural(len(r.Added), "server", "servers"),
			r.Config, strings.Join(r.Added, ", "))
		if !r.DryRun {
			fmt.Fprint(&bw, " A running Switchboard applies the change by itself.")
		}
		fmt.Fprintln(&bw)
	default:
		fmt.Fprintf(&bw, "Nothing to add to %s.\n", r.Config)
	}
	for _, p := range r.ConfigProblems {
		fmt.Fprintf(&bw, "Note: Switchboard's config already had a problem, left as it is: %s\n", p)
	}
	for _, rw := range r.Rewrites {
		fmt.Fprintf(&bw, "%s %s to %s\n", verb("Backed up", "Would back up"), rw.File, rw.Backup)
		fmt.Fprintf(&bw, "%s %s: %s %s through \"switchboard connect NAME\".\n", verb("Rewrote", "Would rewrite"), rw.File,
			strings.Join(rw.Servers, ", "), verb(plural(len(rw.Servers), "now runs", "now run"), plural(len(rw.Servers), "would run", "would run")))
	}
	var notRewritten []string
	if r.RewriteClient {
		for _, e := range r.Entries {
			if e.Outcome == importer.Imported && e.Disabled && !e.Rewritten {
				notRewritten = append(notRewritten, e.Name)
			}
		}
	}
	if len(notRewritten) > 0 {
		fmt.Fprintf(&bw, "Not rewritten: %s (disabled in Switchboard until filled in; point the client at `switchboard connect NAME` once enabled).\n",
			strings.Join(notRewritten, ", "))
	}
	for _, n := range r.Notes {
		fmt.Fprintln(&bw, n)
	}
	_, err := io.WriteString(w, termLines(bw.String()))
	return err
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
