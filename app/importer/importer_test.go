package importer

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/config/jsonedit"
)

var update = flag.Bool("update", false, "rewrite golden files")

var stamp = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

// importCase places fixtures where the client keeps its files, under a
// made-up home and project directory.
type importCase struct {
	client Client
	files  map[string]string // fixture name -> path under the work dir
}

var importCases = []importCase{
	{ClaudeDesktop, map[string]string{"claude_desktop_config.json": "home/.config/Claude/claude_desktop_config.json"}},
	{ClaudeCode, map[string]string{"claude.json": "home/.claude.json", "mcp.json": "proj/.mcp.json"}},
	{Cursor, map[string]string{"mcp.json": "home/.cursor/mcp.json", "project-mcp.json": "proj/.cursor/mcp.json"}},
	{VSCode, map[string]string{"user-mcp.json": "home/.config/Code/User/mcp.json", "mcp.json": "proj/.vscode/mcp.json"}},
}

func setup(t *testing.T, tc importCase) (work string, opts Options) {
	t.Helper()
	work = t.TempDir()
	put := func(src, dst string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst = filepath.Join(work, dst)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for src, dst := range tc.files {
		put(filepath.Join("testdata", string(tc.client), src), dst)
	}
	put("testdata/switchboard.json", "sb/config.json")
	vars := map[string]string{"HOME": filepath.Join(work, "home"), "BROWSER_TOKEN": "t"}
	return work, Options{
		Client: tc.client,
		Config: filepath.Join(work, "sb", "config.json"),
		Env: Env{Home: filepath.Join(work, "home"), Cwd: filepath.Join(work, "proj"), GOOS: "linux",
			Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }},
		RewriteClient: true,
		Now:           func() time.Time { return stamp },
	}
}

// snapshot reads every file under dir.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(path)
			out[strings.TrimPrefix(path, dir)] = string(b)
		}
		return nil
	})
	return out
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// resultJSON is an import's result as the golden files keep it: what
// cmd/switchboard renders as the report (its tests read these files).
func resultJSON(t *testing.T, res *Result) string {
	t.Helper()
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(data) + "\n"
}

func TestImport(t *testing.T) {
	for _, tc := range importCases {
		t.Run(string(tc.client), func(t *testing.T) {
			work, opts := setup(t, tc)
			clean := func(s string) string { return strings.ReplaceAll(s, work, "$WORK") }
			dir := filepath.Join("testdata", string(tc.client))
			before := snapshot(t, work)

			// A dry run reports the same plan and touches nothing.
			dry := opts
			dry.DryRun = true
			res, err := Import(dry)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join(dir, "result-dry-run.golden"), clean(resultJSON(t, res)))
			if diff := cmp.Diff(before, snapshot(t, work)); diff != "" {
				t.Fatalf("a dry run changed files:\n%s", diff)
			}

			res, err = Import(opts)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join(dir, "result.golden"), clean(resultJSON(t, res)))
			after := snapshot(t, work)
			golden(t, filepath.Join(dir, "config.golden"), clean(after["/sb/config.json"]))

			// The merged config is valid and kept everything it had.
			if f, err := config.Decode([]byte(after["/sb/config.json"])); err != nil {
				t.Errorf("merged config: %v", err)
			} else if err := f.Validate(opts.Env.Lookup); err != nil {
				t.Errorf("merged config: %v", err)
			}
			keptAll(t, "Switchboard's config", before["/sb/config.json"], after["/sb/config.json"], nil)

			// Each rewritten client file: backed up byte for byte first,
			// rewritten keeping every field but the launch fields of the
			// entries that now run through Switchboard.
			rewritten := map[string][]string{}
			for _, rw := range res.Rewrites {
				rel := strings.TrimPrefix(rw.File, work)
				if want := rw.File + ".switchboard-20260314-150926.bak"; rw.Backup != want {
					t.Errorf("backup = %s, want %s", rw.Backup, want)
				}
				if got := after[strings.TrimPrefix(rw.Backup, work)]; got != before[rel] {
					t.Errorf("backup of %s differs from the original", rel)
				}
			}
			for _, e := range res.Entries {
				if e.Rewritten {
					rel := strings.TrimPrefix(e.File, work)
					rewritten[rel] = append(rewritten[rel], e.Name)
				}
			}
			for src, dst := range tc.files {
				rel := "/" + dst
				golden(t, filepath.Join(dir, src+".golden"), clean(after[rel]))
				keptAll(t, rel, before[rel], after[rel], rewritten[rel])
				if _, ok := rewritten[rel]; !ok && after[rel] != before[rel] {
					t.Errorf("%s changed but was not reported as rewritten", rel)
				}
			}

			// Importing again finds everything in place and writes nothing.
			again := snapshot(t, work)
			res, err = Import(opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Added) > 0 || len(res.Rewrites) > 0 {
				t.Errorf("second import added %v and rewrote %v", res.Added, res.Rewrites)
			}
			for _, e := range res.Entries {
				if e.Outcome == Imported {
					t.Errorf("second import imported %s again", e.Where)
				}
			}
			if diff := cmp.Diff(again, snapshot(t, work)); diff != "" {
				t.Errorf("second import changed files:\n%s", diff)
			}
		})
	}
}

