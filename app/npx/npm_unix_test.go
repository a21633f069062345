//go:build unix

package npx

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/npx/npxtest"
	"github.com/switchboard-mcp/switchboard/pool"
)

// These tests resolve packages through the real npm against a fake
// registry, and check the resolution against npx itself: the resolved
// command prints what npx's run of the same command line prints.

// npmWorld is an npm of its own for a test: the fake registry, an empty
// cache, a global prefix and a user npmrc (npmrc's lines) of its own.
type npmWorld struct {
	reg    *npxtest.Registry
	env    map[string]string
	global string
}

func newNPMWorld(t *testing.T, npmrc string) *npmWorld {
	t.Helper()
	npxtest.NeedNPM(t)
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("npx not found")
	}
	dir := t.TempDir()
	userconfig := filepath.Join(dir, "npmrc")
	if err := os.WriteFile(userconfig, []byte(npmrc), 0o644); err != nil {
		t.Fatal(err)
	}
	w := &npmWorld{reg: npxtest.NewRegistry(t), global: filepath.Join(dir, "global")}
	w.env = w.reg.Env(filepath.Join(dir, "cache"))
	w.env["npm_config_userconfig"] = userconfig
	w.env["npm_config_prefix"] = w.global
	return w
}

// reporter is a bin that prints, as JSON, who it is and what it was
// started with.
func reporter(shebang, who string) string {
	return shebang + `
const r = {who: ` + fmt.Sprintf("%q", who) + `, args: process.argv.slice(2), node: process.env.SB_WHICH_NODE || "",
  execArgv: process.execArgv, gc: typeof gc}
try { r.helper = require("child_process").execFileSync("sbt-helper").toString().trim() } catch (e) { r.helper = e.code || String(e) }
console.log(JSON.stringify(r))
`
}

type report struct {
	Who      string   `json:"who"`
	Args     []string `json:"args"`
	Node     string   `json:"node"`
	ExecArgv []string `json:"execArgv"`
	GC       string   `json:"gc"`
	Helper   string   `json:"helper"`
}

// publish adds a package whose one bin, named bin, is a reporter.
func (w *npmWorld) publish(t *testing.T, name, version, bin, shebang string, deps map[string]string) {
	t.Helper()
	m := map[string]any{"name": name, "version": version, "bin": map[string]string{bin: "cli.js"}}
	if deps != nil {
		m["dependencies"] = deps
	}
	w.reg.PublishManifest(t, m, map[string]string{"cli.js": reporter(shebang, name+"@"+version)})
}

// install writes a package into root/node_modules as npm installs it,
// its bin linked from root/node_modules/.bin, or from binDir when set.
func install(t *testing.T, modules, binDir, name, bin, who string) {
	t.Helper()
	dir := filepath.Join(modules, filepath.FromSlash(name))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pj := fmt.Sprintf(`{"name": %q, "version": "1.0.0", "bin": {%q: "cli.js"}}`, name, bin)
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(pj), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cli.js"), []byte(reporter("#!/usr/bin/env node", who)), 0o755); err != nil {
		t.Fatal(err)
	}
	if binDir == "" {
		binDir = filepath.Join(modules, ".bin")
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "cli.js"), filepath.Join(binDir, bin)); err != nil {
		t.Fatal(err)
	}
}

func (w *npmWorld) cfg(cwd string, args ...string) pool.ServerConfig {
	return pool.ServerConfig{Name: "s", Command: "npx", Args: args, Cwd: cwd, Env: w.env}
}

// run runs argv as the pool would run cfg's child, with extra added to
// its environment, and reads what it printed.
func run(t *testing.T, cfg pool.ServerConfig, argv []string, extra map[string]string) (report, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = cfg.Cwd
	cmd.Env = childEnv(cfg.Env)
	for k, v := range extra {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("%v: %s", err, ee.Stderr)
		}
		return report{}, fmt.Errorf("%q: %w", argv, err)
	}
	var r report
	if err := json.Unmarshal(out, &r); err != nil {
		return report{}, fmt.Errorf("%q printed %q: %w", argv, out, err)
	}
	return r, nil
}

