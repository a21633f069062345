// Command switchboard is the Switchboard tray app and its CLI. It only
// parses arguments, calls package app, and maps errors to exit codes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/switchboard-mcp/switchboard/app"
	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/version"
)

type cli struct {
	Tray      trayCmd      `cmd:"" default:"withargs" help:"Run the tray app with the pool in-process (the default)."`
	Serve     serveCmd     `cmd:"" help:"Run the pool headless, for servers, CI and tests."`
	Connect   connectCmd   `cmd:"" help:"Relay stdin/stdout to server NAME of the running pool (what MCP clients start)."`
	Status    statusCmd    `cmd:"" help:"Show backends with counts of sessions and requests in flight."`
	Leaks     leaksCmd     `cmd:"" help:"List leaked MCP backends: earlier runs' children still alive, orphans matching a configured server."`
	Kill      killCmd      `cmd:"" help:"Kill a leaked MCP backend with its process group (or all of them with --all-leaked)."`
	Config    configCmd    `cmd:"" help:"Check the config file."`
	Import    importCmd    `cmd:"" help:"Import MCP servers from Claude Desktop, Claude Code, Cursor or VS Code."`
	History   historyCmd   `cmd:"" help:"Show recorded requests, newest first (works with or without a running pool)."`
	Hangs     hangsCmd     `cmd:"" help:"Show requests in flight too long: live, and abandoned by earlier runs."`
	Setup     setupCmd     `cmd:"" help:"Point a client (claude-code, claude-desktop, cursor, vscode) at Switchboard, with a backup; --undo puts back the entries it rewrote."`
	Restart   restartCmd   `cmd:"" help:"Restart server NAME's children (a failed server gets a fresh restart budget)."`
	Stop      stopCmd      `cmd:"" help:"Stop server NAME's children now; its next request starts them again."`
	HTTPToken httpTokenCmd `cmd:"" name:"http-token" help:"Print the HTTP front door's bearer token (--rotate replaces it)."`
	Autostart autostartCmd `cmd:"" help:"Start Switchboard at login: on, off or status."`
	Stacks    stacksCmd    `cmd:"" help:"Print the running pool's goroutine stacks: what each part of it waits on, for a bug report about a hang."`
	Upgrade   upgradeCmd   `cmd:"" help:"Replace the running pool's program with a new binary in place: children keep running, sessions resume."`
	Quit      quitCmd      `cmd:"" help:"Stop the running pool as the tray's Quit does, and wait for its process to exit."`
	Version   versionCmd   `cmd:"" help:"Print the version, commit, build date and Go version."`
}

type trayCmd struct {
	Config    string `help:"Config file (default: $SWITCHBOARD_HOME/config.json)." type:"path"`
	HTTP      string `name:"http" help:"Listen address of the HTTP front door, e.g. 127.0.0.1:7777."`
	Dashboard bool   `help:"Open the dashboard window at start."`
	// StartedByClient is how a client's shim starts the tray (launch.Args).
	StartedByClient bool `name:"started-by-client" hidden:"" help:"Started by a client: without a display, run headless and stop when idle."`
	// Env is how the Windows login item, a command line with no
	// environment of its own, names the home it starts (app.Autostart).
	Env []string `name:"env" hidden:"" sep:"none" placeholder:"KEY=VALUE" help:"Set SWITCHBOARD_HOME, XDG_CONFIG_HOME or XDG_STATE_HOME before starting."`
}

func (c *trayCmd) Run(ctx context.Context) error {
	if err := app.UseHomeEnv(c.Env); err != nil {
		return err
	}
	return app.RunTray(ctx, app.Options{ConfigPath: c.Config, HTTPListen: c.HTTP, HeadlessExitWhenIdle: c.StartedByClient}, c.Dashboard)
}

type serveCmd struct {
	Config       string `help:"Config file (default: $SWITCHBOARD_HOME/config.json)." type:"path"`
	HTTP         string `name:"http" help:"Listen address of the HTTP front door, e.g. 127.0.0.1:7777."`
	ExitWhenIdle bool   `help:"Stop once no session was seen for autostart.idleExit (how clients start the pool)."`
}

