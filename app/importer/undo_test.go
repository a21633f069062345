package importer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/app/config"
)

// TestUndoWithoutItsBackup: an entry whose backup the user deleted (or
// that cannot be read, or no longer has it) is left as it is, still
// running through Switchboard, and the result says so and why; undo puts
// back every other entry all the same, in that file and the others. What
// is still to undo is only what a later undo may yet put back: an entry
// whose backup is there but cannot be read now. On the first edition undo
// failed on the first such entry and put back nothing, then or ever.
func TestUndoWithoutItsBackup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, backup string)
		lost  []string // entries left, by Where; nil: all of the file's
		left  string   // in why they were left
		again bool     // whether they are still to undo
	}{
		{"gone", func(t *testing.T, backup string) { rm(t, backup) }, nil, "is gone", false},
		{"without the entry", func(t *testing.T, backup string) {
			b, err := os.ReadFile(backup)
			if err != nil {
				t.Fatal(err)
			}
			// The first "memory" is mcpServers.memory.
			write(t, backup, strings.Replace(string(b), `"memory": {`, `"memory-was": {`, 1))
		}, []string{"mcpServers.memory"}, "no longer has it", false},
		{"not JSON", func(t *testing.T, backup string) { write(t, backup, "not JSON") }, nil, "is no longer JSON: ", false},
		{"not a file", func(t *testing.T, backup string) {
			rm(t, backup)
			if err := os.Mkdir(backup, 0o700); err != nil {
				t.Fatal(err)
			}
		}, nil, "cannot be read", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work, opts := setup(t, importCases[1])
			file := filepath.Join(work, "home", ".claude.json")
			before := snapshot(t, work)
			res, err := Import(opts)
			if err != nil {
				t.Fatal(err)
			}
			rewrote, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(res.Rewrites, func(rw Rewrite) bool { return rw.File == file })
			if i < 0 || len(res.Rewrites) != 2 {
				t.Fatalf("rewrites %+v", res.Rewrites)
			}
			backup := res.Rewrites[i].Backup
			kept, err := os.ReadFile(backup)
			if err != nil {
				t.Fatal(err)
			}
			tc.spoil(t, backup)

			done, rest, err := Undo(res.Rewrites, stamp)
			if err != nil {
				t.Fatalf("undo: %v", err)
			}
			after := snapshot(t, work)
			if p := "/proj/.mcp.json"; after[p] != before[p] {
				t.Errorf("%s, whose backup is there, after undo:\n%s\nwant:\n%s", p, after[p], before[p])
			}
			j := slices.IndexFunc(done, func(u Undone) bool { return u.File == file })
			if j < 0 || len(done) != 2 {
				t.Fatalf("done = %+v", done)
			}
			var lost []string
			for _, e := range done[j].Entries {
				if e.Left == "" {
					continue
				}
				lost = append(lost, e.Where)
				if !e.Lost || e.Again != tc.again || !strings.Contains(e.Left, backup) || !strings.Contains(e.Left, tc.left) {
					t.Errorf("%s: %+v, want it lost (again: %v) with %q naming %s", e.Where, e, tc.again, tc.left, backup)
				}
			}
			want := tc.lost
			if want == nil {
				want = res.Rewrites[i].Servers
				if string(rewrote) != after["/home/.claude.json"] {
					t.Errorf("with no entry to put back, the file changed:\n%s", after["/home/.claude.json"])
				}
			} else if doc := []byte(after["/home/.claude.json"]); !rewritten(t, doc) || commandOf(t, doc, "sequential-thinking") != "npx" {
				t.Errorf("after undo, memory should run through Switchboard, sequential-thinking not:\n%s", doc)
			}
			if d := cmp.Diff(want, lost); d != "" {
				t.Errorf("entries left (-want +got):\n%s", d)
			}
			if !tc.again {
				if len(rest) != 0 {
					t.Errorf("still to undo: %+v, want nothing", rest)
				}
				return
			}
			// Once the backup can be read, what is still to undo is put
			// back, and the file is as before the rewrite.
			if len(rest) != 1 || rest[0].File != file || len(rest[0].Entries) != len(want) {
				t.Fatalf("still to undo: %+v", rest)
			}
			rm(t, backup)
			write(t, backup, string(kept))
			if done, rest, err = Undo(rest, stamp); err != nil || len(rest) != 0 {
				t.Fatalf("undo again: %v, still to undo %+v", err, rest)
			}
			if got, _ := os.ReadFile(file); string(got) != before["/home/.claude.json"] {
				t.Errorf("after undo again:\n%s\nwant:\n%s", got, before["/home/.claude.json"])
			}
			if len(done) != 1 || slices.ContainsFunc(done[0].Entries, func(e UndoneEntry) bool { return e.Left != "" }) {
				t.Errorf("undo again did %+v", done)
			}
		})
	}
}

