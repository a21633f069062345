package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/flock"
	"github.com/switchboard-mcp/switchboard/app/home"
	"github.com/switchboard-mcp/switchboard/app/importer"
)

// setupRecord is what `switchboard setup CLIENT` and `switchboard import
// --from CLIENT --rewrite-client` rewrote, so that `setup --undo CLIENT`
// can put it back: both write the same entries, and a user undoes them
// with the one command. It lives in the state dir, one file per client.
type setupRecord struct {
	Client   string             `json:"client"`
	Rewrites []importer.Rewrite `json:"rewrites"`
}

func setupRecordPath(paths Paths, client importer.Client) string {
	return filepath.Join(filepath.Dir(paths.History), "setup", string(client)+".json")
}

// Setup is `switchboard setup CLIENT`: import the client's stdio servers
// and point its entries at this binary's `connect`, as connectThisBinary
// says. Entries that run through Switchboard already (an earlier
// setup's) and reach this same instance get the same, keeping the user's
// other fields and variables; those of another instance stay as they
// are. A backup of each client file is written next to it and remembered
// for Undo. Remote (URL) entries stay as they are. The result says what
// it did, also when it fails part way.
//
// file, when set, is the client's config file to rewrite instead of the
// ones at the client's known locations (a VS Code workspace's
// .vscode/mcp.json, say).
func Setup(ctx context.Context, from, file string) (*importer.Result, error) {
	client, err := importer.ParseClient(from)
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
	opts := importer.Options{
		Client: client, File: file, Config: paths.Config, Env: env, RewriteClient: true, UpdateConnected: true, UserOnly: true,
	}
	if err := connectThisBinary(ctx, paths, "setup", &opts); err != nil {
		return nil, err
	}
	lock, err := lockEdits(paths)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	res, err := importer.Import(opts)
	return res, rememberRewrites(paths, client, res, err)
}

// rememberRewrites adds the client entries res rewrote (setup's, or
// `import --rewrite-client`'s) to the client's setup record, so that
// `setup --undo CLIENT` puts them back, and says so in res. err is the
// import's: it is returned, else the record's failure. An import that
// failed part way may have rewritten files all the same.
func rememberRewrites(paths Paths, client importer.Client, res *importer.Result, err error) error {
	if res == nil || res.DryRun || len(res.Rewrites) == 0 {
		return err
	}
	if rerr := remember(setupRecordPath(paths, client), client, res.Rewrites); rerr != nil && err == nil {
		err = rerr
	}
	res.Notes = append(res.Notes, fmt.Sprintf("`switchboard setup --undo %s` puts the rewritten entries back as they were.", client))
	return err
}

// connectThisBinary sets, in opts, what the client entries that setup and
// `import --rewrite-client` write run: this binary by its stable path
// (stableBinary), or on Windows the shim beside it, and the environment a
// client's reduced one lacks: what places this instance's files
// (home.Env: SWITCHBOARD_HOME, or the XDG directories this shell sets),
// so that a client started from the desktop reaches the pool of paths'
// config, and this shell's PATH, which a pool the shim starts needs to
// find npx. A pool running here with another config than paths' is
// refused (otherPoolError), and so is one that does not answer, whose
// config is unknown; cmd names the command for its message.
func connectThisBinary(ctx context.Context, paths Paths, cmd string, opts *importer.Options) error {
	pin, err := home.Env()
	if err != nil {
		return err
	}
	st, ok, err := runningStatus(ctx)
	if err != nil {
		return fmt.Errorf("%s changed nothing: it must know which config the running Switchboard runs, and %w", cmd, err)
	}
	if ok && st.Config != "" && !samePath(st.Config, paths.Config) {
		return otherPoolError(st, paths.Config, pin, cmd)
	}
	exe, err := stableBinary(os.Args[0])
	if err != nil {
		return err
	}
	env := map[string]string{}
	if p := os.Getenv("PATH"); p != "" {
		env["PATH"] = p
	}
	maps.Copy(env, pin)
	opts.Connect, opts.ConnectShim, opts.ConnectEnv = exe, false, env
	if s := connectShim(runtime.GOOS, exe); s != "" {
		opts.Connect, opts.ConnectShim = s, true
	}
	return nil
}

