package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/fileid"
	"github.com/switchboard-mcp/switchboard/app/npx"
	"github.com/switchboard-mcp/switchboard/pool"
)

// DefaultDebounce is how long the config must stay quiet before a reload:
// editors write a file in several steps (truncate, write, chmod, rename),
// and a reload in the middle would see half a file.
const DefaultDebounce = 100 * time.Millisecond

// WatchConfig watches the config file at path and, each time a burst of
// changes to it has been quiet for debounce (<= 0 means DefaultDebounce),
// reads and parses it and calls onChange with the new file, or with the
// error that kept it from loading (then the caller keeps its last good
// config). A change that leaves the file as it was last reported (an
// editor saving without edits) is not reported again; the baseline is the
// content when WatchConfig was called (a running instance passes what it
// loaded: watchConfig), and the file is compared with it once the watch
// is set up, so that a change made in between is reported too.
//
// It watches the file's directory, because editors and atomic writers
// replace the file by renaming another one over it, which a watch on the
// file itself does not see; a symlinked config also watches the
// directory of each link on the way and of the file they lead to, so
// that repointing any link is seen. On Linux it watches the file too
// (watchFile), so that an edit through a hard link in another directory
// is seen, and moves that watch to each file put in its place. A
// directory that does not exist yet is waited for: the deepest ancestor
// of it that exists is watched, and the file is read once it is made. Setup happens before WatchConfig returns, so no
// write after it is missed. One goroutine reads the events and calls
// onChange, serially; it exits when ctx ends, and done closes then.
func WatchConfig(ctx context.Context, path string, debounce time.Duration, onChange func(*config.File, error)) (done <-chan struct{}, err error) {
	data, _ := config.ReadFile(path)
	return watchConfig(ctx, path, debounce, watchBase{data: data}, onChange)
}

// newWatcher is fsnotify.NewWatcher; tests make it fail.
var newWatcher = fsnotify.NewWatcher

// watchFile is whether the file the config leads to is watched besides
// its directory. inotify reports a write in a watched directory only when
// made through a name in it, and a write through any link to a watched
// file: without a watch on the file, an edit through a hard link in
// another directory (a dotfiles checkout) goes unseen. kqueue already
// watches each file of a watched directory by a descriptor of its own,
// which sees writes through any link, and ReadDirectoryChangesW watches a
// file through its directory, so elsewhere a watch on the file adds
// nothing.
var watchFile = runtime.GOOS == "linux" || runtime.GOOS == "android"

// readConfig is config.ReadFile; tests make it fail as a file the
// process may not read does (which root never sees).
var readConfig = config.ReadFile

// watchBase is what a watcher compares the file with at first: the
// content of the config in use, or the error the file gave (then the
// next good file is reported whatever it holds, and the same error is
// not reported again).
type watchBase struct {
	data []byte
	err  string
	none bool // no config runs: none ever loaded, nothing handed over
}

// watchConfig is WatchConfig from base.
func watchConfig(ctx context.Context, path string, debounce time.Duration, base watchBase, onChange func(*config.File, error)) (done <-chan struct{}, err error) {
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("watch config: %w", err)
	}
	w, err := newWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch config: %w", err)
	}
	cw := &configWatch{path: abs, w: w, onChange: onChange, watched: map[string]bool{}}
	if err := cw.watchTargets(); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			w.Close()
			return nil, err
		}
		// The directory is not there yet (serve --config in a directory
		// still to be made): watch the way to it, as when it is deleted.
		if cw.watchTowards(); len(cw.watched) == 0 {
			w.Close()
			return nil, err
		}
	}
	cw.last, cw.lastErr, cw.none = base.data, base.err, base.none
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		defer w.Close()
		cw.loop(ctx, debounce)
	}()
	return ch, nil
}

