package importer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/app/config"
)

// clientWrites sets testHookEdited to write to the file named base, as a
// running client would while Switchboard edits it: times times (-1:
// every time), each write adding "clientWrote": N at the top. It
// returns how many it made.
func clientWrites(t *testing.T, base string, times int) *int {
	t.Helper()
	n := new(int)
	testHookEdited = func(path string) {
		if filepath.Base(path) != base || times >= 0 && *n >= times {
			return
		}
		*n++
		clientWrite(t, path, *n)
	}
	t.Cleanup(func() { testHookEdited = nil })
	return n
}

// clientWrite replaces the file at path, as Claude Code does, with one
// more top-level member.
func clientWrite(t *testing.T, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(b), "{", "{\n  \"clientWrote\": "+strings.Repeat("1", n)+",", 1)
	tmp := path + ".client-tmp"
	if err := os.WriteFile(tmp, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// rewritten says whether doc, ~/.claude.json, has its memory server
// rewritten to connect to Switchboard.
func rewritten(t *testing.T, doc []byte) bool {
	t.Helper()
	var f struct {
		MCPServers map[string]clientEntry `json:"mcpServers"`
	}
	if err := json.Unmarshal(doc, &f); err != nil {
		t.Fatal(err)
	}
	args := f.MCPServers["memory"].Args
	return len(args) > 0 && args[0] == "connect"
}

// backups lists the backups next to path.
func backups(t *testing.T, path string) []string {
	t.Helper()
	m, err := filepath.Glob(path + ".switchboard-*.bak")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRewriteKeepsWhatTheClientWritesMeanwhile: Claude Code rewrites
// ~/.claude.json while it runs; a write of its between the rewrite's
// read and its rename used to be lost (the rewrite renamed the file as
// it had read it, edited, over it). It must survive, with the rewrite
// made on top of it, and the backup must be the file the rewrite
// replaced.
func TestRewriteKeepsWhatTheClientWritesMeanwhile(t *testing.T) {
	work, opts := setup(t, importCases[1])
	file := filepath.Join(work, "home", ".claude.json")
	n := clientWrites(t, ".claude.json", 1)
	res, err := Import(opts)
	if err != nil {
		t.Fatal(err)
	}
	if *n != 1 {
		t.Fatalf("the client wrote %d times, want 1", *n)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"clientWrote": 1,`) {
		t.Errorf("the client's write was lost:\n%s", got)
	}
	if !rewritten(t, got) {
		t.Errorf("the rewrite was not made:\n%s", got)
	}
	bak := backups(t, file)
	if i := slices.IndexFunc(res.Rewrites, func(rw Rewrite) bool { return rw.File == file }); len(bak) != 1 || i < 0 || res.Rewrites[i].Backup != bak[0] {
		t.Fatalf("backups %v, the rewrites %+v", bak, res.Rewrites)
	}
	if b, _ := os.ReadFile(bak[0]); !strings.Contains(string(b), `"clientWrote": 1,`) {
		t.Errorf("the backup is not the file the rewrite replaced:\n%s", b)
	}
}

// TestRewriteGivesUpWhenTheClientKeepsWriting: past the retries, the
// rewrite fails saying why, and leaves the file as the client wrote it,
// with no backup and no rewrite reported.
func TestRewriteGivesUpWhenTheClientKeepsWriting(t *testing.T) {
	work, opts := setup(t, importCases[1])
	file := filepath.Join(work, "home", ".claude.json")
	n := clientWrites(t, ".claude.json", -1)
	res, err := Import(opts)
	if !errors.Is(err, config.ErrChanged) || !strings.Contains(err.Error(), "is claude-code running?") {
		t.Fatalf("err = %v, want ErrChanged naming the client", err)
	}
	if res != nil && slices.ContainsFunc(res.Rewrites, func(rw Rewrite) bool { return rw.File == file }) {
		t.Errorf("a rewrite of %s reported: %+v", file, res.Rewrites)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"clientWrote": ` + strings.Repeat("1", *n) + ","; !strings.HasPrefix(string(got), "{\n  "+want) || rewritten(t, got) {
		t.Errorf("the file is not as the client last wrote it (%s):\n%s", want, got)
	}
	if bak := backups(t, file); len(bak) != 0 {
		t.Errorf("backups of edits that did not land: %v", bak)
	}
}

// TestImportKeepsWhatIsWrittenToTheConfigMeanwhile: Switchboard's
// config written between the import's read and its rename (a server
// added in an editor) keeps that write, and gets the imported servers.
func TestImportKeepsWhatIsWrittenToTheConfigMeanwhile(t *testing.T) {
	_, opts := setup(t, importCases[1])
	opts.RewriteClient = false
	testHookEdited = func(path string) {
		if path != opts.Config {
			return
		}
		testHookEdited = nil
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		doc := strings.Replace(string(b), `"mcpServers": {`, `"mcpServers": {"meanwhile": {"command": "cat"},`, 1)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { testHookEdited = nil })
	res, err := Import(opts)
	if err != nil {
		t.Fatal(err)
	}
	f, err := config.Load(opts.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Servers["meanwhile"]; !ok {
		t.Errorf("the server added meanwhile was lost: %v", f.Servers)
	}
	for _, name := range res.Added {
		if _, ok := f.Servers[name]; !ok {
			t.Errorf("imported %s is missing", name)
		}
	}
}

// TestUndoKeepsWhatTheClientWritesMeanwhile: as for the rewrite, the
// undo's edit is made on the file as the client left it.
func TestUndoKeepsWhatTheClientWritesMeanwhile(t *testing.T) {
	work, opts := setup(t, importCases[1])
	file := filepath.Join(work, "home", ".claude.json")
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Import(opts)
	if err != nil {
		t.Fatal(err)
	}
	clientWrites(t, ".claude.json", 1)
	done, _, err := Undo(res.Rewrites, stamp)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(string(before), "{", "{\n  \"clientWrote\": 1,", 1); string(got) != want {
		t.Errorf("after undo:\n%s\nwant:\n%s", got, want)
	}
	i := slices.IndexFunc(done, func(u Undone) bool { return u.File == file })
	if i < 0 || done[i].KeptAs == "" {
		t.Fatalf("done = %+v", done)
	}
	if b, _ := os.ReadFile(done[i].KeptAs); !strings.Contains(string(b), `"clientWrote": 1,`) {
		t.Errorf("the copy kept is not the file undo replaced:\n%s", b)
	}
}

// TestUndoGivesUpWhenTheClientKeepsWriting: past the retries, undo fails
// saying why and leaves the file as the client wrote it.
func TestUndoGivesUpWhenTheClientKeepsWriting(t *testing.T) {
	work, opts := setup(t, importCases[1])
	file := filepath.Join(work, "home", ".claude.json")
	res, err := Import(opts)
	if err != nil {
		t.Fatal(err)
	}
	n := clientWrites(t, ".claude.json", -1)
	done, _, err := Undo(res.Rewrites, stamp)
	if !errors.Is(err, config.ErrChanged) {
		t.Fatalf("err = %v, want ErrChanged", err)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"clientWrote": ` + strings.Repeat("1", *n) + ","; !strings.HasPrefix(string(got), "{\n  "+want) || !rewritten(t, got) {
		t.Errorf("the file is not as the client last wrote it:\n%s", got)
	}
	if slices.ContainsFunc(done, func(u Undone) bool { return u.File == file }) {
		t.Errorf("done = %+v", done)
	}
	if m, _ := filepath.Glob(file + ".switchboard-undone-*.bak"); len(m) != 0 {
		t.Errorf("copies of undos that did not land: %v", m)
	}
}