// TestUndoGoesOnPastAFile: a file undo cannot write (the client keeps
// writing it) does not stop it from putting back the others; that file's
// rewrites, and only they, are still to undo.
func TestUndoGoesOnPastAFile(t *testing.T) {
	work, opts := setup(t, importCases[1])
	file := filepath.Join(work, "home", ".claude.json")
	before := snapshot(t, work)
	res, err := Import(opts)
	if err != nil {
		t.Fatal(err)
	}
	clientWrites(t, ".claude.json", -1)
	done, rest, err := Undo(res.Rewrites, stamp)
	if !errors.Is(err, config.ErrChanged) {
		t.Fatalf("err = %v, want ErrChanged", err)
	}
	if p := "/proj/.mcp.json"; snapshot(t, work)[p] != before[p] {
		t.Errorf("%s was not put back", p)
	}
	if len(done) != 1 || done[0].File == file {
		t.Errorf("done = %+v", done)
	}
	want := slices.DeleteFunc(slices.Clone(res.Rewrites), func(rw Rewrite) bool { return rw.File != file })
	if d := cmp.Diff(want, rest); d != "" {
		t.Errorf("still to undo (-want +got):\n%s", d)
	}
}

// commandOf is the command of the entry name in doc's mcpServers.
func commandOf(t *testing.T, doc []byte, name string) string {
	t.Helper()
	var f struct {
		MCPServers map[string]clientEntry `json:"mcpServers"`
	}
	if err := json.Unmarshal(doc, &f); err != nil {
		t.Fatal(err)
	}
	return f.MCPServers[name].Command
}

func rm(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestUndoWithoutALaterBackup: setup ran again and brought the entries
// up to date, and the user deleted that run's backup: undo cannot tell
// whether an entry was changed between the two, so it leaves each as it
// is, naming both backups, rather than lose such changes; nothing can
// tell later either, so nothing is still to undo.
func TestUndoWithoutALaterBackup(t *testing.T) {
	work, opts := setup(t, importCases[0])
	path := filepath.Join(work, "home/.config/Claude/claude_desktop_config.json")
	opts.Connect, opts.ConnectEnv, opts.UpdateConnected = "/opt/v1/switchboard", map[string]string{"PATH": "/v1"}, true
	first, err := Import(opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Connect, opts.ConnectEnv = "/opt/v2/switchboard", map[string]string{"PATH": "/v2"}
	again, err := Import(opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Rewrites) != 1 || len(again.Rewrites) != 1 {
		t.Fatalf("rewrites %+v, then %+v", first.Rewrites, again.Rewrites)
	}
	now, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rm(t, again.Rewrites[0].Backup)
	done, rest, err := Undo(append(slices.Clone(first.Rewrites), again.Rewrites...), stamp)
	if err != nil || len(rest) != 0 {
		t.Fatalf("undo: %v, still to undo %+v", err, rest)
	}
	if got, _ := os.ReadFile(path); string(got) != string(now) {
		t.Errorf("the file changed:\n%s", got)
	}
	if len(done) != 1 || len(done[0].Entries) != len(first.Rewrites[0].Servers) {
		t.Fatalf("done = %+v", done)
	}
	for _, e := range done[0].Entries {
		if !e.Lost || e.Again || !strings.Contains(e.Left, again.Rewrites[0].Backup+", is gone") || !strings.Contains(e.Left, first.Rewrites[0].Backup) {
			t.Errorf("%s: %+v, want it left naming both backups", e.Where, e)
		}
	}
}
