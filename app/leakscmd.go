package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/launch"
	"github.com/switchboard-mcp/switchboard/app/leaks"
	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/store"
)

// leakHome is the home leak detection claims processes for, and that the
// run marker of the pool's children names: the directory of the
// instance's run directory (SWITCHBOARD_HOME when set), where its lock
// lives. Another home's leftovers are never this one's.
func leakHome(p Paths) string { return filepath.Dir(p.Run) }

// leakSource gives the children of earlier runs: the history database's
// backends table (kept with history on or off), and the children file of
// earlier versions.
func (inst *Instance) leakSource() leaks.Source {
	srcs := unionSource{leaks.FileSource(inst.Paths.ChildrenFile())}
	if h := inst.history.leakSource(); h != nil {
		srcs = append(srcs, h)
	}
	return srcs
}

// The sources of children keep every child too: a marked process is
// proven by the group of one (leaks.ChildSource).
var (
	_ leaks.ChildSource = unionSource(nil)
	_ leaks.ChildSource = everySource(nil)
	_ leaks.ChildSource = readOnlyHistory("")
	_ leaks.ChildSource = (*store.Store)(nil)
)

// unionSource reads several records of earlier runs' children. A source
// that fails is skipped while another answers.
type unionSource []leaks.Source

func (u unionSource) ChildrenOfEarlierRuns(ctx context.Context) ([]leaks.ChildRecord, error) {
	return u.union(func(src leaks.Source) ([]leaks.ChildRecord, bool, error) {
		recs, err := src.ChildrenOfEarlierRuns(ctx)
		return recs, true, err
	})
}

// RecordedChildren is every child that the sources that keep them
// (leaks.ChildSource) record, exited or not. A source that fails is
// skipped while another answers.
func (u unionSource) RecordedChildren(ctx context.Context) ([]leaks.ChildRecord, error) {
	return u.union(func(src leaks.Source) ([]leaks.ChildRecord, bool, error) {
		cs, ok := src.(leaks.ChildSource)
		if !ok {
			return nil, false, nil
		}
		recs, err := cs.RecordedChildren(ctx)
		return recs, true, err
	})
}

