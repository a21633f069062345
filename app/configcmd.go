package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/importer"
	"github.com/switchboard-mcp/switchboard/app/launch"
)

// ErrInvalidConfig means `config check` found problems; ConfigCheck.Problems
// lists them.
var ErrInvalidConfig = errors.New("the config is not valid")

// ConfigCheck is what `switchboard config check` found: the file's
// problems, or what it declares and what it would change in the running
// pool. cmd/switchboard renders it.
type ConfigCheck struct {
	File string
	// Problems is set when the file is not valid; the rest then stays
	// empty but Unknown, as far as the file reads, and Running.
	Problems []config.Problem
	// EnvChecked says a problem or NotStarted came from a ${VAR}
	// reference, which was checked against this shell's environment, not
	// the pool's.
	EnvChecked bool
	Servers    []string // the pooled servers the file declares
	// NotStarted are warnings, not problems: servers that would not start
	// because a ${VAR} of theirs is not set, or their name is not one
	// clients can use (saying what to name them); the others run.
	NotStarted []config.Problem
	// Warnings are other reasons a server would not start (a cwd that
	// does not exist), checked on this machine now.
	Warnings []config.Problem
	Remote   []string // URL servers, kept but not pooled
	Unknown  []string // fields kept but not used
	// Running is the pool running now, if any.
	Running *RunningConfig
}

// RunningConfig is the running pool as `config check` compares the file
// with it.
type RunningConfig struct {
	PID int
	// Source says what the file was compared with: the config the pool
	// runs, or (an older pool) its file as it is on disk now.
	Source string
	// Diff is what the file would change; ReadErr says why there is none.
	Diff    config.DiffResult
	ReadErr error
	// ConfigError is the running pool's own config error, if any.
	ConfigError *string
	// RunsFile says the pool runs the checked file: one with problems
	// leaves it on its last good config.
	RunsFile bool
}

// CheckConfig is `switchboard config check [FILE]`: it validates file
// (default: the running pool's config, else the default location) and,
// when a pool is running, works out what the file would change in it.
// For a file with problems it returns the check and an error wrapping
// ErrInvalidConfig.
func CheckConfig(ctx context.Context, file string) (ConfigCheck, error) {
	st, running, err := runningStatus(ctx)
	if err != nil {
		return ConfigCheck{File: file}, fmt.Errorf("config check: cannot compare with the running Switchboard: %w", err)
	}
	paths, err := ResolvePaths()
	if err != nil {
		return ConfigCheck{}, err
	}
	if file == "" {
		file = launch.ConfigOf(paths) // what the next pool would run
		if running && st.Config != "" {
			file = st.Config
		}
	}
	chk := ConfigCheck{File: file}
	if running {
		chk.Running = &RunningConfig{PID: st.PID, ConfigError: st.ConfigError, RunsFile: st.Config != "" && samePath(st.Config, file)}
	}
	f, err := config.Load(file)
	if err != nil {
		var ce *config.Error
		if errors.Is(err, os.ErrNotExist) {
			if samePath(file, paths.Config) {
				// Only there: a pool started with --config writes none.
				return chk, fmt.Errorf("config check: no config at %s (Switchboard writes a starter config there when it starts without one)", file)
			}
			return chk, fmt.Errorf("config check: no config at %s", file)
		}
		if !errors.As(err, &ce) {
			return chk, fmt.Errorf("config check: %w", err)
		}
		chk.Problems, chk.Unknown = ce.Problems, ce.Unknown
		for _, p := range ce.Problems {
			chk.EnvChecked = chk.EnvChecked || strings.Contains(p.Msg, "environment variable")
		}
		return chk, fmt.Errorf("%w: %s", ErrInvalidConfig, file)
	}

	servers, _ := f.PoolServers(os.LookupEnv)
	for _, s := range servers {
		chk.Servers = append(chk.Servers, s.Name)
		if e := f.Servers[s.Name]; e.Cwd != "" && !s.Disabled {
			if why := dirProblem(s.Cwd); why != "" {
				chk.Warnings = append(chk.Warnings, config.Problem{Field: "mcpServers." + s.Name + ".cwd", Msg: why})
			}
		}
	}
	chk.NotStarted = f.NotStarted(os.LookupEnv)
	for _, p := range chk.NotStarted {
		chk.EnvChecked = chk.EnvChecked || strings.Contains(p.Msg, "environment variable")
	}
	chk.Remote, chk.Unknown = f.Remote(), f.Unknown()
	if !running {
		return chk, nil
	}
	old, source, err := runningConfig(ctx, st)
	if err != nil {
		chk.Running.ReadErr = err
		return chk, nil
	}
	// Both sides as the pool runs them: an --http address stands in for
	// either file's http.listen.
	chk.Running.Source = source
	chk.Running.Diff = config.Diff(old.WithHTTPListen(st.HTTPListen), f.WithHTTPListen(st.HTTPListen), os.LookupEnv)
	return chk, nil
}

