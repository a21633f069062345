package importer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/config/jsonedit"
	"github.com/switchboard-mcp/switchboard/app/safefile"
)

// Undone is what Undo did to one client file.
type Undone struct {
	File string
	// KeptAs is where the file as it was before Undo wrote it was kept;
	// empty when Undo did not write it.
	KeptAs  string
	Entries []UndoneEntry
}

// UndoneEntry is one entry a rewrite had replaced.
type UndoneEntry struct {
	Where  string // its path in File
	Backup string // the copy of File that has it as it was before the rewrite
	// Left says why Undo left the entry as it is now (it was changed or
	// removed since the rewrite: it is the user's now; or, with Lost, a
	// backup it needs cannot give it back); empty when Undo put it back.
	Left string
	// Lost: the entry was left because a backup it needs is gone, cannot
	// be read, or no longer has it (Left names the backup). Unlike one the
	// user changed, the entry still runs through Switchboard, and only the
	// user can put it back now, by hand: the undo was partial.
	Lost bool
	// Again: the backup is there but could not be read (its permissions,
	// say), which may pass; the entry is among the rewrites Undo returns
	// as still to undo. A backup gone, not JSON, or without the entry
	// will not give it back later either: the entry is not among them.
	Again bool
}

// Undo puts back, in each client file as it is now, the entries rws
// replaced, each as its backup has it. Everything else in the file stays
// as it is now: clients keep writing their files (Claude Code its
// ~/.claude.json at every start), and users theirs. An entry changed or
// removed since its rewrite is left as it is, and the result says so.
// Before it writes a file, Undo keeps a copy of it next to it. The
// rewrites of one file are undone together, a later one's entry over an
// earlier one's; a later one that only brought an entry up to date
// (Rewritten.Updated) leaves it to the earlier one's backup, unless the
// entry was changed between the two: putting back the earlier one's
// would drop those changes, so it is left as it is too.
//
// Undo does all it can: an entry whose backup cannot give it back is left
// as it is (UndoneEntry.Lost) while the others are put back, and a file
// it cannot write (the client kept writing it: config.ErrChanged) does
// not stop it from undoing the others; its error says which failed. It
// returns what it did, and the rewrites still to undo: those of the files
// it could not write, and the entries left for a reason that may pass
// (UndoneEntry.Again), in rws's order. Those put back, those the user
// changed since, and those no backup will ever give back are done with.
func Undo(rws []Rewrite, now time.Time) (done []Undone, rest []Rewrite, err error) {
	var files []string
	todo := map[string][]undoEntry{}
	for _, rw := range rws {
		entries := rw.Entries
		if len(entries) == 0 {
			// Recorded before rewrites kept their entries: the keys are
			// in the paths, and what was written is not known.
			for _, where := range rw.Servers {
				keys, ok := parseWhere(where)
				if !ok {
					return nil, rws, fmt.Errorf("undo %s: cannot read the entry path %q", rw.File, where)
				}
				entries = append(entries, Rewritten{Keys: keys})
			}
		}
		if _, ok := todo[rw.File]; !ok {
			files = append(files, rw.File)
		}
		for i, e := range entries {
			ue := undoEntry{Rewritten: e, where: strings.Join(e.Keys, "."), backup: rw.Backup}
			if i < len(rw.Servers) {
				ue.where = rw.Servers[i]
			}
			list := todo[rw.File]
			switch j := slices.IndexFunc(list, func(x undoEntry) bool { return slices.Equal(x.Keys, e.Keys) }); {
			case j >= 0 && e.Updated:
				// Brought up to date: the earlier rewrite's backup
				// has the entry as it was before Switchboard.
				list[j].updates = append(list[j].updates, undoUpdate{prior: list[j].Rewritten, backup: rw.Backup})
				list[j].Wrote = e.Wrote
			case j >= 0:
				list[j] = ue
			default:
				todo[rw.File] = append(list, ue)
			}
		}
	}
	var errs []error
	for _, file := range files {
		u, err := undoFile(file, todo[file], now)
		if err != nil {
			errs = append(errs, err)
			rest = append(rest, stillToUndo(rws, file, nil)...)
			continue
		}
		done = append(done, u)
		var again [][]string
		for i, e := range u.Entries { // one for each of todo[file], in order
			if e.Again {
				again = append(again, todo[file][i].Keys)
			}
		}
		if len(again) > 0 {
			rest = append(rest, stillToUndo(rws, file, func(keys []string) bool {
				return slices.ContainsFunc(again, func(k []string) bool { return slices.Equal(k, keys) })
			})...)
		}
	}
	return done, rest, errors.Join(errs...)
}

