package npx

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/app/config"
)

// A note (the resolver's error, shown in the log, status --json and the
// dashboard as "started as written: …") quotes the command line as
// configured, never a value a ${VAR} reference expanded to.
func TestResolveNoteKeepsSecretsOut(t *testing.T) {
	const secret = "ghp_SUPERSECRET"
	env := map[string]string{"GH_TOKEN": secret, "NPM_TOKEN": secret}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct {
		name string
		args string // JSON
		want string // the reference the note shows instead
	}{
		{name: "package spec", args: `["-y", "git+https://${GH_TOKEN}@github.com/o/r.git"]`, want: "git+https://${GH_TOKEN}@github.com/o/r.git"},
		{name: "package flag", args: `["-y", "--package=git+https://${GH_TOKEN}@github.com/o/r.git", "r"]`, want: "git+https://${GH_TOKEN}@github.com/o/r.git"},
		{name: "-p package", args: `["-p", "git+https://${GH_TOKEN}@github.com/o/r.git", "r"]`, want: "${GH_TOKEN}"},
		{name: "registry flag", args: `["-y", "--registry=https://:${NPM_TOKEN}@npm.example.com/", "pkg"]`, want: "--registry=https://:${NPM_TOKEN}@npm.example.com/"},
		{name: "call", args: `["--call=curl -H ${GH_TOKEN} x"]`, want: "${GH_TOKEN}"},
		{name: "bin path", args: `["-p", "pkg", "./${GH_TOKEN}/x"]`, want: "./${GH_TOKEN}/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := config.Decode([]byte(`{"mcpServers": {"s": {"command": "npx", "args": ` + tc.args + `}}}`))
			if err != nil {
				t.Fatal(err)
			}
			servers, err := f.PoolServers(lookup)
			if err != nil || len(servers) != 1 {
				t.Fatalf("PoolServers = %v, %v", servers, err)
			}
			cfg := servers[0]
			if !strings.Contains(strings.Join(cfg.Args, " "), secret) {
				t.Fatalf("the args were not expanded: %q", cfg.Args)
			}
			_, err = Resolver{}.Resolve(context.Background(), cfg)
			if err == nil {
				t.Fatal("resolved; want it run as written")
			}
			if note := err.Error(); strings.Contains(note, secret) || !strings.Contains(note, tc.want) {
				t.Fatalf("note %q: want %q in it and not the secret", note, tc.want)
			}
		})
	}
}

// npm's own message, which may quote the package as expanded, is left out
// of the note when the package came from a ${VAR}.
func TestResolveNoteKeepsNPMSecretsOut(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake npm is a shell script")
	}
	const secret = "ghpSUPERSECRET"
	bin := t.TempDir()
	for name, script := range map[string]string{
		"node": "#!/bin/sh\nexit 0\n",
		"npm":  "#!/bin/sh\n[ \"$1\" = prefix ] && { echo /nonexistent; exit 0; }\necho \"npm error notarget No matching version found for ${3#--package=}; tag ${3##*@}\" >&2\nexit 1\n",
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lookup := func(k string) (string, bool) {
		if k == "VER" {
			return secret, true
		}
		return "", false
	}
	for _, tc := range []struct{ pkg, want string }{
		{pkg: "pkg@1.2.3", want: "No matching version found for pkg@1.2.3; tag 1.2.3"}, // nothing expanded: npm's words kept
		{pkg: "pkg@${VER}", want: "npm exec --package=pkg@${VER}: exit status 1"},
	} {
		f, err := config.Decode([]byte(`{"mcpServers": {"s": {"command": "npx", "args": ["-y", "` + tc.pkg + `"], "env": {"PATH": "` + bin + `"}}}}`))
		if err != nil {
			t.Fatal(err)
		}
		servers, err := f.PoolServers(lookup)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Resolver{}.Resolve(context.Background(), servers[0])
		if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: note %v: want %q in it and not the secret", tc.pkg, err, tc.want)
		}
	}
}
