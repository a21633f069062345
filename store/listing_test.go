package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
)

// orphan is a child's answer to an id nobody waits for.
func orphan(id string, when time.Time) pool.Event {
	return pool.Event{Kind: pool.EventOrphan, Time: when, Server: "srv", OriginalID: id, Status: pool.StatusOrphaned}
}

// The history lists newest first by time received: an orphaned answer
// (whose row id is above every request id of its run) takes its place
// among the requests, and old orphans, however many, never hide newer
// requests.
func TestRequestsNewestFirstWithOrphans(t *testing.T) {
	s := openT(t, dbPath(t), nil)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	const old = 120 // more than a page
	for i := range old {
		s.Record(orphan(fmt.Sprint(1000+i), now.Add(-3*time.Hour+time.Duration(i)*time.Millisecond)))
	}
	for i := uint64(1); i <= 5; i++ {
		at := now.Add(-time.Duration(6-i) * time.Minute)
		s.Record(received(i, "s1", "tools/call", "echo", at))
		s.Record(done(i, "s1", "tools/call", "echo", pool.StatusOK, 7, at.Add(time.Millisecond)))
	}
	s.Record(orphan("3", now.Add(-150*time.Second))) // between requests 3 and 4
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	name := func(r Request) string {
		if r.PoolID == 0 {
			return "orphan " + r.OriginalID
		}
		return fmt.Sprint("request ", r.PoolID)
	}
	page := func(f Filter) []string {
		t.Helper()
		rs, err := s.Requests(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for i, r := range rs {
			if i > 0 && (r.Received.After(rs[i-1].Received) || r.Received.Equal(rs[i-1].Received) && r.ID > rs[i-1].ID) {
				t.Errorf("%+v: %s listed after %s, which is older", f, name(r), name(rs[i-1]))
			}
			out = append(out, name(r))
		}
		return out
	}
	first := page(Filter{Limit: 8})
	want := []string{"request 5", "request 4", "orphan 3", "request 3", "request 2", "request 1", "orphan 1119", "orphan 1118"}
	if d := cmp.Diff(want, first); d != "" {
		t.Errorf("the newest 8 (-want +got):\n%s", d)
	}
	if all := page(Filter{}); len(all) != 100 || all[0] != "request 5" || all[99] != "orphan 1026" {
		t.Errorf("a default page: %d rows, %q first, %q last; want 100 from request 5 to orphan 1026", len(all), all[0], all[len(all)-1])
	}
	if got := page(Filter{Status: pool.StatusOrphaned, Limit: 2}); !cmp.Equal(got, []string{"orphan 3", "orphan 1119"}) {
		t.Errorf("orphans only: %q", got)
	}
	if got := page(Filter{Status: pool.StatusOK, Limit: 2}); !cmp.Equal(got, []string{"request 5", "request 4"}) {
		t.Errorf("ok only: %q", got)
	}
	if got := page(Filter{Since: now.Add(-4*time.Minute + time.Second)}); !cmp.Equal(got, []string{"request 5", "request 4", "orphan 3", "request 3"}) {
		t.Errorf("the last 4 minutes: %q", got)
	}

	// Page by page, from the last row of each: the same order, every row
	// once, however the pages fall between requests and orphans.
	for _, size := range []int{1, 2, 3, 7, 100} {
		var got []string
		f := Filter{Limit: size}
		for n := 0; ; n++ {
			rs, err := s.Requests(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) == 0 || n > 200 {
				break
			}
			for _, r := range rs {
				got = append(got, name(r))
			}
			f.After = rs[len(rs)-1].Cursor()
		}
		if len(got) != old+6 || !cmp.Equal(got[:8], want) || got[len(got)-1] != "orphan 1000" {
			t.Errorf("pages of %d: %d rows, first %q, last %q", size, len(got), got[:min(8, len(got))], got[len(got)-1])
		}
	}
}

// An orphaned response opens a timeline of its own (it has no pool id to
// find it by): the child's answer, after the end of the request whose
// pool id it answered.
func TestOrphanTimeline(t *testing.T) {
	s := openT(t, dbPath(t), nil)
	ctx := context.Background()
	now := time.Now()
	s.Record(received(9, "s2", "tools/call", "sleep", now.Add(-time.Minute)))
	s.Record(done(9, "s2", "tools/call", "sleep", pool.StatusTimeout, 7, now.Add(-30*time.Second)))
	s.Record(orphan("9", now.Add(-20*time.Second)))
	s.Record(orphan(`"x"`, now.Add(-10*time.Second))) // no request's
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Requests(ctx, Filter{Status: pool.StatusOrphaned})
	if err != nil || len(rs) != 2 {
		t.Fatalf("orphans: %d, %v", len(rs), err)
	}
	steps := func(r Request) []string {
		t.Helper()
		tl, err := s.TimelineOf(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, st := range tl.Steps {
			out = append(out, st.What)
		}
		return out
	}
	if d := cmp.Diff([]string{"server srv answered id \"x\": " + orphanError}, steps(rs[0])); d != "" {
		t.Errorf("an orphan of no request (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{
		"request 9 (tools/call sleep from session s2) ended timeout after 30s: timeout happened",
		"server srv answered id 9: the late answer to request 9, which no one waited for any more",
	}, steps(rs[1])); d != "" {
		t.Errorf("the late answer to request 9 (-want +got):\n%s", d)
	}
	if _, err := s.TimelineOf(ctx, rowID(s.Run(), 10)); !errors.Is(err, sql.ErrNoRows) {
		t.Errorf("the timeline of no row: %v, want sql.ErrNoRows", err)
	}
}

// A request's id and its child's error text are kept bounded, cut at a
// character with a mark saying so, and the error is redacted as payloads
// are, with capture off: a client's or a child's megabyte costs the
// database a few hundred bytes, and a secret echoed in an error stays out.
func TestIDAndErrorAreBoundedAndRedacted(t *testing.T) {
	s := openT(t, dbPath(t), &Options{InFlightAfter: time.Nanosecond}) // rows for requests in flight at once
	ctx := context.Background()
	now := time.Now()
	bigID := `"` + strings.Repeat("x", 1<<20) + `"`
	wide := strings.Repeat("é", 1<<19) // two bytes each: a cut must not split one
	errs := map[uint64]string{
		1: "invalid arguments: " + strings.Repeat("password=hunter2 ", 1<<16),
		2: `bad params {"apiKey": "sk-live-1", "q": "x"} for Bearer eyJhbGciOi.abc`,
		3: wide,
		4: "tool not found: nosuch",
		5: "token=" + strings.Repeat("é", 1000), // shorter once redacted, longer than the bound before
	}
	for i := uint64(1); i <= 5; i++ {
		e := received(i, "s1", "tools/call", "echo", now)
		if i == 1 {
			e.OriginalID = bigID
		}
		s.Record(e)
		d := done(i, "s1", "tools/call", "echo", pool.StatusError, 7, now)
		d.Err = errs[i]
		s.Record(d)
	}
	// In flight: a request whose id is cut, and one whose id is whole.
	e := received(6, "s1", "tools/call", "slow", now)
	e.OriginalID = bigID
	s.Record(e)
	s.Record(received(7, "s1", "tools/call", "slow", now))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	var stored int64
	if err := s.rdb().QueryRow(`SELECT sum(length(CAST(original_id AS BLOB))) + sum(length(CAST(error AS BLOB))) FROM request_log`).
		Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored > 7*(maxIDBytes+maxErrorBytes) {
		t.Errorf("7 requests keep %d bytes of ids and errors, want at most %d", stored, 7*(maxIDBytes+maxErrorBytes))
	}
	rs, err := s.Requests(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]Request{}
	for _, r := range rs {
		got[r.PoolID] = r
	}
	if id := got[1].OriginalID; len(id) > maxIDBytes || !strings.HasPrefix(id, `"xxxx`) || !strings.Contains(id, "1048578 bytes") {
		t.Errorf("a megabyte id is kept as %d bytes: %.40q...", len(id), id)
	}
	for i, r := range got {
		if len(r.Err) > maxErrorBytes || !utf8.ValidString(r.Err) {
			t.Errorf("request %d: error of %d bytes (valid UTF-8: %v)", i, len(r.Err), utf8.ValidString(r.Err))
		}
		for _, secret := range []string{"hunter2", "sk-live-1", "eyJhbGciOi"} {
			if strings.Contains(r.Err, secret) {
				t.Errorf("request %d: error keeps %q: %.80q", i, secret, r.Err)
			}
		}
	}
	if e := got[1].Err; !strings.HasPrefix(e, "invalid arguments: password="+Redacted+" password=") || !strings.Contains(e, fmt.Sprint(len(errs[1]), " bytes")) {
		t.Errorf("a long error is kept as %.80q ... %q", e, e[max(0, len(e)-40):])
	}
	if e, want := got[2].Err, `bad params {"apiKey": "`+Redacted+`", "q": "x"} for Bearer `+Redacted; e != want {
		t.Errorf("error = %q, want %q", e, want)
	}
	if e := got[3].Err; !strings.HasPrefix(e, "éé") || !strings.Contains(e, fmt.Sprint(len(wide), " bytes")) {
		t.Errorf("a long error of wide characters is kept as %.20q ... %q", e, e[max(0, len(e)-40):])
	}
	if e := got[4].Err; e != errs[4] {
		t.Errorf("a short error is kept as %q, want it whole", e)
	}
	if e, want := got[5].Err, "token="+Redacted+"… [cut from 2006 bytes]"; e != want {
		t.Errorf("error = %q, want %q", e, want)
	}
	// A client still waiting after a restart is answered by id: only an
	// id kept whole can be.
	known, err := s.Unanswered(ctx, s.Run(), "s1")
	owed := known.Requests
	if err != nil || len(owed) != 1 || owed[0].OriginalID != "7" {
		t.Errorf("Unanswered = %+v, %v; want request 7 alone", owed, err)
	}
}

// Why a session or a child ended, and why a config reload was not
// applied, are kept as a request's error is, bounded and redacted: a
// client's close, a child's exit (which may quote its stderr) and a
// config error are texts from outside. The history's readers (the
// waterfall's window, a request's timeline) show what was kept.
func TestReasonsAreBoundedAndRedacted(t *testing.T) {
	s := openT(t, dbPath(t), nil)
	ctx := context.Background()
	now := time.Now()
	huge := func(what string) string { // over a megabyte, wide characters in it
		return what + ": Bearer eyJhbGciOi.abc " + strings.Repeat("password=hunter2 é ", 1<<16)
	}
	s.Record(pool.Event{Kind: pool.EventSessionOpened, Time: now.Add(-4 * time.Second), Server: "srv", Session: "s1", Transport: "stdio"})
	s.Record(pool.Event{Kind: pool.EventBackendStarted, Time: now.Add(-4 * time.Second), Server: "srv", PID: 50, Command: []string{"srv"}})
	s.Record(received(1, "s1", "tools/call", "echo", now.Add(-3*time.Second)))
	s.Record(written(1, "s1", 50, now.Add(-3*time.Second)))
	s.Record(pool.Event{Kind: pool.EventBackendExited, Time: now.Add(-2 * time.Second), Server: "srv", PID: 50, ExitCode: 1,
		Err: huge("child said")})
	s.Record(pool.Event{Kind: pool.EventSessionClosed, Time: now.Add(-time.Second), Server: "srv", Session: "s1", Err: huge("client said")})
	s.Record(done(1, "s1", "tools/call", "echo", pool.StatusFailed, 50, now))
	s.RecordConfigReload(ConfigReload{At: now, Err: huge("config said")})
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	w, err := s.Window(ctx, now.Add(-time.Minute), now.Add(time.Second), 0)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := s.Timeline(ctx, s.Run(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Sessions) != 1 || len(w.Backends) != 1 || len(w.Reloads) != 1 {
		t.Fatalf("window: %d sessions, %d children, %d reloads; want one each", len(w.Sessions), len(w.Backends), len(w.Reloads))
	}
	for _, c := range []struct {
		name, column, table, prefix string
		shown                       string // as the window reads it
		step                        string // the timeline's step that tells it, if one does
	}{
		{"session close reason", "close_reason", "sessions", "client said", w.Sessions[0].CloseReason, "session disconnected: "},
		{"child exit reason", "exit_reason", "backends", "child said", w.Backends[0].ExitReason, "child PID 50 exited ("},
		{"config error", "error", "config_reloads", "config said", w.Reloads[0].Err, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var kept string
			if err := s.rdb().QueryRow("SELECT " + c.column + " FROM " + c.table).Scan(&kept); err != nil {
				t.Fatal(err)
			}
			whole := len(huge(c.prefix))
			if len(kept) > maxErrorBytes || !utf8.ValidString(kept) {
				t.Errorf("kept %d bytes (valid UTF-8: %v), want at most %d", len(kept), utf8.ValidString(kept), maxErrorBytes)
			}
			for _, secret := range []string{"hunter2", "eyJhbGciOi"} {
				if strings.Contains(kept, secret) {
					t.Errorf("keeps %q: %.80q", secret, kept)
				}
			}
			if want := c.prefix + ": Bearer " + Redacted + " password=" + Redacted; !strings.HasPrefix(kept, want) ||
				!strings.HasSuffix(kept, fmt.Sprintf("[cut from %d bytes]", whole)) {
				t.Errorf("kept as %.60q ... %q, want it to start %q and end with its length", kept, kept[max(0, len(kept)-40):], want)
			}
			if c.shown != kept {
				t.Errorf("the window shows %.60q, want %.60q", c.shown, kept)
			}
			if c.step == "" {
				return
			}
			found := false
			for _, st := range tl.Steps {
				found = found || strings.HasPrefix(st.What, c.step+kept)
			}
			if !found {
				t.Errorf("no timeline step tells %q with what was kept", c.step)
			}
		})
	}
}

// What a client names itself and its requests, and the roots it
// declares, are kept bounded: a client's megabyte name or version, a
// megabyte method or tool name, or thousands of roots cost the database
// a few KiB, cut at a character with a mark saying so (the roots: whole
// ones that fit, then how many more there were), and a root's password or
// token stays out. The history's readers show what was kept, and a
// filter by method finds a request by its method, long or not.
func TestClientTextsAreBounded(t *testing.T) {
	s := openT(t, dbPath(t), nil)
	ctx := context.Background()
	now := time.Now()
	huge := func(what string) string { return what + strings.Repeat("é", 1<<19) } // over a megabyte, wide characters
	bigName, bigVersion, bigTransport, bigMethod, bigTool := huge("client "), huge("1."), huge("pipe "), huge("tools/"), huge("echo ")
	secretRoot := "https://alice:hunter2@git.example/repo?access_token=sk-live-1"
	roots := []string{secretRoot, huge("file:///deep/")}
	for i := range 5000 {
		roots = append(roots, fmt.Sprintf("file:///home/u/project-%04d", i))
	}
	s.Record(pool.Event{Kind: pool.EventSessionOpened, Time: now.Add(-4 * time.Second), Server: "srv", Session: "s1",
		ClientName: bigName, ClientVersion: bigVersion, Transport: bigTransport})
	s.Record(pool.Event{Kind: pool.EventBackendStarted, Time: now.Add(-4 * time.Second), Server: "srv", PID: 50,
		Command: []string{"srv"}, Roots: roots})
	s.Record(received(1, "s1", bigMethod, bigTool, now.Add(-3*time.Second)))
	s.Record(written(1, "s1", 50, now.Add(-3*time.Second)))
	s.Record(done(1, "s1", bigMethod, bigTool, pool.StatusOK, 50, now.Add(-2*time.Second)))
	s.Record(received(2, "s1", "tools/call", "echo", now.Add(-time.Second)))
	s.Record(done(2, "s1", "tools/call", "echo", pool.StatusOK, 50, now))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	w, err := s.Window(ctx, now.Add(-time.Minute), now.Add(time.Second), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Sessions) != 1 || len(w.Backends) != 1 || len(w.Requests) != 2 {
		t.Fatalf("window: %d sessions, %d children, %d requests; want 1, 1, 2", len(w.Sessions), len(w.Backends), len(w.Requests))
	}
	var req1 Request
	for _, r := range w.Requests {
		if r.PoolID == 1 {
			req1 = r
		}
	}
	for _, c := range []struct {
		name, column, table, whole string
		bound                      int
		shown                      string // as the window reads it
	}{
		{"client name", "client_name", "sessions", bigName, maxClientBytes, w.Sessions[0].ClientName},
		{"client version", "client_version", "sessions", bigVersion, maxClientBytes, w.Sessions[0].ClientVersion},
		{"transport", "transport", "sessions", bigTransport, maxClientBytes, w.Sessions[0].Transport},
		{"method", "method", "requests WHERE pool_id = 1", bigMethod, maxMethodBytes, req1.Method},
		{"tool name", "name", "requests WHERE pool_id = 1", bigTool, maxNameBytes, req1.Name},
	} {
		t.Run(c.name, func(t *testing.T) {
			var kept string
			if err := s.rdb().QueryRow("SELECT " + c.column + " FROM " + c.table).Scan(&kept); err != nil {
				t.Fatal(err)
			}
			if len(kept) > c.bound || !utf8.ValidString(kept) {
				t.Errorf("kept %d bytes (valid UTF-8: %v), want at most %d", len(kept), utf8.ValidString(kept), c.bound)
			}
			if want := prefix(c.whole, 8); !strings.HasPrefix(kept, want) ||
				!strings.HasSuffix(kept, fmt.Sprintf("[cut from %d bytes]", len(c.whole))) {
				t.Errorf("kept as %.40q ... %q, want it to start %q and end with its length", kept, kept[max(0, len(kept)-40):], want)
			}
			if c.shown != kept {
				t.Errorf("the window shows %.40q, want %.40q", c.shown, kept)
			}
		})
	}
	t.Run("roots", func(t *testing.T) {
		var kept string
		if err := s.rdb().QueryRow("SELECT roots FROM backends").Scan(&kept); err != nil {
			t.Fatal(err)
		}
		var got []string
		if err := json.Unmarshal([]byte(kept), &got); err != nil || len(kept) > maxRootsBytes {
			t.Fatalf("kept %d bytes (%v), want a JSON array of at most %d", len(kept), err, maxRootsBytes)
		}
		if !cmp.Equal(w.Backends[0].Roots, got) {
			t.Errorf("the window shows %d roots, the row keeps %d", len(w.Backends[0].Roots), len(got))
		}
		if len(got) < 4 {
			t.Fatalf("kept %d roots: %q", len(got), got)
		}
		if want := "https://" + Redacted + "@git.example/repo?access_token=" + Redacted; got[0] != want {
			t.Errorf("a root with a password and a token is kept as %q, want %q", got[0], want)
		}
		if r := got[1]; len(r) > maxErrorBytes || !strings.HasPrefix(r, "file:///deep/é") ||
			!strings.HasSuffix(r, fmt.Sprintf("[cut from %d bytes]", len(roots[1]))) {
			t.Errorf("a megabyte root is kept as %d bytes: %.40q ... %q", len(r), r, r[max(0, len(r)-40):])
		}
		whole := got[:len(got)-1]
		if !cmp.Equal(whole[2:], roots[2:len(whole)]) {
			t.Errorf("the roots kept after the first two are not the whole first ones in order: %q", whole[2:])
		}
		if want := fmt.Sprintf("… and %d more", len(roots)-len(whole)); got[len(got)-1] != want {
			t.Errorf("the last of the roots kept is %q, want %q", got[len(got)-1], want)
		}
	})
	t.Run("filter by method", func(t *testing.T) {
		for method, want := range map[string]uint64{"tools/call": 2, bigMethod: 1} {
			rs, err := s.Requests(ctx, Filter{Method: method})
			if err != nil || len(rs) != 1 || rs[0].PoolID != want {
				t.Errorf("Requests(method %.20q) = %d rows, %v; want request %d alone", method, len(rs), err, want)
			}
		}
	})
}

// A child's roots are kept as a JSON array: all of them when they fit,
// else the whole ones that fit and how many more there were, never more
// than maxRootsBytes, even when no root fits.
func TestRootsText(t *testing.T) {
	if got := rootsText(nil); got != nil {
		t.Errorf("no roots: %v, want NULL", got)
	}
	few := []string{"file:///a", "file:///b%20c", "file:///d<e>&f"}
	if b, _ := json.Marshal(few); rootsText(few) != string(b) {
		t.Errorf("a few roots: %v, want %s", rootsText(few), b)
	}
	unprintable := strings.Repeat("\x01", maxRootBytes) // six bytes each as JSON
	long := strings.Repeat("a", 1019)                   // four fill the bound but for 7 bytes
	for _, tc := range []struct {
		name  string
		roots []string
		want  []string
	}{
		{"none fits", []string{unprintable, "file:///a"}, []string{"… and 2 more"}},
		{"the mark in place of the last", append(slices.Repeat([]string{long}, 4), "file:///b"),
			[]string{long, long, long, "… and 2 more"}},
	} {
		kept, _ := rootsText(tc.roots).(string)
		var got []string
		if err := json.Unmarshal([]byte(kept), &got); err != nil || len(kept) > maxRootsBytes || !cmp.Equal(got, tc.want) {
			t.Errorf("%s: kept %d bytes as %q (%v), want %q", tc.name, len(kept), got, err, tc.want)
		}
	}
}

// Requests reads each part of a page along an index in the page's order
// (the row ids for requests, request_log_orphaned for orphans), never
// sorting all the rows a filter matches, with SQLite's statistics or
// without.
func TestRequestsQueryPlans(t *testing.T) {
	s := openT(t, dbPath(t), nil)
	ctx := context.Background()
	now := time.Now()
	for i := uint64(1); i <= 2000; i++ {
		at := now.Add(-time.Duration(2001-i) * time.Second)
		s.Record(received(i, fmt.Sprint("s", i%7+1), "tools/call", "echo", at))
		s.Record(done(i, fmt.Sprint("s", i%7+1), "tools/call", "echo", pool.StatusOK, 7, at))
		if i%200 == 0 {
			s.Record(orphan(fmt.Sprint(i), at))
		}
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	filters := []Filter{{}, {Server: "srv"}, {Session: "s2"}, {Method: "tools/call"}, {Run: s.Run()},
		{Status: pool.StatusOrphaned}, {Status: pool.StatusOK}, {Status: StatusInFlight}, {Status: StatusAbandoned},
		{Since: now.Add(-time.Minute)}, {After: Cursor{now.Add(-time.Minute), rowID(s.Run(), 1940)}},
		{Server: "srv", Run: s.Run(), Since: now.Add(-time.Hour), After: Cursor{now.Add(-time.Minute), rowID(s.Run(), 1940)}}}
	check := func(stats string) {
		for _, f := range filters {
			q, args, err := s.requestsQuery(ctx, s.Run(), f)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := s.rdb().QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
			if err != nil {
				t.Fatal(err)
			}
			parts := map[int]bool{} // the parts' own nodes
			var plan []string
			orphanIndex := false
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, fmt.Sprintf("%d %d %s", id, parent, detail))
				if strings.HasPrefix(detail, "CO-ROUTINE") {
					parts[id] = true
				}
				if parts[parent] && strings.Contains(detail, "TEMP B-TREE") {
					t.Errorf("%s, %+v: a part sorts what it reads: %s", stats, f, detail)
				}
				orphanIndex = orphanIndex || strings.Contains(detail, "request_log_orphaned")
			}
			rows.Close()
			wantOrphans := strings.Contains(q, "status_code = 6 ")
			if orphanIndex != wantOrphans {
				t.Errorf("%s, %+v: the orphans' part reads request_log_orphaned: %v, want %v", stats, f, orphanIndex, wantOrphans)
			}
			if t.Failed() {
				t.Logf("%s\n%s", q, strings.Join(plan, "\n"))
				return
			}
		}
	}
	check("without statistics")
	db, err := sql.Open("sqlite3", dsn(s.path, "_busy_timeout=5000"))
	if err != nil {
		t.Fatal(err)
	}
	execSQLOn(t, db, "ANALYZE")
	db.Close()
	check("with statistics")
}

// A session's unanswered requests come with the PID its pool saw at the
// other end of the session's shim connection (the session's peer): the
// next pool gives them only to that process. A session the history
// knows no peer of, or does not know, has 0.
func TestUnansweredSaysWhoseTheyAre(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, nil)
	run := s.Run()
	now := time.Now()
	s.Record(pool.Event{Kind: pool.EventSessionOpened, Time: now, Server: "srv", Session: "s1", Transport: "stdio", PID: 777})
	s.Record(received(1, "s1", "tools/call", "echo", now))
	s.Record(pool.Event{Kind: pool.EventSessionOpened, Time: now, Server: "srv", Session: "s2", Transport: "stdio"})
	s.Record(received(2, "s2", "tools/call", "echo", now))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	kill(s)

	s = openT(t, path, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		session string
		peer    int
		owed    int
	}{{"s1", 777, 1}, {"s2", 0, 1}, {"s3", 0, 0}} {
		known, err := s.Unanswered(ctx, run, tc.session)
		if err != nil || known.PeerPID != tc.peer || len(known.Requests) != tc.owed {
			t.Errorf("Unanswered(%s) = %+v, %v; want peer %d and %d request(s)", tc.session, known, err, tc.peer, tc.owed)
		}
	}
}
