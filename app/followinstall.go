package app

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/switchboard-mcp/switchboard/app/fileid"
)

// installSettle is how long the binary must stay unchanged after an event
// before the pool upgrades to it: a package manager writes, renames and
// sets modes in several steps.
const installSettle = 2 * time.Second

// followInstalls upgrades the pool in place when the binary it runs from
// is replaced on disk: installing a new package (or `make install`) is
// then the whole upgrade, with no child restarted and no session lost.
// A file that is not a working Switchboard is logged and ignored. It
// returns when ctx ends.
func (inst *Instance) followInstalls(ctx context.Context) {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	// Its identity now: os.Stat's, on Windows, would be read at the first
	// comparison, from the file installed by then.
	running, err := fileid.Stat(exe)
	if err != nil {
		return
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		inst.log.Warn("installs of a new binary are not followed", "err", err)
		return
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(exe)); err != nil {
		inst.log.Warn("installs of a new binary are not followed", "dir", filepath.Dir(exe), "err", err)
		return
	}
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			inst.log.Debug("binary watch", "err", err)
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if filepath.Clean(ev.Name) == exe {
				settle.Reset(installSettle)
			}
		case <-settle.C:
			now, err := fileid.Stat(exe)
			if err != nil || os.SameFile(now, running) {
				continue // removed (for now), or only touched
			}
			if !inst.followsInstall() {
				inst.log.Info("a new binary was installed; autostart.followInstall is off, so the pool keeps running the old one", "binary", exe)
				running = now
				continue
			}
			plan, why, err := inst.planUpgrade(ctx, exe)
			if err != nil {
				inst.log.Warn("a new binary was installed, but the pool cannot upgrade to it", "binary", exe, "err", err)
				running = now
				continue
			}
			stop, err := inst.acceptUpgrade(plan)
			if err != nil {
				return
			}
			inst.log.Info("a new binary was installed: upgrading in place", "binary", exe, "to", plan.to.Version, "carryChildren", plan.carry, "why", why)
			stop()
			return
		}
	}
}

// followsInstall reads the current config's autostart.followInstall.
func (inst *Instance) followsInstall() bool {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.cfg.Autostart.FollowsInstall()
}
