package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one numbered file of migrations/: applying migration i
// takes the schema from version i-1 to version i.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations are the embedded files in order; the schema version is
// len(migrations). Their numbers must run 1, 2, 3... without gaps.
var migrations = mustLoadMigrations(migrationFiles)

func mustLoadMigrations(fsys fs.FS) []migration {
	ms, err := loadMigrations(fsys)
	if err != nil {
		panic(err)
	}
	return ms
}

func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []migration
	for i, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v != i+1 {
			return nil, fmt.Errorf("migration %s: want the name to start with %04d_", name, i+1)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: base, sql: string(b)})
	}
	return out, nil
}

// migrate brings db to the newest schema in one transaction, recording
// the version in PRAGMA user_version (which is part of the transaction).
// A database from a newer build is refused; a non-empty database without
// a version is not ours.
func migrate(db *sql.DB) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var v, objects int
	if err := tx.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v > len(migrations) {
		return fmt.Errorf("%w (schema version %d, this build knows %d)", ErrTooNew, v, len(migrations))
	}
	if v == len(migrations) {
		return nil
	}
	if v == 0 {
		if err := tx.QueryRow("SELECT count(*) FROM sqlite_schema").Scan(&objects); err != nil {
			return err
		}
		if objects > 0 {
			return fmt.Errorf("%w: it has tables but no schema version", ErrCorrupt)
		}
	}
	for _, m := range migrations[v:] {
		if _, err := tx.Exec(m.sql); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
		return err
	}
	return tx.Commit()
}

// startRun closes the books on earlier runs that never ended (their
// in-flight rows become abandoned, with the requests their journal lists,
// and the runs crashed) and starts a new run, in one transaction. The run
// the journal's stop mark names stopped cleanly without marking itself
// ended: it is ended as a clean stop would have, not crashed.
func startRun(db *sql.DB, version string, now time.Time, listed []journaled, stop journalStop) (run int64, err error) {
	tx, err := db.Begin()
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if len(listed) > 0 {
		owed, err := journalOwed(context.Background(), tx, listed[0].Run)
		if err != nil {
			return 0, err
		}
		if !owed {
			if owed, err = adoptJournalRun(tx, listed); err != nil {
				return 0, err
			}
		}
		if owed {
			if err := recordJournaled(tx, listed, stop.At != 0 && stop.Run == listed[0].Run); err != nil {
				return 0, err
			}
		}
	}
	if stop.At != 0 {
		if _, err := tx.Exec(`UPDATE request_log SET status = ?, error = ? WHERE run = ? AND status = 0`,
			statusCodes[StatusUnknown], unknownError, stop.Run); err != nil {
			return 0, fmt.Errorf("close the requests of run %d: %w", stop.Run, err)
		}
		if _, err := tx.Exec(`UPDATE runs SET ended = ? WHERE id = ? AND ended IS NULL`, stop.At, stop.Run); err != nil {
			return 0, fmt.Errorf("end run %d: %w", stop.Run, err)
		}
	}
	if stop.Alive != 0 {
		// The journal saw the run alive later than its database did: a
		// crash while the database refused the run's writes.
		if _, err := tx.Exec(`UPDATE runs SET alive = ?1 WHERE id = ?2 AND ended IS NULL AND coalesce(alive, 0) < ?1`, stop.Alive, stop.Run); err != nil {
			return 0, fmt.Errorf("age run %d: %w", stop.Run, err)
		}
	}
	if err := endCrashedRuns(tx, 0); err != nil {
		return 0, err
	}
	res, err := tx.Exec(`INSERT INTO runs (started, pid, version) VALUES (?, ?, ?)`, now.UnixMicro(), os.Getpid(), version)
	if err != nil {
		return 0, fmt.Errorf("start a run: %w", err)
	}
	if run, err = res.LastInsertId(); err != nil {
		return 0, err
	}
	return run, tx.Commit()
}

// adoptJournalRun records the run of a journal whose database has no
// row of it, nor of any later run: the file the run wrote was lost (found
// damaged and moved aside, or deleted) but its journal stayed at the
// path, so what it had in flight when it crashed is recorded here, of a
// run known only by its id (the earliest request it lists for its start,
// no pid), which endCrashedRuns then marks crashed. A journal of a run
// older than the database's runs is none of its news.
func adoptJournalRun(tx *sql.Tx, listed []journaled) (bool, error) {
	run := listed[0].Run
	var later bool
	if err := tx.QueryRow(`SELECT EXISTS (SELECT 1 FROM runs WHERE id >= ?)`, run).Scan(&later); err != nil {
		return false, fmt.Errorf("history: the journal's run: %w", err)
	}
	if later || run <= 0 {
		return false, nil
	}
	started := listed[0].Received
	for _, e := range listed {
		started = min(started, e.Received)
	}
	if _, err := tx.Exec(`INSERT INTO runs (id, started, pid) VALUES (?, ?, 0)`, run, started); err != nil {
		return false, fmt.Errorf("record the journal's run %d: %w", run, err)
	}
	return true, nil
}

