package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/flock"
	"github.com/switchboard-mcp/switchboard/app/launch"
	"github.com/switchboard-mcp/switchboard/app/version"
	"github.com/switchboard-mcp/switchboard/pool"
)

// An upgrade replaces the running program in place: `switchboard upgrade`
// asks the pool to stop on purpose (its attached sessions are handed back
// to their shims, what is in flight is answered) and to exec the new
// binary, same PID, handing it the instance lock and its ready children
// (pool.Handover): no child restarts, and every client's session resumes
// with the new program. A binary that cannot take the children (another
// HandoverFormat), or a pool whose children were not forked on its main
// thread, restarts them instead; the sessions still resume.

// HandoverFormat is the version of what an upgrading program hands its
// successor (handoverFile). `switchboard version --json` reports it.
const HandoverFormat = 1

// HandoverEnv names, in an upgraded program's environment, the file that
// describes what the earlier program handed over.
const HandoverEnv = "SWITCHBOARD_HANDOVER"

// handoverFile is that file.
type handoverFile struct {
	Format  int           `json:"format"`
	From    version.Info  `json:"from"`
	LockFD  int           `json:"lockFD"`
	Carried *pool.Carried `json:"carried,omitempty"`
	// Config is the config the earlier program ran: the new one runs it
	// when the file does not load (it broke since), and reports the file's
	// error, rather than exit and take the carried children with it. A
	// program that knows no Config ignores it.
	Config []byte `json:"config,omitempty"`
}

// encode is the hand-over as its file holds it. The carried children's
// handshakes are their own JSON (capabilities, serverInfo), which the next
// pool serves its clients as it reads them here: their <, > and & stay as
// the child wrote them, where json.Marshal would spell them otherwise
// (escaped for HTML).
func (hf *handoverFile) encode() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(hf); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// upgradePlan is an accepted upgrade request, carried out when Run ends.
type upgradePlan struct {
	binary string
	to     version.Info
	carry  bool // the new binary takes the children over
	lockFD int  // the instance lock, for the new program; set by Run's shutdown
}

// binaryInfo is what `BINARY version --json` says.
type binaryInfo struct {
	version.Info
	Handover int `json:"handover"`
}

// VersionJSON is `switchboard version --json`: the build and the
// HandoverFormat it takes.
func VersionJSON() any { return binaryInfo{Info: version.Get(), Handover: HandoverFormat} }