func (c *serveCmd) Run(ctx context.Context) error {
	// For `switchboard bench --cpuprofile`: a CPU profile of the whole run.
	if path := os.Getenv("SWITCHBOARD_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("SWITCHBOARD_CPUPROFILE: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("SWITCHBOARD_CPUPROFILE: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	// For `switchboard-bench --trace`: an execution trace of the whole run.
	if path := os.Getenv("SWITCHBOARD_TRACE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("SWITCHBOARD_TRACE: %w", err)
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return fmt.Errorf("SWITCHBOARD_TRACE: %w", err)
		}
		defer trace.Stop()
	}
	return app.Serve(ctx, app.Options{ConfigPath: c.Config, HTTPListen: c.HTTP, ExitWhenIdle: c.ExitWhenIdle})
}

type connectCmd struct {
	Name string `arg:"" help:"Server name from the config."`
}

// Run becomes the small switchboard-connect when it can, else relays
// in-process. Either way SIGINT, SIGTERM and SIGHUP end the process,
// killed by the signal: the small program leaves them alone, and so does
// this one (main catches them for a context the relay does not look at).
func (c *connectCmd) Run(release signalRelease) error {
	release()
	execSmallShim(c.Name)
	return app.Connect(c.Name, os.Stdin, os.Stdout)
}

// signalRelease gives the stop signals back their default action (main's
// NotifyContext stop); SIGHUP ignored from the start stays ignored.
type signalRelease func()

type statusCmd struct {
	JSON bool `name:"json" help:"Print JSON (stable; see the README), which lists each session and request in flight."`
}

func (c *statusCmd) Run(ctx context.Context) error {
	st, err := app.FetchStatus(ctx)
	if errors.Is(err, app.ErrNoPool) {
		return c.noPool()
	}
	if errors.Is(err, control.ErrUnresponsive) && c.JSON {
		if perr := printJSON(os.Stdout, app.UnresponsiveStatus(err)); perr != nil {
			return perr
		}
	}
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(os.Stdout, st)
	}
	return printStatus(os.Stdout, st, time.Now())
}

// noPool is status with no pool running for this home: a line on stderr
// that says which home, and with --json an object a script can read on
// stdout as well (running false, no sessions, backends or requests);
// exit 3 either way (exitCode).
func (c *statusCmd) noPool() error {
	paths, err := app.ResolvePaths()
	if err != nil {
		return fmt.Errorf("%w, and %w", app.ErrNoPool, err)
	}
	if c.JSON {
		if err := printJSON(os.Stdout, app.NoPoolStatus(paths)); err != nil {
			return err
		}
	}
	where := "the config " + paths.Config
	if h := os.Getenv("SWITCHBOARD_HOME"); h != "" {
		where = "SWITCHBOARD_HOME=" + h
	}
	return noPoolError("no Switchboard is running for " + where + " (start one with `switchboard serve` or the tray app)")
}

// noPoolError is app.ErrNoPool said for the user: exit 3 (exitCode).
type noPoolError string

func (e noPoolError) Error() string { return string(e) }
func (e noPoolError) Unwrap() error { return app.ErrNoPool }

type restartCmd struct {
	Name string `arg:"" help:"Server name from the config."`
}

func (c *restartCmd) Run(ctx context.Context) error { return app.RestartServer(ctx, c.Name) }

type stopCmd struct {
	Name string `arg:"" help:"Server name from the config."`
}

func (c *stopCmd) Run(ctx context.Context) error { return app.StopServer(ctx, c.Name) }

type quitCmd struct{}

func (quitCmd) Run(ctx context.Context) error {
	pid, err := app.Quit(ctx)
	if errors.Is(err, app.ErrNoPool) {
		fmt.Println("no Switchboard is running: nothing to quit")
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Printf("Switchboard (pid %d) has quit\n", pid)
	return nil
}

type stacksCmd struct{}

func (stacksCmd) Run(ctx context.Context) error { return app.Stacks(ctx, os.Stdout) }

type httpTokenCmd struct {
	Rotate bool `help:"Replace the token; clients using the old one get 401 from now on."`
}

func (c *httpTokenCmd) Run(ctx context.Context) error {
	tok, err := app.HTTPToken(ctx, c.Rotate)
	if err != nil {
		return err
	}
	fmt.Println(tok)
	return nil
}

type autostartCmd struct {
	Action string `arg:"" enum:"on,off,status" default:"status" help:"on, off or status."`
	JSON   bool   `name:"json" help:"Print {enabled, where, command, env, config} as JSON."`
}

func (c autostartCmd) Run() error {
	st, err := app.Autostart(c.Action)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(os.Stdout, st)
	}
	if !st.Enabled {
		fmt.Printf("off: nothing starts at login (%s)\n", st.Where)
		return nil
	}
	fmt.Printf("on: %s starts at login (%s)\n", st.Command, st.Where)
	home := "the default"
	if len(st.Env) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(st.Env)) {
			kv = append(kv, k+"="+st.Env[k])
		}
		home = strings.Join(kv, " ")
	}
	if st.Config != "" {
		home += ", config " + st.Config
	}
	fmt.Printf("home: %s\n", home)
	if st.ShellConfig != "" {
		fmt.Printf("note: this environment's Switchboard reads %s; `switchboard autostart on` here starts that one at login instead\n", st.ShellConfig)
	}
	return nil
}