// configWatch is the state of WatchConfig's goroutine, which alone owns
// it.
type configWatch struct {
	path     string
	w        *fsnotify.Watcher
	onChange func(*config.File, error)
	watched  map[string]bool // directories added to w
	names    []string        // the config's path, the symlinks it goes through and the file they lead to
	file     string          // the file watched itself (watchFile), "" if none
	fileID   os.FileInfo     // the identity of the file watched, to see another one put in its place
	last     []byte          // content of the last good report (or the start)
	lastErr  string          // the last error reported, "" after a good file
	none     bool            // no good file yet, nor a config to keep
}

// watchTargets watches the directory of the config path, of each symlink
// on the way from it to the file (a link to a link, a linked directory),
// and of the file: replacing any of those links changes the file read.
// The chain is resolved again on each reload, so a link repointed
// elsewhere moves the watch with it; directories no longer on it are
// let go.
func (cw *configWatch) watchTargets() error {
	chain := config.SymlinkChain(cw.path)
	file := cw.path
	if len(chain) > 0 {
		file = chain[len(chain)-1]
	}
	cw.watchTheFile(file)
	names := append([]string{cw.path}, chain...)
	slices.Sort(names)
	cw.names = slices.Compact(names)
	want := map[string]bool{}
	for _, n := range cw.names {
		dir := filepath.Dir(n)
		want[dir] = true
		if cw.watched[dir] {
			continue
		}
		if err := cw.w.Add(dir); err != nil {
			return fmt.Errorf("watch config dir %s: %w", dir, err)
		}
		cw.watched[dir] = true
	}
	// Every directory is watched: those watched on the way to a missing
	// one (watchTowards), or for a link the chain no longer goes through,
	// are not needed now.
	for dir := range cw.watched {
		if !want[dir] {
			_ = cw.w.Remove(dir)
			delete(cw.watched, dir)
		}
	}
	return nil
}

// watchTheFile watches the file at name, which the config leads to, with
// watchFile: a watch already on it is kept, one on another file (a link
// repointed, another file renamed over the config) moves to it. A file
// that is missing, or may not be watched (not readable), is not watched;
// the next reload tries again, and its directory's watch sees the rest.
func (cw *configWatch) watchTheFile(name string) {
	if !watchFile {
		return
	}
	// The identity is read before the watch is added: a file put in its
	// place in between is then watched under the identity of the one
	// before, which the next reload takes for another file and watches
	// again, rather than the other way round (a watch on a file gone,
	// taken for one on the file there).
	id, err := fileid.Stat(name)
	if err == nil && name == cw.file && os.SameFile(id, cw.fileID) {
		return
	}
	cw.unwatchFile()
	if err != nil || !id.Mode().IsRegular() || cw.w.Add(name) != nil {
		return
	}
	cw.file, cw.fileID = name, id
}

// unwatchFile lets go of the watch on the file, if any. fsnotify may
// have dropped it already (the file was renamed or deleted).
func (cw *configWatch) unwatchFile() {
	if cw.file == "" {
		return
	}
	_ = cw.w.Remove(cw.file)
	cw.file, cw.fileID = "", nil
}

// dirGone handles the removal of a watched directory (the kernel dropped
// its watch) and reports whether it was one of ours; if so the nearest
// ancestor that still exists is watched, so its return is seen.
func (cw *configWatch) dirGone(dir string) bool {
	if !cw.watched[dir] {
		return false
	}
	delete(cw.watched, dir)
	_ = cw.w.Remove(dir) // usually gone with the directory already
	cw.watchTowards()
	return true
}

