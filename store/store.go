// Package store keeps Switchboard's request history in SQLite: the record
// a user opens when a tool call "just hangs".
//
// The pool hands every event to Record, which never blocks routing: under
// a mutex held for a few stores, it notes a received request in memory
// and in the journal (journal.go), and turns its end into one finished
// row for the writer; a full queue counts a drop. One writer goroutine
// wakes per batch (FlushInterval, or BatchSize rows), writes the batch in
// one transaction, gives requests in flight longer than InFlightAfter a
// row of their own, keeps the row count within MaxRows in the same
// transaction, and between batches prunes old rows in small steps. The
// database is in WAL mode, so the CLI and the UI read it (OpenReadOnly, or
// the query methods of a writable Store) while the writer writes.
//
// Each writable Open starts a run. Requests still in flight in an earlier
// run that never ended (the app crashed or was killed) become abandoned,
// those the journal lists included, and that run is marked crashed: that
// is the hang forensic. While requests are in flight the writer records a
// heartbeat of its run (HeartbeatInterval), so that a crashed run's
// abandoned requests are aged up to about when it died.
package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/mattn/go-sqlite3" // the database/sql driver "sqlite3"

	"github.com/switchboard-mcp/switchboard/app/fileid"
	"github.com/switchboard-mcp/switchboard/pool"
)

// Statuses the store adds to the pool's (pool.StatusOK and friends).
const (
	// StatusInFlight is a request that has not ended (yet).
	StatusInFlight = "in-flight"
	// StatusAbandoned is a request that was in flight when its run ended
	// without answering it: the app crashed, was killed, or the store lost
	// the request's end (see Dropped).
	StatusAbandoned = "abandoned"
	// StatusUnknown is a request whose end was not recorded: of a run
	// that stopped cleanly (history dropped it under load), or answered
	// when its end was lost (a failed write, a crash before its batch):
	// not a hang.
	StatusUnknown = "unknown"
)

// Defaults of Options.
const (
	DefaultRetainDays = 14
	DefaultMaxRows    = 1_000_000
	// DefaultMaxAbandoned is Options.MaxAbandoned's default.
	DefaultMaxAbandoned = 1000
	DefaultCaptureBytes = 4096
	// DefaultHeartbeatInterval is Options.HeartbeatInterval's default.
	DefaultHeartbeatInterval = 10 * time.Second
)

// Sentinel errors that callers branch on; each is wrapped with the path.
var (
	// ErrTooNew means a newer Switchboard wrote the database: this build
	// does not know its schema and leaves it alone.
	ErrTooNew = errors.New("written by a newer Switchboard")
	// ErrCorrupt means the file is not a usable history database.
	ErrCorrupt = errors.New("corrupt or not a Switchboard history database")
	// ErrLocked means another Switchboard holds the database for writing.
	ErrLocked = errors.New("in use by another running Switchboard")
	// ErrNeedsUpgrade means a read-only open found an older schema; the
	// next writable open (the next start of the app) upgrades it.
	ErrNeedsUpgrade = errors.New("has an older schema; start Switchboard once to upgrade it")
	// ErrUpgrading means a read-only open found an older schema, or none
	// yet, while a running Switchboard holds the database for writing: it
	// is upgrading or creating it, and a read moments later finds it done.
	// It wraps ErrNeedsUpgrade.
	ErrUpgrading error = upgrading{}
)

// upgrading is ErrUpgrading.
type upgrading struct{}

func (upgrading) Error() string {
	return "is being created or upgraded by the running Switchboard"
}

func (upgrading) Unwrap() error { return ErrNeedsUpgrade }