type versionCmd struct {
	JSON bool `name:"json" help:"Print {version, commit, buildDate, go, handover} as JSON."`
}

func (c versionCmd) Run() error {
	info := version.Get()
	if c.JSON {
		return printJSON(os.Stdout, app.VersionJSON())
	}
	fmt.Println(info)
	return nil
}

type upgradeCmd struct {
	Binary string `name:"binary" type:"path" help:"The new switchboard binary (default: this command's own, e.g. the one a package just installed)."`
	JSON   bool   `name:"json" help:"Print {pid, binary, from, to, carryChildren, why, carriedChildren} as JSON."`
}

// upgradeResult is the JSON of \`switchboard upgrade --json\`.
type upgradeResult struct {
	control.UpgradeAccepted
	CarriedChildren []int `json:"carriedChildren"`
}

func (c *upgradeCmd) Run(ctx context.Context) error {
	binary := c.Binary
	if binary == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("upgrade: which binary? %w (give --binary)", err)
		}
		binary = self
	}
	acc, st, err := app.Upgrade(ctx, binary)
	if err != nil {
		return err
	}
	res := upgradeResult{UpgradeAccepted: acc, CarriedChildren: st.Upgrade.CarriedChildren}
	if c.JSON {
		return printJSON(os.Stdout, res)
	}
	fmt.Printf("upgraded pool %d in place: %s -> %s (%s)\n", acc.PID, acc.From.Version, acc.To.Version, acc.Binary)
	if acc.CarryChildren {
		fmt.Printf("children carried over, not restarted: %v\n", res.CarriedChildren)
	} else {
		fmt.Printf("children restarted: %s\n", acc.Why)
	}
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// stopSignals end a command's context: the pool (serve, the tray) stops
// as it does on Quit. SIGHUP is one of them: the terminal running
// `switchboard serve` closing is a stop, not a crash. A process started
// with SIGHUP ignored (nohup) keeps ignoring it.
func stopSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals()...)
	defer stop()
	var c cli
	parser := kong.Must(&c,
		kong.Name("switchboard"),
		kong.Description("Switchboard shares one supervised MCP server process among all your AI coding sessions."),
		kong.BindTo(ctx, (*context.Context)(nil)),
		kong.Bind(signalRelease(stop)),
		kong.Vars{"historyStatuses": strings.Join(app.HistoryStatuses(), ", ")},
	)
	args := helpAsFlag(os.Args[1:])
	k, err := parser.Parse(args)
	if err != nil {
		os.Exit(usageError(parser, args, err))
	}
	if err := k.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "switchboard: %v\n", err)
		os.Exit(exitCode(err))
	}
}

// helpAsFlag reads `switchboard help [COMMAND…]`, which people type as
// they do for git and go, as `switchboard [COMMAND…] --help`.
func helpAsFlag(args []string) []string {
	if len(args) == 0 || args[0] != "help" {
		return args
	}
	return append(slices.Clone(args[1:]), "--help")
}

// exitUsage is the exit code of a command line that does not parse: 2,
// as Go's flag package and most Unix tools use.
const exitUsage = 2

// usageError writes why the command line does not parse, and the usage
// that fits, to stderr, and returns exitUsage. A first word that names no
// command is an unknown command: kong takes it for an argument of the
// default command (the tray), and would show the tray's usage.
func usageError(parser *kong.Kong, args []string, err error) int {
	parser.Stdout = os.Stderr // the usage, after a mistake, is no output
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") && !slices.ContainsFunc(parser.Model.Children,
		func(n *kong.Node) bool { return n.Type == kong.CommandNode && n.Name == args[0] }) {
		root := &kong.Context{Kong: parser, Path: []*kong.Path{{App: parser.Model, Flags: parser.Model.Flags}}}
		_ = kong.DefaultHelpPrinter(kong.HelpOptions{Compact: true, ValueFormatter: kong.DefaultHelpValueFormatter}, root)
		fmt.Fprintln(os.Stderr)
		fmt.Fprintf(os.Stderr, "switchboard: unknown command %q\n", args[0])
		return exitUsage
	}
	var pe *kong.ParseError
	if errors.As(err, &pe) {
		_ = pe.Context.PrintUsage(false)
		fmt.Fprintln(os.Stderr)
	}
	fmt.Fprintf(os.Stderr, "switchboard: %v\n", err)
	return exitUsage
}

// exitCode is the exit status of a command that failed: 3 when no pool
// runs, 4 when one runs already, else 1, a config check's problems too
// (2 is a command line that does not parse, exitUsage).
func exitCode(err error) int {
	switch {
	case errors.Is(err, app.ErrNoPool):
		return 3
	case errors.Is(err, app.ErrAlreadyRunning):
		return 4
	}
	return 1
}
