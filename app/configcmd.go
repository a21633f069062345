package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/importer"
)

// ErrInvalidConfig means `config check` found problems; they have been
// printed.
var ErrInvalidConfig = errors.New("the config is not valid")

// CheckConfig is `switchboard config check [FILE]`: it validates file
// (default: the running pool's config, else the default location), prints
// every problem, and when a pool is running prints what the file would
// change in it. It returns ErrInvalidConfig (wrapped) for a bad file.
func CheckConfig(ctx context.Context, file string, w io.Writer) error {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	st, running := runningStatus(ctx)
	if file == "" {
		if running && st.Config != "" {
			file = st.Config
		} else {
			paths, err := ResolvePaths()
			if err != nil {
				return err
			}
			file = paths.Config
		}
	}
	f, err := config.Load(file)
	if err != nil {
		var ce *config.Error
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("config check: no config at %s (Switchboard writes a starter config there on its first start)", file)
		}
		if !errors.As(err, &ce) {
			return fmt.Errorf("config check: %w", err)
		}
		fmt.Fprintf(bw, "%s: %d %s:\n", file, len(ce.Problems), plural(len(ce.Problems), "problem", "problems"))
		envProblem := false
		for _, p := range ce.Problems {
			fmt.Fprintf(bw, "  %s\n", p)
			envProblem = envProblem || strings.Contains(p.Msg, "environment variable")
		}
		if envProblem {
			fmt.Fprintln(bw, "(${VAR} references were checked against this shell's environment; Switchboard expands them from its own.)")
		}
		if running {
			fmt.Fprintln(bw, "The running Switchboard keeps its last good config until this file is fixed.")
		}
		return fmt.Errorf("%w: %s", ErrInvalidConfig, file)
	}

	servers, _ := f.PoolServers(os.LookupEnv)
	var names []string
	for _, s := range servers {
		names = append(names, s.Name)
	}
	fmt.Fprintf(bw, "%s: valid, %d %s", file, len(names), plural(len(names), "server", "servers"))
	if len(names) > 0 {
		fmt.Fprintf(bw, " (%s)", strings.Join(names, ", "))
	}
	fmt.Fprintln(bw)
	if remote := f.Remote(); len(remote) > 0 {
		fmt.Fprintf(bw, "  remote (URL) servers, not pooled: %s\n", strings.Join(remote, ", "))
	}
	for _, u := range f.Unknown() {
		fmt.Fprintf(bw, "  unknown field, kept but not used: %s\n", u)
	}

	if !running {
		fmt.Fprintln(bw, "No Switchboard is running; nothing to compare with.")
		return nil
	}
	old, source, err := runningConfig(ctx, st)
	if err != nil {
		fmt.Fprintf(bw, "Switchboard is running (pid %d) but its config could not be read: %v\n", st.PID, err)
		return nil
	}
	fmt.Fprintf(bw, "Compared with the running Switchboard (pid %d, %s):\n", st.PID, source)
	writeDiff(bw, config.Diff(old, f))
	if st.ConfigError != nil {
		fmt.Fprintf(bw, "The running Switchboard reports a config error: %s\n", *st.ConfigError)
	}
	return nil
}

// runningStatus asks the running pool for its status, briefly: no pool is
// a normal answer here.
func runningStatus(ctx context.Context) (control.Status, bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := FetchStatus(ctx)
	return st, err == nil
}

// runningConfig is the config the pool runs: from the control API's
// GET /v1/config when the pool serves it, else the pool's config file as
// it is on disk now (which differs from what runs if the file was edited
// since the last good reload).
func runningConfig(ctx context.Context, st control.Status) (*config.File, string, error) {
	var f config.File
	c, err := Control()
	if err == nil {
		err = c.Config(ctx, &f)
	}
	if err == nil {
		return &f, "its running config from " + st.Config, nil
	}
	if st.Config == "" {
		return nil, "", err
	}
	data, rerr := config.ReadFile(st.Config)
	if rerr != nil {
		return nil, "", rerr
	}
	g, derr := config.Decode(data)
	if derr != nil {
		return nil, "", derr
	}
	return g, "its config file " + st.Config + " as it is on disk now", nil
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
		if c.Restarts {
			how = "new child for new requests; the old one finishes what is in flight"
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

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// ImportOptions are the flags of `switchboard import`.
type ImportOptions struct {
	From          string // claude-desktop, claude-code, cursor or vscode
	File          string // read this file instead of the client's known locations
	Config        string // Switchboard config to merge into; default: the running pool's, else the default location
	DryRun        bool
	RewriteClient bool
}

// Import is `switchboard import`: it merges the client's stdio servers
// into Switchboard's config (a running pool picks the change up by
// itself) and, with RewriteClient, points the client's entries at
// `switchboard connect NAME`. It prints exactly what it did.
func Import(ctx context.Context, opts ImportOptions, w io.Writer) error {
	client, err := importer.ParseClient(opts.From)
	if err != nil {
		return err
	}
	env, err := importer.OSEnv()
	if err != nil {
		return err
	}
	cfg := opts.Config
	if cfg == "" {
		if st, ok := runningStatus(ctx); ok && st.Config != "" {
			cfg = st.Config
		} else {
			paths, err := ResolvePaths()
			if err != nil {
				return err
			}
			cfg = paths.Config
		}
	}
	connect, note := connectCommand()
	res, err := importer.Import(importer.Options{
		Client: client, File: opts.File, Config: cfg, Env: env,
		DryRun: opts.DryRun, RewriteClient: opts.RewriteClient, Connect: connect,
	})
	if res != nil {
		if note != "" && len(res.Rewrites) > 0 {
			res.Notes = append(res.Notes, note)
		}
		if werr := res.WriteText(w); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// connectCommand is the command rewritten client entries run: plain
// "switchboard" when that is on PATH (it survives upgrades), else this
// executable's absolute path.
func connectCommand() (string, string) {
	if _, err := exec.LookPath("switchboard"); err == nil {
		return "switchboard", ""
	}
	exe, err := os.Executable()
	if err != nil {
		return "switchboard", "switchboard is not on PATH: make sure the client can find it."
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return exe, fmt.Sprintf("switchboard is not on PATH, so the rewritten entries run %s; rewrite them if it moves.", exe)
}