// keptAll checks that every value in before is in after unchanged, except
// the launch fields of the named entries, which now run through
// Switchboard.
func keptAll(t *testing.T, what, before, after string, rewrittenNames []string) {
	t.Helper()
	b, a := flatten(t, before), flatten(t, after)
	launch := []string{"command", "args", "env", "cwd"}
	for path, v := range b {
		if a[path] == v {
			continue
		}
		seg := strings.Split(path, "\x00")
		allowed := false
		for i := 2; i < len(seg); i++ {
			if slices.Contains(launch, seg[i]) && slices.Contains(rewrittenNames, seg[i-1]) && (seg[i-2] == "mcpServers" || seg[i-2] == "servers") {
				allowed = true
			}
		}
		if !allowed {
			t.Errorf("%s: %s was %s, now %q", what, strings.ReplaceAll(path, "\x00", "."), v, a[path])
		}
	}
}

// flatten maps every leaf of a JSON(C) document to its JSON text.
func flatten(t *testing.T, doc string) map[string]string {
	t.Helper()
	var v any
	if err := json.Unmarshal(jsonedit.Standardize([]byte(doc)), &v); err != nil {
		t.Fatalf("flatten: %v\n%s", err, doc)
	}
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			for k, x := range m {
				p := k
				if prefix != "" {
					p = prefix + "\x00" + k
				}
				walk(p, x)
			}
			return
		}
		b, _ := json.Marshal(v)
		out[prefix] = string(b)
	}
	walk("", v)
	return out
}

func TestImportCreatesConfig(t *testing.T) {
	work, opts := setup(t, importCases[0])
	opts.Config = filepath.Join(work, "new", "dir", "config.json")
	opts.RewriteClient = false
	res, err := Import(opts)
	if err != nil {
		t.Fatal(err)
	}
	f, err := config.Load(opts.Config)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range f.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	if want := []string{"My-Notes", "fetch", "filesystem", "git", "github", "linear", "memory"}; !cmp.Equal(names, want) {
		t.Errorf("servers = %v, want %v", names, want)
	}
	if !cmp.Equal(res.Added, names) && len(res.Added) != len(names) {
		t.Errorf("Added = %v", res.Added)
	}
	if fi, err := os.Stat(opts.Config); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("new config mode: %v %v", fi.Mode(), err)
	}
	if got := snapshot(t, filepath.Join(work, "home")); len(got) != 1 {
		t.Errorf("the client's dir changed without --rewrite-client: %v", got)
	}
}

// TestImportMakesTheConfigPrivate: the servers an import adds bring their
// env (tokens) from a client file into Switchboard's config, which is
// then private to the user (0600) even if it was not; the client's own
// file keeps its mode. On the first edition a 0644 config stayed 0644,
// readable by every user, with the tokens in it.
func TestImportMakesTheConfigPrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	work, opts := setup(t, importCases[0])
	client := filepath.Join(work, importCases[0].files["claude_desktop_config.json"])
	if fi, err := os.Stat(opts.Config); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("the config before: %v %v", fi.Mode(), err)
	}
	res, err := Import(opts)
	if err != nil {
		t.Fatal(err)
	}
	f, err := config.Load(opts.Config)
	if err != nil || !res.ConfigWritten || len(f.Servers["github"].Env) == 0 {
		t.Fatalf("the import added no server with env: written %v, %+v, %v", res.ConfigWritten, f.Servers["github"], err)
	}
	if fi, err := os.Stat(opts.Config); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the config after the import: %v %v, want 0600", fi.Mode(), err)
	}
	if fi, err := os.Stat(client); err != nil || len(res.Rewrites) == 0 || fi.Mode().Perm() != 0o644 {
		t.Errorf("the rewritten client file (%d rewrites): %v %v, want its own 0644", len(res.Rewrites), fi.Mode(), err)
	}
}