// endCrashedRuns marks the runs that never ended, but except, crashed,
// and their in-flight requests abandoned.
func endCrashedRuns(tx *sql.Tx, except int64) error {
	if _, err := tx.Exec(`UPDATE request_log SET status = 7,
		error = 'Switchboard stopped (run ' || run || ' crashed or was killed) before this request was answered'
		WHERE status = 0 AND run IN (SELECT id FROM runs WHERE ended IS NULL AND id != ?)`, except); err != nil {
		return fmt.Errorf("mark abandoned requests: %w", err)
	}
	if _, err := tx.Exec(`UPDATE runs SET crashed = 1 WHERE ended IS NULL AND id != ?`, except); err != nil {
		return fmt.Errorf("mark crashed runs: %w", err)
	}
	return nil
}

// restartRun records run, which started at started, in a database file
// that took the place of its own while it ran (db): as startRun does, it
// closes the books on the file's runs that never ended, then records run
// under its own id (its rows' ids carry it) with what it has open, c. A
// file that holds run already (a copy of its own, put back) is carried
// on; one with another run of that id, or a later run, is refused: their
// rows would mix.
func restartRun(db *sql.DB, run int64, started time.Time, version string, c carried) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var later int
	if err := tx.QueryRow(`SELECT count(*) FROM runs WHERE id > ?`, run).Scan(&later); err != nil {
		return fmt.Errorf("read its runs: %w", err)
	}
	var had int64
	err = tx.QueryRow(`SELECT started FROM runs WHERE id = ?`, run).Scan(&had)
	own := err == nil
	switch {
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("read its runs: %w", err)
	case later > 0 || own && had != started.UnixMicro():
		return fmt.Errorf("the file now there is another history: it has run %d, or later ones", run)
	}
	if err := endCrashedRuns(tx, run); err != nil {
		return err
	}
	if !own {
		if _, err := tx.Exec(`INSERT INTO runs (id, started, pid, version) VALUES (?, ?, ?, ?)`,
			run, started.UnixMicro(), os.Getpid(), version); err != nil {
			return fmt.Errorf("record the run: %w", err)
		}
	}
	for _, b := range c.backends {
		if _, err := tx.Exec(`INSERT INTO backends (`+carriedBackendCols+`) SELECT `+params(len(b))+`
			WHERE NOT EXISTS (SELECT 1 FROM backends WHERE run = ?1 AND pid = ?4 AND started = ?7)`, b...); err != nil {
			return fmt.Errorf("record a child: %w", err)
		}
	}
	for _, r := range c.sessions {
		if _, err := tx.Exec(`INSERT INTO sessions (`+carriedSessionCols+`) VALUES (`+params(len(r))+`)
			ON CONFLICT (run, id) DO NOTHING`, r...); err != nil {
			return fmt.Errorf("record a session: %w", err)
		}
	}
	return tx.Commit()
}

// params is n numbered SQL parameters, ?1 to ?n.
func params(n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = "?" + strconv.Itoa(i+1)
	}
	return strings.Join(p, ", ")
}

// nameSQL is what request_log stores for the name in parameter p, in SQL
// (see writer.name): its id in names, else the text; 0 for none.
func nameSQL(p string) string {
	return "CASE WHEN " + p + " = '' THEN 0 ELSE coalesce((SELECT id FROM names WHERE text = " + p + "), " + p + ") END"
}

// recordJournaled writes the requests a crashed run's journal lists: those
// in flight as in-flight rows, which startRun then marks abandoned, and
// those answered whose end was not committed as answered, their outcome
// unknown. A row the run had written already (it was in flight past
// InFlightAfter) is brought up to date: the journal saw its last moment.
// stopped says the run stopped cleanly, its last writes failed: it did
// not crash.
func recordJournaled(tx *sql.Tx, listed []journaled, stopped bool) error {
	st, err := tx.Prepare(`INSERT INTO request_log (id, run, session, server, method, name, original_id,
		received, written, status, pid, answered, error)
		VALUES (?1, ?2, ?3, ` + nameSQL("?4") + `, ` + nameSQL("?5") + `, ` + nameSQL("?6") + `, ?7, ?8, ?9, ?11, ?10, ?12, ?13)
		ON CONFLICT (id) DO UPDATE SET written = coalesce(excluded.written, written), pid = coalesce(excluded.pid, pid),
			status = excluded.status, answered = excluded.answered, error = excluded.error
		WHERE status = 0`)
	if err != nil {
		return fmt.Errorf("record the journal: %w", err)
	}
	defer st.Close()
	for _, e := range listed {
		var written, pid, answered, errText any
		if e.Written != 0 {
			written = e.Written - e.Received
		}
		if e.PID != 0 {
			pid = e.PID
		}
		status := statusCodes[StatusInFlight]
		if e.Answered != 0 {
			status, answered, errText = statusCodes[StatusUnknown], e.Answered-e.Received, answeredError(e.Run)
			if stopped {
				errText = unwrittenError(e.Run)
			}
		}
		if _, err := st.Exec(e.ID, e.Run, sessionValue(e.Session), e.Server, e.Method, e.Name, idValue(e.OriginalID),
			e.Received, written, pid, status, answered, errText); err != nil {
			return fmt.Errorf("record the journal's request %d: %w", e.PoolID, err)
		}
	}
	return nil
}
