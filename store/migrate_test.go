package store

import (
	"testing"
	"testing/fstest"
)

func TestLoadMigrations(t *testing.T) {
	file := &fstest.MapFile{Data: []byte("SELECT 1;")}
	for _, tc := range []struct {
		name  string
		files []string
		ok    bool
	}{
		{"in order", []string{"0001_a.sql", "0002_b.sql"}, true},
		{"a gap", []string{"0001_a.sql", "0003_c.sql"}, false},
		{"no number", []string{"0001_a.sql", "init.sql"}, false},
		{"no name", []string{"0001.sql"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for _, f := range tc.files {
				fsys["migrations/"+f] = file
			}
			ms, err := loadMigrations(fsys)
			if (err == nil) != tc.ok || (tc.ok && len(ms) != len(tc.files)) {
				t.Errorf("loadMigrations(%v) = %d migrations, %v", tc.files, len(ms), err)
			}
		})
	}
	if len(migrations) != 8 {
		t.Errorf("embedded migrations: %d, want 8 (update testdata when adding one)", len(migrations))
	}
}