func TestImportErrors(t *testing.T) {
	work, opts := setup(t, importCases[0])
	for _, tt := range []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{"no client file", func(o *Options) { o.Client = Cursor }, "no cursor config found (looked in $WORK/home/.cursor/mcp.json, $WORK/proj/.cursor/mcp.json); name one with --file"},
		{"broken client file", func(o *Options) {
			o.File = filepath.Join(work, "broken.json")
			os.WriteFile(o.File, []byte(`{"mcpServers": {"a": }`), 0o600)
		}, "$WORK/broken.json: line 1, column 22: unexpected '}'"},
		{"not a client file", func(o *Options) {
			o.File = filepath.Join(work, "other.json")
			os.WriteFile(o.File, []byte(`{"servers": {}}`), 0o600)
		}, `$WORK/other.json: no "mcpServers" object: is this a claude-desktop config?`},
		{"broken switchboard config", func(o *Options) {
			o.Config = filepath.Join(work, "sb-broken.json")
			os.WriteFile(o.Config, []byte(`{"mcpServers": [}`), 0o600)
		}, "cannot read Switchboard's config $WORK/sb-broken.json (fix it first): line 1, column 17: unexpected '}'"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := opts
			tt.mutate(&o)
			_, err := Import(o)
			if err == nil {
				t.Fatal("no error")
			}
			if got := strings.ReplaceAll(err.Error(), work, "$WORK"); got != tt.want {
				t.Errorf("error:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestImportFileFlag reads a file given by path and infers its project
// from where it lies.
func TestImportFileFlag(t *testing.T) {
	work, opts := setup(t, importCases[3])
	opts.File = filepath.Join(work, "proj", ".vscode", "mcp.json")
	opts.RewriteClient = false
	res, err := Import(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(res.Read, []string{opts.File}) {
		t.Errorf("Read = %v", res.Read)
	}
	f, err := config.Load(opts.Config)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Servers["local"].Cwd; got != filepath.Join(work, "proj") {
		t.Errorf("local cwd = %q", got)
	}
	if got := f.Servers["playwright"].Args; !cmp.Equal(got, []string{"@playwright/mcp@latest", "--output-dir", filepath.Join(work, "proj") + "/out"}) {
		t.Errorf("playwright args = %q", got)
	}
	if s := f.Servers["perplexity"]; !s.Disabled || s.Env["PERPLEXITY_API_KEY"] != "${input:perplexity-key}" {
		t.Errorf("perplexity = %+v", s)
	}
}

func TestLocations(t *testing.T) {
	env := func(goos, home string, vars map[string]string) Env {
		return Env{Home: home, Cwd: "/work/p", GOOS: goos, Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	}
	linux := env("linux", "/home/u", nil)
	xdg := env("linux", "/home/u", map[string]string{"XDG_CONFIG_HOME": "/cfg", "CLAUDE_CONFIG_DIR": "/cc"})
	mac := env("darwin", "/Users/u", nil)
	win := env("windows", `C:\Users\u`, map[string]string{"APPDATA": `C:\Users\u\AppData\Roaming`})
	if filepath.Separator == '\\' {
		t.Skip("paths below are written for a Unix test host")
	}
	for _, tt := range []struct {
		c    Client
		env  Env
		want []string
	}{
		{ClaudeDesktop, linux, []string{"/home/u/.config/Claude/claude_desktop_config.json"}},
		{ClaudeDesktop, xdg, []string{"/cfg/Claude/claude_desktop_config.json"}},
		{ClaudeDesktop, mac, []string{"/Users/u/Library/Application Support/Claude/claude_desktop_config.json"}},
		{ClaudeDesktop, win, []string{`C:\Users\u\AppData\Roaming\Claude\claude_desktop_config.json`}},
		{ClaudeCode, linux, []string{"/home/u/.claude.json", "/work/p/.mcp.json (project /work/p)"}},
		{ClaudeCode, xdg, []string{"/cc/.claude.json", "/home/u/.claude.json", "/work/p/.mcp.json (project /work/p)"}},
		{ClaudeCode, win, []string{`C:\Users\u\.claude.json`, `/work/p\.mcp.json (project /work/p)`}},
		{Cursor, mac, []string{"/Users/u/.cursor/mcp.json", "/work/p/.cursor/mcp.json (project /work/p)"}},
		{VSCode, linux, []string{"/home/u/.config/Code/User/mcp.json", "/home/u/.config/Code/User/settings.json", "/work/p/.vscode/mcp.json (project /work/p)"}},
		{VSCode, mac, []string{"/Users/u/Library/Application Support/Code/User/mcp.json", "/Users/u/Library/Application Support/Code/User/settings.json", "/work/p/.vscode/mcp.json (project /work/p)"}},
		{VSCode, win, []string{`C:\Users\u\AppData\Roaming\Code\User\mcp.json`, `C:\Users\u\AppData\Roaming\Code\User\settings.json`, `/work/p\.vscode\mcp.json (project /work/p)`}},
	} {
		var got []string
		for _, l := range Locations(tt.c, tt.env) {
			s := l.Path
			if l.Project != "" {
				s += fmt.Sprintf(" (project %s)", l.Project)
			}
			got = append(got, s)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s on %s (-want +got):\n%s", tt.c, tt.env.GOOS, diff)
		}
	}
	if _, err := ParseClient("zed"); err == nil || !strings.Contains(err.Error(), "claude-desktop, claude-code, cursor, vscode") {
		t.Errorf("ParseClient(zed) = %v", err)
	}
}

// TestVSCodeSettings reads servers from the "mcp" key of VS Code's
// settings.json, comments and all, and rewrites them in place.
func TestVSCodeSettings(t *testing.T) {
	work, opts := setup(t, importCase{VSCode, map[string]string{}})
	settings := filepath.Join(work, "home", ".config", "Code", "User", "settings.json")
	os.MkdirAll(filepath.Dir(settings), 0o755)
	in := "{\n  // editor\n  \"editor.fontSize\": 14,\n  \"mcp\": {\n    \"servers\": {\n      \"everything\": {\"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-everything\"]}\n    }\n  },\n}\n"
	os.WriteFile(settings, []byte(in), 0o644)
	res, err := Import(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(res.Added, []string{"everything"}) {
		t.Errorf("Added = %v", res.Added)
	}
	got, _ := os.ReadFile(settings)
	want := "{\n  // editor\n  \"editor.fontSize\": 14,\n  \"mcp\": {\n    \"servers\": {\n      \"everything\": {\n        \"command\": \"switchboard\",\n        \"args\": [\n          \"connect\",\n          \"everything\"\n        ]\n      }\n    }\n  },\n}\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("settings.json (-want +got):\n%s", diff)
	}
}

// TestRewriteKeepsSwitchboardHome: a client that runs the shim must reach
// the same pool the import wrote to.
func TestRewriteKeepsSwitchboardHome(t *testing.T) {
	work, opts := setup(t, importCases[0])
	home := filepath.Join(work, "sbhome")
	lookup := opts.Env.Lookup
	opts.Env.Lookup = func(k string) (string, bool) {
		if k == "SWITCHBOARD_HOME" {
			return home, true
		}
		return lookup(k)
	}
	opts.Connect = "/opt/switchboard/bin/switchboard"
	if _, err := Import(opts); err != nil {
		t.Fatal(err)
	}
	fs := desktopEntry(t, work, "filesystem")
	if fs.Command != opts.Connect || !cmp.Equal(fs.Args, []string{"connect", "filesystem"}) || fs.Env["SWITCHBOARD_HOME"] != home {
		t.Errorf("filesystem entry = %+v", fs)
	}
}

// TestRewriteAbsoluteSwitchboardHome: a relative SWITCHBOARD_HOME names
// a directory from where the import ran; the client starts the shim
// elsewhere, so its entry gets the absolute path: Setup's (ConnectEnv)
// when it passes one, else the value made absolute against Env.Cwd.
func TestRewriteAbsoluteSwitchboardHome(t *testing.T) {
	for _, tc := range []struct {
		name       string
		connectEnv map[string]string
		want       func(work string) string
	}{
		{name: "setup made it absolute", connectEnv: map[string]string{"SWITCHBOARD_HOME": "/abs/sbhome", "PATH": "/bin"},
			want: func(string) string { return "/abs/sbhome" }},
		{name: "import", want: func(work string) string { return filepath.Join(work, "proj", "sbhome") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work, opts := setup(t, importCases[0])
			lookup := opts.Env.Lookup
			opts.Env.Lookup = func(k string) (string, bool) {
				if k == "SWITCHBOARD_HOME" {
					return "sbhome", true
				}
				return lookup(k)
			}
			opts.Connect = "/opt/switchboard/bin/switchboard"
			opts.ConnectEnv = tc.connectEnv
			if _, err := Import(opts); err != nil {
				t.Fatal(err)
			}
			if got, want := desktopEntry(t, work, "filesystem").Env["SWITCHBOARD_HOME"], tc.want(work); got != want {
				t.Errorf("SWITCHBOARD_HOME = %q, want %q", got, want)
			}
		})
	}
}

// launchEntry is a server entry of a client's file as the tests read it.
type launchEntry struct {
	Command string
	Args    []string
	Env     map[string]string
}

// desktopEntry reads server name's entry from the Claude Desktop config
// of the test's home under work.
func desktopEntry(t *testing.T, work, name string) launchEntry {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(work, "home/.config/Claude/claude_desktop_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ MCPServers map[string]launchEntry }
	if err := json.Unmarshal(doc, &f); err != nil {
		t.Fatal(err)
	}
	return f.MCPServers[name]
}

// TestRewriteToTheShim: on Windows the rewritten entries run the small
// shim with the server's name alone, and an import after that finds them
// already running through Switchboard, whatever the shim's path.
func TestRewriteToTheShim(t *testing.T) {
	work, opts := setup(t, importCases[0])
	opts.Connect, opts.ConnectShim = `C:\Users\me\AppData\Local\Programs\Switchboard\switchboard-connect.exe`, true
	if _, err := Import(opts); err != nil {
		t.Fatal(err)
	}
	fs := desktopEntry(t, work, "filesystem")
	if fs.Command != opts.Connect || !cmp.Equal(fs.Args, []string{"filesystem"}) {
		t.Errorf("filesystem entry = %+v", fs)
	}
	for _, again := range []Options{opts, {Client: opts.Client, Config: opts.Config, Env: opts.Env}} {
		res, err := Import(again)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range res.Entries {
			if e.Name == "filesystem" && (e.Outcome != Connected || e.As != "filesystem") {
				t.Errorf("import after the rewrite (shim %v): filesystem is %s as %q: %s", again.ConnectShim, e.Outcome, e.As, e.Reason)
			}
		}
	}
}

// TestRelativePathsWithoutProject: a file given by path outside any
// project cannot tell where its relative paths start; the report says so.
func TestRelativePathsWithoutProject(t *testing.T) {
	work, opts := setup(t, importCases[3])
	opts.File = filepath.Join(work, "loose.json")
	opts.RewriteClient = false
	os.WriteFile(opts.File, []byte(`{"servers": {"local": {"command": "node", "args": ["build/index.js"]}, "pkg": {"command": "npx", "args": ["-y", "@scope/pkg"]}}}`), 0o600)
	res, err := Import(opts)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"it names relative paths: set cwd to the directory the client started it in"}, nil}
	for i, e := range res.Entries {
		if !cmp.Equal(e.Notes, want[i]) {
			t.Errorf("%s notes = %q, want %q", e.Name, e.Notes, want[i])
		}
	}
}

// TestProjectFileWithoutSlash: `node mcp-server.js` or `python3
// server.py` in a project names a file in the project directory without
// a slash; the client starts it there, so the import sets cwd. A bare
// word that names nothing there (a package, a subcommand) does not.
func TestProjectFileWithoutSlash(t *testing.T) {
	work, opts := setup(t, importCases[3])
	proj := filepath.Join(work, "proj")
	opts.File = filepath.Join(proj, ".vscode", "mcp.json")
	opts.RewriteClient = false
	if err := os.WriteFile(filepath.Join(proj, "server.py"), []byte("print()\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(opts.File, []byte(`{"servers": {
		"py": {"command": "python3", "args": ["server.py"]},
		"js": {"command": "node", "args": ["--enable-source-maps", "server.py"]},
		"fetch": {"command": "uvx", "args": ["mcp-server-fetch"]}
	}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Import(opts); err != nil {
		t.Fatal(err)
	}
	f, err := config.Load(opts.Config)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"py": proj, "js": proj, "fetch": ""} {
		if got := f.Servers[name].Cwd; got != want {
			t.Errorf("%s cwd = %q, want %q", name, got, want)
		}
	}
}

// TestFileWithoutServersIsSkipped: most VS Code users have a settings.json
// with no "mcp" section beside an mcp.json with servers; a Claude Desktop
// file may hold only preferences, a project's .cursor/mcp.json no
// mcpServers. Such a file has no servers to import, which is no error;
// only a file named with --file must hold some.
func TestFileWithoutServersIsSkipped(t *testing.T) {
	for _, tt := range []struct {
		tc    importCase
		empty string // a file of the client's, under the work dir, without servers
		added bool
	}{
		{importCases[3], "home/.config/Code/User/settings.json", true},
		{importCase{ClaudeDesktop, nil}, "home/.config/Claude/claude_desktop_config.json", false},
		{importCase{Cursor, map[string]string{"mcp.json": "home/.cursor/mcp.json"}}, "proj/.cursor/mcp.json", true},
	} {
		t.Run(string(tt.tc.client), func(t *testing.T) {
			work, opts := setup(t, tt.tc)
			empty := filepath.Join(work, tt.empty)
			os.MkdirAll(filepath.Dir(empty), 0o755)
			os.WriteFile(empty, []byte(`{"editor.fontSize": 14, "preferences": {"x": 1}}`), 0o644)
			res, err := Import(opts)
			if err != nil {
				t.Fatalf("Import: %v", err)
			}
			if tt.added != (len(res.Added) > 0) {
				t.Errorf("Added = %v", res.Added)
			}
			if want := empty + ": no servers"; !slices.Contains(res.Notes, want) {
				t.Errorf("Notes = %q, want %q", res.Notes, want)
			}
			o := opts
			o.File = empty
			if _, err := Import(o); err == nil {
				t.Errorf("--file %s without servers: no error", tt.empty)
			}
		})
	}
}

// TestOneFileAtTwoLocationsIsReadOnce: run from the home directory,
// Cursor's user file ~/.cursor/mcp.json is also the project's
// ./.cursor/mcp.json; a CLAUDE_CONFIG_DIR linked to the home makes its
// .claude.json the user's. Each file is read, planned and rewritten once,
// under the first location that names it. On the first edition the file
// was read twice: each entry "present" (the same as itself) the second
// time, and two backups written, the second of the file already rewritten.
func TestOneFileAtTwoLocationsIsReadOnce(t *testing.T) {
	for _, tt := range []struct {
		tc   importCase
		file string // under the work dir
		prep func(t *testing.T, work string, opts *Options)
	}{
		{importCase{Cursor, nil}, "home/.cursor/mcp.json",
			func(t *testing.T, work string, opts *Options) {
				opts.Env.Cwd = opts.Env.Home
				file := filepath.Join(opts.Env.Home, ".cursor", "mcp.json")
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(`{"mcpServers": {"tool": {"command": "uvx", "args": ["tool"]}}}`), 0o644); err != nil {
					t.Fatal(err)
				}
			}},
		{importCase{ClaudeCode, map[string]string{"claude.json": "home/.claude.json"}}, "home/.claude.json",
			func(t *testing.T, work string, opts *Options) {
				if err := os.Symlink(opts.Env.Home, filepath.Join(work, "cc")); err != nil {
					t.Fatal(err)
				}
				lookup := opts.Env.Lookup
				opts.Env.Lookup = func(k string) (string, bool) {
					if k == "CLAUDE_CONFIG_DIR" {
						return filepath.Join(work, "cc"), true
					}
					return lookup(k)
				}
			}},
	} {
		t.Run(string(tt.tc.client), func(t *testing.T) {
			work, opts := setup(t, tt.tc)
			tt.prep(t, work, &opts)
			res, err := Import(opts)
			if err != nil {
				t.Fatalf("Import: %v", err)
			}
			if len(res.Read) != 1 {
				t.Errorf("Read = %q, want the one file", res.Read)
			}
			for _, e := range res.Entries {
				if strings.HasPrefix(e.Reason, "same as") {
					t.Errorf("%s %s: %s (%s)", e.File, e.Where, e.Outcome, e.Reason)
				}
			}
			if len(res.Rewrites) != 1 {
				t.Errorf("%d rewrites, want 1", len(res.Rewrites))
			}
			backups, _ := filepath.Glob(filepath.Join(work, tt.file) + ".switchboard-*.bak")
			if len(backups) != 1 {
				t.Errorf("backups %q, want 1", backups)
			}
		})
	}
}

// TestEnvFileEntryIsImportedDisabled: Switchboard does not read envFile,
// so such an entry would run without its secrets. It is imported disabled
// with a note saying why, and the client's entry, envFile and all, is
// left alone.
func TestEnvFileEntryIsImportedDisabled(t *testing.T) {
	work, opts := setup(t, importCases[2])
	client := filepath.Join(work, "home/.cursor/mcp.json")
	before, _ := os.ReadFile(client)
	res, err := Import(opts)
	if err != nil {
		t.Fatal(err)
	}
	var e *Entry
	for i := range res.Entries {
		if res.Entries[i].Name == "browser" {
			e = &res.Entries[i]
		}
	}
	if e == nil || e.Outcome != Imported || !e.Disabled || e.Rewritten ||
		!slices.ContainsFunc(e.Notes, func(n string) bool { return strings.Contains(n, "envFile") && strings.Contains(n, "does not read it") }) {
		t.Fatalf("browser entry = %+v", e)
	}
	f, err := config.Load(opts.Config)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Servers["browser"].Disabled {
		t.Errorf("browser is enabled in Switchboard's config")
	}
	var doc struct{ MCPServers map[string]map[string]any }
	after, _ := os.ReadFile(client)
	json.Unmarshal(after, &doc)
	var was struct{ MCPServers map[string]map[string]any }
	json.Unmarshal(before, &was)
	if diff := cmp.Diff(was.MCPServers["browser"], doc.MCPServers["browser"]); diff != "" {
		t.Errorf("the client's browser entry changed (-before +after):\n%s", diff)
	}
}

// TestUndo: undoing a rewrite nobody touched since gives back every
// client file byte for byte, also from a rewrite recorded before
// rewrites kept their entries (only the entries' paths).
func TestUndo(t *testing.T) {
	for _, tc := range importCases {
		for _, old := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/old=%v", tc.client, old), func(t *testing.T) {
				work, opts := setup(t, tc)
				before := snapshot(t, work)
				res, err := Import(opts)
				if err != nil {
					t.Fatal(err)
				}
				rws := slices.Clone(res.Rewrites)
				for i := range rws {
					if old {
						rws[i].Entries = nil
					}
				}
				done, rest, err := Undo(rws, stamp)
				if err != nil || len(rest) != 0 {
					t.Fatalf("undo: %v, still to undo %+v", err, rest)
				}
				after := snapshot(t, work)
				for _, dst := range tc.files {
					if after["/"+dst] != before["/"+dst] {
						t.Errorf("%s after undo:\n%s\nwant:\n%s", dst, after["/"+dst], before["/"+dst])
					}
				}
				for _, u := range done {
					if want := u.File + ".switchboard-undone-20260314-150926.bak"; u.KeptAs != want {
						t.Errorf("kept %s as %q, want %s", u.File, u.KeptAs, want)
					}
					for _, e := range u.Entries {
						if e.Left != "" {
							t.Errorf("%s: left as it is: %s", e.Where, e.Left)
						}
					}
				}
				if len(done) != len(res.Rewrites) {
					t.Errorf("undid %d files, rewrote %d", len(done), len(res.Rewrites))
				}
			})
		}
	}
}

func TestParseWhere(t *testing.T) {
	for in, want := range map[string][]string{
		"mcpServers.memory":                      {"mcpServers", "memory"},
		"mcp.servers.a-b_c":                      {"mcp", "servers", "a-b_c"},
		`mcpServers["My Notes"]`:                 {"mcpServers", "My Notes"},
		`projects["/home/me/app"].mcpServers.db`: {"projects", "/home/me/app", "mcpServers", "db"},
		`projects["/p\"].x"].mcpServers["a.b"]`:  {"projects", `/p"].x`, "mcpServers", "a.b"},
		"":                                       nil,
		`mcpServers["x"`:                         nil,
		"mcpServers..x":                          nil,
	} {
		got, ok := parseWhere(in)
		if ok != (want != nil) || !slices.Equal(got, want) {
			t.Errorf("parseWhere(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// TestUpdateConnected: setup run again (UpdateConnected) brings the
// entries that run through Switchboard up to date with the binary and
// environment it writes now, keeping what the user added to them; an
// entry for a server Switchboard's config lacks stays as it is, as do
// all with a plain import; a run with nothing new writes nothing; and
// undo puts back the entries as they were before the first rewrite,
// except one the user changed between the rewrites: putting that back
// would lose what they added, so undo leaves it as it is and says so.
// On the first edition undo put it back, and the user's additions were
// only in undo's copy of the file.
func TestUpdateConnected(t *testing.T) {
	work, opts := setup(t, importCases[0])
	path := filepath.Join(work, "home/.config/Claude/claude_desktop_config.json")
	edit := func(old, new string) {
		t.Helper()
		doc, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(doc), old) {
			t.Fatalf("%v: no %q in\n%s", err, old, doc)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(doc), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ghost := `"ghost": {"command": "/opt/v1/switchboard", "args": ["connect", "ghost"]},`
	edit(`"mcpServers": {`, `"mcpServers": {`+ghost)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	opts.Connect, opts.ConnectEnv, opts.UpdateConnected = "/opt/v1/switchboard", map[string]string{"PATH": "/v1"}, true
	first, err := Import(opts)
	if err != nil {
		t.Fatal(err)
	}
	edit(`"memory": {`, `"memory": {"x-note": "mine",`)
	edit(`"PATH": "/v1"`, `"MY": "1", "PATH": "/v1"`) // memory's env: the first

	opts.Connect, opts.ConnectEnv = "/opt/v2/switchboard", map[string]string{"PATH": "/v2"}
	plain := opts
	plain.UpdateConnected = false
	if res, err := Import(plain); err != nil || len(res.Rewrites) != 0 {
		t.Fatalf("a plain import rewrote %+v (%v)", res, err)
	}
	again, err := Import(opts)
	if err != nil {
		t.Fatal(err)
	}
	var memory struct {
		XNote   string `json:"x-note"`
		Command string
		Args    []string
		Env     map[string]string
	}
	doc, _ := os.ReadFile(path)
	var f struct{ MCPServers map[string]json.RawMessage }
	if err := json.Unmarshal(doc, &f); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(f.MCPServers["memory"], &memory)
	if memory.XNote != "mine" || memory.Command != opts.Connect || !slices.Equal(memory.Args, []string{"connect", "memory"}) ||
		!cmp.Equal(memory.Env, map[string]string{"MY": "1", "PATH": "/v2"}) {
		t.Errorf("memory after the update: %s", f.MCPServers["memory"])
	}
	if fs := desktopEntry(t, work, "filesystem"); fs.Command != opts.Connect || fs.Env["PATH"] != "/v2" {
		t.Errorf("filesystem after the update: %+v", fs)
	}
	if g := desktopEntry(t, work, "ghost"); g.Command != "/opt/v1/switchboard" {
		t.Errorf("the entry for a server Switchboard lacks was changed: %+v", g)
	}
	if len(again.Rewrites) != 1 || !again.Rewrites[0].Entries[0].Updated {
		t.Fatalf("rewrites %+v", again.Rewrites)
	}
	for _, e := range again.Entries {
		if e.Name == "memory" && (e.Outcome != Connected || !e.Rewritten) {
			t.Errorf("memory: %+v", e)
		}
	}
	if res, err := Import(opts); err != nil || len(res.Rewrites) != 0 {
		t.Fatalf("a run with nothing new rewrote %+v (%v)", res.Rewrites, err)
	}

	done, _, err := Undo(append(slices.Clone(first.Rewrites), again.Rewrites...), stamp)
	if err != nil {
		t.Fatal(err)
	}
	back, _ := os.ReadFile(path)
	var got, want struct{ MCPServers map[string]any }
	if err := json.Unmarshal(back, &got); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(orig, &want)
	var memoryNow any
	_ = json.Unmarshal(f.MCPServers["memory"], &memoryNow)
	want.MCPServers["memory"] = memoryNow
	if diff := cmp.Diff(want.MCPServers, got.MCPServers); diff != "" {
		t.Errorf("after undo (-want +got):\n%s", diff)
	}
	for _, u := range done {
		for _, e := range u.Entries {
			switch {
			case e.Where == "mcpServers.memory" && !strings.HasPrefix(e.Left, "changed since setup"):
				t.Errorf("%s: %+v, want it left as it is", e.Where, e)
			case e.Where != "mcpServers.memory" && e.Left != "":
				t.Errorf("%s: left as it is: %s", e.Where, e.Left)
			}
		}
	}
}

// TestUpdateLeavesAnotherHomesEntries: an entry that runs through
// Switchboard is brought up to date only when its env places
// Switchboard's files where this setup's does, compared as `connect`
// resolves them (an XDG directory pinned to where the default is counts
// as the default); one of another Switchboard home stays as it is, so
// that it keeps reaching its own pool, and the result says so. On the
// first edition every such entry got this setup's SWITCHBOARD_HOME.
func TestUpdateLeavesAnotherHomesEntries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pin     func(work string) map[string]string // this setup's ConnectEnv, but PATH
		updated []string
		other   map[string]string // entry -> the config of the home the result names
	}{
		{"this home is SWITCHBOARD_HOME", func(work string) map[string]string {
			return map[string]string{"SWITCHBOARD_HOME": filepath.Join(work, "sb-work")}
		}, []string{"work"}, map[string]string{
			"default": "home/.config/switchboard/config.json", "xc": "xc/switchboard/config.json",
			"state": "home/.config/switchboard/config.json",
		}},
		{"this home is the default", func(string) map[string]string { return nil },
			[]string{"default", "state"}, map[string]string{
				"work": "sb-work/config.json", "xc": "xc/switchboard/config.json",
			}},
		{"this home is XDG_CONFIG_HOME's", func(work string) map[string]string {
			return map[string]string{"XDG_CONFIG_HOME": filepath.Join(work, "xc")}
		}, []string{"xc"}, map[string]string{
			"work": "sb-work/config.json", "default": "home/.config/switchboard/config.json",
			"state": "home/.config/switchboard/config.json",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work, opts := setup(t, importCases[0])
			path := filepath.Join(work, "home/.config/Claude/claude_desktop_config.json")
			entry := func(env string) string {
				return `{"command": "/opt/v1/switchboard", "args": ["connect", "memory"], "env": {` + env + `}}`
			}
			orig := `{"mcpServers": {
  "default": ` + entry(`"PATH": "/v1"`) + `,
  "work": ` + entry(`"SWITCHBOARD_HOME": "`+filepath.Join(work, "sb-work")+`"`) + `,
  "xc": ` + entry(`"XDG_CONFIG_HOME": "`+filepath.Join(work, "xc")+`"`) + `,
  "state": ` + entry(`"XDG_STATE_HOME": "`+filepath.Join(work, "home/.local/state")+`"`) + `
}}
`
			if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
				t.Fatal(err)
			}
			opts.Connect, opts.UpdateConnected = "/opt/v2/switchboard", true
			opts.ConnectEnv = map[string]string{"PATH": "/v2"}
			maps.Copy(opts.ConnectEnv, tc.pin(work))
			res, err := Import(opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range res.Entries {
				if e.Rewritten {
					got = append(got, e.Name)
					if c := desktopEntry(t, work, e.Name); c.Command != opts.Connect || c.Env["PATH"] != "/v2" {
						t.Errorf("%s after the update: %+v", e.Name, c)
					}
					continue
				}
				cfg, ok := tc.other[e.Name]
				if !ok || !strings.Contains(e.Reason, "another Switchboard") || !strings.Contains(e.Reason, filepath.Join(work, cfg)) {
					t.Errorf("%s: %q, want it left as another home's (%s)", e.Name, e.Reason, cfg)
				}
				if c := desktopEntry(t, work, e.Name); c.Command != "/opt/v1/switchboard" {
					t.Errorf("%s, another home's, was changed: %+v", e.Name, c)
				}
			}
			slices.Sort(got)
			if want := slices.Sorted(slices.Values(tc.updated)); !slices.Equal(got, want) {
				t.Errorf("brought up to date: %v, want %v", got, want)
			}
		})
	}
}

// An entry whose client name Switchboard cannot use is imported under
// the name NameFor gives it, numbered (My-Server-2) when that name is
// another server's: Switchboard's, or a client entry's that has it as
// its own. It was reported as a clash and not imported, or took the
// name of the client's own My-Server, which was then the clash.
func TestImportNumbersARenamedEntryWhoseNameIsTaken(t *testing.T) {
	for _, tc := range []struct {
		name, sb, client string
		want             map[string]string // client name -> outcome as
	}{
		{"taken in Switchboard",
			`{"mcpServers": {"My-Server": {"command": "a"}}}`,
			`{"mcpServers": {"My Server": {"command": "b"}}}`,
			map[string]string{"My Server": "imported My-Server-2"}},
		{"taken by the client's own entry",
			`{"mcpServers": {}}`,
			`{"mcpServers": {"My Server": {"command": "b"}, "My-Server": {"command": "c"}}}`,
			map[string]string{"My Server": "imported My-Server-2", "My-Server": "imported My-Server"}},
		{"the same server under the name",
			`{"mcpServers": {"My-Server": {"command": "b"}}}`,
			`{"mcpServers": {"My Server": {"command": "b"}}}`,
			map[string]string{"My Server": "present My-Server"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sbFile, clientFile := filepath.Join(dir, "config.json"), filepath.Join(dir, "mcp.json")
			if err := os.WriteFile(sbFile, []byte(tc.sb), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(clientFile, []byte(tc.client), 0o600); err != nil {
				t.Fatal(err)
			}
			opts := Options{Client: Cursor, Config: sbFile, File: clientFile,
				Env: Env{Home: dir, Cwd: dir, GOOS: "linux", Lookup: func(string) (string, bool) { return "", false }},
				Now: func() time.Time { return stamp }}
			outcomes := func() map[string]string {
				res, err := Import(opts)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]string{}
				for _, e := range res.Entries {
					got[e.Name] = string(e.Outcome) + " " + e.As
				}
				return got
			}
			if diff := cmp.Diff(tc.want, outcomes()); diff != "" {
				t.Fatalf("import (-want +got):\n%s", diff)
			}
			// Again: what was imported is there now, under the same name.
			again := map[string]string{}
			for k, v := range tc.want {
				again[k] = strings.Replace(v, "imported ", "present ", 1)
			}
			if diff := cmp.Diff(again, outcomes()); diff != "" {
				t.Fatalf("the import again (-want +got):\n%s", diff)
			}
		})
	}
}

// TestImportThroughADanglingLink: a config that is a symlink to a file
// not made yet gets the imported servers there, and stays a link; a
// config directory that is a link to a directory not made yet (dotfiles
// not checked out) is an error saying so, and nothing is made on its far
// side. On the first edition the first link was replaced by a file and
// the second failed with "mkdir …: file exists".
func TestImportThroughADanglingLink(t *testing.T) {
	work, opts := setup(t, importCases[0])
	opts.RewriteClient = false
	dot := filepath.Join(work, "dot")
	if err := os.Mkdir(dot, 0o700); err != nil {
		t.Fatal(err)
	}
	opts.Config = filepath.Join(work, "config.json")
	if err := os.Symlink(filepath.Join(dot, "config.json"), opts.Config); err != nil {
		t.Skip("no symlinks:", err)
	}
	if _, err := Import(opts); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(opts.Config); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the config link was replaced (%v)", err)
	}
	if f, err := config.Load(filepath.Join(dot, "config.json")); err != nil || len(f.Servers) == 0 {
		t.Errorf("the link's target: %v", err)
	}

	missing := filepath.Join(work, "not-cloned")
	link := filepath.Join(work, "sbdir")
	if err := os.Symlink(missing, link); err != nil {
		t.Fatal(err)
	}
	opts.Config = filepath.Join(link, "config.json")
	_, err := Import(opts)
	if why := link + " is a symlink to " + missing + ", and " + missing + " does not exist"; err == nil || !strings.Contains(err.Error(), why) {
		t.Errorf("import into a dangling config dir: %v, want it to say %q", err, why)
	}
	if _, err := os.Lstat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link's missing directory was made (%v)", err)
	}
}