// planUpgrade checks that binary is a Switchboard that can run here and
// says whether it can take the children over.
func (inst *Instance) planUpgrade(ctx context.Context, binary string) (*upgradePlan, string, error) {
	if !filepath.IsAbs(binary) {
		return nil, "", fmt.Errorf("the binary must be an absolute path: %q", binary)
	}
	st, err := os.Stat(binary)
	if err != nil {
		return nil, "", err
	}
	if !executable(runtime.GOOS, binary, st.Mode()) {
		return nil, "", fmt.Errorf("%s is not an executable file", binary)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	check := exec.CommandContext(ctx, binary, "version", "--json")
	check.SysProcAttr = launch.HiddenAttr()
	out, err := check.Output()
	if err != nil {
		return nil, "", fmt.Errorf("%s version --json: %w", binary, err)
	}
	var bi binaryInfo
	if err := json.Unmarshal(out, &bi); err != nil || bi.Version == "" {
		return nil, "", fmt.Errorf("%s is not a Switchboard binary (version --json said %q)", binary, strings.TrimSpace(string(out)))
	}
	plan := &upgradePlan{binary: binary, to: bi.Info, carry: true, lockFD: -1}
	why := ""
	switch {
	case bi.Handover != HandoverFormat:
		why = fmt.Sprintf("the new binary takes hand-over format %d, this one gives %d", bi.Handover, HandoverFormat)
	case inst.startOn == nil:
		why = "this pool's children were not started on its main thread (only Linux, and only `switchboard` or `switchboard serve` as the process's main program, can keep them over an exec)"
	}
	if why != "" {
		plan.carry = false
	}
	return plan, why, nil
}

// executable reports whether the file at path, of that mode, is a program
// goos runs: a regular file with an execute bit, or on Windows, which has
// no execute bits (Go reports 0666 for every file), a regular .exe file.
func executable(goos, path string, mode fs.FileMode) bool {
	if !mode.IsRegular() {
		return false
	}
	if goos == "windows" {
		return strings.EqualFold(filepath.Ext(path), ".exe")
	}
	return mode&0o111 != 0
}

// Upgrade accepts an upgrade to binary (control.Backend): Run's end
// carries it out once start is called.
func (inst *Instance) Upgrade(ctx context.Context, binary string) (control.UpgradeAccepted, func(), error) {
	plan, why, err := inst.planUpgrade(ctx, binary)
	if err != nil {
		return control.UpgradeAccepted{}, nil, err
	}
	stop, err := inst.acceptUpgrade(plan)
	if err != nil {
		return control.UpgradeAccepted{}, nil, fmt.Errorf("%w: %w", control.ErrConflict, err)
	}
	inst.log.Info("upgrading in place", "binary", plan.binary, "to", plan.to.Version, "carryChildren", plan.carry, "why", why)
	return control.UpgradeAccepted{PID: os.Getpid(), Binary: plan.binary, From: version.Get(), To: plan.to,
		CarryChildren: plan.carry, Why: why}, stop, nil
}

// acceptUpgrade makes plan the upgrade Run's end carries out, and returns
// what ends Run.
func (inst *Instance) acceptUpgrade(plan *upgradePlan) (stop func(), err error) {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if inst.upgrade != nil || inst.stopRun == nil {
		return nil, errors.New("an upgrade or a shutdown is already under way")
	}
	inst.upgrade = plan
	return inst.stopRun, nil
}

// plannedUpgrade is the accepted upgrade, or nil.
func (inst *Instance) plannedUpgrade() *upgradePlan {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.upgrade
}

// stopPool ends the pool at the end of Run: a plain Close, or for an
// upgrade a hand-over of the children and the instance lock.
func (inst *Instance) stopPool() error {
	plan := inst.plannedUpgrade()
	if plan == nil {
		return inst.Pool.Close()
	}
	if fd, err := inst.lock.Inheritable(); err == nil {
		plan.lockFD = fd
	} else {
		inst.log.Warn("the instance lock is not passed to the upgraded program", "err", err)
	}
	if !plan.carry {
		return inst.Pool.Close()
	}
	carried, err := inst.Pool.Handover()
	if err != nil {
		inst.log.Warn("children are not carried over; they restart", "err", err)
		return inst.Pool.Close()
	}
	inst.carried = carried
	return nil
}

// handOverConfig is the running config, for the program an upgrade
// starts to run should the file be broken by then; nil when no config has
// loaded (that program then runs none either, and records no request
// history until one does, as this one).
func (inst *Instance) handOverConfig() []byte {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if inst.cfg == nil || inst.noConfig {
		return nil
	}
	data, _ := inst.cfg.Marshal()
	return data
}

// ExecUpgrade replaces the program with the upgrade's binary, when Run
// ended for one; it returns nil at once otherwise. It must run on the
// main thread (the children's), after Run returned.
func (inst *Instance) ExecUpgrade() error {
	plan := inst.plannedUpgrade()
	if plan == nil {
		return nil
	}
	hf := handoverFile{Format: HandoverFormat, From: version.Get(), LockFD: plan.lockFD, Carried: inst.carried,
		Config: inst.handOverConfig()}
	data, err := hf.encode()
	if err != nil {
		return fmt.Errorf("upgrade: encode the hand-over: %w", err)
	}
	path := filepath.Join(inst.Paths.Run, fmt.Sprintf("handover-%d.json", os.Getpid()))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("upgrade: write the hand-over: %w", err)
	}
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, HandoverEnv+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, HandoverEnv+"="+path)
	argv := append([]string{plan.binary}, os.Args[1:]...)
	if hf.Carried == nil && (runtime.GOOS == "windows" || os.Getenv(upgradeSpawnEnv) != "") {
		// Nothing to keep across an exec (or no exec at all, Windows):
		// the new program starts as a process of its own and takes the
		// instance lock once this one has exited.
		return spawnReplacement(plan.binary, argv, env, path)
	}
	inst.log.Info("exec", "binary", plan.binary, "carriedChildren", carriedPIDs(hf.Carried))
	err = syscall.Exec(plan.binary, argv, env)
	os.Remove(path)
	return fmt.Errorf("upgrade: exec %s: %w", plan.binary, err)
}

