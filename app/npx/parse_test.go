package npx

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want Spec
		err  string // a substring of the reason it is run as written
	}{
		{args: []string{"-y", "@modelcontextprotocol/server-memory"}, want: Spec{Package: "@modelcontextprotocol/server-memory"}},
		{args: []string{"--yes", "pkg@1.2.3", "--port", "3"}, want: Spec{Package: "pkg@1.2.3", Args: []string{"--port", "3"}}},
		{args: []string{"@scope/pkg@latest", "-y"}, want: Spec{Package: "@scope/pkg@latest", Args: []string{"-y"}}}, // after the package: its own
		{args: []string{"-y", "-p", "@scope/pkg@2", "pkg-bin", "x"}, want: Spec{Package: "@scope/pkg@2", Bin: "pkg-bin", Args: []string{"x"}}},
		{args: []string{"--package=pkg", "--", "bin", "--flag"}, want: Spec{Package: "pkg", Bin: "bin", Args: []string{"--flag"}}},
		{args: []string{"-q", "--", "pkg", "a"}, want: Spec{Package: "pkg", Args: []string{"a"}}},
		{args: []string{"-y", "--prefer-offline", "pkg"}, err: `npx flag "--prefer-offline" is not one that is resolved`},
		{args: []string{"-c", "echo hi"}, err: "runs a shell command"},
		{args: []string{"--call=echo"}, err: "runs a shell command"},
		{args: []string{"-y"}, err: "no package named"},
		{args: []string{"-p", "a", "-p", "b", "a"}, err: "several -p packages"},
		{args: []string{"-p", "pkg"}, err: "names no command"},
		{args: []string{"-p", "pkg", "./bin/x"}, err: "is a path"},
		{args: []string{"github:owner/repo"}, err: "not a registry package name"},
		{args: []string{"./local-dir"}, err: "not a registry package name"},
		{args: []string{"https://example.com/x.tgz"}, err: "not a registry package name"},
		{args: []string{"a/b/c"}, err: "not a registry package name"},
		// A name with a spec that is not a version, a range or a tag is
		// what npm installs from elsewhere: a fork or tarball of the
		// registry package's name and version would be swapped for it.
		{args: []string{"-y", "foo@file:../x"}, err: "not a registry package spec"},
		{args: []string{"-y", "@scope/foo@file:../x.tgz"}, err: "not a registry package spec"},
		{args: []string{"-y", "foo@github:owner/repo"}, err: "not a registry package spec"},
		{args: []string{"-y", "foo@npm:bar"}, err: "not a registry package spec"},
		{args: []string{"-y", "foo@https://example.com/x.tgz"}, err: "not a registry package spec"},
		{args: []string{"-y", "foo@git+ssh://git@example.com/x.git"}, err: "not a registry package spec"},
		{args: []string{"-y", "foo@owner/repo#main"}, err: "not a registry package spec"},
		{args: []string{"-y", "foo@..\\x"}, err: "not a registry package spec"},
		{args: []string{"-y", "-p", "@scope/foo@1/../../x", "foo"}, err: "not a registry package spec"},
		{args: []string{"-y", "@scope/foo@2026.8.31"}, want: Spec{Package: "@scope/foo@2026.8.31"}},
		{args: []string{"-y", "foo@^1", "a"}, want: Spec{Package: "foo@^1", Args: []string{"a"}}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got, err := Parse(tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse = %+v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got.Package != tc.want.Package || got.Bin != tc.want.Bin || !slices.Equal(got.Args, tc.want.Args) {
				t.Fatalf("Parse = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestPackageName(t *testing.T) {
	for spec, want := range map[string]string{
		"pkg": "pkg", "pkg@1": "pkg", "@s/pkg": "@s/pkg", "@s/pkg@^2.0": "@s/pkg", "@s/pkg@latest": "@s/pkg",
		"pkg@1.2.3": "pkg", "pkg@^1": "pkg", "pkg@latest": "pkg", "@s/pkg@2026.8.31": "@s/pkg", "pkg@>=1 <2": "pkg",
		"pkg@1.0.0-rc.1+build.5": "pkg", "pkg@~1.2 || 2.x": "pkg",
	} {
		if got, err := PackageName(spec); err != nil || got != want {
			t.Errorf("PackageName(%q) = %q, %v; want %q", spec, got, err, want)
		}
	}
}

func TestIsNPX(t *testing.T) {
	for cmd, want := range map[string]bool{"npx": true, "/usr/bin/npx": true, "NPX.CMD": true, "npm": false, "node": false, "npx-like": false} {
		if IsNPX(cmd) != want {
			t.Errorf("IsNPX(%q) = %v", cmd, !want)
		}
	}
}

// The bin npx would run, from package.json as packages write it.
func TestManifestBins(t *testing.T) {
	for _, tc := range []struct {
		dir, bin, want, err string
	}{
		{dir: "one-bin", want: "server-thing=dist/index.js"},          // "bin": "file": named after the unscoped name
		{dir: "many-bins", err: "has 2 bins and none is named tools"}, // npx would refuse too
		{dir: "many-bins", bin: "tools-b", want: "tools-b=bin/b"},
		{dir: "shell-bin", want: "shelly=run.sh"},
	} {
		m, err := readManifest(filepath.Join("testdata", tc.dir))
		if err != nil {
			t.Fatal(err)
		}
		name := map[string]string{"one-bin": "@acme/server-thing", "many-bins": "tools", "shell-bin": "shelly"}[tc.dir]
		bin := tc.bin
		if bin == "" {
			bin, err = defaultBin(name, m.bins)
		}
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: bin %q, %v; want an error with %q", tc.dir, bin, err, tc.err)
			}
			continue
		}
		if err != nil || bin+"="+m.bins[bin] != tc.want {
			t.Errorf("%s: %s=%s, %v; want %s", tc.dir, bin, m.bins[bin], err, tc.want)
		}
	}
}

// Through npm itself, against the real registry and npx cache: the
// package's script, started with node; and an unresolvable command line
// is refused with its reason.
func TestResolveRealPackage(t *testing.T) {
	if os.Getenv("SWITCHBOARD_NPX") == "" {
		t.Skip("SWITCHBOARD_NPX is not set")
	}
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("npx not found")
	}
	res, err := Resolver{}.Resolve(context.Background(), pool.ServerConfig{Name: "seq", Command: "npx",
		Args: []string{"-y", "@modelcontextprotocol/server-sequential-thinking", "--extra"}})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(res.Command) != "node" || len(res.Args) != 2 || res.Args[1] != "--extra" ||
		!strings.Contains(res.Args[0], filepath.FromSlash("node_modules/@modelcontextprotocol/server-sequential-thinking/")) {
		t.Fatalf("resolution %+v", res)
	}
	if _, err := os.Stat(res.Args[0]); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", res.Note)
	_, err = Resolver{}.Resolve(context.Background(), pool.ServerConfig{Name: "seq", Command: "npx",
		Args: []string{"-y", "-p", "@modelcontextprotocol/server-sequential-thinking", "no-such-bin"}})
	if err == nil || !strings.Contains(err.Error(), `has no bin "no-such-bin"`) {
		t.Fatalf("a bin the package lacks: %v", err)
	}
}