// otherPoolError is the refusal of cmd (setup, or import rewriting a
// client) when the pool running here (found by this environment's state
// directory) runs another config than the one this environment places:
// cmd would add the servers to the running pool's config but pin this
// environment into the entries, which, once that pool is gone, start a
// pool of the other config, without them.
// Pinning the running pool's home instead would go against what this
// shell says, and a pool started with --config has no home to pin.
func otherPoolError(st control.Status, config string, pin map[string]string, cmd string) error {
	sets := "sets none of SWITCHBOARD_HOME, XDG_CONFIG_HOME and XDG_STATE_HOME"
	if len(pin) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(pin)) {
			kv = append(kv, k+"="+pin[k])
		}
		sets = "sets " + strings.Join(kv, " ")
	}
	return fmt.Errorf("the running Switchboard (pid %d) runs the config %s, but this environment places Switchboard's config at %s (it %s): "+
		"clients set up from here would reach a pool of that config once the running one stops, and not find the servers %s adds; "+
		"run %s with the environment the running Switchboard was started with, or stop it and run %s again",
		st.PID, st.Config, config, sets, cmd, cmd, cmd)
}

// samePath says whether a and b name the same file: the same path, or,
// when both exist, the same file by another path (a link).
func samePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// stableBinary is the path setup writes into client entries and
// `autostart on` into the login item: this binary as it was called
// (argv0, absolute or found on PATH) when that leads to this same file,
// else its resolved path. A package manager runs each version from a
// directory of its own and links it from one on PATH (Homebrew's
// bin/switchboard -> Cellar/switchboard/1.0/bin/switchboard, a Nix
// profile's bin): the link outlives the version, whose directory goes with
// the next upgrade and would leave every entry broken and the login item
// starting nothing.
func stableBinary(argv0 string) (string, error) {
	exe, err := thisBinary()
	if err != nil {
		return "", err
	}
	called := argv0
	if filepath.Base(argv0) == argv0 { // a name, found on PATH
		if called, err = exec.LookPath(argv0); err != nil {
			return exe, nil
		}
	}
	if called, err = filepath.Abs(called); err != nil {
		return exe, nil
	}
	if r, err := filepath.EvalSymlinks(called); err != nil || r != exe {
		return exe, nil
	}
	return called, nil
}

// editLockWait bounds the wait for another setup, import or undo of
// this home to finish its edits: each takes a moment.
const editLockWait = 30 * time.Second

// lockEdits takes this home's edit lock (Paths.EditLockFile), waiting for
// another setup, import or undo to finish: each reads Switchboard's
// config, client files and setup's records and writes them back, and two
// at once would lose what the other added (a server one imported, which
// its client is then pointed at all the same).
func lockEdits(paths Paths) (*flock.Lock, error) {
	if err := paths.EnsureRunDir(); err != nil {
		return nil, err
	}
	l, err := flock.Wait(paths.EditLockFile(), time.Now().Add(editLockWait))
	if errors.Is(err, flock.ErrHeld) {
		return nil, fmt.Errorf("another setup, import or setup --undo has been changing this Switchboard's config or a client's for %s (lock %s, held by pid %d): run this again once it is done",
			editLockWait, paths.EditLockFile(), flock.ReadPID(paths.EditLockFile()))
	}
	if err != nil {
		return nil, err
	}
	if err := l.WritePID(); err != nil {
		l.Unlock()
		return nil, fmt.Errorf("lock %s: %w", paths.EditLockFile(), err)
	}
	return l, nil
}

