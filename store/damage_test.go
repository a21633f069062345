package store

import (
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// recordRequests records requests from..to (pool ids), each received and
// answered, and writes them.
func recordRequests(t *testing.T, s *Store, from, to uint64) error {
	t.Helper()
	for id := from; id <= to; id++ {
		s.Record(received(id, "s1", "tools/call", "t", at(time.Duration(id)*time.Millisecond)))
		s.Record(done(id, "s1", "tools/call", "t", pool.StatusOK, 7, at(time.Duration(id)*time.Millisecond+time.Microsecond)))
	}
	return s.flush()
}

// dbValue reads one value from the database at path.
func dbValue(t *testing.T, path, q string, dst any) {
	t.Helper()
	db, err := sql.Open("sqlite3", dsn(path, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(q).Scan(dst); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// damageIndex changes the key of row's entry in index (a one-page index)
// in the file at path, so that the entry no longer matches its row:
// damage that quick_check does not look for. The store may have the file
// open: the checkpoint moves every page into the file, and makes its
// connections read them again.
func damageIndex(t *testing.T, path, index string, row int64) {
	t.Helper()
	execSQL(t, path, "PRAGMA wal_checkpoint(TRUNCATE)")
	var pageSize, root int64
	dbValue(t, path, "PRAGMA page_size", &pageSize)
	dbValue(t, path, "SELECT rootpage FROM sqlite_master WHERE name = '"+index+"'", &root)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, pageSize)
	if _, err := f.ReadAt(page, (root-1)*pageSize); err != nil {
		t.Fatal(err)
	}
	if page[0] != 0x0a {
		t.Fatalf("page %d of %s is of type %#x, want a leaf index page (0x0a)", root, index, page[0])
	}
	// Each cell: its payload size (one byte here), then a record of two
	// integers, the key and the row id: its header size and their serial
	// types, then their values, big-endian.
	size := map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8}
	for i := range int(page[3])<<8 | int(page[4]) {
		cell := int(page[8+2*i])<<8 | int(page[9+2*i])
		hdr, keySize, idSize := int(page[cell+1]), size[page[cell+2]], size[page[cell+3]]
		if page[cell] >= 0x80 || hdr != 3 || keySize == 0 || idSize == 0 {
			t.Fatalf("unexpected cell in %s: % x", index, page[cell:cell+4])
		}
		key := cell + 1 + hdr
		var id int64
		for _, b := range page[key+keySize : key+keySize+idSize] {
			id = id<<8 | int64(b)
		}
		if id != row {
			continue
		}
		last := key + keySize - 1
		if _, err := f.WriteAt([]byte{page[last] ^ 0x01}, (root-1)*pageSize+int64(last)); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("row %d is not in %s", row, index)
}

// An index entry that no longer matches its row passes quick_check at
// open, and fails every delete that reaches the row: at the row cap, each
// batch's. The writer rebuilds the indexes and records on, and status
// says what happened; the file is not marked to be moved aside.
func TestWriterRebuildsADamagedIndex(t *testing.T) {
	path := dbPath(t)
	const maxRows = 256
	o := &Options{MaxRows: maxRows, FlushInterval: time.Hour, BatchSize: 1 << 20}
	s := openT(t, path, o)
	if err := recordRequests(t, s, 1, maxRows); err != nil {
		t.Fatal(err)
	}
	run := s.Run()
	s.Close()
	damageIndex(t, path, "request_log_time", run<<40|64) // the oldest row in the index: the first the cap deletes
	var check string
	dbValue(t, path, "PRAGMA integrity_check", &check)
	if !strings.Contains(check, "missing from index request_log_time") {
		t.Fatalf("integrity_check: %q, want a row missing from request_log_time", check)
	}

	s = openT(t, path, o) // quick_check passes
	if err := recordRequests(t, s, 1, 64); err != nil {
		t.Fatalf("recording at the row cap on a damaged index: %v", err)
	}
	if err := recordRequests(t, s, 65, 128); err != nil {
		t.Fatalf("recording after the indexes were rebuilt: %v", err)
	}
	if s.Repaired() == nil || !strings.Contains(s.Repaired().Error(), "malformed") {
		t.Errorf("Repaired: %v, want why the indexes were rebuilt", s.Repaired())
	}
	s.Close()
	var n int64
	dbValue(t, path, "SELECT count(*) FROM request_log WHERE run = 2", &n)
	if n != 128 {
		t.Errorf("%d requests of the second run recorded, want 128", n)
	}
	dbValue(t, path, "SELECT count(*) FROM request_log", &n)
	if n != maxRows {
		t.Errorf("%d requests kept, want %d", n, maxRows)
	}
	dbValue(t, path, "PRAGMA integrity_check", &check)
	if check != "ok" {
		t.Errorf("integrity_check after the rebuild: %q", check)
	}
	if _, err := os.Stat(path + damagedSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mended file is marked to be moved aside: %v", err)
	}
}

// A batch that carries only events can succeed where request rows
// cannot be written: it must not clear the error that lost them. A batch
// that records requests again does.
func TestEventsOnlyBatchKeepsTheRequestsError(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, &Options{FlushInterval: time.Hour, BatchSize: 1 << 20})
	execSQL(t, path, `CREATE TRIGGER no_rows BEFORE INSERT ON request_log BEGIN SELECT RAISE(ABORT, 'no rows'); END`)
	if err := recordRequests(t, s, 1, 10); err == nil || !strings.Contains(err.Error(), "no rows") {
		t.Fatalf("recording requests that cannot be written: %v, want their error", err)
	}
	s.Record(pool.Event{Kind: pool.EventSessionOpened, Time: at(time.Second), Server: "srv", Session: "s2"})
	if err := s.flush(); err == nil || !strings.Contains(err.Error(), "no rows") {
		t.Fatalf("after a batch of events only: %v, want the requests' error still", err)
	}
	execSQL(t, path, `DROP TRIGGER no_rows`)
	if err := recordRequests(t, s, 11, 20); err != nil {
		t.Fatalf("requests recorded again, error %v, want none", err)
	}
}

// A file marked damaged by an earlier run (damage that rebuilding its
// indexes did not mend) is reported as ErrCorrupt at the next Open, so
// that the app moves it aside; MoveAside takes the mark away.
func TestOpenReportsAFileMarkedDamaged(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, nil)
	s.Close()
	if err := os.WriteFile(path+damagedSuffix, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(path, nil); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open of a file marked damaged: %v, want ErrCorrupt", err)
	}
	if _, err := MoveAside(path, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + damagedSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mark is left after moving the file aside: %v", err)
	}
	openT(t, path, nil).Close()
}

// Damage that rebuilding the indexes does not mend (here, damage again
// after a rebuild, in the same run) keeps its error in Err, batches of
// events only included, and marks the file: the next Open reports it as
// ErrCorrupt, for the app to move it aside.
func TestWriterMarksDamageARebuildDoesNotMend(t *testing.T) {
	path := dbPath(t)
	const maxRows = 256
	s := openT(t, path, &Options{MaxRows: maxRows, FlushInterval: time.Hour, BatchSize: 1 << 20})
	run := s.Run()
	if err := recordRequests(t, s, 1, maxRows); err != nil {
		t.Fatal(err)
	}
	damageIndex(t, path, "request_log_time", run<<40|64)
	if err := recordRequests(t, s, maxRows+1, maxRows+64); err != nil {
		t.Fatalf("recording after the first damage: %v, want the indexes rebuilt", err)
	}
	damageIndex(t, path, "request_log_time", run<<40|128)
	err := recordRequests(t, s, maxRows+65, maxRows+128)
	if err == nil || !strings.Contains(err.Error(), "malformed") || !strings.Contains(err.Error(), "moved aside at the next start") {
		t.Fatalf("recording after damage again: %v, want it malformed, to be moved aside", err)
	}
	s.Record(pool.Event{Kind: pool.EventSessionOpened, Time: at(time.Second), Server: "srv", Session: "s2"})
	if err := s.flush(); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("after a batch of events only: %v, want the damage still said", err)
	}
	s.Close()
	if s, err := Open(path, nil); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open of the file found damaged: %v, want ErrCorrupt", err)
	}
}