// Options tune a Store. Nil or zero fields give the defaults.
type Options struct {
	// RetainDays keeps requests this many days. Default 14; negative keeps
	// them forever. SetLimits changes it, and MaxRows, while the store
	// runs.
	RetainDays int
	// MaxRows keeps at most this many requests, newest first, but never
	// prunes a request of the running run still in flight (with more of
	// those than MaxRows, it keeps them all), and prunes the requests
	// earlier runs left unanswered (MaxAbandoned) only once no other is
	// left. Default 1,000,000; negative means no cap.
	MaxRows int
	// MaxAbandoned keeps at most this many of the requests earlier runs
	// left unanswered (abandoned by a crash, or unknown), newest first:
	// the hangs a restart is for finding, which MaxRows prunes last, bounded
	// on their own so that crash after crash cannot fill the history with
	// them. Default 1000; negative means no bound.
	MaxAbandoned int
	// MaxSessions keeps at most this many sessions, and MaxBackends this
	// many children, the oldest ended first: a client can open sessions
	// without end, and start a child with each. Neither deletes a row
	// still open (a child never seen exiting may be a leak) nor one a
	// kept request refers to: with more of those, it keeps them all.
	// Default a tenth of MaxRows, at least 1,000 (no cap when MaxRows is
	// negative); negative means no cap.
	MaxSessions, MaxBackends int
	// CapturePayloads stores a bounded, redacted prefix of each request
	// and response. Off by default.
	CapturePayloads bool
	// CaptureBytes bounds each stored payload. Default 4096.
	CaptureBytes int
	// ChildrenOnly records the children the pool starts and sees exit, and
	// nothing else: history is off, and leak detection still needs to
	// know which processes were the pool's.
	ChildrenOnly bool
	// Version is the app's version, recorded with the run.
	Version string
	// Logger receives write errors; nil discards.
	Logger *slog.Logger

	// QueueSize is how many rows and events may wait for the writer
	// before Record drops. Default 65536.
	QueueSize int
	// BatchSize flushes a transaction once this many rows and events wait.
	// Default 4096.
	BatchSize int
	// FlushInterval flushes a transaction at most this long after its
	// first row. Default 100 ms: every wake of the writer shows in the
	// tail latency of the requests around it (10 ms doubled the p99 at
	// one request in flight; 100 ms is within a few percent of history
	// off), and the journal keeps what a crash would lose meanwhile.
	FlushInterval time.Duration
	// InFlightAfter is how long a request may be in flight before it gets
	// a row of its own (status in-flight), before it ends; until then the
	// journal alone records it. Default 1 s.
	InFlightAfter time.Duration
	// HeartbeatInterval is how often, while requests are in flight, the
	// writer records that the run is alive: a crash's abandoned requests
	// are aged up to the later of its last heartbeat and its last recorded
	// event, so at most about this much short of when it died. Default
	// 10 s; with nothing in flight the writer does not wake for it.
	HeartbeatInterval time.Duration
	// PruneInterval is how often retention runs. Default 10 min; the
	// first run is a minute after Open (or PruneInterval, if shorter).
	PruneInterval time.Duration
	// PruneBatch is how many rows one pruning step deletes in its own
	// short transaction. Default 1000.
	PruneBatch int
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.RetainDays == 0 {
		r.RetainDays = DefaultRetainDays
	}
	if r.MaxRows == 0 {
		r.MaxRows = DefaultMaxRows
	}
	if r.MaxAbandoned == 0 {
		r.MaxAbandoned = DefaultMaxAbandoned
	}
	r.MaxSessions, r.MaxBackends = tableCap(r.MaxSessions, r.MaxRows), tableCap(r.MaxBackends, r.MaxRows)
	if r.CaptureBytes <= 0 {
		r.CaptureBytes = DefaultCaptureBytes
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.QueueSize <= 0 {
		r.QueueSize = 1 << 16
	}
	if r.BatchSize <= 0 {
		r.BatchSize = 4096
	}
	if r.FlushInterval <= 0 {
		r.FlushInterval = 100 * time.Millisecond
	}
	if r.InFlightAfter <= 0 {
		r.InFlightAfter = time.Second
	}
	if r.HeartbeatInterval <= 0 {
		r.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if r.PruneInterval <= 0 {
		r.PruneInterval = 10 * time.Minute
	}
	if r.PruneBatch <= 0 {
		r.PruneBatch = 1000
	}
	return r
}

// tableCap is the cap of the sessions or the children given as asked
// (Options.MaxSessions, MaxBackends) under a cap of maxRows requests,
// after defaults: asked unless zero, else a tenth of maxRows, at least
// 1,000, or none (-1) when maxRows is negative.
func tableCap(asked, maxRows int) int {
	switch {
	case asked != 0:
		return asked
	case maxRows > 0:
		return max(maxRows/10, 1000)
	}
	return -1
}

// limits are the bounds the writer prunes to (Options' RetainDays,
// MaxRows, MaxSessions and MaxBackends, after defaults): Open's, until
// SetLimits changes them.
type limits struct {
	retainDays, maxRows, maxSessions, maxBackends int
}

// limitsFor are the limits of retainDays and maxRows as Options gives
// them (zero: the default), with the sessions and children caps asked
// as Options' MaxSessions and MaxBackends.
func limitsFor(retainDays, maxRows int, tablesAsked [2]int) limits {
	if retainDays == 0 {
		retainDays = DefaultRetainDays
	}
	if maxRows == 0 {
		maxRows = DefaultMaxRows
	}
	return limits{retainDays: retainDays, maxRows: maxRows,
		maxSessions: tableCap(tablesAsked[0], maxRows), maxBackends: tableCap(tablesAsked[1], maxRows)}
}

// Store is an open history database. A writable Store (Open) records one
// run; a read-only one (OpenReadOnly) only answers queries. The query
// methods are safe for concurrent use with each other and with Record.
type Store struct {
	path string
	opts Options
	log  *slog.Logger
	// readDB answers queries (rdb): several connections, read-only. A
	// writable Store's writer replaces it when it recreates the database
	// file (writer.reopen).
	readDB atomic.Pointer[sql.DB]

	// Set for a writable Store only.
	wdb     *sql.DB   // the writer's single connection; the writer's alone once it runs
	lock    io.Closer // held while open: one writer per database
	run     int64
	started time.Time // when the run started
	// journalErr says why this writable Store has no journal; nil when it
	// has one.
	journalErr error

	rec      recorder      // Record's side: what waits for the writer
	wake     chan struct{} // Record -> writer: work for an idle writer
	full     chan struct{} // Record -> writer: a whole batch waits
	dropped  atomic.Uint64
	closed   atomic.Bool
	killed   atomic.Bool      // tests: the writer stops as a killed process would, writing nothing more
	stop     chan struct{}    // closed by Close: the writer drains and ends
	done     chan struct{}    // closed by the writer when it has ended
	pruneReq chan chan error  // tests: run retention to completion now
	flushReq chan chan error  // tests: write everything queued now
	goneReq  chan goneRequest // CloseGoneChildren -> writer: rows of gone children to close

	recheck chan struct{} // Err -> writer: the file at path is not the one open

	// newLimits are the limits SetLimits last set, which the writer
	// takes (and prunes to) when limitsSet wakes it; tablesAsked are
	// Open's MaxSessions and MaxBackends as given (zero: they follow
	// MaxRows, tableCap).
	newLimits   atomic.Pointer[limits]
	limitsSet   chan struct{}
	tablesAsked [2]int

	errMu    sync.Mutex
	lastErr  error // the writer's last failure; nil after a good flush
	walErr   error // a write-ahead log no checkpoint can fold in (checkWAL); nil once it can
	repaired error // why the writer last rebuilt the indexes (Repaired)
	// dbFile is the database file open for writing: when the file at
	// path is no longer it (deleted, replaced), the writer recreates it.
	dbFile os.FileInfo
	// marker is the value this Store puts in the header of each database
	// file it writes (markFile), armed once the file itself holds it:
	// then another value there is another file's content copied over it
	// in place (fileLeft).
	marker int32
	armed  bool

	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating or upgrading) the history database at path for
// writing, starts a new run, and starts the writer. Requests left in
// flight by earlier runs that never ended become abandoned. Close it.
//
// Errors wrap ErrTooNew, ErrCorrupt or ErrLocked where they apply; the app
// then runs without history and says so.
func Open(path string, opts *Options) (*Store, error) {
	o := opts.withDefaults()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("history: create %s: %w", filepath.Dir(path), err)
	}
	lk, err := lockWriter(path+".lock", lockWait)
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", path, err)
	}
	// Private to the user: SQLite gives the -wal and -shm files the
	// database file's permissions, so creating it 0600 first covers them.
	if err := createPrivate(path); err != nil {
		lk.Close()
		return nil, fmt.Errorf("history %s: %w", path, err)
	}
	if _, err := os.Stat(path + damagedSuffix); err == nil {
		lk.Close()
		return nil, fmt.Errorf("history %s: %w: an earlier run found damage that rebuilding its indexes did not mend", path, ErrCorrupt)
	}
	s := &Store{path: path, opts: o, log: o.Logger, lock: lk}
	if opts != nil {
		s.tablesAsked = [2]int{opts.MaxSessions, opts.MaxBackends}
	}
	if err := s.openWritable(); err != nil {
		s.closeDBs()
		return nil, err
	}
	s.wake = make(chan struct{}, 1)
	s.full = make(chan struct{}, 1)
	s.recheck = make(chan struct{}, 1)
	s.limitsSet = make(chan struct{}, 1)
	s.stop = make(chan struct{})
	s.done = make(chan struct{})
	s.pruneReq = make(chan chan error)
	s.flushReq = make(chan chan error)
	s.goneReq = make(chan goneRequest)
	w, err := newWriter(s)
	if err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("history %s: %w", path, err)
	}
	go runAtLowerPriority(w.loop)
	return s, nil
}

