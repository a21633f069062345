package npx

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// NewResolver is a Resolver that runs each package from a folder of its
// own under dir, one per package version, installed there by npm and
// never changed after: npx's cache is shared by every `npx PACKAGE` on the
// machine, and npm updates a package there in place when its `latest`
// moves, under a child that a crash restart would start again. Resolver{}
// runs packages from npx's cache.
func NewResolver(dir string) Resolver {
	return Resolver{installs: &installs{dir: dir, used: map[string]bool{}}}
}

// installs is a folder of package versions the pool runs (NewResolver).
type installs struct {
	dir string

	mu sync.Mutex
	// used are the versions (folder names) this process ran, or runs in a
	// child carried over an upgrade (Keep): never pruned by it.
	used map[string]bool
}

// pruneAfter is how long a version no server of this process uses is
// kept after its last use: a pool that restarts finds its servers'
// versions in place.
const pruneAfter = 7 * 24 * time.Hour

// Keep marks the version that command, a child's resolved command line
// (node and a script in the resolver's folder), runs from as in use: this
// process never prunes it. An upgraded program calls it for the children
// carried over to it: the earlier program resolved them, and they run on,
// however long ago a start last used their version.
func (r Resolver) Keep(command []string) {
	in := r.installs
	if in == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, word := range command {
		if rel, err := filepath.Rel(in.dir, word); err == nil && rel != "." && filepath.IsLocal(rel) {
			in.used[strings.SplitN(filepath.ToSlash(rel), "/", 2)[0]] = true
		}
	}
}

// npmAt is where and how npx ran npm for a server: its working directory
// ("": the pool's), npm's local prefix there (the project, whose .npmrc is
// read; "" when npm did not say), and the environment.
type npmAt struct {
	cwd, project string
	env          []string
}

// own returns the directory of the package that npm exec installed in
// dir, or of the same version installed for good, when dir is in npx's
// cache: the pool runs its own copy from then on, and reuses it for every
// server of that version. A package npx found elsewhere (the project's
// node_modules, a global install) is the user's, and is run where it is.
func (in *installs) own(ctx context.Context, npm string, spec Spec, name, dir string, at npmAt) (string, error) {
	nodeModules := strings.TrimSuffix(dir, string(filepath.Separator)+filepath.FromSlash(name))
	if in == nil || filepath.Base(nodeModules) != "node_modules" || filepath.Base(filepath.Dir(filepath.Dir(nodeModules))) != "_npx" {
		return dir, nil
	}
	m, err := readManifest(dir)
	if err != nil {
		return "", err
	}
	lock := lockEntryOf(nodeModules, name)
	if err := fromRegistry(name, m, lock); err != nil {
		return "", err
	}
	key, err := versionKey(name, m.Version, lock.Integrity)
	if err != nil {
		return "", err
	}
	in.mu.Lock()
	in.used[key] = true // before it is looked for: a prune running now leaves it
	in.mu.Unlock()
	final := filepath.Join(in.dir, key)
	pkgDir := filepath.Join(final, "node_modules", filepath.FromSlash(name))
	if _, err := os.Stat(filepath.Join(pkgDir, "package.json")); err == nil {
		now := time.Now()
		_ = os.Chtimes(final, now, now) // its last use, for prune
		return pkgDir, nil
	}
	if err := in.install(ctx, npm, spec, name, name+"@"+m.Version, final, at); err != nil {
		return "", err
	}
	in.prune()
	return pkgDir, nil
}

// install has npm install pkg into final: into a new folder beside it,
// renamed into place once complete, so that final is either absent or
// whole. npm runs with the npm config npx had (registry, scopes, auth,
// proxy), and the files come from npm's cache, where npm exec just put
// them: npm_config_* in the server's environment, the user's and global
// npmrc, and the project's .npmrc. npm reads a project's config from its
// local prefix, which --prefix makes the new folder: the project's file is
// copied there for the install, and removed before the folder is renamed
// into place (it may hold tokens). npm runs in the server's working
// directory, against which it resolves relative paths in its config.
func (in *installs) install(ctx context.Context, npm string, spec Spec, name, pkg, final string, at npmAt) error {
	// Private, as every directory Switchboard makes; one an earlier
	// version made 0755 is made private too.
	if err := os.MkdirAll(in.dir, 0o700); err != nil {
		return fmt.Errorf("install %s: %w", spec.shownPackage, err)
	}
	if err := os.Chmod(in.dir, 0o700); err != nil {
		return fmt.Errorf("install %s: %w", spec.shownPackage, err)
	}
	tmp, err := os.MkdirTemp(in.dir, ".new-")
	if err != nil {
		return fmt.Errorf("install %s: %w", spec.shownPackage, err)
	}
	defer os.RemoveAll(tmp) // gone once renamed
	projectConfig := filepath.Join(tmp, ".npmrc")
	if at.project != "" {
		// Unreadable, it is left out, as npm leaves it out.
		if b, err := os.ReadFile(filepath.Join(at.project, ".npmrc")); err == nil {
			if err := os.WriteFile(projectConfig, b, 0o600); err != nil {
				return fmt.Errorf("install %s: %w", spec.shownPackage, err)
			}
		}
	}
	// Never global, whatever npm's config says (global, location): a
	// global install goes to tmp/lib/node_modules.
	cmd := exec.Command(npm, "install", "--prefix", tmp, "--global=false", "--location=project", "--no-save", "--prefer-offline",
		"--no-audit", "--no-fund", "--loglevel=error", pkg)
	cmd.Dir, cmd.Env = at.cwd, at.env
	cmd.WaitDelay = 2 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := pool.RunHelper(ctx, cmd); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("npm install %s into %s: %w", spec.shownPackage, in.dir, ctx.Err())
		}
		msg := npmReason(stderr.String())
		if spec.shownPackage != spec.Package {
			msg = "npm's message is left out: it may quote what the package's ${…} expanded to"
		}
		return fmt.Errorf("npm install %s into %s: %v: %s", spec.shownPackage, in.dir, err, msg)
	}
	if err := os.Remove(projectConfig); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("install %s: %w", spec.shownPackage, err)
	}
	if !holds(tmp, name) {
		return fmt.Errorf("npm install %s into %s: the package is not in node_modules", spec.shownPackage, in.dir)
	}
	if err := in.rename(tmp, final, name); err != nil {
		return fmt.Errorf("install %s: %w", spec.shownPackage, err)
	}
	now := time.Now()
	_ = os.Chtimes(final, now, now) // its first use
	return nil
}