// upgradeSpawnEnv, set, makes an upgrade that carries no children start
// the new program as a new process, as on Windows (tests use it).
const upgradeSpawnEnv = "SWITCHBOARD_UPGRADE_SPAWN"

// handoverLockWait is how long a program started by an upgrade waits for
// the earlier one to exit and release the instance lock.
const handoverLockWait = 30 * time.Second

// spawnReplacement starts the upgraded program on its own, with this
// one's arguments, output and environment, and returns: this program then
// exits, releasing the lock the new one waits for.
func spawnReplacement(binary string, argv, env []string, handover string) error {
	cmd := exec.Command(binary, argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.SysProcAttr = launch.DetachedAttr()
	if err := cmd.Start(); err != nil {
		os.Remove(handover)
		return fmt.Errorf("upgrade: start %s: %w", binary, err)
	}
	_ = cmd.Process.Release()
	return nil
}

// takeHandover reads what an earlier program handed over, when this one
// is its upgrade: the instance lock and the carried children. The file
// is removed and the variable cleared, so children do not see them.
func takeHandover(paths Paths, log interface{ Warn(string, ...any) }) (*handoverFile, *flock.Lock) {
	path := os.Getenv(HandoverEnv)
	if path == "" {
		return nil, nil
	}
	os.Unsetenv(HandoverEnv)
	data, err := os.ReadFile(path)
	os.Remove(path)
	if err != nil {
		log.Warn("the hand-over of the earlier program is unreadable; its children end with it", "err", err)
		return nil, nil
	}
	var hf handoverFile
	if err := json.Unmarshal(data, &hf); err != nil || hf.Format != HandoverFormat {
		log.Warn("the hand-over of the earlier program is not in a known format", "format", hf.Format, "err", err)
		return nil, nil
	}
	var lock *flock.Lock
	if hf.LockFD > 0 {
		if lock, err = flock.Adopt(hf.LockFD, paths.LockFile()); err != nil {
			log.Warn("the instance lock was not taken over", "err", err)
		}
	}
	return &hf, lock
}

// carriedPIDs lists the PIDs of carried children.
func carriedPIDs(c *pool.Carried) []int {
	if c == nil {
		return nil
	}
	pids := make([]int, 0, len(c.Children))
	for _, cc := range c.Children {
		pids = append(pids, cc.PID)
	}
	return pids
}

// Upgrade is `switchboard upgrade`: the running pool execs binary in
// place, and Upgrade waits until the new program answers.
func Upgrade(ctx context.Context, binary string) (control.UpgradeAccepted, control.Status, error) {
	c, err := Control()
	if err != nil {
		return control.UpgradeAccepted{}, control.Status{}, err
	}
	asked := time.Now()
	acc, err := c.Upgrade(ctx, binary)
	if err != nil {
		return acc, control.Status{}, fmt.Errorf("upgrade: %w", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, err := c.Status(ctx)
		if err == nil {
			if done, err := upgradeOutcome(acc, st, asked); done || err != nil {
				return acc, st, err
			}
		}
		if time.Now().After(deadline) {
			return acc, st, errors.New("upgrade: the new program did not answer within 2 minutes (see the pool log)")
		}
		select {
		case <-ctx.Done():
			return acc, st, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// upgradeOutcome reads a status taken while `switchboard upgrade` waits
// for the upgrade pool acc.PID accepted at asked: done once the new
// program answers, an error once another pool answers in its place. An
// exec keeps the PID: until then the old program answers, with no newer
// upgrade. A successor spawned instead (Windows) has a PID of its own and
// says what it took over. A pool of another PID that took over nothing
// was started afresh after the upgrading one exited (a client starts one
// at once): the new program did not come and will not.
func upgradeOutcome(acc control.UpgradeAccepted, st control.Status, asked time.Time) (bool, error) {
	if st.Upgrade != nil && !st.Upgrade.At.Before(asked) {
		return true, nil
	}
	if st.PID == acc.PID {
		return false, nil
	}
	runs := "version " + st.Version
	switch {
	case acc.To.Version == acc.From.Version:
	case st.Version == acc.To.Version:
		runs = "the new program, " + runs
	case st.Version == acc.From.Version:
		runs = "the old program, " + runs
	}
	return false, fmt.Errorf("upgrade: pool %d exited during the upgrade and %s did not take over (see the pool log); a new pool (pid %d) runs %s",
		acc.PID, acc.Binary, st.PID, runs)
}