// MoveAside renames a damaged database (and its -wal and -shm files) to
// PATH.damaged-TIME, so that a fresh one can start where it was and the
// old one stays for inspection. It returns the new name. The journal of
// the requests in flight is copied there, and stays at its path too: the
// fresh database records what a crashed run listed in it as abandoned.
func MoveAside(path string, now time.Time) (string, error) {
	aside, err := moveAside(path, now, "", "-wal", "-shm")
	if err != nil {
		return "", err
	}
	// A copy for inspection only: the journal stays at its path whatever
	// happens to it, and a failure (no room) must not keep the fresh
	// history from starting.
	_ = copyFile(journalPath(path), journalPath(aside))
	return aside, nil
}

// copyFile copies the file at from to a new file at to, private to the
// user.
func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o600)
}

// moveAside is MoveAside of the files of path with suffixes.
func moveAside(path string, now time.Time, suffixes ...string) (string, error) {
	aside := path + ".damaged-" + now.Format("20060102-150405")
	for _, suffix := range suffixes {
		if err := os.Rename(path+suffix, aside+suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("move the damaged history aside: %w", err)
		}
	}
	if err := os.Remove(path + damagedSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("move the damaged history aside: %w", err)
	}
	return aside, nil
}

// damagedSuffix names the marker beside a database that the writer found
// damaged beyond what rebuilding its indexes mends: the next Open reports
// it as ErrCorrupt, and the app moves it aside (MoveAside removes it).
const damagedSuffix = "-damaged" // beside the database