// watchTowards watches each config directory, or where it is missing the
// deepest ancestor of it that exists: creating the next level down is
// then an event.
func (cw *configWatch) watchTowards() {
	for _, n := range cw.names {
		for d := filepath.Dir(n); !cw.watched[d]; d = filepath.Dir(d) {
			if cw.w.Add(d) == nil {
				cw.watched[d] = true
				break
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
}

// onTheWay reports whether name is a directory on the way to the config
// (its directory or an ancestor of it), whose creation can bring it back.
func (cw *configWatch) onTheWay(name string) bool {
	for _, n := range cw.names {
		if d := filepath.Dir(n); d == name || strings.HasPrefix(d, name+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

func (cw *configWatch) loop(ctx context.Context, debounce time.Duration) {
	// The first reload compares the file with the baseline: a change made
	// before the watch began (since the baseline was read) is reported
	// too, debounced like any other.
	timer := time.NewTimer(debounce)
	defer timer.Stop()
	// waitedOnEmpty: the file read empty once since the last event. An
	// empty file is what a truncate-then-write looks like in between, so
	// it is read once more a debounce later before it is reported.
	waitedOnEmpty := false
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-cw.w.Events:
			if !ok {
				return
			}
			name := filepath.Clean(ev.Name)
			if ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 && name == cw.file {
				// Renamed or deleted, the file may be back under its name
				// (renamed back) while fsnotify dropped its watch: reload
				// watches it anew.
				cw.unwatchFile()
			}
			switch {
			case ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 && cw.dirGone(name):
				// The config's directory went away; watch upwards and
				// report the file as gone.
			case ev.Op&fsnotify.Create != 0 && cw.onTheWay(name):
				// A directory on the way back to the config: watch it
				// (or what exists of the way down) and read the file,
				// which may have been written before the watch was added.
				cw.watchTowards()
			case !cw.concerns(name, ev.Op):
				continue
			}
			waitedOnEmpty = false
			timer.Reset(debounce)
		case err, ok := <-cw.w.Errors:
			if !ok {
				return
			}
			// Usually an event queue overflow: events were lost, so read
			// the file again rather than trust what was seen.
			_ = err
			timer.Reset(debounce)
		case <-timer.C:
			if ctx.Err() != nil {
				return
			}
			if cw.reload(!waitedOnEmpty) {
				waitedOnEmpty = true
				timer.Reset(debounce)
				continue
			}
			waitedOnEmpty = false
		}
	}
}

// concerns reports whether an event on name may change what reading the
// config gives. A chmod or chown of the file can make it readable again
// (or not), and so can one of a watched directory while the file could
// not be read; reload reports nothing when the content is the same.
func (cw *configWatch) concerns(name string, op fsnotify.Op) bool {
	if slices.Contains(cw.names, name) {
		return true
	}
	return op == fsnotify.Chmod && cw.lastErr != "" && cw.watched[name]
}

// reload reads the file and reports it, unless nothing changed since the
// last report. With waitOnEmpty, a file that reads empty is not reported:
// reload says so, and the caller reads it again later.
func (cw *configWatch) reload(waitOnEmpty bool) (empty bool) {
	// The symlink may point elsewhere now; a failure to watch the new
	// target's directory is reported like a broken file.
	if err := cw.watchTargets(); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			cw.report(nil, nil, err)
			return false
		}
		cw.watchTowards() // the file is reported gone below
	}
	data, err := readConfig(cw.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			err = configMissing(cw.path, cw.none)
		}
		cw.report(nil, nil, err)
		return false
	}
	if waitOnEmpty && len(bytes.TrimSpace(data)) == 0 {
		return true
	}
	if cw.lastErr == "" && bytes.Equal(data, cw.last) {
		return false
	}
	f, err := config.Parse(data)
	if err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			ce.File = cw.path
		}
	}
	cw.report(data, f, err)
	return false
}

func (cw *configWatch) report(data []byte, f *config.File, err error) {
	if err != nil {
		// The same problems in a file that now switches history off are
		// news: that part of a broken file applies (config.Error).
		key := err.Error()
		if ce := (*config.Error)(nil); errors.As(err, &ce) && ce.HistoryOff {
			key += "\x00history off"
		}
		if key == cw.lastErr {
			return
		}
		cw.lastErr = key
		cw.onChange(nil, err)
		return
	}
	cw.last, cw.lastErr, cw.none = data, "", false
	cw.onChange(f, nil)
}

