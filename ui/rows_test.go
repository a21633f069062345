package ui

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/pool"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestMain(m *testing.M) {
	if role := os.Getenv(memHelperEnv); role != "" {
		os.Exit(memHelper(role))
	}
	if age, err := time.ParseDuration(os.Getenv(agedCacheClockEnv)); err == nil {
		// Not a wait for anything: the time passing is what
		// TestOverviewRendersAfterTheCacheClockAged tests.
		time.Sleep(age)
	}
	displayZone = time.UTC
	goleak.VerifyTestMain(m)
}

// t0 is the fixture's "now".
var t0 = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)

// fixture is a pool with three sessions on two servers, one failed
// server, and three requests in flight: one fresh, one hung, one not yet
// written to its child.
func fixture() pool.Snapshot {
	return pool.Snapshot{
		TakenAt: t0,
		Servers: []pool.ServerInfo{
			{Name: "fake", Share: pool.ShareShared, State: pool.StateReady},
			{Name: "memory", Share: pool.ShareShared, State: pool.StateFailed, Error: "crashed 5 times in 60s"},
		},
		Sessions: []pool.SessionInfo{
			{ID: "s1", Server: "fake", ClientName: "claude-code", ClientVersion: "2.1.3", Transport: "stdio",
				ConnectedAt: t0.Add(-42 * time.Minute), InFlight: 2, PID: 3101},
			{ID: "s2", Server: "fake", ClientName: "cursor", ClientVersion: "1.7.0", Transport: "stdio",
				ConnectedAt: t0.Add(-5 * time.Minute), InFlight: 1, PID: 3102},
			{ID: "s3", Server: "memory", ClientName: "", ClientVersion: "", Transport: "http",
				ConnectedAt: t0.Add(-26 * time.Hour)},
		},
		Backends: []pool.BackendInfo{
			{Server: "fake", PID: 4242, State: pool.StateReady, Era: "legacy", StartedAt: t0.Add(-42*time.Minute - 3*time.Second),
				Sessions: 2, Restarts: 1, InFlight: 3, StderrTail: []string{"fake: starting", "fake: ready"}},
			{Server: "memory", PID: 0, State: pool.StateFailed, Era: "", Restarts: 5,
				LastError: "exit status 1: Cannot find module 'server-memory'"},
		},
		InFlight: []pool.RequestInfo{
			{PoolID: 9, Session: "s2", Server: "fake", Method: "tools/call", Name: "sleep", PID: 4242,
				ReceivedAt: t0.Add(-95 * time.Second), WrittenToChild: true},
			{PoolID: 7, Session: "s1", Server: "fake", Method: "tools/call", Name: "search", PID: 4242,
				ReceivedAt: t0.Add(-2 * time.Second), WrittenToChild: true},
			{PoolID: 11, Session: "s1", Server: "fake", Method: "resources/read", PID: 4242,
				ReceivedAt: t0.Add(-100 * time.Millisecond)},
		},
	}
}

func cells(rows []row) [][]string {
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = r.cells
	}
	return out
}

func levels(rows []row) []level {
	out := make([]level, len(rows))
	for i, r := range rows {
		out[i] = r.level
	}
	return out
}

func TestSessionRows(t *testing.T) {
	got := sessionRows(fixture(), t0)
	want := [][]string{
		{"claude-code", "2.1.3", "stdio", "fake", "08:44:53 (42m00s ago)", "2", "s1", "3101"},
		{"cursor", "1.7.0", "stdio", "fake", "09:21:53 (5m00s ago)", "1", "s2", "3102"},
		{"(unnamed client)", "", "http", "memory", "Mar 13 07:26 (1d02h ago)", "0", "s3", "—"},
	}
	if d := cmp.Diff(want, cells(got)); d != "" {
		t.Errorf("sessionRows (-want +got):\n%s", d)
	}
}