// union gathers what read gives of each source (ok false: the source
// keeps no such records). A source that fails is skipped while another
// answers; the first error is returned when none did.
func (u unionSource) union(read func(leaks.Source) (recs []leaks.ChildRecord, ok bool, err error)) ([]leaks.ChildRecord, error) {
	var out []leaks.ChildRecord
	var firstErr error
	answered := false
	for _, src := range u {
		recs, ok, err := read(src)
		switch {
		case !ok:
			continue
		case err != nil:
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		answered = true
		out = append(out, recs...)
	}
	if !answered && firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// everySource reads several records of earlier runs' children, each of
// which must answer: without a running pool the CLI would rather fail,
// saying why, than call a recorded child no leak.
type everySource []leaks.Source

func (e everySource) ChildrenOfEarlierRuns(ctx context.Context) ([]leaks.ChildRecord, error) {
	var out []leaks.ChildRecord
	for _, src := range e {
		recs, err := src.ChildrenOfEarlierRuns(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the children of earlier runs: %w", err)
		}
		out = append(out, recs...)
	}
	return out, nil
}

// RecordedChildren is every child that the sources that keep them
// (leaks.ChildSource) record, exited or not; each must answer.
func (e everySource) RecordedChildren(ctx context.Context) ([]leaks.ChildRecord, error) {
	var out []leaks.ChildRecord
	for _, src := range e {
		cs, ok := src.(leaks.ChildSource)
		if !ok {
			continue
		}
		recs, err := cs.RecordedChildren(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the children runs started: %w", err)
		}
		out = append(out, recs...)
	}
	return out, nil
}

// readOnlyHistory is the history database as a leaks.Source for the CLI
// without a running pool: opened for each read, absent means no records.
// An earlier version's schema is read as it is: the new build may not
// have run yet, and that version's children are the ones to find.
type readOnlyHistory string

func (path readOnlyHistory) ChildrenOfEarlierRuns(ctx context.Context) ([]leaks.ChildRecord, error) {
	recs, err := store.ReadChildrenOfEarlierRuns(ctx, string(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return recs, err
}

// RecordedChildren is every child the database records, exited or not.
func (path readOnlyHistory) RecordedChildren(ctx context.Context) ([]leaks.ChildRecord, error) {
	recs, err := store.ReadRecordedChildren(ctx, string(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return recs, err
}

// sweepLeaks is the startup sweep: it compacts the children file of
// earlier versions and logs the leaked backends it finds. Run calls it
// once it owns the sockets, so no other instance touches the file.
func (inst *Instance) sweepLeaks(ctx context.Context) {
	if err := leaks.FileSource(inst.Paths.ChildrenFile()).Compact(ctx); err != nil {
		inst.log.Warn("cannot compact the children file of an earlier version", "err", err)
	}
	ls, err := inst.Leaks(ctx)
	if err != nil {
		inst.log.Warn("cannot look for leaked backends", "err", err)
		return
	}
	for _, l := range ls {
		if !l.Proven {
			// kill refuses a suspect: no kill hint for it.
			inst.log.Warn("suspected leaked backend, not proven (see reason): listed, never killed by Switchboard",
				"pid", l.PID, "server", l.Server, "kind", l.Kind, "rssBytes", l.RSSBytes, "reason", l.Reason)
			continue
		}
		inst.log.Warn("leaked backend (kill it with `switchboard kill PID` or from the tray)",
			"pid", l.PID, "server", l.Server, "kind", l.Kind, "rssBytes", l.RSSBytes, "reason", l.Reason)
	}
}

// Leaks lists the leaked backends now: the UI's Leaks tab and
// `switchboard leaks` read it. The pool's own children are never leaks.
func (inst *Instance) Leaks(ctx context.Context) ([]leaks.Leak, error) {
	return leaks.Find(ctx, leakHome(inst.Paths), inst.leakSource(), inst.configuredServers(), inst.Pool.ChildPIDs())
}

// configuredServers are the servers of the current config, disabled ones
// included (their orphans are still MCP backends).
func (inst *Instance) configuredServers() []pool.ServerConfig {
	inst.mu.Lock()
	cfg := inst.cfg
	inst.mu.Unlock()
	return serversForMatching(cfg)
}

// serversForMatching lists the config's local servers, disabled ones
// included, as the commands Find matches against. It never fails: an
// unset ${VAR} expands to "", which can only make a match less likely.
func serversForMatching(cfg *config.File) []pool.ServerConfig {
	if cfg == nil {
		return nil
	}
	var out []pool.ServerConfig
	for name, s := range cfg.Servers {
		if s.Command == "" {
			continue // remote (URL) entries are not processes
		}
		c := pool.ServerConfig{Name: name, Command: expandOrEmpty(s.Command), Cwd: config.ServerDir(expandOrEmpty(s.Cwd))}
		for _, a := range s.Args {
			c.Args = append(c.Args, expandOrEmpty(a))
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// expandOrEmpty expands ${VAR} and ${VAR:-default} as the config does,
// from this process's environment, with "" for an unset variable.
func expandOrEmpty(s string) string { return config.ExpandVars(s, os.LookupEnv) }

// Kill kills one PID or every leaked backend. A PID that is one of the
// pool's own running children is killed through the pool, at once: the
// way to end a hung child, which the pool takes for a crash and replaces.
// Any other PID must be a leaked backend found right now.
func (inst *Instance) Kill(ctx context.Context, req control.KillRequest) ([]control.KillResult, error) {
	if !req.AllLeaked && slices.Contains(inst.Pool.ChildPIDs(), req.PID) {
		r := control.KillResult{PID: req.PID, Note: "a running child of this pool: it ends as in a crash, and the pool starts a new one"}
		for _, b := range inst.Pool.Snapshot().Backends {
			if b.PID == req.PID {
				r.Server = b.Server
			}
		}
		if err := inst.Pool.KillChild(req.PID); err != nil {
			r.Error = err.Error()
		} else {
			r.Killed = true
		}
		return []control.KillResult{r}, nil
	}
	found, err := inst.Leaks(ctx)
	if err != nil {
		return nil, err
	}
	return killFound(ctx, leakHome(inst.Paths), req, found), nil
}

// killFound kills req's PID (or all of found) with found, home's leaks,
// as the proof. Several leaks are killed concurrently: each may take the
// SIGTERM grace. With AllLeaked only proven leaks are killed; the
// suspects come back Skipped.
func killFound(ctx context.Context, home string, req control.KillRequest, found []leaks.Leak) (out []control.KillResult) {
	var targets []int
	var skipped []control.KillResult
	if req.AllLeaked {
		for _, l := range found {
			if l.Proven {
				targets = append(targets, l.PID)
				continue
			}
			note := "no Switchboard run marker: may be another program's, so it is left alone"
			switch l.Kind {
			case leaks.KindDetached:
				note = "a live child of server " + l.Server + " may have started it on purpose: it is left alone while that child runs"
			case leaks.KindInherited:
				note = "in the process group or session of no child its run started: may be a program that merely inherited the run marker, so it is left alone"
			case leaks.KindLegacy:
				note = "an earlier version's run marker, which names no Switchboard home: may be another home's, so it is left alone"
			}
			skipped = append(skipped, control.KillResult{PID: l.PID, Server: l.Server, Skipped: true, Note: note})
		}
	} else {
		targets = []int{req.PID}
	}
	defer func() { out = append(out, skipped...) }()
	out = make([]control.KillResult, len(targets))
	var wg sync.WaitGroup
	for i, pid := range targets {
		wg.Go(func() {
			r := control.KillResult{PID: pid}
			if j := slices.IndexFunc(found, func(l leaks.Leak) bool { return l.PID == pid }); j >= 0 {
				r.Server = found[j].Server
			}
			err := leaks.Kill(ctx, home, pid, found)
			switch {
			case err == nil:
				r.Killed = true
			case errors.Is(err, leaks.ErrNotRunning):
				r.NotRunning = true
			case errors.Is(err, leaks.ErrRefused):
				r.Refused, r.Error = true, err.Error()
			default:
				r.Error = err.Error()
			}
			out[i] = r
		})
	}
	wg.Wait()
	return out
}

// ListLeaks is `switchboard leaks`: it asks the running pool, which knows
// its own children and its current config. With no pool running it looks
// itself, from the recorded children and the config file at configPath
// ("" for the default); warn receives what it could not use.
func ListLeaks(ctx context.Context, configPath string, warn func(string)) ([]leaks.Leak, error) {
	c, err := Control()
	if err != nil {
		return nil, err
	}
	ls, err := c.Leaks(ctx)
	if errors.Is(err, ErrNoPool) {
		home, src, servers, err := direct(configPath, warn)
		if err != nil {
			return nil, err
		}
		return leaks.Find(ctx, home, src, servers, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("ask the pool for leaks: %w", err)
	}
	if ls == nil {
		ls = []leaks.Leak{}
	}
	return ls, nil
}

// KillLeaked is `switchboard kill PID` and `switchboard kill
// --all-leaked`: through the running pool, or directly when none runs.
// The results say, per PID, whether it was killed or refused.
func KillLeaked(ctx context.Context, configPath string, req control.KillRequest, warn func(string)) ([]control.KillResult, error) {
	c, err := Control()
	if err != nil {
		return nil, err
	}
	res, err := c.Kill(ctx, req)
	if errors.Is(err, ErrNoPool) {
		home, src, servers, err := direct(configPath, warn)
		if err != nil {
			return nil, err
		}
		found, err := leaks.Find(ctx, home, src, servers, nil)
		if err != nil {
			return nil, err
		}
		return killFound(ctx, home, req, found), nil
	}
	if err != nil {
		return nil, fmt.Errorf("ask the pool to kill: %w", err)
	}
	return res, nil
}

// direct gives what Find needs when no pool runs: the home, the recorded
// children (all from earlier runs now) and the config's servers. A config
// that cannot be read is reported to warn, not fatal: the recorded
// children still prove themselves. Records that cannot be read fail the
// read (everySource).
func direct(configPath string, warn func(string)) (string, leaks.Source, []pool.ServerConfig, error) {
	paths, err := ResolvePaths()
	if err != nil {
		return "", nil, nil, err
	}
	if configPath == "" {
		configPath = launch.ConfigOf(paths)
	}
	var servers []pool.ServerConfig
	data, err := config.ReadFile(configPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		warn(fmt.Sprintf("cannot read %s (%v): only children recorded by earlier runs are checked", configPath, err))
	default:
		var f config.File
		if err := json.Unmarshal(data, &f); err != nil {
			warn(fmt.Sprintf("cannot parse %s (%v): only children recorded by earlier runs are checked", configPath, err))
		} else {
			servers = serversForMatching(&f)
		}
	}
	return leakHome(paths), everySource{leaks.FileSource(paths.ChildrenFile()), readOnlyHistory(paths.History)}, servers, nil
}
