package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/switchboard-mcp/switchboard/app/fileid"
)

// A database file deleted (or replaced) while the store runs would take
// everything recorded until the stop with it, the children leak detection
// needs included, while status said all was well: the writer looks at
// its path every fileCheckInterval while it writes (and when Err is
// asked), and recreates the file there, with the run and what it has
// open. The journal likewise.

// fileCheckInterval is how often, at most, the writer looks whether its
// files are still at their paths while it writes.
const fileCheckInterval = time.Second

// refusedRetry is how often the writer tries again a file at its path
// that it could not make its own (another history's, one on a full disk):
// each try reads it all (quick_check). Another file there (or none) is
// tried at the next look.
const refusedRetry = 30 * time.Second

// carried is what a run has open that a recreated database file must
// hold: the children it runs (leak detection's record of them) and its
// open sessions, as rows of carriedBackendCols and carriedSessionCols.
type carried struct {
	backends, sessions [][]any
}

const (
	carriedBackendCols = "run, server, session, pid, process_start, command, started, roots, resolved_command"
	carriedSessionCols = "run, id, server, client_name, client_version, transport, peer_pid, connected"
)

// checkFile recreates the database file when another file took its path
// (or none: it was deleted), or tries again when that failed, and the
// journal likewise. It looks at most every fileCheckInterval, unless
// forced.
func (w *writer) checkFile(now time.Time, force bool) {
	if !force && now.Sub(w.checked) < fileCheckInterval {
		return
	}
	w.checked = now
	switch {
	case w.conn != nil && !w.s.fileGone():
		w.armMarker()
	case w.conn == nil && w.refused != nil && now.Sub(w.refusedAt) < refusedRetry && w.stillThere(w.refused):
	default:
		w.reopen(now)
	}
	w.checkJournal()
}

// armMarker arms the check of the database file's marker once a
// checkpoint has written it there (Store.markFile).
func (w *writer) armMarker() {
	w.s.errMu.Lock()
	armed := w.s.armed || w.s.marker == 0
	w.s.errMu.Unlock()
	if !armed {
		w.s.armMarker(w.conn)
	}
}

// stillThere says whether the file at the path is f.
func (w *writer) stillThere(f os.FileInfo) bool {
	fi, err := fileid.Stat(w.s.path)
	return err == nil && os.SameFile(f, fi)
}

// reopen closes the database file that left its path and makes one
// there, for this run to go on in.
func (w *writer) reopen(now time.Time) {
	s := w.s
	if w.conn != nil {
		s.log.Warn("history: the database file was deleted, replaced or truncated while Switchboard runs: making it again at its path (what it held is not in the new one)",
			"path", s.path)
		c, err := w.carry()
		if err != nil {
			s.log.Warn("history: the children and sessions open cannot be read from the file that left: the new one lacks them", "err", err)
		}
		w.carried = c
		if s.fileTruncated() {
			// Still at its path, it is one SQLite would write its WAL's
			// pages back into as it closes it, making a damaged file there:
			// moved aside, it is one that left, which SQLite leaves as it is.
			if aside, err := moveAside(s.path, now, "", "-wal", "-shm"); err != nil {
				s.log.Warn("history: move the truncated database file aside", "err", err)
			} else {
				s.log.Warn("history: moved what is left of the truncated database file aside", "aside", aside)
			}
		}
		w.close()
		if s.fileOverwritten() {
			// The file at the path is this one, with another content:
			// closed last, the write connection would write its WAL's
			// pages into it. A reader's lock keeps it from that.
			s.closeWriterFirst()
		} else {
			s.rdb().Close()
			s.wdb.Close()
		}
		// SQLite leaves a moved file's WAL and shared memory at its path
		// when it closes it (they go by name, and could be another file's
		// by then): they are the old file's, and the file now there, or
		// made there, would read the old file's pages from them.
		for _, suffix := range []string{"-wal", "-shm"} {
			if err := os.Remove(s.path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
				s.log.Warn("history: remove the WAL of the file that left", "err", err)
			}
		}
	}
	if err := w.recreate(); err != nil {
		err = fmt.Errorf("history: %w, and cannot be made again: %w", errFileGone, err)
		if w.noDB == nil || w.noDB.Error() != err.Error() {
			s.log.Error("history: recording nothing until the database file can be made again", "err", err)
		}
		w.noDB = err
		w.refused, _ = fileid.Stat(s.path)
		w.refusedAt = now
		s.setErr(err)
		return
	}
	w.noDB, w.carried, w.refused = nil, carried{}, nil
	s.setErr(nil)
	w.wrote() // a failure of the new file is news
	s.rec.requeueRowed()
	s.log.Info("history: recreated the database file", "path", s.path, "run", s.run)
}

