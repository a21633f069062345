package main

import (
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/app/importer"
)

func TestTerm(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"tools/call", "tools/call"},
		{"café 東京 ✓", "café 東京 ✓"},
		{"\x1b]0;owned\x07", `\x1b]0;owned\x07`},
		{"\x1b]52;c;cm0gLXJmIH4=\x1b\\", `\x1b]52;c;cm0gLXJmIH4=\x1b\`},
		{"a\rb\nc\td", `a\x0db\x0ac\x09d`},
		{"\u009b2J", `\x9b2J`},
		{"safe\u202egnp.exe", `safe\u202egnp.exe`},
		{"\xff\xfe", `\xff\xfe`},
		{"\uFFFD", `\ufffd`},
	} {
		if got := term(tc.in); got != tc.want {
			t.Errorf("term(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got, want := termLines("a\x1b[2J\nb\n"), "a\\x1b[2J\nb\n"; got != want {
		t.Errorf("termLines = %q, want %q", got, want)
	}
}

// TestHistoryTextCannotDriveTheTerminal: a session names its request with
// escape sequences (clear the screen, retitle the window, set the
// clipboard); `switchboard history` and `hangs` print it as text.
func TestHistoryTextCannotDriveTheTerminal(t *testing.T) {
	in := serve(t, fakeConfig(t))
	s := in.connect(t, "fake")
	s.initialize("claude-code")
	const attack = `\u001b[2J\u001b]0;owned\u0007\u001b]52;c;cm0gLXJmIH4=\u001b\\\u009b1;31m\u202e`
	s.send(`{"jsonrpc":"2.0","id":1,"method":"` + attack + `","params":{}}`)
	s.recvID("1") // the fake answers an unknown method with an error
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + attack + `","arguments":{}}}`)
	s.recvID("2")
	waitFor(t, "both requests in the history", func() bool {
		o, err := in.run("history", "--json", "--limit", "10")
		return err == nil && strings.Count(o, `"receivedAt"`) >= 2
	})
	out, err := in.run("history", "--limit", "10")
	if err != nil || !strings.Contains(out, `\x1b]0;owned\x07`) {
		t.Errorf("history: %v, the names not shown escaped:\n%s", err, out)
	}
	for _, bad := range []string{"\x1b", "\x07", "\u009b", "\u202e"} {
		if strings.Contains(out, bad) {
			t.Errorf("history printed %q raw:\n%s", bad, out)
		}
	}
}

// TestImportReportCannotDriveTheTerminal: a cloned repository's
// .vscode/mcp.json names a server with escape sequences; the report of
// `import` and `setup` prints them as text, its own newlines kept.
func TestImportReportCannotDriveTheTerminal(t *testing.T) {
	evil := "x\x1b]0;owned\x07\x1b[8m"
	r := &importer.Result{Client: "vscode", Read: []string{"/repo/.vscode/mcp.json"}, DryRun: true,
		Entries: []importer.Entry{{File: "/repo/.vscode/mcp.json", Where: "servers." + evil, Name: evil, As: "x",
			Outcome: importer.Imported, Reason: "stdio: " + evil, Notes: []string{"named \"x\" in Switchboard " + evil}}},
		Added: []string{"x"}, Config: "/home/me/.config/switchboard/config.json"}
	var b strings.Builder
	if err := writeImportReport(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, `x\x1b]0;owned\x07\x1b[8m`) {
		t.Errorf("the report:\n%q", out)
	}
	if n := strings.Count(out, "\n"); n < 5 {
		t.Errorf("the report lost its lines (%d newlines):\n%s", n, out)
	}
}
