package store

import (
	stdcmp "cmp"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/pool"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(crashHelper())
	}
	code := m.Run()
	if fake.path != "" {
		os.RemoveAll(filepath.Dir(fake.path))
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// t0 is a fixed, recent moment: events carry their own times.
var t0 = time.Now().Add(-time.Hour).Truncate(time.Second)

func at(d time.Duration) time.Time { return t0.Add(d) }

func received(id uint64, sess, method, name string, when time.Time) pool.Event {
	return pool.Event{Kind: pool.EventRequestReceived, Time: when, Server: "srv", Session: sess, PoolID: id,
		Method: method, Name: name, OriginalID: fmt.Sprint(id), Size: 100}
}

func written(id uint64, sess string, pid int, when time.Time) pool.Event {
	return pool.Event{Kind: pool.EventRequestWritten, Time: when, Server: "srv", Session: sess, PoolID: id, PID: pid}
}

func done(id uint64, sess, method, name, status string, pid int, when time.Time) pool.Event {
	e := pool.Event{Kind: pool.EventRequestDone, Time: when, Server: "srv", Session: sess, PoolID: id, PID: pid,
		Method: method, Name: name, Status: status, Size: 200, Written: pid != 0}
	if status != pool.StatusOK {
		e.ErrCode, e.Err = -32000, status+" happened"
	}
	return e
}

func openT(t *testing.T, path string, o *Options) *Store {
	t.Helper()
	s, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dbPath(t *testing.T) string { return filepath.Join(t.TempDir(), "history.db") }

func schema(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite3", dsn(path, "mode=ro"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		b.WriteString(s + ";\n\n")
	}
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("-- user_version %d\n\n%s", v, b.String())
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s differs (-want +got; -update rewrites it):\n%s", name, d)
	}
}

func TestMigrateFromEmpty(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	golden(t, "schema.golden.sql", schema(t, path))
}

// TestMigrateFromV1 upgrades a frozen version-1 database with data: the
// schema ends up exactly as a fresh one, the rows survive, and the crashed
// run's request in flight becomes abandoned.
func TestMigrateFromV1(t *testing.T) {
	path := dbPath(t)
	dump, err := os.ReadFile("testdata/v1.sql")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", dsn(path, "_journal_mode=WAL"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(string(dump)); err != nil {
		t.Fatal(err)
	}
	db.Close()

	// A read-only open does not upgrade.
	if _, err := OpenReadOnly(path); !errors.Is(err, ErrNeedsUpgrade) {
		t.Fatalf("read-only open of v1: %v, want ErrNeedsUpgrade", err)
	}

	s := openT(t, path, nil)
	ctx := context.Background()
	got, err := s.Requests(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Run           int64
		Method, Name  string
		Status        string
		Written       bool
		PID           int
		Abandoned     bool
		ErrorMentions string
	}
	var rows []row
	for _, r := range got {
		mention := ""
		if strings.Contains(r.Err, "run 2") {
			mention = "run 2"
		}
		rows = append(rows, row{r.Run, r.Method, r.Name, r.Status, r.WrittenToChild(), r.PID, r.Abandoned, mention})
	}
	want := []row{
		{2, "tools/call", "create_entities", StatusAbandoned, true, 4242, true, "run 2"},
		{1, "tools/call", "read_graph", pool.StatusError, true, 4141, false, ""},
		{1, "tools/list", "", pool.StatusOK, true, 4141, false, ""},
	}
	if d := cmp.Diff(want, rows); d != "" {
		t.Errorf("requests after the upgrade (-want +got):\n%s", d)
	}
	runs, err := s.Runs(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 || runs[0].ID != s.Run() || !runs[1].Crashed || runs[2].Crashed {
		t.Errorf("runs = %+v, want this run, crashed run 2, clean run 1", runs)
	}
	kids, err := s.ChildrenOfEarlierRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != 1 || kids[0].PID != 4242 || kids[0].Run != "2" || kids[0].Command[0] != "npx" {
		t.Errorf("children of earlier runs = %+v, want child 4242 of run 2", kids)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	golden(t, "schema.golden.sql", schema(t, path))
}

// TestMigrateFromEveryVersion upgrades a database of each earlier schema
// version (the frozen version-1 dump, brought to version k by the frozen
// migration files up to k): its requests read back through the query API
// as they were written, with every time to the microsecond, and the
// crashed run's request in flight is abandoned. Their ids are now their
// run's and pool id's (rowID).
func TestMigrateFromEveryVersion(t *testing.T) {
	dump, err := os.ReadFile("testdata/v1.sql")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID, Run                     int64
		PoolID                      uint64
		Session, Server, Method     string
		Name, OriginalID, Status    string
		Err                         string
		ErrCode                     int
		Received, Written, Answered int64
		RequestSize, ResponseSize   int
		PID                         int
	}
	want := []row{
		{2<<40 + 1, 2, 1, "s1", "memory", "tools/call", "create_entities", `"a"`, StatusAbandoned,
			"Switchboard stopped (run 2 crashed or was killed) before this request was answered", 0,
			1767232803000000, 1767232803000200, 0, 200, 0, 4242},
		{1<<40 + 2, 1, 2, "s1", "memory", "tools/call", "read_graph", "2", pool.StatusError, "graph is empty", -32603,
			1767225604000000, 1767225604000100, 1767225604500000, 80, 120, 4141},
		{1<<40 + 1, 1, 1, "s1", "memory", "tools/list", "", "1", pool.StatusOK, "", 0,
			1767225603000000, 1767225603000100, 1767225603002000, 60, 900, 4141},
	}
	for k := 1; k < len(migrations); k++ {
		t.Run(fmt.Sprintf("from v%d", k), func(t *testing.T) {
			path := dbPath(t)
			q := string(dump)
			for _, m := range migrations[1:k] {
				q += "\n" + m.sql
			}
			execSQL(t, path, q+fmt.Sprintf("\nPRAGMA user_version = %d;", k))
			s := openT(t, path, nil)
			got, err := s.Requests(context.Background(), Filter{})
			if err != nil {
				t.Fatal(err)
			}
			var rows []row
			for _, r := range got {
				us := func(t time.Time) int64 {
					if t.IsZero() {
						return 0
					}
					return t.UnixMicro()
				}
				rows = append(rows, row{r.ID, r.Run, r.PoolID, r.Session, r.Server, r.Method, r.Name, r.OriginalID, r.Status,
					r.Err, r.ErrCode, us(r.Received), us(r.Written), us(r.Answered), r.RequestSize, r.ResponseSize, r.PID})
			}
			if d := cmp.Diff(want, rows); d != "" {
				t.Errorf("requests after the upgrade (-want +got):\n%s", d)
			}
		})
	}
}

