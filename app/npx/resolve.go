package npx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// Resolver resolves npx servers through npm itself: `npm exec` installs
// the package into npm's own npx cache exactly as npx would (same version
// rules, same cache, a download only when npx would download), and runs
// node with the package's bin directory on PATH, which is how the package
// is found. Its package.json names the script. It is a pool.Resolver.
type Resolver struct {
	installs *installs // nil: packages run from npx's cache (NewResolver)
}

// Resolve implements pool.Resolver.
func (r Resolver) Resolve(ctx context.Context, cfg pool.ServerConfig) (pool.Resolution, error) {
	if !IsNPX(cfg.Command) {
		return pool.Resolution{}, fmt.Errorf("%s is not npx", cfg.Command)
	}
	// Notes (this function's errors included) quote the command line as
	// configured: an expanded ${VAR} may be a secret, and a note is logged
	// and shown in status and the dashboard.
	var shown []string
	if len(cfg.Shown) == len(cfg.Args)+1 {
		shown = cfg.Shown[1:]
	}
	spec, err := parse(cfg.Args, shown)
	if err != nil {
		return pool.Resolution{}, err
	}
	name, _ := PackageName(spec.Package) // Parse checked it
	env := childEnv(cfg.Env)
	path, pathext := lookupEnv(env, "PATH"), lookupEnv(env, "PATHEXT")
	l, err := launchFor(cfg.Cwd, path, pathext)
	if err != nil {
		return pool.Resolution{}, err
	}
	if _, err := findIn(l.goos, "node", filepath.SplitList(l.pathFor("")), pathext); err != nil {
		return pool.Resolution{}, errors.New("no node on the server's PATH")
	}
	npm, err := npmFor(cfg.Command, path, pathext)
	if err != nil {
		return pool.Resolution{}, err
	}
	l.gypBin = nodeGypBin(npm)
	if spec.Bin == "" {
		if res, ok, err := l.found(ctx, npm, spec, name, env); ok {
			return res, err
		}
	}
	dir, project, err := installedDir(ctx, npm, spec, name, cfg.Cwd, env)
	if err != nil {
		return pool.Resolution{}, err
	}
	if dir, err = r.installs.own(ctx, npm, spec, name, dir, npmAt{cwd: cfg.Cwd, project: project, env: env}); err != nil {
		return pool.Resolution{}, err
	}
	manifest, err := readManifest(dir)
	if err != nil {
		return pool.Resolution{}, err
	}
	bin, shownBin := spec.Bin, spec.shownBin
	if bin == "" {
		if bin, err = defaultBin(name, manifest.bins); err != nil {
			return pool.Resolution{}, err
		}
		shownBin = bin
	}
	rel, ok := manifest.bins[bin]
	if !ok {
		return pool.Resolution{}, fmt.Errorf("package %s has no bin %q", name, shownBin)
	}
	script := filepath.Join(dir, filepath.FromSlash(rel))
	if r, err := filepath.Rel(dir, script); err != nil || strings.HasPrefix(r, "..") {
		return pool.Resolution{}, fmt.Errorf("bin %s points outside its package (%s)", shownBin, rel)
	}
	res, err := l.command(script, l.installBin(dir, name), spec.Args)
	if err != nil {
		return pool.Resolution{}, err
	}
	res.Note = fmt.Sprintf("npx %s resolved to %s %s, bin %s", spec.shownPackage, name, manifest.Version, shownBin)
	return res, nil
}

// launchFor is how npx starts bins for a server with working directory
// cwd ("": the pool's) and PATH.
func launchFor(cwd, path, pathext string) (launch, error) {
	abs, err := filepath.Abs(cwd)
	if err != nil {
		return launch{}, fmt.Errorf("working directory: %w", err)
	}
	return launch{goos: runtime.GOOS, cwd: abs, path: path, pathext: pathext}, nil
}

