// Package app wires Switchboard together: it loads and watches the
// config, runs the pool and its front doors, serves the control API the
// CLI uses, and shuts everything down in order.
package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/flock"
	"github.com/switchboard-mcp/switchboard/app/leaks"
	"github.com/switchboard-mcp/switchboard/app/localsock"
	"github.com/switchboard-mcp/switchboard/app/mainthread"
	"github.com/switchboard-mcp/switchboard/app/npx"
	"github.com/switchboard-mcp/switchboard/app/version"
	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/store"
)

// Options configure a running instance.
type Options struct {
	// ConfigPath overrides Paths.Config.
	ConfigPath string
	// HTTPListen overrides the config's http.listen.
	HTTPListen string
	Logger     *slog.Logger
	// ExitWhenIdle stops the instance once no session has been seen for
	// the config's autostart.idleExit: how a pool that a client started
	// ends when the user's clients are gone.
	ExitWhenIdle bool
	// HeadlessExitWhenIdle is ExitWhenIdle for RunTray once it runs the
	// pool headless for want of a display: a tray a client started then
	// ends as the headless pool a client starts does.
	HeadlessExitWhenIdle bool

	startOn pool.StartOn // where children are forked: the main thread, when Serve or RunTray has it
	lock    *flock.Lock  // the instance lock, already taken (a tray app taking a headless pool's place)
}

// Instance is a running pool with its front doors and control API. The UI
// holds one to read snapshots and to act.
type Instance struct {
	Paths Paths
	Pool  *pool.Pool
	log   *slog.Logger

	configPath    string
	exitWhenIdle  bool
	lock          *flock.Lock            // the instance lock: one pool per home, held for life
	httpToken     atomic.Pointer[string] // the HTTP front door's bearer token (httptoken.go)
	tokenTurn     chan struct{}          // one at a time changes the token file, with httpToken (httptoken.go)
	history       *historyState          // request history; records nothing when off or unavailable
	reloads       reloadLog              // the latest config reloads, for the dashboard's waterfall
	watchBase     watchBase              // what Start loaded, the config watcher's baseline; set by Start, read by Run
	mu            sync.Mutex             // guards the fields below
	cfg           *config.File
	noConfig      bool // no config has loaded: cfg is an empty stand-in, not to be handed over
	configErr     error
	watchErr      error             // why the config is not watched (keepWatching tries again); nil while it is
	restartNeeded []string          // cfg's settings that differ from what runs until a restart (status's restartNeeded)
	notStarted    map[string]string // cfg's servers disabled for an unset ${VAR}: why, by name
	httpAddr      string            // the HTTP front door's bound address, once listening
	stopRun       func()            // ends Run; nil before Run and once it is ending
	showDashboard func()            // the UI's, for POST /v1/dashboard; nil headless
	upgrade       *upgradePlan

	// Set by Start, then only read.
	started    config.File // the config the pool started with: its settings read only at start run until a restart
	httpListen string      // Options.HTTPListen: the address in place of the config's http.listen; "" if none

	resolver npx.Resolver         // npx servers' resolver: their packages installed under Paths.PackagesDir
	startOn  pool.StartOn         // Options.startOn: set, children can be carried over an upgrade
	upgraded *control.UpgradeInfo // what this program took over from the one it upgraded; nil if none
	carried  *pool.Carried        // what Run's end handed over, for ExecUpgrade
}

// ErrAlreadyRunning means another instance owns this SWITCHBOARD_HOME.
var ErrAlreadyRunning = errors.New("switchboard is already running")

// Serve runs the pool headless until ctx ends: `switchboard serve`. Called
// on the main thread (main's goroutine), it forks the children there, so
// that an upgrade keeps them (mainthread), and execs the upgrade there.
func Serve(ctx context.Context, opts Options) error {
	onMain := mainthread.IsMain()
	if onMain {
		opts.startOn = mainthread.Do
	}
	inst, startLock, err := startServing(ctx, opts)
	if err != nil {
		return err
	}
	released := letClientsInOnceServing(ctx, startLock)
	if !onMain {
		err = inst.Run(ctx)
	} else {
		done := make(chan struct{})
		go func() {
			defer close(done)
			err = inst.Run(ctx)
		}()
		mainthread.Serve(done)
	}
	<-released
	if err != nil {
		return err
	}
	return inst.ExecUpgrade()
}