// createPrivate creates path 0600 if it does not exist, and makes an
// existing one 0600 (earlier versions created it 0644).
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (s *Store) openWritable() error {
	var err error
	if s.wdb, err = s.openWriteDB(); err != nil {
		return err
	}
	// The journal says what a run that did not stop had in flight; once
	// that is in the database, it records this run.
	j, listed, err := openJournal(s.path)
	if err != nil {
		// Without it every request gets its in-flight row at the next
		// batch (slower, and the last moment before a crash is lost).
		s.log.Warn("history: running without a journal of the requests in flight: a crash loses those of the last batch",
			"path", s.path, "err", err)
		s.journalErr = err
	}
	s.started = time.Now()
	if s.run, err = startRun(s.wdb, s.opts.Version, s.started, listed, readJournalStop(s.path)); err != nil {
		j.close()
		return s.wrap(err)
	}
	if j == nil && len(listed) > 0 {
		// What it listed is in the database now: empty the file, so that
		// no later start lists it again, and give its blocks back.
		_ = os.Truncate(journalPath(s.path), 0)
	}
	s.markFile(s.wdb)
	j.reset(s.run)
	if s.opts.ChildrenOnly {
		j.close() // no requests to journal
		j = nil
	}
	s.rec.init(s.run, j)
	if j != nil {
		j.onLose = func() { // the lock held
			s.dropped.Add(uint64(s.rec.journalLostLocked()))
			if s.rec.wakeLocked() {
				notify(s.wake)
			}
		}
	}
	return s.openReaders()
}

// openWriteDB opens the database file at s.path for writing, in WAL
// mode, checked and migrated, and notes which file it is (dbFile).
func (s *Store) openWriteDB() (_ *sql.DB, err error) {
	db, err := sql.Open("sqlite3", dsn(s.path,
		fmt.Sprintf("_journal_mode=WAL&_sync=1&_fk=1&_txlock=immediate&_busy_timeout=%d", busyTimeout.Milliseconds())))
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", s.path, err)
	}
	defer func() {
		if err != nil {
			db.Close()
		}
	}()
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		return nil, s.wrap(err)
	}
	if mode != "wal" {
		return nil, fmt.Errorf("history %s: journal mode is %q, want wal", s.path, mode)
	}
	// A log a burst grew is cut back to this when it is next reset,
	// instead of keeping its size on the disk.
	if _, err := db.Exec("PRAGMA journal_size_limit = 67108864"); err != nil {
		return nil, s.wrap(err)
	}
	fi, err := fileid.Stat(s.path)
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", s.path, err)
	}
	// Damage in the middle of the file shows nowhere else until a query
	// reaches it: check the whole file once, at open.
	var check string
	if err := db.QueryRow("PRAGMA quick_check").Scan(&check); err != nil {
		return nil, s.wrap(err)
	}
	if check != "ok" {
		return nil, fmt.Errorf("history %s: %w: quick_check: %s", s.path, ErrCorrupt, check)
	}
	if err := migrate(db); err != nil {
		return nil, s.wrap(err)
	}
	s.errMu.Lock()
	s.dbFile, s.armed = fi, false
	s.errMu.Unlock()
	return db, nil
}