// closeWriterFirst closes the write connection while a reader holds a
// read transaction open, then the readers: SQLite writes the WAL back into
// the database file (a checkpoint) as the last connection to it closes,
// and read-only ones never write.
func (s *Store) closeWriterFirst() {
	ctx := context.Background()
	rdb := s.rdb()
	defer rdb.Close()
	tx, err := rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err == nil {
		var v int64
		err = tx.QueryRowContext(ctx, "PRAGMA schema_version").Scan(&v)
		defer tx.Rollback()
	}
	if err != nil {
		s.log.Warn("history: hold the file copied over the database while closing it (the WAL may be written into it)", "err", err)
	}
	s.wdb.Close()
}

// recreate makes a database file at the path for this run and attaches
// the writer and the readers to it.
func (w *writer) recreate() error {
	s := w.s
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	if err := createPrivate(s.path); err != nil {
		return err
	}
	db, err := s.openWriteDB()
	if err != nil {
		return err
	}
	if err := restartRun(db, s.run, s.started, s.opts.Version, w.carried); err != nil {
		db.Close()
		return s.wrap(err)
	}
	s.wdb = db
	s.markFile(db)
	if err := w.attach(); err != nil {
		db.Close()
		return err
	}
	if err := s.openReaders(); err != nil {
		w.close()
		db.Close()
		return err
	}
	return nil
}

// carry reads what this run has open from the database file open.
func (w *writer) carry() (c carried, err error) {
	if c.backends, err = w.readRows(`SELECT ` + carriedBackendCols + ` FROM backends WHERE run = ? AND exited IS NULL`); err != nil {
		return c, fmt.Errorf("read the children: %w", err)
	}
	if c.sessions, err = w.readRows(`SELECT ` + carriedSessionCols + ` FROM sessions WHERE run = ? AND disconnected IS NULL`); err != nil {
		return c, fmt.Errorf("read the sessions: %w", err)
	}
	return c, nil
}

// readRows is the rows q selects for this run, their values as they are.
func (w *writer) readRows(q string) ([][]any, error) {
	rows, err := w.conn.QueryContext(w.ctx, q, w.run)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, vals)
	}
	return out, rows.Err()
}

// checkJournal maps the journal again from the file at its path when
// that is not the file mapped whole: deleted, replaced, or truncated in
// place (a store past its new end would fault), or when a store faulted
// already (the mapping is lost): a crash must find it there. What the
// journal listed goes with it into the new file, unless its mapping is
// lost or shrank (its requests then got their rows: journalLostLocked);
// what a file put in its place listed is not this run's.
func (w *writer) checkJournal() {
	r := &w.s.rec
	j := r.journal
	if j == nil || j.file == nil {
		return // none, or not mapped (history off)
	}
	r.mu.Lock()
	lost := j.lost != nil
	r.mu.Unlock()
	path := journalPath(w.s.path)
	fi, err := fileid.Stat(path)
	same := err == nil && os.SameFile(j.file, fi)
	shrunk := same && fi.Size() < journalSize
	if !lost && !shrunk && (same || err != nil && !errors.Is(err, fs.ErrNotExist)) {
		return
	}
	if (lost || shrunk) && w.journalErr == "" { // said once, not at each try
		w.s.log.Warn("history: the journal of requests in flight shrank while Switchboard runs (was it truncated?): the requests it listed get their rows, and it is made again",
			"path", path)
	}
	fresh, _, err := openJournal(w.s.path)
	r.mu.Lock()
	if shrunk {
		j.lose(errShrunk(path)) // the next store past its end would fault
	}
	if err != nil {
		j.remapErr = err
		r.mu.Unlock()
		if w.journalErr != err.Error() {
			w.s.log.Warn("history: the journal of requests in flight was deleted, replaced or truncated and cannot be made again: a crash loses those of the last batch",
				"err", err)
		}
		w.journalErr = err.Error()
		return
	}
	unmap := j.moveTo(fresh)
	r.mu.Unlock()
	w.journalErr = ""
	if err := unmap(); err != nil {
		w.s.log.Warn("history: unmap the journal that was deleted, replaced or truncated", "err", err)
	}
	w.s.log.Info("history: recreated the journal of requests in flight", "path", path)
}