// startServing is Start for Serve. A pool started by hand (not
// ExitWhenIdle) that finds a headless pool a client started holding the
// instance lock asks it to make way, as the tray app does, and takes its
// place: that pool's sessions resume with this one. The start lock it
// then holds (nil otherwise) keeps clients from starting a pool meanwhile.
// A pool that will not make way (one started by hand, a tray app) keeps
// running, and the error, ErrAlreadyRunning, says why.
func startServing(ctx context.Context, opts Options) (*Instance, *flock.Lock, error) {
	inst, err := Start(opts)
	if !errors.Is(err, ErrAlreadyRunning) || opts.ExitWhenIdle || opts.lock != nil {
		return inst, nil, err
	}
	p, perr := takePlace(ctx, false)
	if perr != nil {
		why := perr.Error()
		if errors.Is(perr, control.ErrConflict) {
			why = strings.TrimPrefix(why, control.ErrConflict.Error()+": ")
		}
		return nil, nil, fmt.Errorf("%w, and it did not make way: %s", err, why)
	}
	fmt.Fprintln(os.Stderr, "switchboard: the headless pool a client started made way; running it here")
	opts.lock = p.lock
	if inst, err = Start(opts); err != nil {
		p.start.Unlock()
		return nil, nil, err
	}
	return inst, p.start, nil
}

// letClientsInOnceServing lets go of startLock (none when nil) once this
// home's pool answers, or after a while: the clients waiting on it then
// find the pool that took the place of theirs, and start none. The
// channel closes once it has.
func letClientsInOnceServing(ctx context.Context, startLock *flock.Lock) <-chan struct{} {
	released := make(chan struct{})
	if startLock == nil {
		close(released)
		return released
	}
	go func() {
		defer close(released)
		awaitControl(ctx, 5*time.Second)
		startLock.Unlock()
	}()
	return released
}

