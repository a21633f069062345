package npx

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/npx/npxtest"
	"github.com/switchboard-mcp/switchboard/pool"
)

// A prune, after an install, removes the versions this process has not
// run (nor runs in a child carried over to it) and none has run for
// pruneAfter, and what an earlier process left half-made; the others stay.
func TestPruneKeepsWhatRunsAndWhatRanLately(t *testing.T) {
	dir := t.TempDir()
	r := NewResolver(dir)
	in := r.installs
	long := time.Now().Add(-pruneAfter - time.Hour)
	for name, mtime := range map[string]time.Time{
		"unused@1.0.0": long, "running@1.0.0": long, "carried@1.0.0": long, "lately@1.0.0": time.Now(), ".new-123": long,
	} {
		path := filepath.Join(dir, name, "node_modules")
		if err := os.MkdirAll(path, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(dir, name), mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	in.used["running@1.0.0"] = true
	r.Keep([]string{"/usr/bin/node", filepath.Join(dir, "carried@1.0.0", "node_modules", "carried", "cli.js"),
		filepath.Join(dir, "..", "unused@1.0.0"), dir})
	in.prune()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"carried@1.0.0", "lately@1.0.0", "running@1.0.0"}; !slices.Equal(left, want) {
		t.Errorf("left %q, want %q", left, want)
	}
}

func TestVersionKey(t *testing.T) {
	for _, tc := range []struct{ name, version, integrity, want string }{
		{"pkg", "1.2.3", "", "pkg@1.2.3"},
		{"@scope/pkg", "1.2.3-beta.1+build", "", "@scope+pkg@1.2.3-beta.1+build"},
		{"pkg", "1.2.3", "sha512-abc", "pkg@1.2.3-"},
		{"pkg", "../1", "", ""},
		{"pkg", "", "", ""},
	} {
		got, err := versionKey(tc.name, tc.version, tc.integrity)
		switch {
		case tc.want == "":
			if err == nil {
				t.Errorf("versionKey(%q, %q) = %q, want an error", tc.name, tc.version, got)
			}
		case tc.integrity != "":
			if len(got) != len(tc.want)+12 || got[:len(tc.want)] != tc.want {
				t.Errorf("versionKey(%q, %q, %q) = %q, want %s and 12 hex digits", tc.name, tc.version, tc.integrity, got, tc.want)
			}
		case got != tc.want || err != nil:
			t.Errorf("versionKey(%q, %q) = %q, %v, want %q", tc.name, tc.version, got, err, tc.want)
		}
	}
}

// A package npx installed in its cache runs from the resolver's own
// install of that version, which the next resolution of the version
// reuses as it is. An install that cannot be made is the resolution's
// error: the command runs as written.
func TestResolverRunsItsOwnInstall(t *testing.T) {
	npxtest.NeedNPM(t)
	reg := npxtest.NewRegistry(t)
	reg.Publish(t, "@sbt/own", "1.0.0", map[string]string{
		"package.json": `{"name":"@sbt/own","version":"1.0.0","bin":{"own":"server.js"}}`,
		"server.js":    npxtest.Server,
	})
	cfg := pool.ServerConfig{Name: "own", Command: "npx", Args: []string{"-y", "@sbt/own", "--flag"}, Env: reg.Env(t.TempDir())}
	dir := t.TempDir()
	res, err := NewResolver(dir).Resolve(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(dir, "@sbt+own@1.0.0-")
	if len(res.Args) != 2 || !strings.HasPrefix(res.Args[0], folder) || res.Args[1] != "--flag" ||
		!strings.HasSuffix(res.Args[0], filepath.Join("node_modules", "@sbt", "own", "server.js")) {
		t.Fatalf("resolution %+v, want the script in %s…", res, folder)
	}
	first, err := os.Stat(filepath.Dir(res.Args[0]))
	if err != nil {
		t.Fatal(err)
	}
	again, err := NewResolver(dir).Resolve(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Dir(again.Args[0])); err != nil || !os.SameFile(first, st) || again.Args[0] != res.Args[0] {
		t.Errorf("the version was installed again: %q after %q", again.Args[0], res.Args[0])
	}

	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewResolver(filepath.Join(blocked, "npx")).Resolve(context.Background(), cfg); err == nil ||
		!strings.Contains(err.Error(), "install @sbt/own") {
		t.Errorf("an install that cannot be made: %v", err)
	}
}

// userNPM is the environment of a user whose npm config (npmrc files of
// the test's own) names reg as the registry, of every scope too, with an
// npm cache of the test's own.
func userNPM(t *testing.T, reg *npxtest.Registry) map[string]string {
	t.Helper()
	dir := t.TempDir()
	env := reg.Env(filepath.Join(dir, "cache"))
	delete(env, "npm_config_registry")
	env["npm_config_userconfig"] = filepath.Join(dir, "npmrc")
	env["npm_config_globalconfig"] = filepath.Join(dir, "global-npmrc")
	if err := os.WriteFile(env["npm_config_userconfig"], []byte("registry="+reg.URL()+"\n@sbt:registry="+reg.URL()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return env
}

// publishFrom publishes name 1.0.0, an MCP server whose file "from" says
// which registry it came from.
func publishFrom(t *testing.T, reg *npxtest.Registry, name, from string) {
	t.Helper()
	reg.PublishManifest(t, map[string]any{"name": name, "version": "1.0.0", "bin": map[string]string{"sbt-private": "server.js"}},
		map[string]string{"server.js": npxtest.Server, "from": from})
}

// installedFrom resolves cfg with a resolver whose folder is dir and says
// which registry the package the child runs came from.
func installedFrom(t *testing.T, dir string, cfg pool.ServerConfig) string {
	t.Helper()
	res, err := NewResolver(dir).Resolve(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if len(res.Args) == 0 || !strings.HasPrefix(res.Args[0], dir) {
		t.Fatalf("resolution %+v, want the script in %s", res, dir)
	}
	from, err := os.ReadFile(filepath.Join(filepath.Dir(res.Args[0]), "from"))
	if err != nil {
		t.Fatal(err)
	}
	return string(from)
}

// A version's own install reads the npm config npx read: the project's
// .npmrc (npm's local prefix's: the nearest folder up from the working
// directory with a package.json), here naming the registry of the
// package's scope, above the user's. The first edition installed with the
// user's config alone: another package of the same name and version, from
// the user's registry, ran in the folder named after the one npx found.
func TestOwnInstallReadsTheProjectNPMRC(t *testing.T) {
	npxtest.NeedNPM(t)
	project, user := npxtest.NewRegistry(t), npxtest.NewRegistry(t)
	publishFrom(t, project, "@sbt/private", "project")
	publishFrom(t, user, "@sbt/private", "user")
	root := t.TempDir()
	for name, body := range map[string]string{
		"package.json": `{"name": "app", "version": "1.0.0"}`,
		".npmrc":       "@sbt:registry=" + project.URL() + "\n",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cwd := filepath.Join(root, "src")
	if err := os.Mkdir(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := pool.ServerConfig{Name: "private", Command: "npx", Args: []string{"-y", "@sbt/private"}, Cwd: cwd, Env: userNPM(t, user)}
	dir := t.TempDir()
	if from := installedFrom(t, dir, cfg); from != "project" {
		t.Errorf("the child runs the package from the %s's registry, want the project's", from)
	}
	if user.AskedFor("@sbt/private") {
		t.Error("the user's registry was asked for the package")
	}
	// The project's config, copied for the install, is not kept.
	if left, _ := filepath.Glob(filepath.Join(dir, "*", ".npmrc")); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}
}

// npm_config_* in the server's env, or the pool's own, configure the npm
// that installs the version as they configure npx's: above the npmrc
// files, the project's among them.
func TestOwnInstallReadsNPMConfigFromTheEnv(t *testing.T) {
	npxtest.NeedNPM(t)
	for _, where := range []string{"server", "pool"} {
		t.Run(where, func(t *testing.T) {
			chosen, user := npxtest.NewRegistry(t), npxtest.NewRegistry(t)
			publishFrom(t, chosen, "sbt-private", "env")
			publishFrom(t, user, "sbt-private", "user")
			env := userNPM(t, user)
			if where == "server" {
				env["npm_config_registry"] = chosen.URL()
			} else {
				t.Setenv("npm_config_registry", chosen.URL())
			}
			project := t.TempDir()
			if err := os.WriteFile(filepath.Join(project, ".npmrc"), []byte("registry="+user.URL()+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := pool.ServerConfig{Name: "private", Command: "npx", Args: []string{"-y", "sbt-private"}, Cwd: project, Env: env}
			if from := installedFrom(t, t.TempDir(), cfg); from != "env" {
				t.Errorf("the child runs the package from the %s's registry, want the env's", from)
			}
			if user.AskedFor("sbt-private") {
				t.Error("the user's registry was asked for the package")
			}
		})
	}
}

// The folder of npx packages, and the state directory above it when it
// makes that too, are private to the user (0700), as every directory
// Switchboard makes is: the packages run as the user's servers. The
// first edition made them 0755; a folder it made is made private at the
// next install. Here npm is a script that installs an empty package.
func TestOwnInstallFoldersArePrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	npm := filepath.Join(t.TempDir(), "npm")
	script := "#!/bin/sh\nmkdir -p \"$3/node_modules/pkg\" && echo '{}' > \"$3/node_modules/pkg/package.json\"\n"
	if err := os.WriteFile(npm, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	install := func(dir string) string {
		t.Helper()
		final := filepath.Join(dir, "pkg@1.0.0")
		if err := NewResolver(dir).installs.install(context.Background(), npm, Spec{Package: "pkg", shownPackage: "pkg"}, "pkg", "pkg@1.0.0", final, npmAt{}); err != nil {
			t.Fatalf("install: %v", err)
		}
		return final
	}
	state := filepath.Join(t.TempDir(), "state")
	dir := filepath.Join(state, "npx")
	final := install(dir)
	earlier := filepath.Join(t.TempDir(), "npx")
	if err := os.Mkdir(earlier, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(earlier, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	install(earlier)
	for _, d := range []string{state, dir, final, earlier} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o700 {
			t.Errorf("%s is %#o, want 0700", d, perm)
		}
	}
}

// npxCacheInstall lays out what npm exec leaves in npx's cache for the
// package name: its package.json, as manifest, and the hidden lockfile's
// entry for it, as lock. It returns the package's directory.
func npxCacheInstall(t *testing.T, name, manifest, lock string) string {
	t.Helper()
	nodeModules := filepath.Join(t.TempDir(), "_npx", "0123abcd", "node_modules")
	dir := filepath.Join(nodeModules, filepath.FromSlash(name))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	lockfile := `{"lockfileVersion":3,"packages":{"node_modules/` + name + `":` + lock + `}}`
	if err := os.WriteFile(filepath.Join(nodeModules, ".package-lock.json"), []byte(lockfile), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The resolver's own install of a version is the registry's package of
// the name npx was given: what npm exec installed from elsewhere (an
// alias's other package, a local tarball or folder, a git repository)
// is not replaced by the registry package of its name and version, even
// when a folder of that version is in place; it runs as written. npm
// is never run here: its path does not exist.
func TestOwnRunsOnlyTheRegistryPackage(t *testing.T) {
	const registry = `"https://registry.example/foo/-/foo-1.0.0.tgz"`
	for _, tc := range []struct {
		what, manifest, lock, err string
	}{
		{what: "registry", manifest: `{"name":"foo","version":"1.0.0"}`, lock: `{"version":"1.0.0","resolved":` + registry + `,"integrity":"sha512-x"}`},
		{what: "alias", manifest: `{"name":"bar","version":"1.0.0"}`, lock: `{"name":"bar","version":"1.0.0","resolved":` + registry + `,"integrity":"sha512-x"}`, err: "is bar"},
		{what: "tarball", manifest: `{"name":"foo","version":"1.0.0"}`, lock: `{"version":"1.0.0","resolved":"file:../foo-1.0.0.tgz","integrity":"sha512-x"}`, err: "a file: spec"},
		{what: "git", manifest: `{"name":"foo","version":"1.0.0"}`, lock: `{"version":"1.0.0","resolved":"git+ssh://git@github.com/a/foo.git#0123"}`, err: "a git+ssh: spec"},
		{what: "folder", manifest: `{"name":"foo","version":"1.0.0"}`, lock: `{"resolved":"../foo","link":true}`, err: "a link to a folder"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			dir := npxCacheInstall(t, "foo", tc.manifest, tc.lock)
			own := t.TempDir()
			in := NewResolver(own).installs
			// The registry's foo 1.0.0, installed for good earlier.
			key, err := versionKey("foo", "1.0.0", lockEntryOf(filepath.Dir(dir), "foo").Integrity)
			if err != nil {
				t.Fatal(err)
			}
			installed := filepath.Join(own, key, "node_modules", "foo")
			if err := os.MkdirAll(installed, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(installed, "package.json"), []byte(`{"name":"foo","version":"1.0.0"}`), 0o600); err != nil {
				t.Fatal(err)
			}
			npm := filepath.Join(t.TempDir(), "no-npm")
			got, err := in.own(context.Background(), npm, Spec{Package: "foo", shownPackage: "foo"}, "foo", dir, npmAt{})
			if tc.err == "" {
				if err != nil || got != installed {
					t.Fatalf("own = %q, %v; want %q", got, err, installed)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("own = %q, %v; want an error with %q", got, err, tc.err)
			}
		})
	}
}

// A version's folder that is in place without the package in it (left so
// by an earlier edition, whose npm installed the package elsewhere) is
// replaced by a whole install, not taken for one. Here npm is a script
// that installs an empty package.
func TestOwnInstallReplacesAFolderWithoutThePackage(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("npm is a shell script here")
	}
	npm := filepath.Join(t.TempDir(), "npm")
	script := "#!/bin/sh\nmkdir -p \"$3/node_modules/pkg\" && echo '{}' > \"$3/node_modules/pkg/package.json\"\n"
	if err := os.WriteFile(npm, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	final := filepath.Join(dir, "pkg@1.0.0")
	if err := os.MkdirAll(filepath.Join(final, "lib", "node_modules", "pkg"), 0o700); err != nil {
		t.Fatal(err)
	}
	in := NewResolver(dir).installs
	if err := in.install(context.Background(), npm, Spec{Package: "pkg", shownPackage: "pkg"}, "pkg", "pkg@1.0.0", final, npmAt{}); err != nil {
		t.Fatalf("install: %v", err)
	}
	if _, err := os.Stat(filepath.Join(final, "node_modules", "pkg", "package.json")); err != nil {
		t.Errorf("the version's folder has no package after the install: %v", err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 {
		t.Errorf("the folder holds %v (%v), want the version's folder alone", entries, err)
	}
}

// npm config that makes installs global (npm_config_global here, or
// location=global in an npmrc) does not move the version's install out of
// its folder: the first edition renamed the folder into place without the
// package in it, and installed it again at every resolution.
func TestOwnInstallIsNotGlobal(t *testing.T) {
	npxtest.NeedNPM(t)
	reg := npxtest.NewRegistry(t)
	reg.Publish(t, "@sbt/local", "1.0.0", map[string]string{
		"package.json": `{"name":"@sbt/local","version":"1.0.0","bin":{"local":"server.js"}}`,
		"server.js":    npxtest.Server,
	})
	for _, global := range []map[string]string{{"npm_config_global": "true"}, {"npm_config_location": "global"}} {
		env := reg.Env(t.TempDir())
		for k, v := range global {
			env[k] = v
		}
		dir := t.TempDir()
		final := filepath.Join(dir, "@sbt+local@1.0.0")
		spec := Spec{Package: "@sbt/local", shownPackage: "@sbt/local"}
		if err := NewResolver(dir).installs.install(context.Background(), "npm", spec, "@sbt/local", "@sbt/local@1.0.0", final, npmAt{cwd: t.TempDir(), env: childEnv(env)}); err != nil {
			t.Fatalf("with %v: install: %v", global, err)
		}
		if _, err := os.Stat(filepath.Join(final, "node_modules", "@sbt", "local", "package.json")); err != nil {
			t.Errorf("with %v: %v", global, err)
		}
	}
}
