package store

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A program that holds a read transaction open on history.db (a database
// browser left in one) keeps SQLite from folding the write-ahead log into
// the database: the log grew with every batch, without bound, and nothing
// said so. Past walStuckBytes the store's error now says so, and no more
// once the reader lets go and the log is folded in.
func TestStuckWriteAheadLogIsReported(t *testing.T) {
	oldInterval, oldBytes := walCheckInterval, walStuckBytes
	walCheckInterval, walStuckBytes = 0, 64<<10
	t.Cleanup(func() { walCheckInterval, walStuckBytes = oldInterval, oldBytes })
	path := dbPath(t)
	s := openT(t, path, &Options{FlushInterval: time.Hour})
	id := uint64(0)
	load := func() {
		t.Helper()
		now := time.Now()
		for range 200 {
			id++
			name := strings.Repeat("n", 500)
			s.Record(received(id, "s1", "tools/call", name, now))
			s.Record(done(id, "s1", "tools/call", name, pool.StatusOK, 40, now))
		}
		_ = s.flush()
	}
	load()
	if err := s.Err(); err != nil {
		t.Fatalf("before any reader: %v", err)
	}

	ctx := context.Background()
	db, err := sql.Open("sqlite3", dsn(path, "mode=ro"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reader, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var n int
	if _, err := reader.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if err := reader.QueryRowContext(ctx, "SELECT count(*) FROM request_log").Scan(&n); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		load()
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "write-ahead log") {
		t.Fatalf("with a reader holding the log: Err() = %v, want it to say the write-ahead log is not folded in", err)
	}

	if _, err := reader.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	load()
	if err := s.Err(); err != nil {
		t.Fatalf("once the reader let go: Err() = %v, want none", err)
	}
}
