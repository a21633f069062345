package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/switchboard-mcp/switchboard/app"
	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/importer"
)

type configCmd struct {
	Check configCheckCmd `cmd:"" help:"Validate a config file and show what it would change in the running pool."`
}

type configCheckCmd struct {
	File string `arg:"" optional:"" type:"path" help:"Config file (default: the running pool's, else $SWITCHBOARD_HOME/config.json)."`
}

func (c *configCheckCmd) Run(ctx context.Context) error {
	chk, err := app.CheckConfig(ctx, c.File)
	if err != nil && !errors.Is(err, app.ErrInvalidConfig) {
		return err
	}
	if werr := writeConfigCheck(os.Stdout, chk); werr != nil && err == nil {
		err = werr
	}
	return err
}

// writeConfigCheck prints what `config check` found: every problem, or the
// servers the file declares and what it would change in the running pool.
//
// Everything in it may come from the file (server names, problems quoting
// its text), so it goes out through termLines, as a child's stderr does.
func writeConfigCheck(w io.Writer, chk app.ConfigCheck) error {
	var out strings.Builder
	defer func() { _, _ = io.WriteString(w, termLines(out.String())) }()
	bw := bufio.NewWriter(&out)
	if len(chk.Problems) > 0 {
		fmt.Fprintf(bw, "%s: %d %s:\n", chk.File, len(chk.Problems), plural(len(chk.Problems), "problem", "problems"))
		for _, p := range chk.Problems {
			fmt.Fprintf(bw, "  %s\n", p)
		}
		if chk.EnvChecked {
			fmt.Fprintln(bw, "(${VAR} references were checked against this shell's environment; Switchboard expands them from its own.)")
		}
		writeUnknown(bw, chk.Unknown)
		if chk.Running != nil && chk.Running.RunsFile {
			fmt.Fprintln(bw, "The running Switchboard keeps its last good config until this file is fixed.")
		}
		return bw.Flush()
	}
	fmt.Fprintf(bw, "%s: valid, %d %s", chk.File, len(chk.Servers), plural(len(chk.Servers), "server", "servers"))
	if len(chk.Servers) > 0 {
		fmt.Fprintf(bw, " (%s)", strings.Join(chk.Servers, ", "))
	}
	fmt.Fprintln(bw)
	for _, p := range chk.NotStarted {
		fmt.Fprintf(bw, "  warning: %s\n", p)
	}
	if len(chk.NotStarted) > 0 && chk.EnvChecked {
		fmt.Fprintln(bw, "(${VAR} references were checked against this shell's environment; Switchboard expands them from its own.)")
	}
	for _, p := range chk.Warnings {
		fmt.Fprintf(bw, "  warning: %s\n", p)
	}
	if len(chk.Remote) > 0 {
		fmt.Fprintf(bw, "  remote (URL) servers, not pooled: %s\n", strings.Join(chk.Remote, ", "))
	}
	writeUnknown(bw, chk.Unknown)
	switch r := chk.Running; {
	case r == nil:
		fmt.Fprintln(bw, "No Switchboard is running; nothing to compare with.")
	case r.ReadErr != nil:
		fmt.Fprintf(bw, "Switchboard is running (pid %d) but its config could not be read: %v\n", r.PID, r.ReadErr)
	default:
		fmt.Fprintf(bw, "Compared with the running Switchboard (pid %d, %s):\n", r.PID, r.Source)
		writeDiff(bw, r.Diff)
		if r.ConfigError != nil {
			fmt.Fprintf(bw, "The running Switchboard reports a config error: %s\n", *r.ConfigError)
		}
	}
	return bw.Flush()
}

// writeUnknown lists the fields Switchboard does not know: a misspelled
// one lands there, so they are shown whether the file is valid or not.
func writeUnknown(w io.Writer, unknown []string) {
	for _, u := range unknown {
		fmt.Fprintf(w, "  unknown field, kept but not used: %s\n", u)
	}
}