// configMissing is the error of a config file that does not exist: with
// none, no config was ever loaded, and the pool runs no servers until the
// file is made; otherwise the file is gone, and the last good config
// keeps running. A symlink on the way that leads to a directory that is
// missing (dotfiles not checked out yet) is named: that is what to make.
func configMissing(path string, none bool) error {
	why := ""
	if err := config.DanglingLink(path); err != nil {
		why = ": " + err.Error()
	}
	if none {
		// os.ErrNotExist reads "file does not exist".
		return fmt.Errorf("%s: the config %w%s (the pool runs with no servers until it does)", path, os.ErrNotExist, why)
	}
	return fmt.Errorf("%s: the config file is gone%s (keeping the last good config until it is back)", path, why)
}

// applyConfig makes the pool run f, which follows old (nil at start), and
// says what changed, both as the pool runs them (with an --http address in
// place of http.listen). Servers whose entry did not change are not
// touched; changed ones get a new child while the old one drains; removed
// ones finish what they have in flight and stop (pool.Apply). On error
// the pool is unchanged.
func applyConfig(p *pool.Pool, r npx.Resolver, old, f *config.File) (config.DiffResult, error) {
	servers, err := f.PoolServers(os.LookupEnv)
	if err != nil {
		return config.DiffResult{}, err
	}
	if err := p.Apply(withResolvers(servers, f, r)); err != nil {
		return config.DiffResult{}, fmt.Errorf("apply config: %w", err)
	}
	return config.Diff(old, f, os.LookupEnv), nil
}

// noteReload keeps a config reload for the dashboard's live waterfall
// and records it in the history for the waterfall after the fact.
func (inst *Instance) noteReload(at time.Time, changes string, err error) {
	inst.reloads.add(at, changes, err)
	inst.history.configReloaded(at, changes, err)
}

// startOnlyChanges lists the settings of f, other than the history's
// (historyState.apply), that the pool reads only when it starts and that
// differ from those it started with (config.Diff's names).
// Both as the pool runs them (config.File.Effective): a setting written
// out at its default is no change.
func (inst *Instance) startOnlyChanges(f *config.File) []string {
	s := inst.started.Effective()
	f = f.Effective()
	var out []string
	add := func(changed bool, name string) {
		if changed {
			out = append(out, name)
		}
	}
	add(inst.httpListen == "" && f.HTTP.Listen != s.HTTP.Listen, "http.listen")
	add(!slices.Equal(f.HTTP.AllowedOrigins, s.HTTP.AllowedOrigins), "http.allowedOrigins")
	add(f.MaxInFlightPerSession != s.MaxInFlightPerSession, "maxInFlightPerSession")
	add(f.MaxInFlightMiBPerSession != s.MaxInFlightMiBPerSession, "maxInFlightMiBPerSession")
	add(f.MaxSubscriptionsPerSession != s.MaxSubscriptionsPerSession, "maxSubscriptionsPerSession")
	add(f.MaxChildrenPerServer != s.MaxChildrenPerServer, "maxChildrenPerServer")
	add(f.EvictAfter() != s.EvictAfter(), "evictSlowClientsAfter")
	return out
}