// sameAsNPX resolves cfg, runs the resolution and npx as written, and
// returns what the resolved child printed after checking that npx's run
// printed the same.
func sameAsNPX(t *testing.T, cfg pool.ServerConfig) report {
	t.Helper()
	res, err := Resolver{}.Resolve(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	t.Logf("%s: %q", res.Note, append([]string{res.Command}, res.Args...))
	got, err := run(t, cfg, append([]string{res.Command}, res.Args...), res.Env)
	if err != nil {
		t.Fatalf("resolved: %v", err)
	}
	want, err := run(t, cfg, append([]string{cfg.Command}, cfg.Args...), nil)
	if err != nil {
		t.Fatalf("as written: %v", err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("resolved, the child printed\n  %+v\nnpx's printed\n  %+v", got, want)
	}
	return got
}

// A resolved child has the PATH npx gives it: the installed package's
// node_modules/.bin first (a dependency's bin is found), then those of
// the working directory and its parents, whose node runs the bin as
// under npx. The first edition started the server's PATH's node, without
// those folders.
func TestResolvedChildHasNPXPath(t *testing.T) {
	w := newNPMWorld(t, "")
	w.reg.PublishManifest(t, map[string]any{"name": "sbt-helper", "version": "1.0.0", "bin": "helper.js"},
		map[string]string{"helper.js": "#!/usr/bin/env node\nconsole.log('helper ran')\n"})
	w.publish(t, "sbt-spawner", "1.0.0", "sbt-spawner", "#!/usr/bin/env node", map[string]string{"sbt-helper": "1.0.0"})
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	bin := filepath.Join(project, "node_modules", ".bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := "#!/bin/sh\nSB_WHICH_NODE=project exec " + node + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "node"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	cwd := filepath.Join(project, "sub")
	if err := os.Mkdir(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	got := sameAsNPX(t, w.cfg(cwd, "-y", "sbt-spawner", "a b"))
	if got.Who != "sbt-spawner@1.0.0" || got.Node != "project" || got.Helper != "helper ran" {
		t.Errorf("resolved child: %+v", got)
	}
}

// Node's flags in a bin's #! line are node's under the resolution too;
// a #! line that is not node's is run as written. The first edition ran
// `node SCRIPT` for any #! line naming node.
func TestResolvedBinKeepsItsShebang(t *testing.T) {
	w := newNPMWorld(t, "")
	w.publish(t, "sbt-flags", "1.0.0", "sbt-flags", "#!/usr/bin/env -S node --expose-gc --max-old-space-size=64", nil)
	w.reg.PublishManifest(t, map[string]any{"name": "sbt-tsnode", "version": "1.0.0", "bin": "cli.ts"},
		map[string]string{"cli.ts": "#!/usr/bin/env ts-node\nconsole.log('ts')\n"})
	got := sameAsNPX(t, w.cfg(t.TempDir(), "-y", "sbt-flags"))
	if got.GC != "function" || strings.Join(got.ExecArgv, " ") != "--expose-gc --max-old-space-size=64" {
		t.Errorf("resolved child: %+v", got)
	}
	_, err := Resolver{}.Resolve(context.Background(), w.cfg(t.TempDir(), "-y", "sbt-tsnode"))
	if err == nil || !strings.Contains(err.Error(), "is not a node script (#!/usr/bin/env ts-node)") {
		t.Errorf("a ts-node bin: %v; want it run as written", err)
	}
}

// `npx NAME` runs a bin named NAME that it finds before installing
// anything: in node_modules/.bin of the project or a parent, then among
// the global bins, then the package when installed globally. The
// registry's NAME, another package, is neither downloaded nor run. The
// first edition asked npm for the package NAME.
func TestResolveRunsTheBinNPXFinds(t *testing.T) {
	w := newNPMWorld(t, "")
	w.publish(t, "scoped-server", "9.9.9", "scoped-server", "#!/usr/bin/env node", nil)
	w.publish(t, "sbt-echo", "9.9.9", "sbt-echo", "#!/usr/bin/env node", nil)
	w.publish(t, "sbt-tool", "1.0.0", "sbt-tool-cli", "#!/usr/bin/env node", nil)
	w.publish(t, "sbt-tool", "9.9.9", "sbt-tool-cli", "#!/usr/bin/env node", nil)
	project := t.TempDir()
	install(t, filepath.Join(project, "node_modules"), "", "@sbt/scoped", "scoped-server", "project's @sbt/scoped")
	cwd := filepath.Join(project, "src", "deep")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	globalBin := filepath.Join(w.global, "bin")
	install(t, filepath.Join(w.global, "lib", "node_modules"), globalBin, "sbt-echo", "sbt-echo", "global sbt-echo")
	install(t, filepath.Join(w.global, "lib", "node_modules"), globalBin, "sbt-tool", "sbt-tool-cli", "global sbt-tool")

	for _, tc := range []struct {
		cwd, pkg, want string
	}{
		{cwd, "scoped-server", "project's @sbt/scoped"},
		{t.TempDir(), "sbt-echo", "global sbt-echo"},
		{t.TempDir(), "sbt-tool", "global sbt-tool"},
		{t.TempDir(), "sbt-tool@1.0.0", "global sbt-tool"},
		{t.TempDir(), "sbt-tool@9.9.9", "sbt-tool@9.9.9"}, // not the global version: installed
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			got := sameAsNPX(t, w.cfg(tc.cwd, "-y", tc.pkg))
			if got.Who != tc.want {
				t.Errorf("ran %q, want %q", got.Who, tc.want)
			}
		})
	}
	// Whether npx takes the global copy for a tag is the registry's word.
	if _, err := (Resolver{}).Resolve(context.Background(), w.cfg(t.TempDir(), "-y", "sbt-tool@latest")); err == nil ||
		!strings.Contains(err.Error(), "may run the global sbt-tool 1.0.0") {
		t.Errorf("sbt-tool@latest: %v; want it run as written", err)
	}
	for _, name := range []string{"scoped-server", "sbt-echo"} {
		if w.reg.AskedFor(name) {
			t.Errorf("the registry was asked for %s", name)
		}
	}
}

// npm's reason for failing is in the error (the note in status): npm
// 11's last line is only where its log is.
func TestResolveErrorSaysWhyNPMFailed(t *testing.T) {
	w := newNPMWorld(t, "")
	_, err := Resolver{}.Resolve(context.Background(), w.cfg(t.TempDir(), "-y", "@sbt/nope"))
	if err == nil || !strings.Contains(err.Error(), "code E404") || !strings.Contains(err.Error(), "404 Not Found - GET") ||
		strings.Contains(err.Error(), "complete log") {
		t.Fatalf("Resolve = %v; want npm's E404 lines", err)
	}
}

// Installing without asking is what the command line says: npm's yes=false
// (npmrc) stands unless the command says -y, and --no is passed on.
// The first edition always passed --yes.
func TestResolveAsksAsNPXWould(t *testing.T) {
	w := newNPMWorld(t, "yes=false\n")
	w.publish(t, "sbt-echo", "1.0.0", "sbt-echo", "#!/usr/bin/env node", nil)
	for _, args := range [][]string{{"sbt-echo"}, {"--no", "sbt-echo"}} {
		cfg := w.cfg(t.TempDir(), args...)
		_, err := Resolver{}.Resolve(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), "npx canceled due to missing packages") {
			t.Errorf("%q: Resolve = %v; want npm's refusal", args, err)
		}
		if _, err := run(t, cfg, append([]string{"npx"}, args...), nil); err == nil {
			t.Errorf("%q: npx ran it as written", args)
		}
	}
	got := sameAsNPX(t, w.cfg(t.TempDir(), "-y", "sbt-echo"))
	if got.Who != "sbt-echo@1.0.0" {
		t.Errorf("with -y: %+v", got)
	}
}