// markerOffset is where SQLite keeps the application ID in a database
// file's header (PRAGMA application_id): the store's marker.
const markerOffset = 68

// markFile writes the Store's marker into the header of the database
// file db writes, once it is the run's (another history's is left as it
// is), and arms the check of it. The header reaches the file itself at a
// checkpoint: one is asked for now, and until it is there the writer asks
// again (armMarker). A file copied over the database in place (`cp`, the
// same file with another content) then holds another value, or none:
// SQLite would read its pages mixed with the WAL's, the running store's,
// and damage both, so the writer makes the file again (fileLeft). A
// failure leaves the check unarmed: a file replaced otherwise is still
// noticed.
func (s *Store) markFile(db *sql.DB) {
	s.errMu.Lock()
	if s.marker == 0 {
		s.marker = int32(rand.Uint32()>>1) + 1 // positive: never 0, SQLite's default
	}
	marker := s.marker
	s.errMu.Unlock()
	if _, err := db.Exec(fmt.Sprintf("PRAGMA application_id = %d", marker)); err != nil {
		s.log.Warn("history: mark the database file (a copy put over it in place will not be noticed)", "err", err)
		return
	}
	s.armMarker(db)
}

// armMarker checkpoints the WAL (as far as readers let it) and arms the
// check of the marker once the database file holds it.
func (s *Store) armMarker(q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}) {
	if _, err := q.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		return
	}
	v, err := readMarker(s.path)
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if err == nil && v == s.marker {
		s.armed = true
	}
}

// readMarker reads the marker in the header of the file at path.
func readMarker(path string) (int32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var b [4]byte
	if _, err := f.ReadAt(b[:], markerOffset); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(b[:])), nil
}

// rdb is the read-only connections that answer queries.
func (s *Store) rdb() *sql.DB { return s.readDB.Load() }

// OpenReadOnly opens the history database at path for queries only, while
// another process may be writing it. A missing database is an error
// wrapping fs.ErrNotExist; an older schema wraps ErrNeedsUpgrade.
func OpenReadOnly(path string) (*Store, error) { return openReadOnly(path, len(migrations)) }

// childrenSchema is the oldest schema ReadChildrenOfEarlierRuns reads:
// every column of runs and backends that ChildrenOfEarlierRuns (and
// LiveRun) selects is in version 1.
const childrenSchema = 1

// ReadChildrenOfEarlierRuns is ChildrenOfEarlierRuns of the database at
// path, opened read-only for the read. Unlike OpenReadOnly it reads an
// older schema too: after an upgrade, until a run of this build has
// migrated the database, the children an earlier version recorded are
// the ones that may have leaked. A missing database wraps fs.ErrNotExist.
func ReadChildrenOfEarlierRuns(ctx context.Context, path string) ([]ChildRecord, error) {
	s, err := openReadOnly(path, childrenSchema)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.ChildrenOfEarlierRuns(ctx)
}

// ReadRecordedChildren is RecordedChildren of the database at path, read
// as ReadChildrenOfEarlierRuns reads it (an older schema too). A missing
// database wraps fs.ErrNotExist.
func ReadRecordedChildren(ctx context.Context, path string) ([]ChildRecord, error) {
	s, err := openReadOnly(path, childrenSchema)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.RecordedChildren(ctx)
}