// TestChildrenOfEarlierRunsFromEveryVersion reads the children an
// earlier version recorded from a database of each schema version, as
// that version left it (a new build installed, no run of it yet): leak
// detection without a running pool needs them, and the read-only read
// leaves the schema as it was.
func TestChildrenOfEarlierRunsFromEveryVersion(t *testing.T) {
	dump, err := os.ReadFile("testdata/v1.sql")
	if err != nil {
		t.Fatal(err)
	}
	want := []ChildRecord{{PID: 4242, Server: "memory", Command: []string{"npx", "-y", "@modelcontextprotocol/server-memory"},
		StartedAt: time.UnixMicro(1767232801000000), Run: "2"}}
	for k := 1; k <= len(migrations); k++ {
		t.Run(fmt.Sprintf("v%d", k), func(t *testing.T) {
			path := dbPath(t)
			q := string(dump)
			for _, m := range migrations[1:k] {
				q += "\n" + m.sql
			}
			execSQL(t, path, q+fmt.Sprintf("\nPRAGMA user_version = %d;", k))
			got, err := ReadChildrenOfEarlierRuns(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("children of earlier runs (-want +got):\n%s", d)
			}
			if v := userVersion(t, path); v != k {
				t.Errorf("schema version %d after the read, want %d", v, k)
			}
		})
	}
	t.Run("newer", func(t *testing.T) {
		path := dbPath(t)
		execSQL(t, path, string(dump)+fmt.Sprintf("\nPRAGMA user_version = %d;", len(migrations)+1))
		if _, err := ReadChildrenOfEarlierRuns(context.Background(), path); !errors.Is(err, ErrTooNew) {
			t.Errorf("newer schema: %v, want ErrTooNew", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		if _, err := ReadChildrenOfEarlierRuns(context.Background(), dbPath(t)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("missing database: %v, want fs.ErrNotExist", err)
		}
	})
}

func userVersion(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite3", dsn(path, "mode=ro"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMigrateFromV4 upgrades a frozen version-4 database with every kind
// of row the compact request log encodes (payloads, an orphan, a status
// without a code, a tool name too long for the dictionary, rows of two
// crashed runs): the query API, the timeline and the compatibility view
// requests read them as version 4 did, and the crashed run's request in
// flight is owed to its session.
func TestMigrateFromV4(t *testing.T) {
	path := dbPath(t)
	dump, err := os.ReadFile("testdata/v4.sql")
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, path, string(dump))
	// What version 4 read, straight from its table.
	old := viewRows(t, path)
	s := openT(t, path, nil)
	ctx := context.Background()
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	// The same, but run 3's request in flight is abandoned now.
	for i, r := range old {
		old[i] = strings.Replace(r, "|in-flight|<nil>|<nil>|",
			"|abandoned|<nil>|Switchboard stopped (run 3 crashed or was killed) before this request was answered|", 1)
	}
	if d := cmp.Diff(old, viewRows(t, path)); d != "" {
		t.Errorf("the requests view after the upgrade (-version 4 +now):\n%s", d)
	}
	got, err := s.Requests(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 {
		t.Fatalf("%d requests, want 6", len(got))
	}
	long := strings.Repeat("x", 70)
	byID := map[int64]Request{} // by version 4's id
	for _, r := range got {
		old := map[int64]int64{rowID(1, 1): 1, rowID(1, 2): 2, orphanRowID(1, 3): 3, rowID(1, 3): 4, rowID(2, 1): 5, rowID(3, 1): 6}[r.ID]
		if old == 0 {
			t.Errorf("request %+v has an id of no version-4 row", r)
		}
		byID[old] = r
	}
	if r := byID[2]; r.RequestPayload == "" || !strings.Contains(r.ResponsePayload, "graph is empty") || r.ErrCode != -32603 {
		t.Errorf("request 2 (payloads) = %+v", r)
	}
	if r := byID[3]; r.Status != pool.StatusOrphaned || r.PoolID != 0 || r.OriginalID != "77" || r.Method != "" {
		t.Errorf("request 3 (orphan) = %+v", r)
	}
	if r := byID[4]; r.Status != StatusUnknown || r.Name != long || r.Abandoned {
		t.Errorf("request 4 (unknown, long name) = %+v", r)
	}
	if r := byID[6]; r.Status != StatusAbandoned || !r.WrittenToChild() || r.PID != 4343 || r.Server != "fs" {
		t.Errorf("request 6 (in flight at run 3's crash) = %+v", r)
	}
	var longInNames int
	if err := s.rdb().QueryRow(`SELECT count(*) FROM names WHERE text = ?`, long).Scan(&longInNames); err != nil || longInNames != 0 {
		t.Errorf("the long name in the dictionary: %d %v", longInNames, err)
	}
	for _, f := range []Filter{{Server: "fs"}, {Method: "tools/list"}, {Status: StatusAbandoned}, {Status: pool.StatusOrphaned}} {
		rs, err := s.Requests(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{"fs": 1, "tools/list": 1, StatusAbandoned: 2, pool.StatusOrphaned: 1}[stdcmp.Or(f.Server, f.Method, f.Status)]
		if len(rs) != n {
			t.Errorf("Requests(%+v) = %d rows, want %d", f, len(rs), n)
		}
	}
	tl, err := s.Timeline(ctx, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if tl.Backend == nil || len(tl.Backend.Roots) != 1 || tl.Backend.ResolvedCommand[0] != "/usr/bin/node" || !tl.Run.Crashed {
		t.Errorf("timeline of run 3's request: %+v", tl)
	}
	known, err := s.Unanswered(ctx, 3, "s1")
	owed := known.Requests
	if err != nil || len(owed) != 1 || owed[0].OriginalID != `"b"` || !owed[0].Written || owed[0].Name != "read_text_file" {
		t.Errorf("Unanswered(run 3, s1) = %+v, %v", owed, err)
	}
	hangs, err := s.Hangs(ctx, 0, time.Now())
	if err != nil || len(hangs) != 2 || hangs[0].ID != rowID(2, 1) || hangs[1].ID != rowID(3, 1) {
		t.Errorf("hangs = %+v, %v; want the abandoned requests 5 and 6", hangs, err)
	}
	counts, err := s.CountsByStatus(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]int{"ok": 1, "error": 1, "orphaned": 1, "unknown": 1, "abandoned": 2}, counts); d != "" {
		t.Errorf("counts (-want +got):\n%s", d)
	}
}

// viewRows reads table or view requests as version 4's columns but the
// id (renumbered by version 5), one string per row.
func viewRows(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite3", dsn(path, "mode=ro"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT run, pool_id, session, server, method, name, original_id, received, written,
		answered, status, error_code, error, request_size, response_size, pid, request_payload, response_payload
		FROM requests ORDER BY run, received, id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals := make([]any, 18)
		ptrs := make([]any, 18)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, v := range vals {
			if bs, ok := v.([]byte); ok {
				v = string(bs)
			}
			fmt.Fprintf(&b, "%v|", v)
		}
		out = append(out, b.String())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestOpenRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, path string)
		want    error
	}{
		{"newer schema", func(t *testing.T, path string) {
			s := openT(t, path, nil)
			s.Close()
			execSQL(t, path, "PRAGMA user_version = 99")
		}, ErrTooNew},
		{"garbage", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(strings.Repeat("not a database ", 300)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrCorrupt},
		{"someone else's database", func(t *testing.T, path string) {
			execSQL(t, path, "CREATE TABLE notes (body TEXT)")
		}, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			tc.prepare(t, path)
			s, err := Open(path, nil)
			if !errors.Is(err, tc.want) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("Open: %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			if tc.want == ErrCorrupt {
				return // a read-only open of garbage fails too, less precisely
			}
			if _, err := OpenReadOnly(path); !errors.Is(err, tc.want) {
				t.Errorf("OpenReadOnly: %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("missing, read-only", func(t *testing.T) {
		if _, err := OpenReadOnly(dbPath(t)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("OpenReadOnly: %v, want fs.ErrNotExist", err)
		}
	})
	t.Run("second writer", func(t *testing.T) {
		defer func(d time.Duration) { lockWait = d }(lockWait)
		lockWait = 50 * time.Millisecond
		path := dbPath(t)
		openT(t, path, nil)
		if s, err := Open(path, nil); !errors.Is(err, ErrLocked) {
			if s != nil {
				s.Close()
			}
			t.Fatalf("second Open: %v, want ErrLocked", err)
		}
	})
}

func execSQL(t *testing.T, path, q string) {
	t.Helper()
	db, err := sql.Open("sqlite3", dsn(path, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(q); err != nil {
		t.Fatal(err)
	}
}

// TestRecord records one life of each kind, with the events of a request
// in one batch (folded into one INSERT) and spread over batches (INSERT
// then UPDATEs), and reads it back through the query API.
func TestRecord(t *testing.T) {
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprintf("split=%v", split), func(t *testing.T) {
			path := dbPath(t)
			s := openT(t, path, &Options{CapturePayloads: true, CaptureBytes: 64, Version: "test"})
			ctx := context.Background()
			step := func(es ...pool.Event) {
				for _, e := range es {
					s.Record(e)
				}
				if split {
					if err := s.flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			step(pool.Event{Kind: pool.EventBackendStarted, Time: at(0), Server: "srv", PID: 4242, ProcessStart: at(0),
				Command: []string{"srv-mcp", "--api-key", "sk-secret", "--verbose"}})
			step(pool.Event{Kind: pool.EventSessionOpened, Time: at(time.Second), Server: "srv", Session: "s1", Transport: "stdio", PID: 777})
			step(pool.Event{Kind: pool.EventSessionOpened, Time: at(time.Second), Server: "srv", Session: "s1", ClientName: "claude-code", ClientVersion: "2.1"})
			r1 := received(1, "s1", "tools/call", "echo", at(2*time.Second))
			r1.Payload = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"password":"hunter2","text":"hello"}}}`)
			step(r1)
			step(written(1, "s1", 4242, at(2*time.Second+time.Millisecond)))
			d1 := done(1, "s1", "tools/call", "echo", pool.StatusOK, 4242, at(2*time.Second+5*time.Millisecond))
			d1.Payload = []byte(`{"jsonrpc":"2.0","id":1,"result":{"token":"abc"}}`)
			step(d1)
			step(received(2, "s1", "tools/call", "sleep", at(3*time.Second)), written(2, "s1", 4242, at(3*time.Second+time.Millisecond)))
			step(received(3, "s1", "tools/list", "", at(4*time.Second)),
				done(3, "s1", "tools/list", "", pool.StatusFailed, 0, at(4*time.Second+time.Millisecond)))
			step(pool.Event{Kind: pool.EventOrphan, Time: at(5 * time.Second), Server: "srv", OriginalID: "99", Status: pool.StatusOrphaned})
			step(pool.Event{Kind: pool.EventBackendExited, Time: at(6 * time.Second), Server: "srv", PID: 4242, ExitCode: 3, Err: "exit status 3"})
			step(done(2, "s1", "tools/call", "sleep", pool.StatusFailed, 4242, at(6*time.Second+time.Millisecond)))
			step(pool.Event{Kind: pool.EventSessionClosed, Time: at(7 * time.Second), Server: "srv", Session: "s1", Err: "client went away"})
			s.Record(pool.Event{Kind: pool.EventBackendState, State: pool.StateReady}) // not recorded, not dropped
			if err := s.flush(); err != nil {
				t.Fatal(err)
			}

			got, err := s.Requests(ctx, Filter{})
			if err != nil {
				t.Fatal(err)
			}
			type row struct {
				PoolID            uint64
				Method, Name      string
				Status            string
				Written           bool
				PID               int
				Dur               time.Duration
				ReqSize, RespSize int
				ReqLoad, RespLoad string
				ErrCode           int
			}
			var rows []row
			for _, r := range got {
				d, _ := r.Duration()
				rows = append(rows, row{r.PoolID, r.Method, r.Name, r.Status, r.WrittenToChild(), r.PID, d,
					r.RequestSize, r.ResponseSize, r.RequestPayload, r.ResponsePayload, r.ErrCode})
			}
			want := []row{
				{0, "", "", pool.StatusOrphaned, false, 0, 0, 0, 0, "", "", 0},
				{3, "tools/list", "", pool.StatusFailed, false, 0, time.Millisecond, 100, 200, "", "", -32000},
				{2, "tools/call", "sleep", pool.StatusFailed, true, 4242, 6*time.Second + time.Millisecond - 3*time.Second, 100, 200, "", "", -32000},
				{1, "tools/call", "echo", pool.StatusOK, true, 4242, 5 * time.Millisecond, 100, 200,
					`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`, `{"jsonrpc":"2.0","id":1,"result":{"token":"[REDACTED]"}}`, 0},
			}
			if d := cmp.Diff(want, rows); d != "" {
				t.Errorf("requests (-want +got):\n%s", d)
			}

			page, err := s.Requests(ctx, Filter{Limit: 2, After: got[1].Cursor(), Server: "srv"})
			if err != nil || len(page) != 2 || page[0].PoolID != 2 || page[1].PoolID != 1 {
				t.Errorf("second page = %+v, %v; want requests 2 and 1", page, err)
			}
			for _, f := range []Filter{{Status: pool.StatusOK}, {Method: "tools/list"}, {Session: "nobody"}, {Since: at(3 * time.Second)}} {
				rs, err := s.Requests(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				n := map[string]int{"ok": 1, "tools/list": 1, "nobody": 0, "since": 3}[stdcmp.Or(f.Status, f.Method, f.Session, "since")]
				if len(rs) != n {
					t.Errorf("Requests(%+v) = %d rows, want %d", f, len(rs), n)
				}
			}

			counts, err := s.CountsByStatus(ctx, at(0))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(map[string]int{"ok": 1, "failed": 2, "orphaned": 1}, counts); d != "" {
				t.Errorf("counts (-want +got):\n%s", d)
			}

			tl, err := s.Timeline(ctx, s.Run(), 2)
			if err != nil {
				t.Fatal(err)
			}
			var what []string
			for _, st := range tl.Steps {
				what = append(what, st.What)
			}
			wantSteps := []string{
				"received tools/call sleep from session s1 (claude-code 2.1) with id 2",
				"written to child PID 4242 of server srv",
				"child PID 4242 exited (exit status 3)",
				"ended failed after 3.001s: failed happened",
			}
			if d := cmp.Diff(wantSteps, what); d != "" {
				t.Errorf("timeline (-want +got):\n%s", d)
			}
			if tl.Session == nil || tl.Session.Transport != "stdio" || tl.Session.PeerPID != 777 || tl.Session.CloseReason != "client went away" {
				t.Errorf("timeline session = %+v", tl.Session)
			}
			if tl.Backend == nil || tl.Backend.ExitCode != 3 ||
				!cmp.Equal(tl.Backend.Command, []string{"srv-mcp", "--api-key", Redacted, "--verbose"}) {
				t.Errorf("timeline backend = %+v", tl.Backend)
			}
			if s.Dropped() != 0 {
				t.Errorf("dropped %d events", s.Dropped())
			}
		})
	}
}

// TestHangs: requests of the live run in flight past the threshold, and
// requests abandoned by a crashed run, seen by the writer and by a
// read-only reader in another "process" (connection).
func TestHangs(t *testing.T) {
	path := dbPath(t)
	ctx := context.Background()
	now := time.Now()

	// Run 1 "crashes" with request 7 written and in flight: it is closed
	// without Close (the lock goes, the run stays open).
	s1 := openT(t, path, nil)
	s1.Record(received(7, "s1", "tools/call", "pay", now.Add(-time.Hour)))
	s1.Record(written(7, "s1", 55, now.Add(-time.Hour)))
	// Run 1 lived a minute more: request 7 had waited that long.
	s1.Record(received(8, "s1", "tools/list", "", now.Add(-time.Hour+time.Minute)))
	s1.Record(done(8, "s1", "tools/list", "", pool.StatusOK, 55, now.Add(-time.Hour+time.Minute)))
	if err := s1.flush(); err != nil {
		t.Fatal(err)
	}
	crash(t, s1)

	s := openT(t, path, nil)
	s.Record(received(1, "s2", "tools/call", "sleep", now.Add(-time.Minute)))
	s.Record(written(1, "s2", 66, now.Add(-time.Minute)))
	s.Record(received(2, "s2", "tools/call", "queued", now.Add(-40*time.Second)))
	s.Record(received(3, "s2", "tools/call", "young", now.Add(-time.Second)))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	type hang struct {
		Run       int64
		Name      string
		Written   bool
		PID       int
		Abandoned bool
	}
	want := []hang{
		{1, "pay", true, 55, true},
		{2, "sleep", true, 66, false},
		{2, "queued", false, 0, false},
	}
	check := func(who string, st *Store, want []hang) {
		t.Helper()
		got, err := st.Hangs(ctx, 30*time.Second, now)
		if err != nil {
			t.Fatal(err)
		}
		var hs []hang
		for _, r := range got {
			hs = append(hs, hang{r.Run, r.Name, r.WrittenToChild(), r.PID, r.Abandoned})
		}
		if d := cmp.Diff(want, hs); d != "" {
			t.Errorf("%s: hangs (-want +got):\n%s", who, d)
		}
	}
	check("writer", s, want)
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	check("reader while the writer runs", ro, want)
	if live, _ := ro.LiveRun(ctx); live != s.Run() {
		t.Errorf("reader's live run = %d, want %d", live, s.Run())
	}

	tl, err := ro.Timeline(ctx, 1, 7)
	if err != nil {
		t.Fatal(err)
	}
	if last := tl.Steps[len(tl.Steps)-1].What; !strings.Contains(last, "abandoned") || !strings.Contains(last, "run 1 crashed") {
		t.Errorf("abandoned timeline ends with %q", last)
	}

	// Run 2 crashes too: to a reader, its requests in flight are
	// abandoned at once (no writer holds the database), aged to the run's
	// last moment: the young one had waited no time at all.
	crash(t, s)
	check("reader after the writer died", ro, []hang{
		{1, "pay", true, 55, true},
		{2, "sleep", true, 66, true},
		{2, "queued", false, 0, true},
	})
}

// TestHangsAgeAbandonedUpToTheirRun: a request abandoned by a run that
// crashed waited until that run's last recorded moment, not until now;
// --over compares that age, so an old crash's young request does not grow
// into a hang.
func TestHangsAgeAbandonedUpToTheirRun(t *testing.T) {
	path := dbPath(t)
	ctx := context.Background()
	now := time.Now()
	crashAt := now.Add(-10 * time.Minute)
	s1 := openT(t, path, nil)
	s1.Record(received(1, "s1", "tools/call", "stuck", crashAt.Add(-2*time.Second)))
	s1.Record(written(1, "s1", 55, crashAt.Add(-2*time.Second)))
	s1.Record(received(2, "s1", "tools/list", "", crashAt))
	s1.Record(done(2, "s1", "tools/list", "", pool.StatusOK, 55, crashAt))
	crash(t, s1)
	s := openT(t, path, nil)
	defer s.Close()

	for _, tc := range []struct {
		over time.Duration
		want []string
	}{
		{0, []string{"stuck"}},
		{time.Second, []string{"stuck"}},
		{2 * time.Second, []string{"stuck"}},
		{3 * time.Second, nil},
		{time.Minute, nil},
	} {
		t.Run(tc.over.String(), func(t *testing.T) {
			got, err := s.Hangs(ctx, tc.over, now)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range got {
				names = append(names, r.Name)
				if age := r.Age(now); age != 2*time.Second {
					t.Errorf("%s: age %s at now, want 2s (to its run's end)", r.Name, age)
				}
			}
			if d := cmp.Diff(tc.want, names); d != "" {
				t.Errorf("Hangs(over %s) (-want +got):\n%s", tc.over, d)
			}
		})
	}
	rs, err := s.Requests(ctx, Filter{Status: StatusAbandoned})
	if err != nil || len(rs) != 1 || rs[0].Age(now.Add(time.Hour)) != 2*time.Second {
		t.Errorf("Requests(abandoned) = %+v, %v; want one, aged 2s whenever asked", rs, err)
	}
}

// TestHangsAgeAbandonedUpToTheirHeartbeat: a run that crashed with a
// call in flight, the call its last event, lived on while the call
// waited; its heartbeat says how long, and the call is aged up to it (it
// used to be aged no time at all, up to its own receipt, and so was no
// hang at any threshold).
func TestHangsAgeAbandonedUpToTheirHeartbeat(t *testing.T) {
	path := dbPath(t)
	ctx := context.Background()
	start := time.Now()
	s1 := openT(t, path, &Options{HeartbeatInterval: 5 * time.Millisecond})
	// Received five minutes ago (events carry their own times): it has
	// had its row, the run's last event, since the first batch.
	s1.Record(received(1, "s1", "tools/call", "stuck", start.Add(-5*time.Minute)))
	s1.Record(written(1, "s1", 55, start.Add(-5*time.Minute)))
	waitFor(t, "a heartbeat of the run", func() bool {
		runs, err := s1.Runs(ctx, 1)
		return err == nil && len(runs) == 1 && !runs[0].Alive.Before(start)
	})
	crash(t, s1)
	s := openT(t, path, nil)

	later := time.Now().Add(time.Hour) // the age does not grow after the crash
	hs, err := s.Hangs(ctx, 5*time.Minute, later)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || !hs[0].Abandoned || hs[0].Name != "stuck" || hs[0].Age(later) < 5*time.Minute ||
		hs[0].RunEnded.Before(start) {
		t.Fatalf("Hangs(over 5m) = %+v, want the stuck call, abandoned, aged 5m or more (to its run's heartbeat)", hs)
	}
	if age := hs[0].Age(later); age > time.Since(start)+5*time.Minute {
		t.Errorf("age %s: past the crash", age)
	}
	rs, err := s.Requests(ctx, Filter{Status: StatusAbandoned})
	if err != nil || len(rs) != 1 || rs[0].Age(later) != hs[0].Age(later) {
		t.Errorf("Requests(abandoned) = %+v, %v; want the stuck call aged as Hangs ages it", rs, err)
	}
}

// Statuses lists every status a row can be stored with: the CLI refuses
// any other as a filter.
func TestStatusesAreTheStoredOnes(t *testing.T) {
	got := Statuses()
	slices.Sort(got)
	want := slices.Clone(statusNames[:])
	slices.Sort(want)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Statuses() (-stored +listed):\n%s", d)
	}
}

// crash ends a writable Store the way SIGKILL would, once what it
// recorded is written: the writer stops without closing the run, the
// connections and the lock go.
func crash(t *testing.T, s *Store) {
	t.Helper()
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	kill(s)
}

// kill is crash at once: what waits for the writer is lost, as it is when
// a process is killed between two batches.
func kill(s *Store) {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.killed.Store(true) // the writer writes nothing more
		close(s.stop)
		<-s.done
		s.wdb.Close()
		s.rdb().Close()
		s.lock.Close()
		s.rec.mu.Lock()
		s.rec.journal.close() // its memory stays in the file, as a killed process's does
		s.rec.mu.Unlock()
	})
}

// The history holds what clients asked: it is the user's alone. The
// database, its WAL and shared-memory files and the journal are 0600 (the
// first edition left them 0644).
func TestHistoryFilesArePrivate(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, nil)
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-inflight"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", filepath.Base(p), fi.Mode().Perm())
		}
	}
}

// Damage in the middle of the file (the header intact) is found at open
// by quick_check, not months later by a query that reaches it.
func TestOpenFindsMidFileDamage(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, nil)
	s.Close()
	execSQL(t, path, "CREATE TABLE filler (b BLOB)")
	for range 50 {
		execSQL(t, path, "INSERT INTO filler VALUES (randomblob(4000))")
	}
	execSQL(t, path, "PRAGMA wal_checkpoint(TRUNCATE)")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	if _, err := f.WriteAt([]byte(strings.Repeat("\xde\xad", 2048)), fi.Size()/2/4096*4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := Open(path, nil); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "quick_check") {
		t.Fatalf("Open of a damaged file: %v, want ErrCorrupt from quick_check", err)
	}
	aside, err := MoveAside(path, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(aside); err != nil {
		t.Fatalf("the damaged file is not kept: %v", err)
	}
	fresh := openT(t, path, nil)
	fresh.Close()
}

// With the queue full, an end that does not fit is dropped and counted,
// and takes its request with it: no row is left in flight (the next run
// would report it abandoned, a hang that never was), and nothing waits in
// memory or in the journal for it. The ends that fit are recorded.
func TestFullQueueLeavesNothingInFlight(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, &Options{QueueSize: 4, FlushInterval: time.Hour, BatchSize: 1 << 20})
	now := time.Now()
	const n = 200
	for i := range n {
		s.Record(pool.Event{Kind: pool.EventRequestReceived, Time: now, Server: "fake", Session: "s1", PoolID: uint64(i + 1), Method: "tools/call", Name: "echo"})
	}
	for i := range n {
		s.Record(pool.Event{Kind: pool.EventRequestDone, Time: now.Add(time.Millisecond), Server: "fake", Session: "s1", PoolID: uint64(i + 1), Method: "tools/call", Name: "echo", Status: pool.StatusOK})
	}
	if got := s.Dropped(); got != n-4 {
		t.Errorf("Dropped = %d, want %d (a queue of 4)", got, n-4)
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	reqs, err := s.Requests(ctx, Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 4 {
		t.Errorf("recorded %d requests, want the 4 that fit", len(reqs))
	}
	for _, r := range reqs {
		if r.Status != pool.StatusOK {
			t.Errorf("request %d: %s", r.PoolID, r.Status)
		}
	}
	if len(s.rec.open) != 0 || s.rec.waitHead != nil {
		t.Errorf("%d requests still open in memory", len(s.rec.open))
	}
	crash(t, s)
	if listed, err := readJournalFile(path); err != nil || len(listed) != 0 {
		t.Errorf("the journal lists %d requests (%v), want none", len(listed), err)
	}
}

// A request that ended is freed from the journal only once its row is
// committed: until then the journal lists it as answered, so that a crash
// before the commit does not lose it.
func TestJournalFreesOnlyWhatIsCommitted(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, &Options{FlushInterval: time.Hour})
	now := time.Now()
	s.Record(received(1, "s1", "tools/call", "echo", now))
	s.Record(written(1, "s1", 4242, now))
	s.Record(done(1, "s1", "tools/call", "echo", pool.StatusOK, 4242, now))
	listed, err := readJournalFile(path)
	if err != nil || len(listed) != 1 || listed[0].PoolID != 1 || listed[0].Written == 0 || listed[0].Answered == 0 ||
		listed[0].Name != "echo" {
		t.Fatalf("journal before the commit: %+v, %v; want request 1, written and answered", listed, err)
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if listed, err := readJournalFile(path); err != nil || len(listed) != 0 {
		t.Errorf("journal after the commit: %+v, %v; want it empty", listed, err)
	}
}

// Without a journal (its file cannot be made), history still records
// everything: each request in flight gets its row at the next batch, as
// every row did before the journal.
func TestWithoutAJournal(t *testing.T) {
	s := openWithoutJournal(t)
	now := time.Now()
	s.Record(received(1, "s1", "tools/call", "echo", now))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Requests(context.Background(), Filter{})
	if err != nil || len(rs) != 1 || rs[0].Status != StatusInFlight {
		t.Fatalf("requests after a flush: %+v, %v; want request 1 in flight", rs, err)
	}
	s.Record(done(1, "s1", "tools/call", "echo", pool.StatusOK, 0, now.Add(time.Millisecond)))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if rs, err := s.Requests(context.Background(), Filter{}); err != nil || len(rs) != 1 || rs[0].Status != pool.StatusOK {
		t.Errorf("requests after its end: %+v, %v", rs, err)
	}
}

// Without a journal, a request's in-flight row is queued at once, and
// its write to a child updates that row: a crash finds it written, with
// its child.
func TestWrittenWithoutAJournalIsRecorded(t *testing.T) {
	s := openWithoutJournal(t)
	now := time.Now()
	s.Record(received(1, "s1", "tools/call", "echo", now))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	s.Record(written(1, "s1", 40, now.Add(time.Millisecond)))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Requests(context.Background(), Filter{})
	if err != nil || len(rs) != 1 || rs[0].Status != StatusInFlight || !rs[0].WrittenToChild() || rs[0].PID != 40 {
		t.Fatalf("requests after the write: %+v, %v; want request 1 in flight, written to child 40", rs, err)
	}
}

// A journaled request in flight past InFlightAfter has its row; when it
// reaches a child after that (it waited for a child to start), the row
// says so, with the child and when: `history --status in-flight` must not
// tell the user no child got a request that one has. A request that
// reaches its child while young queues nothing: its row comes at its end.
func TestWrittenAfterItsInFlightRowIsRecorded(t *testing.T) {
	s := openT(t, dbPath(t), &Options{FlushInterval: time.Hour})
	ctx := context.Background()
	now := time.Now()
	s.Record(received(1, "s1", "tools/call", "sleep", now.Add(-2*time.Second)))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Requests(ctx, Filter{})
	if err != nil || len(rs) != 1 || rs[0].Status != StatusInFlight || rs[0].WrittenToChild() {
		t.Fatalf("requests after a flush: %+v, %v; want request 1 in flight, not written", rs, err)
	}
	s.Record(received(2, "s1", "tools/call", "echo", now))
	s.Record(written(2, "s1", 41, now))
	if n := s.rec.pending(); n != 0 {
		t.Errorf("a young request's write queued %d rows, want none", n)
	}
	s.Record(written(1, "s1", 40, now.Add(time.Millisecond)))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	rs, err = s.Requests(ctx, Filter{Status: StatusInFlight})
	if err != nil || len(rs) != 1 || rs[0].PoolID != 1 || !rs[0].WrittenToChild() || rs[0].PID != 40 ||
		!rs[0].Written.Equal(now.Add(time.Millisecond).Truncate(time.Microsecond)) {
		t.Fatalf("in flight after its write: %+v, %v; want request 1 written to child 40 at %v", rs, err, now.Add(time.Millisecond))
	}
}

// openWithoutJournal opens a store whose journal file cannot be made (a
// directory stands in its place).
func openWithoutJournal(t *testing.T) *Store {
	t.Helper()
	path := dbPath(t)
	if err := os.Mkdir(path+"-inflight", 0o700); err != nil {
		t.Fatal(err)
	}
	return openT(t, path, nil)
}

// A pool id twice in a run (a pool's bug, or two pools on one store) does
// not cost the batch: the statement that meets the taken id is undone and
// its rows inserted one by one, the second of the two skipped.
func TestTakenIDCostsOnlyItsRow(t *testing.T) {
	s := openT(t, dbPath(t), &Options{FlushInterval: time.Hour})
	now := time.Now()
	for i := 1; i <= 2*insBatch; i++ {
		id := uint64(i)
		if i == insBatch/2 {
			id = 3 // taken
		}
		s.Record(done(id, "s1", "tools/call", "echo", pool.StatusOK, 0, now))
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Requests(context.Background(), Filter{Limit: 1000})
	if err != nil || len(rs) != 2*insBatch-1 || s.Dropped() != 0 {
		t.Errorf("recorded %d requests (%v), dropped %d; want %d and none", len(rs), err, s.Dropped(), 2*insBatch-1)
	}
}

// Requests since a time, and their counts, are found through the sample
// of one row in 64 and filtered exactly: every request received at or
// after the time, whatever side of a sample it falls on, and none before.
func TestSinceFindsEveryRequest(t *testing.T) {
	s := openT(t, dbPath(t), nil)
	start := time.Now().Add(-time.Hour).Truncate(time.Millisecond) // times are kept to the microsecond
	const n = 1000
	for i := uint64(1); i <= n; i++ {
		at := start.Add(time.Duration(i) * 100 * time.Millisecond) // 100 s in all
		s.Record(received(i, "s1", "tools/call", "echo", at))
		s.Record(done(i, "s1", "tools/call", "echo", pool.StatusOK, 0, at))
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []int{0, 1, 63, 64, 65, 500, 999, 1000, 1001} {
		since := start.Add(time.Duration(k) * 100 * time.Millisecond)
		want := n - max(k, 1) + 1
		if k > n {
			want = 0
		}
		rs, err := s.Requests(ctx, Filter{Since: since, Limit: 2 * n})
		if err != nil {
			t.Fatal(err)
		}
		counts, err := s.CountsByStatus(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != want || counts[pool.StatusOK] != want {
			t.Errorf("since request %d: %d requests, %d counted; want %d", k, len(rs), counts[pool.StatusOK], want)
		}
		for _, r := range rs {
			if r.Received.Before(since) {
				t.Errorf("since request %d: request %d received before", k, r.PoolID)
			}
		}
	}
}

// Orphaned responses have row ids above every request of their run, and
// every 64th is in the sample of received times: a run's 64th orphan must
// not bound the requests since a later time, or every request the run
// received afterwards (fewer than 64 of them: no later sample) is missed
// by Requests, CountsByStatus and Window.
func TestSinceAfterOrphans(t *testing.T) {
	s := openT(t, dbPath(t), nil)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	long := now.Add(-3 * time.Hour)
	const orphans, requests = 64, 10
	for i := range orphans {
		s.Record(pool.Event{Kind: pool.EventOrphan, Time: long.Add(time.Duration(i) * time.Millisecond), Server: "srv",
			OriginalID: fmt.Sprint(1000 + i), PID: 7})
	}
	for i := uint64(1); i <= requests; i++ {
		at := now.Add(-time.Duration(requests+1-i) * time.Second)
		s.Record(received(i, "s1", "tools/call", "echo", at))
		s.Record(done(i, "s1", "tools/call", "echo", pool.StatusOK, 7, at.Add(time.Millisecond)))
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	since := now.Add(-time.Minute)
	rs, err := s.Requests(ctx, Filter{Since: since})
	if err != nil {
		t.Fatal(err)
	}
	counts, err := s.CountsByStatus(ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Window(ctx, since, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != requests || counts[pool.StatusOK] != requests || len(w.Requests) != requests {
		t.Errorf("since a minute ago: %d requests, %d counted, %d in the window; want %d each",
			len(rs), counts[pool.StatusOK], len(w.Requests), requests)
	}
	// The orphans themselves are found since before them.
	all, err := s.CountsByStatus(ctx, long.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if all[pool.StatusOrphaned] != orphans || all[pool.StatusOK] != requests {
		t.Errorf("since before the orphans: %v; want %d orphaned, %d ok", all, orphans, requests)
	}
}

// inFlightTimeline records events in a new store that lists a request in
// flight at once, and returns the timeline of its request 7.
func inFlightTimeline(t *testing.T, events []pool.Event) Timeline {
	t.Helper()
	s := openT(t, dbPath(t), &Options{InFlightAfter: time.Nanosecond})
	for _, e := range events {
		s.Record(e)
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	tl, err := s.Timeline(context.Background(), s.run, 7)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// stepSays reports whether a step of tl says what.
func stepSays(tl Timeline, what string) bool {
	return slices.ContainsFunc(tl.Steps, func(st Step) bool { return strings.Contains(st.What, what) })
}

// A child's roots partition is recorded with it and told in the timeline
// of a request it served.
func TestBackendRootsRecorded(t *testing.T) {
	now := time.Now()
	tl := inFlightTimeline(t, []pool.Event{
		{Kind: pool.EventBackendStarted, Time: now, Server: "fs", PID: 4321, ProcessStart: now, Command: []string{"fs-server"},
			Roots: []string{"file:///work/a", "file:///work/b"}},
		{Kind: pool.EventRequestReceived, Time: now, Server: "fs", Session: "s1", PoolID: 7, Method: "tools/call", Name: "read"},
		{Kind: pool.EventRequestWritten, Time: now, Server: "fs", Session: "s1", PoolID: 7, PID: 4321},
	})
	if tl.Backend == nil || strings.Join(tl.Backend.Roots, " ") != "file:///work/a file:///work/b" {
		t.Fatalf("backend %+v", tl.Backend)
	}
	if !stepSays(tl, "(roots file:///work/a, file:///work/b)") {
		t.Errorf("the timeline does not name the roots: %+v", tl.Steps)
	}
}

// What a child was started as, when its command was resolved (npx ->
// node), is recorded beside the configured command and told in the
// timeline of a request it served.
func TestBackendResolvedCommandRecorded(t *testing.T) {
	now := time.Now()
	tl := inFlightTimeline(t, []pool.Event{
		{Kind: pool.EventBackendStarted, Time: now, Server: "seq", PID: 4321, ProcessStart: now,
			Command:         []string{"npx", "-y", "@modelcontextprotocol/server-sequential-thinking"},
			ResolvedCommand: []string{"/usr/bin/node", "/cache/node_modules/@modelcontextprotocol/server-sequential-thinking/dist/index.js"}},
		{Kind: pool.EventRequestReceived, Time: now, Server: "seq", Session: "s1", PoolID: 7, Method: "tools/list"},
		{Kind: pool.EventRequestWritten, Time: now, Server: "seq", Session: "s1", PoolID: 7, PID: 4321},
	})
	if tl.Backend == nil || tl.Backend.Command[0] != "npx" || len(tl.Backend.ResolvedCommand) != 2 || tl.Backend.ResolvedCommand[0] != "/usr/bin/node" {
		t.Fatalf("backend %+v", tl.Backend)
	}
	if !stepSays(tl, "started as /usr/bin/node /cache/node_modules/") {
		t.Errorf("the timeline does not say what the child was started as: %+v", tl.Steps)
	}
}

// TestChildrenOnlyRecordsChildrenAlone: with history off the database
// keeps the one record of the pool's children, which leak detection
// reads, and none of the requests or sessions the user asked it not to.
func TestChildrenOnlyRecordsChildrenAlone(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, &Options{ChildrenOnly: true})
	s.Record(pool.Event{Kind: pool.EventSessionOpened, Time: at(0), Server: "srv", Session: "s1", Transport: "stdio"})
	s.Record(pool.Event{Kind: pool.EventBackendStarted, Time: at(0), Server: "srv", PID: 4242, ProcessStart: at(0), Command: []string{"fake-mcp"}})
	s.Record(received(1, "s1", "tools/call", "echo", at(time.Millisecond)))
	s.Record(done(1, "s1", "tools/call", "echo", pool.StatusOK, 4242, at(2*time.Millisecond)))
	crash(t, s) // the run ends without seeing its child exit

	next := openT(t, path, nil)
	if rs, err := next.Requests(context.Background(), Filter{}); err != nil || len(rs) != 0 {
		t.Errorf("requests recorded with history off: %+v %v", rs, err)
	}
	kids, err := next.ChildrenOfEarlierRuns(context.Background())
	if err != nil || len(kids) != 1 || kids[0].PID != 4242 || kids[0].Server != "srv" {
		t.Errorf("children of the earlier run: %+v %v", kids, err)
	}
	var sessions int
	if err := next.rdb().QueryRow(`SELECT count(*) FROM sessions`).Scan(&sessions); err != nil || sessions != 0 {
		t.Errorf("sessions recorded with history off: %d %v", sessions, err)
	}
}

// TestJournaledCounts: Journaled follows each request through the
// journal: listed when received, written when its child has it, neither
// once it is answered (the journal keeps it, as answered, until its end
// is committed).
func TestJournaledCounts(t *testing.T) {
	s := openT(t, dbPath(t), nil)
	now := time.Now()
	check := func(when string, listed, written int) {
		t.Helper()
		if l, w := s.Journaled(); l != listed || w != written {
			t.Errorf("%s: journaled %d, written %d; want %d, %d", when, l, w, listed, written)
		}
	}
	check("at start", 0, 0)
	s.Record(received(1, "s1", "tools/call", "a", now))
	s.Record(received(2, "s1", "tools/call", "b", now))
	check("two received", 2, 0)
	s.Record(written(1, "s1", 4321, now))
	s.Record(written(1, "s1", 4321, now)) // a second note of the same write counts once
	check("one written", 2, 1)
	s.Record(done(1, "s1", "tools/call", "a", pool.StatusOK, 4321, now))
	check("the written one answered", 1, 0)
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	check("the written one's end committed", 1, 0)
	if listed, err := readJournalFile(s.path); err != nil || len(listed) != 1 {
		t.Errorf("the journal lists %+v (%v); want request 2 alone", listed, err)
	}
}