func TestInflightRows(t *testing.T) {
	for _, tc := range []struct {
		name   string
		now    time.Time
		hang   time.Duration
		cells  [][]string
		levels []level
	}{
		{
			name: "at the snapshot", now: t0, hang: 30 * time.Second,
			cells: [][]string{
				{"tools/call", "sleep", "s2 (cursor)", "fake", "4242", "1m35s", "yes", ""},
				{"tools/call", "search", "s1 (claude-code)", "fake", "4242", "2s", "yes", ""},
				{"resources/read", "", "s1 (claude-code)", "fake", "4242", "0s", "no", ""},
			},
			levels: []level{levelHung, levelNormal, levelWarn},
		},
		{
			name: "ages tick from the snapshot's timestamps", now: t0.Add(29 * time.Second), hang: 30 * time.Second,
			cells: [][]string{
				{"tools/call", "sleep", "s2 (cursor)", "fake", "4242", "2m04s", "yes", ""},
				{"tools/call", "search", "s1 (claude-code)", "fake", "4242", "31s", "yes", ""},
				{"resources/read", "", "s1 (claude-code)", "fake", "4242", "29s", "no", ""},
			},
			levels: []level{levelHung, levelHung, levelWarn},
		},
		{
			name: "no threshold", now: t0, hang: 0,
			cells: [][]string{
				{"tools/call", "sleep", "s2 (cursor)", "fake", "4242", "1m35s", "yes", ""},
				{"tools/call", "search", "s1 (claude-code)", "fake", "4242", "2s", "yes", ""},
				{"resources/read", "", "s1 (claude-code)", "fake", "4242", "0s", "no", ""},
			},
			levels: []level{levelNormal, levelNormal, levelWarn},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := inflightRows(fixture(), tc.now, tc.hang)
			if d := cmp.Diff(tc.cells, cells(got)); d != "" {
				t.Errorf("cells (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.levels, levels(got)); d != "" {
				t.Errorf("levels (-want +got):\n%s", d)
			}
			if got[0].poolID != 9 || got[0].server != "fake" || got[0].pid != 4242 {
				t.Errorf("first row targets pool id %d server %q pid %d, want 9 fake 4242", got[0].poolID, got[0].server, got[0].pid)
			}
		})
	}
}

func TestRequestAgeFallsBackToAgeMs(t *testing.T) {
	r := pool.RequestInfo{AgeMs: 1500}
	if got := requestAge(r, t0, t0.Add(2*time.Second)); got != 3500*time.Millisecond {
		t.Errorf("age = %v, want 3.5s", got)
	}
}