// remember adds rewrites to the client's setup record. Each keeps its
// own backup: a file rewritten again (entries added since the first
// setup, rewritten by setup or an import) has entries from before each.
func remember(path string, client importer.Client, rws []importer.Rewrite) error {
	rec := setupRecord{Client: string(client)}
	if data, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(data, &rec)
	}
	rec.Rewrites = append(rec.Rewrites, rws...)
	return writeRecord(path, rec)
}

// writeRecord writes rec, a client's setup record, at path.
func writeRecord(path string, rec setupRecord) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("remember the setup: %w", err)
	}
	return config.WritePrivateFile(path, append(data, '\n'))
}

// ErrNothingToUndo means neither setup nor `import --rewrite-client`
// rewrote that client's config.
var ErrNothingToUndo = errors.New("nothing to undo")

// UndoSetup is `switchboard setup --undo CLIENT`: in each client file
// setup or `import --rewrite-client` rewrote, the entries they rewrote
// get back what they were before, from their backups; the rest of the
// file (what the client or the user changed since) stays as it is now.
// An entry changed or removed since its rewrite is left as it is, and the
// result says so. The file as it is now
// is kept next to it before it is written. Switchboard's own config keeps
// the imported servers (they harm nothing). It returns what it did, also
// when it fails part way.
//
// An entry whose backup cannot give it back (the user deleted it) is left
// as it is, still running through Switchboard, while the others are put
// back (importer.Undo); the undo then fails as partial, saying to edit
// those entries by hand and where Switchboard's config, which has their
// servers, is. The record keeps only what a later undo may yet put back
// (importer.Undo's rest: a file the client kept writing, a backup there
// but unreadable now) and goes with the last of it: an entry no backup
// will ever give back would otherwise fail every later undo of the
// client, and one the user changed since is theirs.
func UndoSetup(from string) ([]importer.Undone, error) {
	client, err := importer.ParseClient(from)
	if err != nil {
		return nil, err
	}
	paths, err := ResolvePaths()
	if err != nil {
		return nil, err
	}
	lock, err := lockEdits(paths)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	path := setupRecordPath(paths, client)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: neither `switchboard setup %s` nor `switchboard import --from %s --rewrite-client` has rewritten that client's config", ErrNothingToUndo, client, client)
	}
	if err != nil {
		return nil, err
	}
	var rec setupRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	done, rest, err := importer.Undo(rec.Rewrites, time.Now())
	if rerr := keepToUndo(path, rec, rest); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return done, errors.Join(err, partialUndo(client, paths.Config, done))
}

// keepToUndo leaves in the client's setup record at path only rest, what
// is still to undo; with nothing, it removes the record.
func keepToUndo(path string, rec setupRecord, rest []importer.Rewrite) error {
	if len(rest) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("forget the undone setup: %w", err)
		}
		return nil
	}
	rec.Rewrites = rest
	return writeRecord(path, rec)
}

// partialUndo is the error of an undo that left entries running through
// Switchboard because their backups cannot give them back (per entry,
// done says which and why), saying what the user can do: nil when it
// left none.
func partialUndo(client importer.Client, config string, done []importer.Undone) error {
	var lost, again int
	for _, u := range done {
		for _, e := range u.Entries {
			if e.Lost {
				lost++
			}
			if e.Again {
				again++
			}
		}
	}
	if lost == 0 {
		return nil
	}
	msg := fmt.Sprintf("setup --undo %s was partial: the entry said above still runs through Switchboard, its backup gone or unusable; "+
		"edit it by hand in the client's file (the server it runs is in Switchboard's config, %s)", client, config)
	if lost > 1 {
		msg = fmt.Sprintf("setup --undo %s was partial: the %d entries said above still run through Switchboard, their backups gone or unusable; "+
			"edit them by hand in the client's file (the servers they run are in Switchboard's config, %s)", client, lost, config)
	}
	if again > 0 {
		msg += fmt.Sprintf("; or make the backups that are there readable and run `switchboard setup --undo %s` again", client)
	}
	return errors.New(msg)
}
