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
		if err := NewResolver(dir).installs.install(context.Background(), npm, Spec{Package: "pkg", shownPackage: "pkg"}, "pkg@1.0.0", final, npmAt{}); err != nil {
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