// Start loads the config and prepares the pool, without serving yet.
func Start(opts Options) (*Instance, error) {
	paths, err := ResolvePaths()
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	inst := &Instance{Paths: paths, log: log, configPath: paths.Config, exitWhenIdle: opts.ExitWhenIdle, startOn: opts.startOn,
		tokenTurn: make(chan struct{}, 1), resolver: npx.NewResolver(paths.PackagesDir())}
	if opts.ConfigPath != "" {
		inst.configPath = opts.ConfigPath
	}
	if err := paths.EnsureRunDir(); err != nil {
		return nil, err
	}
	handover, lock := takeHandover(paths, log)
	switch {
	case lock != nil:
		inst.lock = lock
	case opts.lock != nil:
		inst.lock = opts.lock
	case handover != nil:
		// Started by an upgrading program that could not exec into this
		// one: it lets the lock go as it exits.
		if inst.lock, err = flock.Wait(paths.LockFile(), time.Now().Add(handoverLockWait)); err != nil {
			return nil, fmt.Errorf("take over from the upgraded program: %w", err)
		}
		_ = inst.lock.WritePID()
	default:
		if inst.lock, err = lockInstance(paths); err != nil {
			return nil, err
		}
	}
	recordConfig(paths, opts.ConfigPath, log)
	var carried *pool.Carried
	if handover != nil {
		carried = handover.Carried
		inst.upgraded = &control.UpgradeInfo{From: handover.From, At: time.Now(), CarriedChildren: []int{}}
	}
	if carried != nil {
		for _, cc := range carried.Children {
			inst.resolver.Keep(cc.Resolved) // its package version is not pruned under it
		}
	}
	var handedOver []byte
	if handover != nil {
		handedOver = handover.Config
	}
	cfg, runs, startErr := inst.loadStartConfig(opts.ConfigPath == "", handedOver)
	var history *config.History // nil: not known
	if cfg == nil {
		// The settings read only at start are their defaults, but for the
		// history: the file's when they read although the rest does not,
		// else none, which records nothing until a config loads.
		cfg, inst.noConfig = &config.File{}, true
		if ce := (*config.Error)(nil); errors.As(startErr, &ce) {
			history = ce.History
		}
	} else {
		history = &cfg.History
	}
	inst.cfg, inst.configErr = cfg, startErr
	inst.notStarted = notStarted(cfg, nil, log)
	switch tok, err := loadOrCreateToken(HTTPTokenFile(paths)); {
	case err == nil:
		inst.httpToken.Store(&tok)
	case config.DanglingLink(HTTPTokenFile(paths)) != nil:
		// Not a reason to leave clients without a pool: the config dir
		// is a link to a checkout not made yet, which is the user's to
		// make. The front door, which needs the token, refuses every
		// request, and `http-token` makes it once it can.
		log.Warn("the HTTP front door refuses every request until its token file can be made", "err", err)
	default:
		inst.lock.Unlock() // a token file that cannot be read or made otherwise: the user's to mend
		return nil, err
	}
	inst.history = openHistory(paths.History, history, log)
	if startErr != nil {
		// As a running pool reports a file that broke: in status
		// (configError), the tray, the reloads and the log; the watcher
		// applies the file once it is fixed.
		inst.noteReload(time.Now(), "", startErr)
		log.Error("config not applied; starting with "+runs+" until the file is fixed", "config", inst.configPath, "err", startErr)
	}
	marker, err := leaks.RunMarker(context.Background(), leakHome(paths))
	if err != nil {
		log.Warn("leaked grandchildren of this run will not be traceable", "err", err)
	}
	inst.Pool = pool.New(&pool.Options{
		Logger:             log,
		AskIDFloor:         reserveAskIDs(paths.AskIDsFile(), time.Now(), log), // under the instance lock, before the pool asks
		ChildEnv:           []string{leaks.RunEnv + "=" + marker},
		ProcessStart:       func(pid int) (time.Time, error) { return leaks.StartTime(context.Background(), pid) },
		EvictAfter:         cfg.EvictAfter(),          // applies from the next start
		MaxSessionInFlight: cfg.MaxInFlightPerSession, // 0: the pool's default; from the next start
		MaxSessionBytes:    cfg.MaxInFlightMiBPerSession << 20,
		// 0: the pool's defaults; from the next start
		MaxSessionSubscriptions: cfg.MaxSubscriptionsPerSession,
		MaxRootsChildren:        cfg.MaxChildrenPerServer,
		RunID:                   inst.history.runID(),
		Unanswered:              inst.history.unanswered(),
		ClientInfo:              pool.Implementation{Name: "switchboard", Version: version.Version},
		Record:                  inst.history.record(), // requests with history on; children always
		RedactText:              store.RedactText,      // a session's own child's stderr, quoted in its errors

		CapturePayloads:    inst.history.captureBytes(),
		HTTPToken:          inst.currentToken,
		HTTPAllowedOrigins: cfg.HTTP.AllowedOrigins, // applies from the next start
		ConfigProblem:      inst.ConfigError,
		StartOn:            opts.startOn,
		Carried:            carried,
	})
	servers, _ := cfg.PoolServers(os.LookupEnv)
	if err := inst.Pool.Apply(withResolvers(servers, cfg, inst.resolver)); err != nil {
		inst.Pool.Close()
		inst.history.close()
		inst.lock.Unlock()
		return nil, err
	}
	if inst.upgraded != nil {
		for _, b := range inst.Pool.Snapshot().Backends {
			if b.CarriedOver {
				inst.upgraded.CarriedChildren = append(inst.upgraded.CarriedChildren, b.PID)
			}
		}
		log.Info("upgraded in place", "from", handover.From.Version, "carriedChildren", inst.upgraded.CarriedChildren)
	}
	if remote := cfg.Remote(); len(remote) > 0 {
		log.Warn("remote (URL) servers are not pooled; connect to them directly", "servers", remote)
	}
	if opts.HTTPListen != "" {
		inst.cfg.HTTP.Listen = opts.HTTPListen
		inst.httpListen = opts.HTTPListen
	}
	inst.started = *inst.cfg
	return inst, nil
}

// lockInstance takes the instance lock of this home, so that two pools
// never serve one home: a second one (a user's `serve` racing a client's
// start, or a tray app started twice) gets ErrAlreadyRunning. The OS
// releases it when the holder dies, however it dies. A client checking
// whether a pool runs takes the lock for an instant when it is free
// (package launch): that is waited out, briefly.
func lockInstance(paths Paths) (*flock.Lock, error) {
	l, err := flock.Wait(paths.LockFile(), time.Now().Add(lockProbeWait))
	if errors.Is(err, flock.ErrHeld) {
		return nil, fmt.Errorf("%w (pid %d holds %s)", ErrAlreadyRunning, flock.ReadPID(paths.LockFile()), paths.LockFile())
	}
	if err != nil {
		return nil, err
	}
	_ = l.WritePID()
	return l, nil
}

// recordConfig notes, under the instance lock, the config file this pool
// runs (home.Paths.ConfigRecordFile): a client that finds no pool once it
// has stopped starts the next with that file (launch.RecordedConfig). The
// default file is no record. A failure costs only that, and is logged.
func recordConfig(paths Paths, configPath string, log *slog.Logger) {
	record := paths.ConfigRecordFile()
	if configPath == "" {
		if err := os.Remove(record); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Warn("a pool a client starts may run another config than this one", "err", err)
		}
		return
	}
	abs, err := filepath.Abs(configPath)
	if err == nil {
		err = config.WritePrivateFile(record, []byte(abs+"\n"))
	}
	if err != nil {
		log.Warn("a pool a client starts will run another config than this one", "config", configPath, "err", err)
	}
}