func writeDiff(w io.Writer, d config.DiffResult) {
	if d.Empty() {
		fmt.Fprintf(w, "  no changes (%d %s unchanged)\n", len(d.Unchanged), plural(len(d.Unchanged), "server", "servers"))
		return
	}
	for _, n := range d.Added {
		fmt.Fprintf(w, "  + %s: new server\n", n)
	}
	for _, n := range d.Removed {
		fmt.Fprintf(w, "  - %s: removed; takes no new sessions, finishes what is in flight, then stops\n", n)
	}
	for _, c := range d.Changed {
		how := "applies at once, the child keeps running"
		switch {
		case c.Restarts:
			how = "new child for new requests; the old one finishes what is in flight"
		case c.Stops:
			how = "its requests are refused, saying why; the old child finishes what is in flight, then stops"
		}
		fmt.Fprintf(w, "  ~ %s: %s changed; %s\n", c.Name, strings.Join(c.Fields, ", "), how)
	}
	if len(d.Unchanged) > 0 {
		fmt.Fprintf(w, "  = unchanged: %s\n", strings.Join(d.Unchanged, ", "))
	}
	if len(d.Settings) > 0 {
		fmt.Fprintf(w, "  settings changed: %s\n", strings.Join(d.Settings, ", "))
	}
}

type importCmd struct {
	From          string `required:"" enum:"claude-desktop,claude-code,cursor,vscode" placeholder:"CLIENT" help:"Client to import from: claude-desktop, claude-code, cursor or vscode."`
	File          string `type:"path" placeholder:"PATH" help:"Read this file instead of the client's known locations."`
	Config        string `type:"path" placeholder:"PATH" help:"Switchboard config to merge into (default: the running pool's, else $SWITCHBOARD_HOME/config.json)."`
	DryRun        bool   `help:"Show what would be done; write nothing."`
	RewriteClient bool   `help:"Also rewrite the client's config so that each server now in Switchboard runs this binary's 'connect NAME', with the entries setup writes (a timestamped backup is written next to it)."`
}

func (c *importCmd) Run(ctx context.Context) error {
	res, err := app.Import(ctx, app.ImportOptions{From: c.From, File: c.File, Config: c.Config,
		DryRun: c.DryRun, RewriteClient: c.RewriteClient})
	return reportImport(res, err)
}

// reportImport prints what an import or a setup did, also when it failed
// part way, and returns the first error.
func reportImport(res *importer.Result, err error) error {
	if res == nil {
		return err
	}
	if werr := writeImportReport(os.Stdout, res); werr != nil && err == nil {
		err = werr
	}
	return err
}

type setupCmd struct {
	Client string `arg:"" enum:"claude-code,claude-desktop,cursor,vscode" help:"claude-code, claude-desktop, cursor or vscode."`
	Undo   bool   `help:"Put back, from the backup setup made, the entries setup rewrote; the rest of the client's config stays as it is now."`
	File   string `help:"The client's config file to point at Switchboard, instead of the client's known locations (e.g. a workspace's .vscode/mcp.json); a project's file in the current directory is rewritten only when named so." type:"path"`
}

func (c *setupCmd) Run(ctx context.Context) error {
	if !c.Undo {
		return reportImport(app.Setup(ctx, c.Client, c.File))
	}
	done, err := app.UndoSetup(c.Client)
	writeUndo(os.Stdout, done)
	return err
}

// writeUndo prints what `setup --undo` put back, and what it left as it
// is: an entry the user changed since is theirs; one whose backup cannot
// give it back still runs through Switchboard, which the line says, with
// what to do (the command then fails as partial, app.UndoSetup).
// Entry paths are keys of a client's file: printed through term.
func writeUndo(w io.Writer, done []importer.Undone) {
	var b strings.Builder
	for _, u := range done {
		if u.KeptAs != "" {
			fmt.Fprintf(&b, "Kept the current %s as %s\n", u.File, u.KeptAs)
		}
		for _, e := range u.Entries {
			switch {
			case e.Left == "":
				fmt.Fprintf(&b, "Put back %s in %s from %s\n", e.Where, u.File, e.Backup)
			case e.Again:
				fmt.Fprintf(&b, "Not put back: %s in %s still runs through Switchboard: %s; edit it by hand, or make the backup readable and run setup --undo again\n", e.Where, u.File, e.Left)
			case e.Lost:
				fmt.Fprintf(&b, "Not put back: %s in %s still runs through Switchboard: %s; edit it by hand\n", e.Where, u.File, e.Left)
			default:
				fmt.Fprintf(&b, "Left %s in %s as it is: %s (before setup, it was as in %s)\n", e.Where, u.File, e.Left, e.Backup)
			}
		}
	}
	io.WriteString(w, termLines(b.String()))
}
