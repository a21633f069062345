package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// term is s as the CLI's text output prints it: control characters (an
// escape sequence's ESC, a bell, a carriage return, C1 codes) and the
// invisible bidirectional overrides shown as \x1b, \u202e and so on. A
// method or tool name is whatever a session sent, an error or a stderr line
// whatever a child wrote, a leaked process's command line whatever that
// process set: printed raw, they could retitle or clear the user's
// terminal, hide rows or set its clipboard (OSC 52). JSON output escapes
// them already.
func term(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i]) // a byte that is not UTF-8
		case !unsafeRune(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// termLines is text through term line by line, its newlines kept: for a
// report made of many such strings.
func termLines(text string) string {
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		body, nl := strings.CutSuffix(l, "\n")
		lines[i] = term(body)
		if nl {
			lines[i] += "\n"
		}
	}
	return strings.Join(lines, "")
}

// unsafeRune reports whether r does something to a terminal, or to the
// order of what it shows, rather than print: a control character, the
// Unicode bidirectional controls, or a byte that is not UTF-8.
func unsafeRune(r rune) bool {
	switch {
	case r == utf8.RuneError:
		return true
	case unicode.IsControl(r):
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}