// loadStartConfig is the config a starting pool runs: the file's (the
// starter config on a first run at the default location); or, when the
// file cannot be loaded, the config the program this one upgrades ran
// (handedOver), else none (nil); runs says which of those two, and of
// none, whether the file's history settings read (config.Error.History).
// The error is the file's, reported as when a running pool's file
// breaks: a broken file never keeps the pool from starting (its clients
// would start pools in a loop, and an upgrade would lose the children it
// carries). It also sets the watcher's baseline to what it loaded, not to
// what the file holds when Run begins, so that an edit in between is
// applied.
func (inst *Instance) loadStartConfig(isDefault bool, handedOver []byte) (cfg *config.File, runs string, err error) {
	path := inst.configPath
	if abs, err := filepath.Abs(path); err == nil {
		path = abs // as the watcher names it, so that it does not report the same error again
	}
	var data []byte
	if err = writeStarterConfig(path, isDefault); err == nil {
		data, err = config.ReadFile(path)
	}
	if err == nil {
		cfg, err = config.Parse(data)
		var ce *config.Error
		if errors.As(err, &ce) {
			ce.File = path
		}
	}
	if err == nil {
		inst.watchBase = watchBase{data: data}
		return cfg, "", nil
	}
	if len(handedOver) > 0 {
		f, perr := config.Parse(handedOver)
		if perr == nil {
			inst.watchBase = watchBase{err: err.Error()}
			return f, "the config the upgraded program ran", err
		}
		inst.log.Warn("the config the upgraded program ran does not load here either", "err", perr)
	}
	if errors.Is(err, os.ErrNotExist) {
		err = configMissing(path, true) // as the watcher says it, so that it is not reported twice
	}
	inst.watchBase = watchBase{err: err.Error(), none: true}
	if ce := (*config.Error)(nil); errors.As(err, &ce) && ce.History != nil {
		return nil, "no servers (the request history as the file sets it)", err
	}
	return nil, "no servers, and no request history,", err
}

// writeStarterConfig gives a first run a working config, only at the
// default location and only if there is none. It is written atomically:
// a reader (the watcher, a client starting) sees all of it or none. A
// config that is a symlink gets it where the link leads, and stays a
// link; a link to a directory that does not exist (dotfiles not checked
// out yet) gets none, nor the directory: reading the file then says why.
// A config that another writer (an import) makes meanwhile is left as
// it is.
func writeStarterConfig(path string, isDefault bool) error {
	if !isDefault {
		return nil
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if config.DanglingLink(path) != nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create config dir: %w", err)
	}
	// Created, never renamed over a config that appeared since the check
	// above (an import into this fresh home writing its servers).
	err := config.CreatePrivateFile(path, []byte(config.Starter))
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("write starter config: %w", err)
	}
	return nil
}