// stillToUndo returns, in order, the rewrites of file in rws, narrowed to
// the entries keep picks (all when keep is nil). An entry that later
// rewrites brought up to date stays with all of them: undoing it needs
// each one's backup.
func stillToUndo(rws []Rewrite, file string, keep func(keys []string) bool) []Rewrite {
	var out []Rewrite
	for _, rw := range rws {
		switch {
		case rw.File != file:
			continue
		case keep == nil:
			out = append(out, rw)
			continue
		}
		n := Rewrite{File: rw.File, Backup: rw.Backup}
		if len(rw.Entries) == 0 { // recorded with the paths alone
			for _, where := range rw.Servers {
				if keys, ok := parseWhere(where); ok && keep(keys) {
					n.Servers = append(n.Servers, where)
				}
			}
		}
		for i, e := range rw.Entries {
			if !keep(e.Keys) {
				continue
			}
			where := strings.Join(e.Keys, ".")
			if i < len(rw.Servers) {
				where = rw.Servers[i]
			}
			n.Servers, n.Entries = append(n.Servers, where), append(n.Entries, e)
		}
		if len(n.Servers) > 0 {
			out = append(out, n)
		}
	}
	return out
}

// undoEntry is one entry to put back, and the backup that has it.
type undoEntry struct {
	Rewritten
	where, backup string
	// updates are the later rewrites that brought it up to date, in order.
	updates []undoUpdate
}

// undoUpdate is a rewrite that brought an entry up to date: its backup
// has the entry as it found it, which is what the rewrite before it
// wrote (prior) unless the entry was changed in between.
type undoUpdate struct {
	prior  Rewritten
	backup string
}

// jsonDoc is a client file's text, standardized and parsed.
type jsonDoc struct {
	doc, std []byte
	root     *jsonedit.Value
}

// undoBackups are the backups one undo of a file has read, by path, each
// read once.
type undoBackups map[string]backupRead

// backupRead is a backup as read: its document, or why it cannot give
// entries back.
type backupRead struct {
	doc *jsonDoc
	// err is why it cannot be read; again says it may be read later:
	// it is there (not gone, and JSON when it could be read).
	err   error
	again bool
}

func (bs undoBackups) read(path string) backupRead {
	if r, ok := bs[path]; ok {
		return r
	}
	var r backupRead
	doc, err := safefile.Read(path, maxClientFileBytes)
	switch {
	case err != nil:
		r.err, r.again = err, !errors.Is(err, fs.ErrNotExist)
	default:
		r.doc, r.err = parseDoc(path, doc)
	}
	bs[path] = r
	return r
}