// holds reports whether folder, an install's prefix, has the package name
// in its node_modules.
func holds(folder, name string) bool {
	_, err := os.Stat(filepath.Join(folder, "node_modules", filepath.FromSlash(name), "package.json"))
	return err == nil
}

// rename puts the install tmp in place as final. A final that holds the
// package is another server's install of the same version, made
// meanwhile, and tmp is left; one without it (an earlier edition renamed
// a global install's empty prefix into place) is moved aside and removed.
func (in *installs) rename(tmp, final, name string) error {
	err := os.Rename(tmp, final)
	if err == nil || holds(final, name) {
		return nil
	}
	if _, statErr := os.Lstat(final); statErr != nil {
		return err
	}
	gone := filepath.Join(in.dir, ".old-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.Rename(final, gone); err == nil {
		_ = os.RemoveAll(gone)
	}
	if err := os.Rename(tmp, final); err != nil && !holds(final, name) {
		return err
	}
	return nil
}

// prune removes the versions in the folder that no server of this process
// has run and none has run for pruneAfter, and what an earlier process
// left half-made. It runs after an install, when the folder grows.
func (in *installs) prune() {
	entries, err := os.ReadDir(in.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < pruneAfter {
			continue
		}
		old := filepath.Join(in.dir, e.Name())
		gone := filepath.Join(in.dir, ".old-"+strconv.FormatInt(time.Now().UnixNano(), 36))
		// Checked and moved aside under the lock (two renames of local
		// metadata, no waiting on a process): a resolution that picks this
		// version marks it used first, then finds it whole or absent.
		in.mu.Lock()
		if in.used[e.Name()] {
			in.mu.Unlock()
			continue
		}
		err = os.Rename(old, gone)
		in.mu.Unlock()
		if err == nil {
			_ = os.RemoveAll(gone)
		}
	}
}

// versionKey names a version's folder: the package (its scope's slash
// made a +), its version, and a digest of its tarball's integrity as npm
// recorded it, when it did: the same name and version from another
// registry is another package.
func versionKey(name, version, integrity string) (string, error) {
	if version == "" || strings.ContainsAny(version, `/\:`) || strings.Contains(version, "..") {
		return "", fmt.Errorf("package %s has a version that cannot name a folder: %q", name, version)
	}
	key := strings.ReplaceAll(name, "/", "+") + "@" + version
	if integrity != "" {
		sum := sha256.Sum256([]byte(integrity))
		key += "-" + hex.EncodeToString(sum[:6])
	}
	return key, nil
}

// lockEntry is a package's entry in the hidden lockfile npm keeps in a
// node_modules folder: where it came from and its tarball's integrity.
type lockEntry struct {
	Resolved  string `json:"resolved"`
	Integrity string `json:"integrity"`
	Link      bool   `json:"link"`
}

// lockEntryOf is name's entry in nodeModules' hidden lockfile; empty when
// there is none.
func lockEntryOf(nodeModules, name string) lockEntry {
	b, err := os.ReadFile(filepath.Join(nodeModules, ".package-lock.json"))
	if err != nil {
		return lockEntry{}
	}
	var lock struct {
		Packages map[string]lockEntry `json:"packages"`
	}
	if json.Unmarshal(b, &lock) != nil {
		return lockEntry{}
	}
	return lock.Packages["node_modules/"+name]
}

// fromRegistry checks that the package npm exec installed as name is the
// registry's package of that name, which the resolver's own install
// fetches again by name and version: an alias installs another package
// under the name, and a tarball, folder or git repository may hold a
// fork with the registry package's name and version. A package npm
// recorded nothing about is taken as installed by name.
func fromRegistry(name string, m manifest, lock lockEntry) error {
	if m.Name != name {
		return fmt.Errorf("the package npm installed as %s is %s, not the registry's %s", name, m.Name, name)
	}
	if lock.Link {
		return fmt.Errorf("npm installed %s as a link to a folder, not from the registry", name)
	}
	// Only the scheme is quoted: a git URL may hold a token.
	if scheme, _, _ := strings.Cut(lock.Resolved, ":"); lock.Resolved != "" && scheme != "https" && scheme != "http" {
		return fmt.Errorf("npm installed %s from a %s: spec, not from the registry", name, scheme)
	}
	return nil
}