// openReadOnly is OpenReadOnly accepting any schema version from oldest
// on; the caller reads only what that version already had.
func openReadOnly(path string, oldest int) (*Store, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", path, err)
	}
	if fi.Size() < minDBSize {
		// SQLite reads a file with no page as an empty database (schema
		// version 0), and deletes the WAL beside it: a running writer's,
		// whose writes would go on into the deleted file.
		err := fmt.Errorf("history: %s is empty or damaged (was it truncated?): %d bytes, no database", path, fi.Size())
		if writerAlive(path + ".lock") {
			err = fmt.Errorf("%w; the running Switchboard makes it (again) within a second: try again", err)
		}
		return nil, err
	}
	s := &Store{path: path, opts: (*Options)(nil).withDefaults()}
	s.log = s.opts.Logger
	v, err := s.readerVersion(readerParams)
	if _, noWAL := os.Lstat(path + "-wal"); err != nil && isReadOnly(err) && errors.Is(noWAL, fs.ErrNotExist) {
		// SQLite reads a WAL database with its -shm, which it makes
		// beside it: in a directory the user cannot write it cannot. With
		// no -wal (its run stopped cleanly) the file alone is the
		// database, and a writer would make a -wal first: it is read as
		// an immutable file.
		s.closeDBs()
		v, err = s.readerVersion(readerParams + "&immutable=1")
	}
	if err != nil {
		s.closeDBs()
		return nil, err
	}
	switch n := len(migrations); {
	case v > n:
		s.closeDBs()
		return nil, fmt.Errorf("history %s: %w (schema version %d, this build knows %d)", path, ErrTooNew, v, n)
	case v < oldest && writerAlive(path+".lock"):
		s.closeDBs()
		return nil, fmt.Errorf("history %s: %w (schema version %d of %d): try again in a moment", path, ErrUpgrading, v, n)
	case v < oldest:
		s.closeDBs()
		return nil, fmt.Errorf("history %s: %w (schema version %d of %d)", path, ErrNeedsUpgrade, v, n)
	}
	return s, nil
}

// readerVersion opens the readers with params and reads the database's
// schema version.
func (s *Store) readerVersion(params string) (int, error) {
	if err := s.openReadersAs(params); err != nil {
		return 0, err
	}
	var v int
	if err := s.rdb().QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		return 0, s.wrap(err)
	}
	return v, nil
}

// readerParams are the readers' connection parameters: read-only.
const readerParams = "mode=ro&_busy_timeout=5000&_txlock=deferred"

func (s *Store) openReaders() error { return s.openReadersAs(readerParams) }