// dirProblem says why dir cannot be a server's working directory, or "".
func dirProblem(dir string) string {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "directory " + dir + " does not exist; the server cannot start until it does"
	case err != nil:
		return fmt.Sprintf("%v; the server cannot start in it", err)
	case !fi.IsDir():
		return dir + " is not a directory; the server cannot start in it"
	}
	return ""
}

// runningStatus asks the running pool for its status: running is false,
// with no error, when no pool runs (no one listens on the control socket:
// a normal answer here). A pool that runs but does not answer within the
// question's bound (stopped, stuck) is an error that Is
// control.ErrUnresponsive: which config it runs is unknown, so it is no
// more "no pool" than a pool of another config is.
func runningStatus(ctx context.Context) (st control.Status, running bool, err error) {
	st, err = FetchStatus(ctx)
	switch {
	case err == nil:
		return st, true, nil
	case errors.Is(err, ErrNoPool):
		return control.Status{}, false, nil
	}
	return control.Status{}, false, err
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
// itself) and, with RewriteClient, points the client's entries at this
// binary's `connect` with the entries setup writes (connectThisBinary),
// which reach this environment's pool: it is refused when the servers go
// to another config. Those rewrites join the client's setup record, for
// `setup --undo` (rememberRewrites). A dry run writes nothing, not even
// the edit lock. The result says exactly what it did, also when it fails
// part way.
func Import(ctx context.Context, opts ImportOptions) (*importer.Result, error) {
	client, err := importer.ParseClient(opts.From)
	if err != nil {
		return nil, err
	}
	env, err := importer.OSEnv()
	if err != nil {
		return nil, err
	}
	paths, err := ResolvePaths()
	if err != nil {
		return nil, err
	}
	cfg := opts.Config
	if cfg == "" {
		st, ok, err := runningStatus(ctx)
		if err != nil {
			return nil, fmt.Errorf("import changed nothing: it adds the servers to the running Switchboard's config, and %w", err)
		}
		cfg = paths.Config
		if ok && st.Config != "" {
			cfg = st.Config
		}
	}
	// Rewriting, a project's file is left alone unless named, as setup does.
	iopts := importer.Options{Client: client, File: opts.File, Config: cfg, Env: env,
		DryRun: opts.DryRun, RewriteClient: opts.RewriteClient, UserOnly: opts.RewriteClient}
	if opts.RewriteClient {
		if err := connectThisBinary(ctx, paths, "import --rewrite-client", &iopts); err != nil {
			return nil, err
		}
		if !samePath(cfg, paths.Config) {
			// The entries pin this environment, whose pool reads
			// paths.Config; no pin places a config at cfg.
			return nil, fmt.Errorf("import --rewrite-client writes client entries that reach the pool of this environment's config %s, "+
				"but the servers would be added to %s: those clients would not find them; "+
				"import into %s without --rewrite-client, or run it from the environment whose config that is", paths.Config, cfg, cfg)
		}
	}
	if opts.DryRun {
		// It writes nothing: no lock, nor the directory for one.
		return importer.Import(iopts)
	}
	// Another setup or import at once would write the config from what
	// it read before this one's servers were added.
	lock, err := lockEdits(paths)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	res, err := importer.Import(iopts)
	return res, rememberRewrites(paths, client, res, err)
}

// connectShim is the small switchboard-connect.exe beside exe (for
// "switchboard", found on PATH), which clients on Windows run for their
// sessions (importer.Options.ConnectShim), or "" on other systems (there
// `switchboard connect` execs the shim itself) and when it is not there.
// Each session keeps its process for hours, and the full binary links the
// GUI and SQLite.
func connectShim(goos, exe string) string {
	if goos != "windows" {
		return ""
	}
	if !filepath.IsAbs(exe) {
		found, err := exec.LookPath(exe)
		if err != nil {
			return ""
		}
		exe = found
	}
	shim := filepath.Join(filepath.Dir(exe), "switchboard-connect.exe")
	if fi, err := os.Stat(shim); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	return shim
}