func TestBackendRows(t *testing.T) {
	got := backendRows(fixture(), t0, map[int]procStat{4242: {RSS: 48 << 20, CPU: 12.4}})
	want := [][]string{
		{"fake", "legacy", "4242", "ready", "42m03s", "48.0 MiB", "12%", "2", "1", "fake: ready"},
		{"memory", "", "—", "failed", "", "", "", "0", "5", "exit status 1: Cannot find module 'server-memory'"},
	}
	if d := cmp.Diff(want, cells(got)); d != "" {
		t.Errorf("backendRows (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]level{levelNormal, levelHung}, levels(got)); d != "" {
		t.Errorf("levels (-want +got):\n%s", d)
	}
	if got[0].detail != "fake: starting\nfake: ready" {
		t.Errorf("detail = %q", got[0].detail)
	}
	// A shared server runs one child per roots partition: the row says which.
	parts := fixture()
	parts.Backends[0].Roots = []string{"file:///work/alpha", "file:///work/beta/"}
	if name := backendRows(parts, t0, nil)[0].cells[0]; name != "fake (alpha, beta)" {
		t.Errorf("partition child's name cell = %q", name)
	}
	unsampled := backendRows(fixture(), t0, nil)
	if c := unsampled[0].cells; c[5] != "…" || c[6] != "…" {
		t.Errorf("memory and CPU before the first sample = %q, %q, want …", c[5], c[6])
	}
}

func TestLeakAndHistoryRows(t *testing.T) {
	leaks := leakRows([]Leak{{PID: 777, Server: "memory", Command: "node server-memory", StartedAt: t0.Add(-3 * time.Hour),
		RSSBytes: 3 << 30, Reason: "child of an earlier run (pid 12) that is gone", Proven: true}}, t0)
	if d := cmp.Diff([][]string{{"777", "memory", "3.00 GiB", "06:26:53 (3h00m ago)",
		"child of an earlier run (pid 12) that is gone", "node server-memory"}}, cells(leaks)); d != "" {
		t.Errorf("leakRows (-want +got):\n%s", d)
	}
	hist := historyRows([]HistoryRow{
		{ID: 1, Server: "fake", Session: "s1", Method: "tools/call", Name: "echo", Status: "ok", ReceivedAt: t0, Duration: 1200 * time.Microsecond, PID: 4242},
		{ID: 2, Server: "fake", Session: "s2", Method: "tools/call", Name: "sleep", Status: "abandoned", ReceivedAt: t0, PID: 4000},
		{ID: 3, Server: "fake", Session: "s2", Method: "tools/list", Status: "error", ReceivedAt: t0, Duration: 2500 * time.Millisecond, Error: "boom"},
		{ID: 4, Server: "fake", Session: "s2", Method: "ping", Status: "in-flight", ReceivedAt: t0, Duration: 420 * time.Microsecond},
	})
	if d := cmp.Diff([][]string{
		{"2026-03-14 09:26:53", "fake", "s1", "tools/call", "echo", "ok", "1 ms", "4242", ""},
		{"2026-03-14 09:26:53", "fake", "s2", "tools/call", "sleep", "abandoned", "", "4000", ""},
		{"2026-03-14 09:26:53", "fake", "s2", "tools/list", "", "error", "2.5 s", "—", "boom"},
		{"2026-03-14 09:26:53", "fake", "s2", "ping", "", "in-flight", "420 µs", "—", ""},
	}, cells(hist)); d != "" {
		t.Errorf("historyRows (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]level{levelNormal, levelHung, levelWarn, levelWarn}, levels(hist)); d != "" {
		t.Errorf("history levels (-want +got):\n%s", d)
	}
}

// Session ids start again with each app start: rows of two runs name the
// run beside each session, so that two different clients' s3 are told
// apart; rows of one run show the session alone.
func TestHistoryRowsOfManyRunsNameTheRun(t *testing.T) {
	hist := historyRows([]HistoryRow{
		{ID: 1, Run: 12, Server: "fake", Session: "s3", Method: "ping", Status: "ok", ReceivedAt: t0},
		{ID: 2, Run: 11, Server: "fake", Session: "s3", Method: "ping", Status: "ok", ReceivedAt: t0},
	})
	if got := []string{cells(hist)[0][2], cells(hist)[1][2]}; !slices.Equal(got, []string{"s3 (run 12)", "s3 (run 11)"}) {
		t.Errorf("sessions of two runs: %q", got)
	}
	one := historyRows([]HistoryRow{{ID: 1, Run: 12, Session: "s3", Status: "ok", ReceivedAt: t0}})
	if got := cells(one)[0][2]; got != "s3" {
		t.Errorf("a session of one run: %q", got)
	}
}

func TestFormatAge(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"}, {0, "0s"}, {999 * time.Millisecond, "0s"}, {59 * time.Second, "59s"},
		{60 * time.Second, "1m00s"}, {125 * time.Second, "2m05s"}, {time.Hour + 4*time.Minute, "1h04m"},
		{49 * time.Hour, "2d01h"},
	} {
		if got := formatAge(tc.d); got != tc.want {
			t.Errorf("formatAge(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestSummary(t *testing.T) {
	sum := summarize(fixture(), t0, 30*time.Second, 2)
	want := summary{Sessions: 3, InFlight: 3, Hung: 1, Children: 1, Leaks: 2, Failed: []string{"memory"},
		HungServer: "fake", HungKey: wfKey{PoolID: 9}, HungWhat: "tools/call sleep on fake, 1m35s"}
	if d := cmp.Diff(want, sum); d != "" {
		t.Errorf("summary (-want +got):\n%s", d)
	}
	sum.Killable = 2
	if got, w := sum.String(), "3 sessions · 3 in flight (1 hung) · 1 child · 2 leaks · failed: memory"; got != w {
		t.Errorf("summary = %q, want %q", got, w)
	}
	sum.Killable = 1 // the other is a suspect
	if got, w := sum.String(), "3 sessions · 3 in flight (1 hung) · 1 child · 1 leak, 1 suspect · failed: memory"; got != w {
		t.Errorf("summary = %q, want %q", got, w)
	}
}

// bigSnapshot is the scale the dashboard must stay smooth at.
func bigSnapshot(sessions, inflight, servers int) pool.Snapshot {
	s := pool.Snapshot{TakenAt: t0}
	for i := range servers {
		name := fmt.Sprintf("server-%02d", i)
		s.Servers = append(s.Servers, pool.ServerInfo{Name: name, State: pool.StateReady})
		s.Backends = append(s.Backends, pool.BackendInfo{Server: name, PID: 10000 + i, State: pool.StateReady, Era: "legacy",
			StartedAt: t0.Add(-time.Hour), Sessions: sessions / servers, StderrTail: []string{"ready"}})
	}
	for i := range sessions {
		s.Sessions = append(s.Sessions, pool.SessionInfo{ID: fmt.Sprintf("s%d", i), Server: fmt.Sprintf("server-%02d", i%servers),
			ClientName: "claude-code", ClientVersion: "2.1.3", Transport: "stdio", ConnectedAt: t0.Add(-time.Duration(i) * time.Second),
			InFlight: inflight / sessions, PID: 20000 + i})
	}
	for i := range inflight {
		s.InFlight = append(s.InFlight, pool.RequestInfo{PoolID: uint64(i + 1), Session: fmt.Sprintf("s%d", i%sessions),
			Server: fmt.Sprintf("server-%02d", i%servers), Method: "tools/call", Name: "search", PID: 10000 + i%servers,
			ReceivedAt: t0.Add(-time.Duration(i) * 10 * time.Millisecond), WrittenToChild: i%7 != 0})
	}
	return s
}

// BenchmarkFrame1000Sessions5000InFlight is the loop's cost per redraw
// at scale: summary, tray menu and every table's rows from one snapshot.
func BenchmarkFrame1000Sessions5000InFlight(b *testing.B) {
	s := bigSnapshot(1000, 5000, 20)
	u := New(nil, newFake(s), nil)
	b.ReportAllocs()
	for b.Loop() {
		u.frameFor(s, t0.Add(time.Second), true)
	}
}

// BenchmarkFrameTrayOnly is the same while the dashboard is closed: no
// table rows.
func BenchmarkFrameTrayOnly1000Sessions5000InFlight(b *testing.B) {
	s := bigSnapshot(1000, 5000, 20)
	u := New(nil, newFake(s), nil)
	b.ReportAllocs()
	for b.Loop() {
		u.frameFor(s, t0.Add(time.Second), false)
	}
}

func BenchmarkRows(b *testing.B) {
	s := bigSnapshot(1000, 5000, 20)
	now := t0.Add(time.Second)
	b.Run("sessions-1000", func(b *testing.B) {
		for b.Loop() {
			sessionRows(s, now)
		}
	})
	b.Run("inflight-5000", func(b *testing.B) {
		for b.Loop() {
			inflightRows(s, now, 30*time.Second)
		}
	})
}

// A session kept across a pool restart says so in its transport cell,
// shows since when its client has had it (not when it reattached, which
// its detail says, with where it came from). One whose shim did not say
// when it began shows when it reattached.
func TestReattachedSessionRow(t *testing.T) {
	now := t0.Add(time.Minute)
	rows := sessionRows(pool.Snapshot{Sessions: []pool.SessionInfo{
		{ID: "s1", Server: "fake", ClientName: "claude-code", Transport: "stdio", ConnectedAt: t0, ReattachedFrom: "run 7 session s3",
			BeganAt: t0.Add(-2 * time.Hour)},
		{ID: "s2", Server: "fake", ClientName: "cursor", Transport: "stdio", ConnectedAt: t0},
		{ID: "s3", Server: "fake", ClientName: "zed", Transport: "stdio", ConnectedAt: t0, ReattachedFrom: "run 7 session s4"},
	}}, now)
	if got := rows[0].cells[2]; got != "stdio (reattached)" {
		t.Errorf("transport cell %q", got)
	}
	if got, want := rows[0].cells[4], "07:26:53 (2h01m ago)"; got != want {
		t.Errorf("a reattached session's Since %q, want when it began, %q", got, want)
	}
	if got, want := rows[2].cells[4], "09:26:53 (1m00s ago)"; got != want {
		t.Errorf("a reattached session's Since without when it began %q, want when it reattached, %q", got, want)
	}
	if want := "kept across a pool restart: was run 7 session s3, reattached 09:26:53 (1m00s ago)"; rows[0].detail != want ||
		rows[1].detail != "" || rows[1].cells[2] != "stdio" {
		t.Errorf("rows %+v, want the first one's detail %q", rows, want)
	}
}

// A child carried over an in-place upgrade says so in its PID cell and
// its detail.
func TestCarriedOverBackendRow(t *testing.T) {
	rows := backendRows(pool.Snapshot{Backends: []pool.BackendInfo{
		{Server: "fake", PID: 42, State: pool.StateReady, StartedAt: t0, CarriedOver: true},
		{Server: "memory", PID: 43, State: pool.StateReady, StartedAt: t0},
	}}, t0, nil)
	if got := rows[0].cells[2]; got != "42 (carried over)" || !strings.HasPrefix(rows[0].detail, "carried over an in-place upgrade") {
		t.Errorf("carried row %q, detail %q", got, rows[0].detail)
	}
	if got := rows[1].cells[2]; got != "43" || strings.Contains(rows[1].detail, "carried") {
		t.Errorf("plain row %q, detail %q", got, rows[1].detail)
	}
}