func (s *Store) openReadersAs(params string) error {
	db, err := sql.Open("sqlite3", dsn(s.path, params))
	if err != nil {
		return fmt.Errorf("history %s: %w", s.path, err)
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(2)
	if err := db.Ping(); err != nil {
		db.Close()
		return s.wrap(err)
	}
	s.readDB.Store(db)
	return nil
}

// dsn makes a go-sqlite3 URI filename. Characters that URIs reserve are
// escaped so that any path works.
func dsn(path, params string) string {
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	return "file:" + r.Replace(filepath.ToSlash(path)) + "?" + params
}

// wrap adds the path and classifies SQLite's "not a database" and
// "malformed" errors as ErrCorrupt.
func (s *Store) wrap(err error) error {
	if isCorrupt(err) {
		return fmt.Errorf("history %s: %w: %v", s.path, ErrCorrupt, err)
	}
	return fmt.Errorf("history %s: %w", s.path, err)
}

// Record hands one pool event to the history. It never blocks: a
// received request is noted in memory and in the journal, its end becomes
// one row for the writer; when rows and events waiting for the writer
// reach QueueSize (or the store is closed) the event is dropped and
// counted (Dropped). Pass it as pool.Options.Record.
func (s *Store) Record(e pool.Event) {
	switch e.Kind {
	case pool.EventRequestReceived, pool.EventRequestWritten, pool.EventRequestDone, pool.EventOrphan,
		pool.EventSessionOpened, pool.EventSessionClosed, pool.EventBackendStarted, pool.EventBackendExited:
	default:
		return // state changes and lag notices are live-only
	}
	if s.opts.ChildrenOnly && e.Kind != pool.EventBackendStarted && e.Kind != pool.EventBackendExited {
		return
	}
	if s.wake == nil || s.closed.Load() {
		s.dropped.Add(1)
		return
	}
	s.record(e)
}

// ConfigReload is one reload of the config file: applied (Err empty,
// Changes what it changed) or not (Err why).
type ConfigReload struct {
	Run     int64 // the run that reloaded (Window); RecordConfigReload records its own
	At      time.Time
	Changes string
	Err     string
}

// RecordConfigReload records a reload of the config file, so that the
// waterfall over a past window shows it as the running dashboard did.
// Like Record it never blocks; with history disabled it records nothing.
func (s *Store) RecordConfigReload(c ConfigReload) {
	if s.opts.ChildrenOnly {
		return
	}
	if s.wake == nil || s.closed.Load() {
		s.dropped.Add(1)
		return
	}
	ok, wake := s.rec.reloaded(c)
	if !ok {
		s.dropped.Add(1)
	}
	if wake {
		notify(s.wake)
	}
}

// Dropped is the number of events not recorded: the queue was full, the
// store was closed, or a write failed (each row lost counts one). Status
// and the UI show it.
func (s *Store) Dropped() uint64 { return s.dropped.Load() }

// Err is the writer's last error, or nil once a later write succeeded.
// When the database file was deleted, replaced or truncated while it was
// open, it says so until the writer has recreated it (it is asked to at
// once).
func (s *Store) Err() error {
	s.errMu.Lock()
	err := cmp.Or(s.lastErr, s.walErr)
	s.errMu.Unlock()
	if err != nil || s.recheck == nil || !s.fileGone() {
		return err
	}
	notify(s.recheck)
	return fmt.Errorf("history %s: %w: recreating it", s.path, errFileGone)
}

// errFileGone says the database file open for writing is no longer at
// its path whole: deleted, replaced by another file, or truncated in
// place.
var errFileGone = errors.New("the database file was deleted, replaced or truncated while Switchboard runs")

// minDBSize is the size of the smallest database file that holds a page
// (SQLite's smallest page size): a shorter one has lost its header.
const minDBSize = 512

// fileGone says whether the file at s.path is not the database file open
// for writing (dbFile) whole: there is none, another one, it was
// truncated in place (fileTruncated), or another database was copied over
// it in place (fileOverwritten). A path it cannot look at (no permission)
// tells nothing.
func (s *Store) fileGone() bool {
	gone, _ := s.fileLeft()
	return gone
}

// fileTruncated says whether the file at s.path is the database file open
// for writing, truncated in place (`: > file`, logrotate's copytruncate):
// too short to hold its header.
func (s *Store) fileTruncated() bool {
	_, truncated := s.fileLeft()
	return truncated
}

// fileOverwritten says whether the file at s.path is the database file
// open for writing with another database's content copied over it in
// place (`cp old.db history.db`): its header lacks the Store's marker.
func (s *Store) fileOverwritten() bool {
	gone, truncated := s.fileLeft()
	return gone && !truncated && s.stillOpen()
}

// stillOpen says whether the file at s.path is the database file open
// for writing.
func (s *Store) stillOpen() bool {
	s.errMu.Lock()
	open := s.dbFile
	s.errMu.Unlock()
	fi, err := fileid.Stat(s.path)
	return open != nil && err == nil && os.SameFile(open, fi)
}

// fileLeft is fileGone and fileTruncated at one look.
func (s *Store) fileLeft() (gone, truncated bool) {
	s.errMu.Lock()
	open, armed, marker := s.dbFile, s.armed, s.marker
	s.errMu.Unlock()
	if open == nil {
		return false, false
	}
	fi, err := fileid.Stat(s.path)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist), false
	}
	if !os.SameFile(open, fi) {
		return true, false
	}
	if fi.Size() < minDBSize {
		return true, true
	}
	if !armed {
		return false, false
	}
	v, err := readMarker(s.path)
	return err == nil && v != marker, false
}

// Repaired says why the writer rebuilt the database's indexes this run
// (SQLite found it damaged where quick_check at open does not look: an
// index entry that no longer matches its row), or nil if it did not.
// Requests are recorded again after it; status shows it.
func (s *Store) Repaired() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.repaired
}

func (s *Store) setErr(err error) {
	s.errMu.Lock()
	s.lastErr = err
	s.errMu.Unlock()
}

// setWALErr sets what checkWAL found, and returns what it found before.
func (s *Store) setWALErr(err error) (was error) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	was, s.walErr = s.walErr, err
	return was
}

// Journaled is how many requests in flight the journal lists now, and how
// many of them as written to a child: what a crash at this moment would
// leave for the next start to record as abandoned (and, for the written,
// to answer as may-have-run). Events reach the store up to 10 ms after
// they happen (the pool batches them), and a full journal lists no more,
// so either can be below the pool's own count.
func (s *Store) Journaled() (listed, written int) {
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	return s.rec.journal.inUse()
}