func parseDoc(path string, doc []byte) (*jsonDoc, error) {
	d := &jsonDoc{doc: doc, std: jsonedit.Standardize(doc)}
	var err error
	if d.root, err = jsonedit.Parse(d.std); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

func (d *jsonDoc) at(keys []string) *jsonedit.Value {
	v := d.root
	for _, k := range keys {
		if v = v.Get(k); v == nil {
			return nil
		}
	}
	return v
}

// undoFile puts back entries in file, as it is when written: the client
// may write its file meanwhile (config.EditFile).
func undoFile(file string, entries []undoEntry, now time.Time) (Undone, error) {
	u := Undone{File: file}
	bs := undoBackups{}
	err := config.EditFile(file, maxClientFileBytes, 0o600, func(doc []byte, exists bool) ([]byte, error) {
		if err := dropBackup(&u.KeptAs); err != nil {
			return nil, err
		}
		u.Entries = nil
		if !exists {
			for _, e := range entries {
				u.Entries = append(u.Entries, UndoneEntry{Where: e.where, Backup: e.backup, Left: "the file is gone"})
			}
			return nil, nil
		}
		cur, err := parseDoc(file, doc)
		if err != nil {
			return nil, fmt.Errorf("%w; nothing was put back", err)
		}
		out, err := undoEdits(cur, entries, bs, &u)
		if out == nil || err != nil {
			return nil, err
		}
		if u.KeptAs, err = writeBackup(file, "switchboard-undone", doc, now); err != nil {
			return nil, err
		}
		if testHookEdited != nil {
			testHookEdited(file)
		}
		return out, nil
	})
	if err != nil {
		_ = dropBackup(&u.KeptAs)
		u.Entries = nil
		return u, fmt.Errorf("undo %s: %w", file, clientBusy(clientOf(file), err))
	}
	return u, nil
}

// clientOf names, for a message, the client whose file path is.
func clientOf(path string) string {
	if filepath.Base(path) == ".claude.json" {
		return string(ClaudeCode)
	}
	return "the client"
}

// undoEdits returns cur with entries put back as their backups have them
// (nil when none is), and says in u what it did with each, one
// UndoneEntry for each of entries, in order.
func undoEdits(cur *jsonDoc, entries []undoEntry, bs undoBackups, u *Undone) ([]byte, error) {
	var edits []jsonedit.Edit
	for _, e := range entries {
		ue := UndoneEntry{Where: e.where, Backup: e.backup}
		v := cur.at(e.Keys)
		switch {
		case v == nil:
			ue.Left = "removed since setup"
		case !e.isWhatWasWritten(v.Raw(cur.std)):
			ue.Left = "changed since setup"
		}
		if ue.Left == "" {
			if b, w := e.original(bs, &ue); w != nil {
				edit, err := jsonedit.ReplaceWith(cur.doc, cur.std, v, b.doc, b.std, w)
				if err != nil {
					return nil, err
				}
				edits = append(edits, edit)
			}
		}
		u.Entries = append(u.Entries, ue)
	}
	if len(edits) == 0 {
		return nil, nil
	}
	return jsonedit.Apply(cur.doc, edits...)
}

// original finds the entry as it was before its first rewrite: w, in its
// backup b. It checks first that each later rewrite that brought the
// entry up to date found it as the one before had written it. When the
// entry cannot be put back, original returns a nil w and says why in ue.
func (e undoEntry) original(bs undoBackups, ue *UndoneEntry) (b *jsonDoc, w *jsonedit.Value) {
	for _, up := range e.updates {
		r := bs.read(up.backup)
		if r.err != nil {
			ue.lost(r, "undo cannot tell whether it was changed before setup ran again and brought it up to date: the backup from then, "+up.backup+",")
			ue.Left += " (before setup, it was as in " + e.backup + ")"
			return nil, nil
		}
		if found := r.doc.at(e.Keys); found == nil || !(undoEntry{Rewritten: up.prior}).isWhatWasWritten(found.Raw(r.doc.std)) {
			ue.Left = "changed since setup, before setup ran again and brought it up to date"
			return nil, nil
		}
	}
	r := bs.read(e.backup)
	if r.err != nil {
		ue.lost(r, "its backup "+e.backup)
		return nil, nil
	}
	if w = r.doc.at(e.Keys); w == nil {
		ue.Left, ue.Lost = "its backup "+e.backup+" no longer has it", true
		return nil, nil
	}
	return r.doc, w
}

// lost says in ue that the entry was left because the backup what names
// could not be read, as r says.
func (ue *UndoneEntry) lost(r backupRead, what string) {
	ue.Lost, ue.Again = true, r.again
	switch {
	case errors.Is(r.err, fs.ErrNotExist):
		ue.Left = what + " is gone"
	case !r.again:
		ue.Left = fmt.Sprintf("%s is no longer JSON: %v", what, r.err)
	default:
		ue.Left = fmt.Sprintf("%s cannot be read: %v", what, r.err)
	}
}

// isWhatWasWritten says whether raw, an entry as the file has it now, is
// the one the rewrite wrote: the same JSON, however laid out (a client
// may rewrite the whole file). For a rewrite recorded without what it
// wrote, an entry that runs through Switchboard is taken for it.
func (e undoEntry) isWhatWasWritten(raw []byte) bool {
	var now any
	if json.Unmarshal(raw, &now) != nil {
		return false
	}
	if e.Wrote != nil {
		var wrote any
		return json.Unmarshal(e.Wrote, &wrote) == nil && reflect.DeepEqual(now, wrote)
	}
	var ce clientEntry
	if json.Unmarshal(raw, &ce) != nil || ce.Command == "" {
		return false
	}
	_, ok := (&importer{}).connected(ce)
	return ok
}

// parseWhere turns an entry's path as Entry.Where writes it
// (projects["/p"].mcpServers.db) into its keys.
func parseWhere(s string) ([]string, bool) {
	var keys []string
	for s != "" {
		if s[0] == '[' {
			dec := json.NewDecoder(strings.NewReader(s[1:]))
			var k string
			if dec.Decode(&k) != nil {
				return nil, false
			}
			rest := s[1+dec.InputOffset():]
			if !strings.HasPrefix(rest, "]") {
				return nil, false
			}
			keys, s = append(keys, k), rest[1:]
			continue
		}
		if len(keys) > 0 {
			if s[0] != '.' {
				return nil, false
			}
			s = s[1:]
		}
		n := strings.IndexAny(s, ".[")
		if n < 0 {
			n = len(s)
		}
		if n == 0 {
			return nil, false
		}
		keys, s = append(keys, s[:n]), s[n:]
	}
	return keys, len(keys) > 0
}
