package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/app/config/jsonedit"
	"github.com/switchboard-mcp/switchboard/app/importer"
)

// setupClient puts the importer's fixture for client (or text, when
// given) at name under a fresh HOME, with a fresh SWITCHBOARD_HOME, and
// returns the file's path and its text.
func setupClient(t *testing.T, fixture, name, text string) (path, orig string) {
	t.Helper()
	sbHome(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	if fixture != "" {
		b, err := os.ReadFile(filepath.Join("importer", "testdata", fixture))
		if err != nil {
			t.Fatal(err)
		}
		text = string(b)
	}
	path = filepath.Join(home, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, text
}

// clientEdit is a change a client (or its user) makes to its file: fn
// returns the edit to doc, given doc's parse.
type clientEdit func(t *testing.T, std []byte, root *jsonedit.Value) jsonedit.Edit

// apply applies edits to the text doc one after the other, each on the
// document the previous one left.
func apply(t *testing.T, doc string, edits ...clientEdit) string {
	t.Helper()
	for _, fn := range edits {
		std := jsonedit.Standardize([]byte(doc))
		root, err := jsonedit.Parse(std)
		if err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		out, err := jsonedit.Apply([]byte(doc), fn(t, std, root))
		if err != nil {
			t.Fatal(err)
		}
		doc = string(out)
	}
	return doc
}

// at finds the value at keys, or fails the test.
func at(t *testing.T, root *jsonedit.Value, keys ...string) *jsonedit.Value {
	t.Helper()
	v := root
	for _, k := range keys {
		if v = v.Get(k); v == nil {
			t.Fatalf("no %s", strings.Join(keys, "."))
		}
	}
	return v
}

// insert adds key: value at the end of the object at keys.
func insert(key, value string, keys ...string) clientEdit {
	return func(t *testing.T, std []byte, root *jsonedit.Value) jsonedit.Edit {
		e, err := jsonedit.Insert(std, std, at(t, root, keys...), key, []byte(value))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
}

// replace sets the value at keys.
func replace(value string, keys ...string) clientEdit {
	return func(t *testing.T, std []byte, root *jsonedit.Value) jsonedit.Edit {
		e, err := jsonedit.Replace(std, at(t, root, keys...), []byte(value))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
}

// removeLast removes the last member of the object at keys.
func removeLast(keys ...string) clientEdit {
	return func(t *testing.T, std []byte, root *jsonedit.Value) jsonedit.Edit {
		obj := at(t, root, keys...)
		n := len(obj.Members)
		if n < 2 {
			t.Fatalf("%s: nothing to keep", strings.Join(keys, "."))
		}
		return jsonedit.Edit{Start: obj.Members[n-2].Value.End, End: obj.Members[n-1].Value.End}
	}
}

// TestUndoSetupKeepsLaterChanges: a client goes on writing its file after
// setup (Claude Code counts its startups in ~/.claude.json and keeps its
// login there; VS Code's settings.json holds all of the editor's
// settings). `setup --undo` puts back only the entries setup rewrote,
// each as it was, and leaves every later change, comment and all.
func TestUndoSetupKeepsLaterChanges(t *testing.T) {
	for _, tc := range []struct {
		client, fixture, name, text string
		later                       []clientEdit
	}{
		{client: "claude-code", fixture: "claude-code/claude.json", name: ".claude.json", later: []clientEdit{
			replace("57", "numStartups"),
			insert("oauthAccount", `{"emailAddress": "me@example.com", "organizationUuid": "o-1"}`),
			insert("linear", `{"type": "stdio", "command": "npx", "args": ["-y", "linear-mcp"]}`, "mcpServers"),
			replace("0.5", "projects", "/home/me/other", "lastCost"),
		}},
		{client: "vscode", name: ".config/Code/User/settings.json", text: `{
  // the editor
  "editor.fontSize": 14,
  "mcp": {
    "servers": {
      // notes, for the notes
      "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]}, // keep it
      "time": {
        "command": "uvx", /* pinned */
        "args": ["mcp-server-time"]
      },
    }
  },
}
`, later: []clientEdit{
			replace("16", "editor.fontSize"),
			insert("workbench.colorTheme", `"Solarized Dark"`),
			insert("fetch", `{"command": "uvx", "args": ["mcp-server-fetch"]}`, "mcp", "servers"),
		}},
	} {
		t.Run(tc.client, func(t *testing.T) {
			path, orig := setupClient(t, tc.fixture, tc.name, tc.text)
			ctx := context.Background()
			res, err := Setup(ctx, tc.client, path)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Rewrites) != 1 {
				t.Fatalf("setup rewrote %+v", res.Rewrites)
			}
			rewritten, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			now := apply(t, string(rewritten), tc.later...)
			if err := os.WriteFile(path, []byte(now), 0o644); err != nil {
				t.Fatal(err)
			}

			done, err := UndoSetup(tc.client)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The later changes touch no rewritten entry: the file is the
			// original with them made.
			if diff := cmp.Diff(apply(t, orig, tc.later...), string(got)); diff != "" {
				t.Errorf("after undo (-want +got):\n%s", diff)
			}
			if len(done) != 1 || done[0].KeptAs == "" || len(done[0].Entries) != len(res.Rewrites[0].Servers) {
				t.Fatalf("undo did %+v", done)
			}
			for _, e := range done[0].Entries {
				if e.Left != "" {
					t.Errorf("%s left as it is: %s", e.Where, e.Left)
				}
			}
			if kept, err := os.ReadFile(done[0].KeptAs); err != nil || string(kept) != now {
				t.Errorf("the file as it was before the undo was not kept (%v)", err)
			}
		})
	}
}

// TestUndoSetupLeavesEditedEntries: an entry setup rewrote that the user
// changed or removed since is theirs now: undo leaves it as it is and
// says so, and puts back the others.
func TestUndoSetupLeavesEditedEntries(t *testing.T) {
	path, orig := setupClient(t, "claude-code/claude.json", ".claude.json", "")
	ctx := context.Background()
	if _, err := Setup(ctx, "claude-code", path); err != nil {
		t.Fatal(err)
	}
	rewritten, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mine := []clientEdit{
		replace(`{"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory", "--debug"]}`, "mcpServers", "memory"),
		removeLast("projects", "/home/me/app", "mcpServers"),
	}
	if err := os.WriteFile(path, []byte(apply(t, string(rewritten), mine...)), 0o644); err != nil {
		t.Fatal(err)
	}

	done, err := UndoSetup("claude-code")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// sequential-thinking is back as it was; memory is the user's, the
	// project's memory stays gone.
	if diff := cmp.Diff(apply(t, orig, mine...), string(got)); diff != "" {
		t.Errorf("after undo (-want +got):\n%s", diff)
	}
	backup := path + ".switchboard-"
	want := []importer.UndoneEntry{
		{Where: "mcpServers.memory", Left: "changed since setup"},
		{Where: "mcpServers.sequential-thinking"},
		{Where: `projects["/home/me/app"].mcpServers.memory`, Left: "removed since setup"},
	}
	if len(done) != 1 || done[0].File != path || done[0].KeptAs == "" {
		t.Fatalf("undo did %+v", done)
	}
	for i, e := range done[0].Entries {
		if !strings.HasPrefix(e.Backup, backup) {
			t.Errorf("%s: backup %s", e.Where, e.Backup)
		}
		done[0].Entries[i].Backup = ""
	}
	if diff := cmp.Diff(want, done[0].Entries); diff != "" {
		t.Errorf("undo's report (-want +got):\n%s", diff)
	}
}

// TestSamePath: setup refuses a running pool of another config, not one
// that names the same config by a link (a linked ~/.config).
func TestSamePath(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.MkdirAll(filepath.Join(real, "switchboard"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(real, "switchboard", "config.json")
	if err := os.WriteFile(cfg, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{cfg, filepath.Join(real, ".", "switchboard", "config.json"), true},
		{cfg, filepath.Join(dir, "link", "switchboard", "config.json"), true},
		{cfg, filepath.Join(dir, "other", "switchboard", "config.json"), false},
		{filepath.Join(dir, "a", "config.json"), filepath.Join(dir, "b", "config.json"), false},
	} {
		if got := samePath(tc.a, tc.b); got != tc.want {
			t.Errorf("samePath(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestUndoSetupUndoesImportRewrites: `import --rewrite-client` rewrites a
// client's entries as setup does, and `setup --undo` puts them back as
// well: those of an import alone, and those of an import after a setup,
// whose record they join (a server added to the client since setup).
func TestUndoSetupUndoesImportRewrites(t *testing.T) {
	ctx := context.Background()
	undoAll := func(t *testing.T, want, path string) []importer.Undone {
		t.Helper()
		done, err := UndoSetup("claude-code")
		if err != nil {
			t.Fatalf("setup --undo: %v", err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, string(got)); diff != "" {
			t.Errorf("after undo (-want +got):\n%s", diff)
		}
		for _, u := range done {
			for _, e := range u.Entries {
				if e.Left != "" {
					t.Errorf("%s left as it is: %s", e.Where, e.Left)
				}
			}
		}
		return done
	}
	t.Run("import alone", func(t *testing.T) {
		path, orig := setupClient(t, "claude-code/claude.json", ".claude.json", "")
		res, err := Import(ctx, ImportOptions{From: "claude-code", File: path, RewriteClient: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Rewrites) != 1 {
			t.Fatalf("import rewrote %+v", res.Rewrites)
		}
		if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "setup --undo claude-code") }) {
			t.Errorf("the report does not say how to undo: %q", res.Notes)
		}
		done := undoAll(t, orig, path)
		if len(done) != 1 || len(done[0].Entries) != len(res.Rewrites[0].Servers) {
			t.Errorf("undo did %+v", done)
		}
	})
	t.Run("after setup", func(t *testing.T) {
		path, orig := setupClient(t, "claude-code/claude.json", ".claude.json", "")
		if _, err := Setup(ctx, "claude-code", path); err != nil {
			t.Fatal(err)
		}
		added := insert("linear", `{"type": "stdio", "command": "npx", "args": ["-y", "linear-mcp"]}`, "mcpServers")
		rewritten, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(apply(t, string(rewritten), added)), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := Import(ctx, ImportOptions{From: "claude-code", File: path, RewriteClient: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Rewrites) != 1 || !slices.Equal(res.Rewrites[0].Servers, []string{"mcpServers.linear"}) {
			t.Fatalf("import rewrote %+v", res.Rewrites)
		}
		done := undoAll(t, apply(t, orig, added), path)
		if len(done) != 1 || !slices.ContainsFunc(done[0].Entries, func(e importer.UndoneEntry) bool { return e.Where == "mcpServers.linear" }) {
			t.Errorf("undo did %+v", done)
		}
	})
}

// TestUndoSetupWithoutABackup: the user deleted the backup of the first
// setup, and a server added to the client since was set up again, with a
// backup of its own. Undo puts back the one whose backup is there, leaves
// the others (still running through Switchboard) saying how to fix them,
// fails as partial, and forgets them: nothing can put them back later,
// and a next undo has nothing left to do. On the first edition undo
// failed on the missing backup, put back nothing, and every later undo
// failed the same way.
func TestUndoSetupWithoutABackup(t *testing.T) {
	path, _ := setupClient(t, "claude-code/claude.json", ".claude.json", "")
	ctx := context.Background()
	first, err := Setup(ctx, "claude-code", path)
	if err != nil {
		t.Fatal(err)
	}
	rewritten, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	extra := insert("extra", `{"type": "stdio", "command": "/opt/extra/bin/extra-mcp", "args": []}`, "mcpServers")
	if err := os.WriteFile(path, []byte(apply(t, string(rewritten), extra)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Setup(ctx, "claude-code", path); err != nil {
		t.Fatal(err)
	}
	if len(first.Rewrites) != 1 {
		t.Fatalf("rewrites %+v", first.Rewrites)
	}
	gone := first.Rewrites[0].Backup
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}

	done, err := UndoSetup("claude-code")
	paths, perr := ResolvePaths()
	if perr != nil {
		t.Fatal(perr)
	}
	if err == nil || !strings.Contains(err.Error(), "by hand") || !strings.Contains(err.Error(), paths.Config) {
		t.Errorf("err = %v, want the undo failed as partial, naming what to do and %s", err, paths.Config)
	}
	got, rerr := os.ReadFile(path)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if want := apply(t, string(rewritten), extra); string(got) != want {
		t.Errorf("after undo (-want +got):\n%s", cmp.Diff(want, string(got)))
	}
	var lost []string
	for _, u := range done {
		for _, e := range u.Entries {
			switch {
			case e.Where == "mcpServers.extra" && e.Left != "":
				t.Errorf("%s, whose backup is there, left: %s", e.Where, e.Left)
			case e.Where != "mcpServers.extra" && (!e.Lost || !strings.Contains(e.Left, gone)):
				t.Errorf("%s: %+v, want it left naming %s", e.Where, e, gone)
			case e.Left != "":
				lost = append(lost, e.Where)
			}
		}
	}
	if d := cmp.Diff(first.Rewrites[0].Servers, lost); d != "" {
		t.Errorf("entries left (-want +got):\n%s", d)
	}
	if _, err := UndoSetup("claude-code"); !errors.Is(err, ErrNothingToUndo) {
		t.Errorf("undo again: %v, want ErrNothingToUndo", err)
	}
}

// TestUndoSetupKeepsWhatMayYetBeUndone: a backup that is there but cannot
// be read now (here a directory in its place) leaves its entries as they
// are, and the setup record keeps them: once it can be read, the next
// undo puts them back, and then the record goes.
func TestUndoSetupKeepsWhatMayYetBeUndone(t *testing.T) {
	path, orig := setupClient(t, "claude-code/claude.json", ".claude.json", "")
	res, err := Setup(context.Background(), "claude-code", path)
	if err != nil {
		t.Fatal(err)
	}
	backup := res.Rewrites[0].Backup
	kept, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(backup); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(backup, 0o700); err != nil {
		t.Fatal(err)
	}
	done, err := UndoSetup("claude-code")
	if err == nil || !strings.Contains(err.Error(), "setup --undo claude-code` again") {
		t.Errorf("err = %v, want the undo failed as partial, saying to run it again", err)
	}
	if len(done) != 1 || slices.ContainsFunc(done[0].Entries, func(e importer.UndoneEntry) bool { return !e.Again }) {
		t.Errorf("undo did %+v, want every entry left to undo again", done)
	}
	if err := os.Remove(backup); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(backup, kept, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := UndoSetup("claude-code"); err != nil {
		t.Fatalf("undo again: %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != orig {
		t.Errorf("after undo again (-want +got):\n%s", cmp.Diff(orig, string(got)))
	}
	if _, err := UndoSetup("claude-code"); !errors.Is(err, ErrNothingToUndo) {
		t.Errorf("a third undo: %v, want ErrNothingToUndo", err)
	}
}