// installedDir has npm install spec's package (as npx does) and returns
// the package's directory, and npm's local prefix there: the project,
// whose .npmrc npm read. Its errors quote the package as configured.
func installedDir(ctx context.Context, npm string, spec Spec, name, cwd string, env []string) (dir, project string, err error) {
	args := append(append([]string{"exec"}, yesFlag(spec)...), "--package="+spec.Package, "--")
	// npm gives what it runs its PATH and its local prefix
	// (npm_config_local_prefix, since npm 7; null before). No spaces or
	// quotes: npm passes the words on through a shell.
	const report = "process.stdout.write(JSON.stringify([process.env.PATH,process.env.npm_config_local_prefix]))"
	cmd := exec.Command(npm, append(args, "node", "-e", report)...)
	cmd.Dir, cmd.Env = cwd, env
	cmd.WaitDelay = 2 * time.Second // a grandchild holding the pipes cannot hang us
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// As the pool runs a child: npm and what it starts end with the
	// resolution (the pool closing, the timeout) and with the pool.
	err = pool.RunHelper(ctx, cmd)
	if err != nil {
		msg := npmReason(stderr.String())
		if spec.shownPackage != spec.Package {
			// npm's words may quote the package, or part of it, as expanded.
			msg = "npm's message is left out: it may quote what the package's ${…} expanded to"
		}
		if ctx.Err() != nil {
			return "", "", fmt.Errorf("npm exec --package=%s: %w", spec.shownPackage, ctx.Err())
		}
		return "", "", fmt.Errorf("npm exec --package=%s: %v: %s", spec.shownPackage, err, msg)
	}
	var out [2]string
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return "", "", fmt.Errorf("npm exec --package=%s: unexpected output: %w", spec.shownPackage, err)
	}
	// npm exec puts the .bin directories of what it installed first.
	for _, entry := range filepath.SplitList(out[0]) {
		if filepath.Base(entry) != ".bin" || filepath.Base(filepath.Dir(entry)) != "node_modules" {
			continue
		}
		dir := filepath.Join(filepath.Dir(entry), filepath.FromSlash(name))
		if _, err := os.Stat(filepath.Join(dir, "package.json")); err == nil {
			return dir, out[1], nil
		}
	}
	return "", "", fmt.Errorf("npm exec --package=%s: the package's directory is not on the PATH it gave", spec.shownPackage)
}

type manifest struct {
	Name    string
	Version string
	bins    map[string]string // bin name -> script, relative to the package
}

// readManifest reads a package.json's name, version and bin (a string names the
// package's one bin, after its unscoped name).
func readManifest(dir string) (manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return manifest{}, err
	}
	var raw struct {
		Name    string          `json:"name"`
		Version string          `json:"version"`
		Bin     json.RawMessage `json:"bin"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return manifest{}, fmt.Errorf("%s/package.json: %w", dir, err)
	}
	m := manifest{Name: raw.Name, Version: raw.Version, bins: map[string]string{}}
	var one string
	if err := json.Unmarshal(raw.Bin, &one); err == nil && one != "" {
		m.bins[raw.Name[strings.LastIndexByte(raw.Name, '/')+1:]] = one
		return m, nil
	}
	if len(raw.Bin) > 0 {
		if err := json.Unmarshal(raw.Bin, &m.bins); err != nil {
			return manifest{}, fmt.Errorf("%s/package.json: bin: %w", dir, err)
		}
	}
	return m, nil
}

// npmFor finds the npm that belongs to npx: beside it when npx is given
// as a path, else on PATH.
func npmFor(npx, path, pathext string) (string, error) {
	if filepath.IsAbs(npx) {
		if npm, err := findIn(runtime.GOOS, "npm", []string{filepath.Dir(npx)}, pathext); err == nil {
			return npm, nil
		}
	}
	npm, err := lookPath("npm", path, pathext)
	if err != nil {
		return "", errors.New("no npm on the server's PATH")
	}
	return npm, nil
}

// childEnv is the environment a child gets: this process's plus the
// server's own values (later entries win in exec).
func childEnv(extra map[string]string) []string {
	env := os.Environ()
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// lookupEnv is key's value in env, as exec reads it: the last entry, and
// on Windows in any case (Path is PATH).
func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		k, v, _ := strings.Cut(env[i], "=")
		if k == key || (runtime.GOOS == "windows" && strings.EqualFold(k, key)) {
			return v
		}
	}
	return ""
}