// JournalErr says why the Store records without its journal of the
// requests in flight (its file cannot be made, or the disk has no room
// for it): a crash then loses the requests that had no row yet. Nil when
// it has one, and for a read-only Store. When the journal's file was
// deleted, replaced or truncated while the Store runs, it says so until
// the writer has made it again (it is asked to at once); meanwhile each
// request in flight gets its row at the next batch.
func (s *Store) JournalErr() error {
	if s.journalErr != nil {
		return s.journalErr
	}
	r := &s.rec
	r.mu.Lock()
	j := r.journal
	var mapped os.FileInfo
	var err, remapErr error
	if j != nil && j.unmap != nil {
		mapped, remapErr = j.file, j.remapErr
		err = cmp.Or(remapErr, j.lost)
	}
	r.mu.Unlock()
	if mapped == nil {
		return nil
	}
	if err == nil {
		fi, serr := fileid.Stat(journalPath(s.path))
		if serr == nil && os.SameFile(mapped, fi) && fi.Size() >= journalSize || serr != nil && !errors.Is(serr, fs.ErrNotExist) {
			return nil
		}
		err = fmt.Errorf("journal %s: %w", journalPath(s.path), errJournalGone)
	}
	if remapErr == nil && s.recheck != nil { // a failed try is tried again at the writer's next check
		notify(s.recheck)
	}
	return fmt.Errorf("history: without the journal of requests in flight until it is made again: %w", err)
}

// errJournalGone says the journal's file is not the one mapped whole:
// deleted, replaced, or truncated in place.
var errJournalGone = errors.New("the file was deleted, replaced or truncated while Switchboard runs")

// Run is this Store's run id; 0 for a read-only Store.
func (s *Store) Run() int64 { return s.run }

// Path is the database file.
func (s *Store) Path() string { return s.path }

// CaptureBytes is what pool.Options.CapturePayloads should be: the payload
// prefix size when capture is on, else 0.
func (s *Store) CaptureBytes() int {
	if !s.opts.CapturePayloads {
		return 0
	}
	return s.opts.CaptureBytes
}

// SetLimits changes, while the store runs, how many days it keeps
// requests and how many it keeps at most, as Options.RetainDays and
// MaxRows do at Open (zero: the default; negative: no limit), with the
// sessions and children caps that follow MaxRows: a config reload must
// not wait for a restart to bound the history, nor a pool that started
// without knowing its config's (and so kept everything) run unbounded
// until then. It returns at once; the writer applies the limits when it
// next wakes, and prunes to them as it does at a start: a lower MaxRows
// deletes, in the transaction of each batch, at most PruneBatch rows
// beyond what the batch adds, so the count comes down as requests are
// recorded. It does nothing on a read-only Store.
func (s *Store) SetLimits(retainDays, maxRows int) {
	if s.limitsSet == nil {
		return
	}
	l := limitsFor(retainDays, maxRows, s.tablesAsked)
	s.newLimits.Store(&l)
	select {
	case s.limitsSet <- struct{}{}:
	default: // the writer has yet to take the earlier limits: it takes these
	}
}

// Close writes what is queued, marks the run ended, empties the journal
// and closes the database. Requests of this run still in flight at that
// point (the pool closes first, so their end was lost) are recorded as
// unknown, not abandoned. Record after Close counts drops.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		if s.stop != nil {
			close(s.stop)
			<-s.done
		}
		s.closeErr = errors.Join(s.Err(), s.closeDBs())
	})
	return s.closeErr
}

func (s *Store) closeDBs() error {
	var errs []error
	s.rec.mu.Lock()
	errs = append(errs, s.rec.journal.close())
	s.rec.mu.Unlock()
	if db := s.rdb(); db != nil {
		errs = append(errs, db.Close())
	}
	if s.wdb != nil {
		errs = append(errs, s.wdb.Close())
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("history %s: close: %w", s.path, err)
	}
	return nil
}

// busyTimeout is how long a write waits for another program's lock on
// the database (a DB browser's transaction), and how long a stop may wait
// for it in all (writer.finish); a variable so that tests need not wait.
var busyTimeout = 5 * time.Second

// lockWait is how long Open waits for another writer's lock; a variable
// so that tests need not wait.
var lockWait = 2 * time.Second

// flush writes everything recorded so far (tests).
func (s *Store) flush() error {
	reply := make(chan error)
	s.flushReq <- reply
	return <-reply
}

// prune runs retention to completion now (tests).
func (s *Store) prune() error {
	reply := make(chan error)
	s.pruneReq <- reply
	return <-reply
}
