package store

import (
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"
)

// A read-only open (`switchboard history`) of a database that the
// running Switchboard is upgrading, or creating (no schema yet), says so,
// rather than ask for a start that is under way. It used to say "has an
// older schema; start Switchboard once to upgrade it".
func TestReadOnlyWhileUpgrading(t *testing.T) {
	for _, tc := range []struct {
		name string
		sql  func(t *testing.T) string
	}{
		{"upgrading", func(t *testing.T) string {
			dump, err := os.ReadFile("testdata/v1.sql")
			if err != nil {
				t.Fatal(err)
			}
			return string(dump)
		}},
		{"creating", func(*testing.T) string { return "CREATE TABLE started (x); DROP TABLE started" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			db, err := sql.Open("sqlite3", dsn(path, "_journal_mode=WAL"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(tc.sql(t)); err != nil {
				t.Fatal(err)
			}
			db.Close()
			if _, err := OpenReadOnly(path); !errors.Is(err, ErrNeedsUpgrade) {
				t.Fatalf("read-only open with no Switchboard running: %v, want ErrNeedsUpgrade", err)
			}
			lk, err := lockWriter(path+".lock", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer lk.Close()
			_, err = OpenReadOnly(path)
			if !errors.Is(err, ErrUpgrading) || !strings.Contains(err.Error(), "try again") {
				t.Fatalf("read-only open while a Switchboard holds the lock: %v, want ErrUpgrading", err)
			}
		})
	}
}

// A read-only open of a database file that the running Switchboard has
// just made, still empty, says that it makes it, as well as that it may
// have been truncated (which the running Switchboard mends too).
func TestReadOnlyWhileCreatingTheFile(t *testing.T) {
	path := dbPath(t)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	lk, err := lockWriter(path+".lock", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	if _, err := OpenReadOnly(path); err == nil || !strings.Contains(err.Error(), "the running Switchboard makes it") {
		t.Fatalf("read-only open of an empty file while a Switchboard holds the lock: %v, want it to say it makes it", err)
	}
}