// reloadConfig is the WatchConfig callback of a running instance: a good
// file is applied and becomes the running config; a broken one leaves the
// last good config running and shows its error in status (configError)
// and the log until a good file arrives.
func (inst *Instance) reloadConfig(f *config.File, err error) {
	inst.mu.Lock()
	old := inst.cfg
	inst.mu.Unlock()
	var d config.DiffResult
	if err == nil {
		d, err = applyConfig(inst.Pool, inst.resolver, old, f.WithHTTPListen(inst.httpListen))
	}
	if err != nil {
		inst.mu.Lock()
		inst.configErr = err
		runs := "the last good config keeps running"
		if inst.noConfig {
			runs = "the pool runs with no servers until the file is fixed"
		}
		inst.mu.Unlock()
		inst.noteReload(time.Now(), "", err)
		inst.log.Error("config not applied; "+runs, "config", inst.configPath, "err", err)
		if ce := (*config.Error)(nil); errors.As(err, &ce) && ce.HistoryOff && inst.history.requests() != nil {
			inst.history.switchOff()
			inst.log.Info("request history switched off: the file does not load, but says so", "config", inst.configPath)
		}
		return
	}
	// The front door keeps the address it was started with (and any
	// --http override) until restart.
	running := *f
	if old != nil {
		running.HTTP = old.HTTP
	}
	inst.mu.Lock()
	before := inst.notStarted
	inst.mu.Unlock()
	why := notStarted(f, before, inst.log)
	recording := inst.history.requests() != nil
	restart := append(inst.startOnlyChanges(f), inst.history.apply(f.History)...)
	inst.mu.Lock()
	inst.cfg = &running
	inst.noConfig = false
	inst.configErr = nil
	inst.notStarted = why
	inst.restartNeeded = restart
	inst.mu.Unlock()
	inst.noteReload(time.Now(), d.String(), nil)
	inst.log.Info("config reloaded", "config", inst.configPath, "changes", d.String())
	switch now := inst.history.requests() != nil; {
	case now && !recording:
		inst.log.Info("request history switched on", "config", inst.configPath)
	case !now && recording:
		inst.log.Info("request history switched off", "config", inst.configPath)
	}
	if len(restart) > 0 {
		inst.log.Warn("settings in the config that take effect when Switchboard restarts", "settings", restart)
	}
	if remote := f.Remote(); len(remote) > 0 {
		inst.log.Warn("remote (URL) servers are not pooled; connect to them directly", "servers", remote)
	}
}

// watchRetry is how long a pool whose config watch could not be set up
// (the inotify limits reached, say) waits before it tries again. A var
// for tests.
var watchRetry = 30 * time.Second

// withWatchLimitHint is err, a watch that could not be set up, with what
// to do when a limit of the system's was reached: on Linux, inotify
// reports its instances used up (fs.inotify.max_user_instances, 128 by
// default, which editors and file-syncing tools share) as too many open
// files, and its watches used up as no space left on the device.
func withWatchLimitHint(err error) error {
	if err == nil || runtime.GOOS != "linux" {
		return err
	}
	switch {
	case errors.Is(err, syscall.EMFILE):
		return fmt.Errorf("%w (the user's inotify instances, or the pool's file descriptors, are used up: "+
			"raise fs.inotify.max_user_instances, e.g. sudo sysctl fs.inotify.max_user_instances=512, or end programs that watch files)", err)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%w (the user's inotify watches are used up: "+
			"raise fs.inotify.max_user_watches, e.g. sudo sysctl fs.inotify.max_user_watches=524288, or end programs that watch files)", err)
	}
	return err
}

// keepWatching watches the config for the running instance until ctx
// ends. A watch that cannot be set up is shown in status (and the log)
// and tried again every watchRetry, so hot reload is never off for good;
// its first reload applies an edit made meanwhile (watchBase).
func (inst *Instance) keepWatching(ctx context.Context) {
	for {
		done, err := watchConfig(ctx, inst.configPath, DefaultDebounce, inst.watchBase, inst.reloadConfig)
		err = withWatchLimitHint(err)
		inst.mu.Lock()
		was := inst.watchErr
		inst.watchErr = err
		inst.mu.Unlock()
		if err == nil {
			if was != nil {
				inst.log.Info("config hot reload is on again", "config", inst.configPath)
			}
			<-done
			return
		}
		if was == nil {
			inst.log.Warn("config hot reload is off until the config can be watched", "config", inst.configPath, "err", err, "retry", watchRetry)
		}
		t := time.NewTimer(watchRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// watchError is why the config file is not watched (edits to it are not
// applied until it is), or nil.
func (inst *Instance) watchError() error {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.watchErr
}