// Run serves until ctx ends, then stops accepting, cancels what is in
// flight and shuts every child down.
func (inst *Instance) Run(ctx context.Context) error {
	defer inst.lock.Unlock()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	inst.mu.Lock()
	inst.stopRun = stop
	inst.mu.Unlock()
	poolLn, err := localsock.Listen(inst.Paths.PoolSocket())
	if err != nil {
		inst.Pool.Close()
		inst.history.close()
		return err
	}
	ctlLn, err := localsock.Listen(inst.Paths.ControlSocket())
	if err != nil {
		poolLn.Close()
		inst.Pool.Close()
		inst.history.close()
		return err
	}
	inst.mu.Lock()
	httpAddr := inst.cfg.HTTP.Listen
	inst.mu.Unlock()
	var front *http.Server
	var frontLn *frontDoorListener
	if httpAddr != "" {
		if frontLn, err = listenHTTP(httpAddr); err != nil {
			poolLn.Close()
			ctlLn.Close()
			inst.Pool.Close()
			inst.history.close()
			return err
		}
		front = frontDoorServer(inst.Pool.HTTPHandler(), frontLn, inst.log)
		inst.mu.Lock()
		inst.httpAddr = frontLn.Addr().String()
		inst.mu.Unlock()
		inst.log.Info("HTTP front door", "url", "http://"+frontLn.Addr().String()+"/mcp/NAME")
	}
	ctl := controlServer(inst.controlHandler(), inst.log)
	inst.log.Info("switchboard serving", "config", inst.configPath, "socket", poolLn.Addr().String(), // a named pipe on Windows
		"servers", inst.Pool.Servers())

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return inst.Pool.ServeStdio(poolLn) })
	g.Go(func() error { inst.keepWatching(gctx); return nil })
	g.Go(func() error { inst.sweepLeaks(gctx); return nil })
	g.Go(func() error { inst.followInstalls(gctx); return nil })
	if inst.exitWhenIdle {
		g.Go(func() error { inst.exitWhenIdleLoop(gctx, stop); return nil })
	}
	if front != nil {
		g.Go(func() error { return serveHTTP(front, frontLn, "HTTP front door") })
	}
	g.Go(func() error { return serveHTTP(ctl, limitControl(ctlLn), "control API") })
	g.Go(func() error {
		<-gctx.Done()
		inst.mu.Lock()
		inst.stopRun = nil // no upgrade begins now
		inst.mu.Unlock()
		inst.log.Info("shutting down", "why", context.Cause(gctx))
		poolLn.Close()
		shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = ctl.Shutdown(shutCtx)
		err := inst.stopPool() // ends every session, HTTP streams included; hands children over for an upgrade
		if front != nil {
			_ = front.Shutdown(shutCtx)
			front.Close()
		}
		// After the pool, so that its last events (cancellations) are recorded.
		if herr := inst.history.close(); herr != nil {
			inst.log.Warn("close the request history", "err", herr)
		}
		return err
	})
	err = g.Wait()
	os.Remove(inst.Paths.PoolSocket())
	os.Remove(inst.Paths.ControlSocket())
	return err
}

// notStarted is why each of f's servers that the config holds back is
// not started (config.File.NotStarted: a ${VAR} the pool's environment
// lacks, a name clients cannot use), logged when a server is held back,
// or for another reason, than in before (the last load's): a reload of a
// file that still holds it back does not say it again. The other
// servers run.
func notStarted(f *config.File, before map[string]string, log *slog.Logger) map[string]string {
	why := map[string]string{}
	for name, ps := range f.NotStartedBy(os.LookupEnv) {
		msgs := make([]string, len(ps))
		for i, p := range ps {
			msgs[i] = p.String()
		}
		why[name] = strings.Join(msgs, "; ")
	}
	for _, name := range slices.Sorted(maps.Keys(why)) {
		if was, ok := before[name]; ok && was == why[name] {
			continue // said when it was held back, and status says it still
		}
		msg := "server not started"
		if strings.Contains(why[name], "environment variable") {
			msg += ": a variable it needs is not set in Switchboard's environment"
		}
		log.Warn(msg, "server", name, "err", why[name])
	}
	return why
}

// snapshot is the pool's snapshot with the reason each server the config
// holds back (an unset ${VAR}, a name clients cannot use) is not started,
// as its error, and its request names and roots redacted as the history
// keeps them: what status, the tray and the dashboard show.
func (inst *Instance) snapshot() pool.Snapshot {
	snap := inst.Pool.Snapshot()
	inst.explain(&snap)
	redactSnapshot(&snap)
	return snap
}

// explain sets the error of the servers in snap that the config holds
// back (notStarted).
func (inst *Instance) explain(snap *pool.Snapshot) {
	inst.mu.Lock()
	why := inst.notStarted
	inst.mu.Unlock()
	for i := range snap.Servers {
		if w, ok := why[snap.Servers[i].Name]; ok && snap.Servers[i].Disabled {
			snap.Servers[i].Error = w
		}
	}
}

// ConfigError is the error of the last config load, or nil.
func (inst *Instance) ConfigError() error {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.configErr
}

// frontDoorIdleTimeout closes a keep-alive connection of the HTTP front
// door that has sent no request for this long, so that idle connections
// (of clients without the token, say) do not hold a goroutine and a
// descriptor for ever. A var for tests.
var frontDoorIdleTimeout = 2 * time.Minute

// frontDoorMaxHeaderBytes bounds a request's headers on the HTTP front
// door. They are read before the token is checked, so any local process
// may send them; net/http's default (1 MB) let a few thousand unfinished
// requests hold gigabytes. A bearer token, an Origin and an MCP client's
// few headers take well under 1 KiB; a browser's cookies for localhost
// could take more, and are still far below this.
const frontDoorMaxHeaderBytes = 64 << 10

// lockProbeWait is how long a starting pool tries for the instance lock
// before it says another one runs: longer than a client's probe holds it.
const lockProbeWait = 200 * time.Millisecond
