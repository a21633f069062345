package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/app"
)

// historyFixture has what a session may send that makes a wide cell: a
// resources/read of a deep URI (the history keeps names up to 1 KiB, with
// a mark of how long it was), a method of 300 bytes, and a tool name with
// an escape sequence; and ordinary requests around them.
func historyFixture(now time.Time) []app.HistoryEntry {
	ms := func(f float64) *float64 { return &f }
	errText := "server \"files\" did not answer resources/read within 30s"
	deep := "file:///home/u/project/" + strings.Repeat("deeper/", 140) + "notes.md"
	deepKept := deep[:1000] + "… [cut from 1012 bytes]"
	at := now.Add(-time.Minute)
	return []app.HistoryEntry{
		{Run: 3, Server: "memory", Session: "s1", Method: "tools/call", Name: "read_graph", Status: "ok",
			ReceivedAt: at, DurationMs: ms(1.2), WrittenToChild: true, PID: 5001},
		{Run: 3, Server: "files", Session: "s2", Method: "resources/read", Name: deepKept, Status: "timeout",
			ReceivedAt: at.Add(time.Second), DurationMs: ms(30000), WrittenToChild: true, PID: 5002, Error: &errText},
		{Run: 3, Server: "files", Session: "s2", Method: "resources/read", Name: "file:///home/u/project/src/components/forms/DatePicker.tsx",
			Status: "ok", ReceivedAt: at.Add(time.Second), DurationMs: ms(3.5), WrittenToChild: true, PID: 5002},
		{Run: 3, Server: "files", Session: "s2", Method: "vendor/" + strings.Repeat("é", 300), Status: "error",
			ReceivedAt: at.Add(2 * time.Second), DurationMs: ms(0.4), WrittenToChild: true, PID: 5002},
		{Run: 3, Server: "memory", Session: "s1", Method: "tools/call", Name: "x\x1b]0;owned\x07", Status: "in-flight",
			ReceivedAt: at.Add(3 * time.Second), AgeMs: age(57 * time.Second), WrittenToChild: true, PID: 5001},
	}
}

func age(d time.Duration) *int64 {
	ms := d.Milliseconds()
	return &ms
}

// maxTableWidth is the widest line the history's tables may print: a
// wide terminal's, whatever the names a session sent.
const maxTableWidth = 200

// TestHistoryText: a request's method and name are cut to a column of
// their own width in the table (a deep URI keeps its start and its end),
// so that one long name does not push every row past the screen.
func TestHistoryText(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	if err := printHistory(&out, historyFixture(now), now); err != nil {
		t.Fatal(err)
	}
	checkWidth(t, out.String())
	golden(t, filepath.Join("testdata", "history", "history.golden"), out.String())
}

// TestHangsText: hangs cuts the method and name as history does.
func TestHangsText(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var hung []app.HistoryEntry
	for _, e := range historyFixture(now) {
		e.DurationMs, e.AgeMs = nil, age(45*time.Second)
		hung = append(hung, e)
	}
	hung[3].Abandoned, hung[3].Run = true, 2
	var out bytes.Buffer
	if err := printHangs(&out, hung, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	checkWidth(t, out.String())
	golden(t, filepath.Join("testdata", "history", "hangs.golden"), out.String())
}

func checkWidth(t *testing.T, table string) {
	t.Helper()
	for i, line := range strings.Split(table, "\n") {
		if !utf8.ValidString(line) {
			t.Errorf("line %d is not UTF-8: %q", i+1, line)
		}
		if n := utf8.RuneCountInString(line); n > maxTableWidth {
			t.Errorf("line %d is %d columns wide, want at most %d: %.80q...", i+1, n, maxTableWidth, line)
		}
	}
}

// TestClip: a cut cell ends (or, cut in its middle, has) an ellipsis and
// is never cut inside a character.
func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in       string
		n        int
		end, mid string
	}{
		{"tools/call", 10, "tools/call", "tools/call"},
		{"tools/call!", 10, "tools/cal…", "tools…all!"},
		{"éééééé", 4, "ééé…", "éé…é"},
	} {
		if got := clip(tc.in, tc.n); got != tc.end {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.end)
		}
		if got := clipMiddle(tc.in, tc.n); got != tc.mid {
			t.Errorf("clipMiddle(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.mid)
		}
	}
}
