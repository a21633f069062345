package jsonrpc

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// refSkipString is skipString one byte at a time, as it was written
// before it learnt to look at eight: the reference its fast path must
// agree with, offsets of errors included.
func refSkipString(b []byte, i int) (int, bool, error) {
	start := i
	i++
	escaped := false
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return 0, false, syntaxErr(i, "unterminated escape")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return 0, false, syntaxErr(i, "invalid \\u escape")
				}
				i += 6
			default:
				return 0, false, syntaxErr(i, "invalid escape")
			}
		case c < 0x20:
			return 0, false, syntaxErr(i, "control character in string")
		default:
			i++
		}
	}
	return 0, false, syntaxErr(start, "unterminated string")
}

type member struct {
	key, val Span
	esc      bool
}

// collect lists what walk reports for the object at b[i].
func collect(walk func(fn func(Span, bool, Span) bool)) []member {
	var ms []member
	walk(func(k Span, esc bool, v Span) bool {
		ms = append(ms, member{k, v, esc})
		return true
	})
	return ms
}

func TestSkipString(t *testing.T) {
	long := strings.Repeat("abcdefgh", 9)
	for _, s := range []string{
		`""`, `"a"`, `"abcdefg"`, `"abcdefgh"`, `"` + long + `"`, `"` + long + `\"` + long + `"`,
		`"` + long + `\u00e9` + long + `"`, `"` + long + "\x01" + `"`, `"` + long + "\x1f" + long + `"`, `"` + long + " \x7f\x80\xff" + long + `"`, `"` + long + `\x"`, `"` + long + `\u12"`,
		`"` + long, `"` + long + `\`, `"héllo wörld, ünïcode über alles"`, "\"tab\there\"",
		`"` + long + `"` + `, "next"`, `"\\\\\\\\\\\\\\\\\\"`,
	} {
		b := []byte(s)
		end, esc, err := skipString(b, 0)
		wEnd, wEsc, wErr := refSkipString(b, 0)
		if end != wEnd || esc != wEsc || (err == nil) != (wErr == nil) || err != nil && err.Error() != wErr.Error() {
			t.Errorf("skipString(%q) = %d, %v, %v; byte by byte: %d, %v, %v", s, end, esc, err, wEnd, wEsc, wErr)
		}
		if err == nil {
			if got, gotEsc := skipValidString(b, 0); got != end || gotEsc != esc {
				t.Errorf("skipValidString(%q) = %d, %v; want %d, %v", s, got, gotEsc, end, esc)
			}
			if got := skipValidStringLong(b, 0); got != end {
				t.Errorf("skipValidStringLong(%q) = %d, want %d", s, got, end)
			}
		}
	}
}

func TestSkipValid(t *testing.T) {
	for _, s := range []string{
		`0`, `-1.5e+3`, `true`, `null`, `"x"`, `{}`, `[]`, `{"a":[1,2,{"b":"}]"}],"c":"\"{"}`,
		`[ 1 , "two" , [ ] , { } ]`, `{"k":"` + strings.Repeat(`\\`, 20) + `"}`, `1 `, `false,`,
	} {
		b := []byte(s)
		want, err := skipValue(b, 0, 0)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got := skipValid(b, 0); got != want {
			t.Errorf("skipValid(%q) = %d, want %d", s, got, want)
		}
	}
}

// FuzzScan checks the fast paths against the plain ones: skipString
// against the byte-by-byte reference on any input, and the skipping
// scanner against the validating one on any valid object. On invalid
// input the skipping scanner must still stay within the input.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"text":"0123456789abcdef\"q"}}}`,
		`{"a\u0062":[1,{"c":"\\"}],"d":"` + strings.Repeat("é", 20) + `"}`,
		`"abcdefghijklmnop\u00e9"`, `{"a":"b\`, `{"a`, `{"a":}`, `[{"a":1},`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 0 && b[0] == '"' {
			end, esc, err := skipString(b, 0)
			wEnd, wEsc, wErr := refSkipString(b, 0)
			if end != wEnd || esc != wEsc || (err == nil) != (wErr == nil) || err != nil && err.Error() != wErr.Error() {
				t.Fatalf("skipString(%q) = %d, %v, %v; byte by byte: %d, %v, %v", b, end, esc, err, wEnd, wEsc, wErr)
			}
		}
		i := skipSpace(b, 0)
		if !Valid(b) {
			// Garbage: no panic, offsets within b.
			if end := skipValid(b, i); end < i || end > len(b) {
				t.Fatalf("skipValid(%q) = %d, outside [%d, %d]", b, end, i, len(b))
			}
			membersValid(b, i, func(k Span, _ bool, v Span) bool {
				if k.Start < 0 || k.End > len(b) || v.Start > v.End || v.End > len(b) {
					t.Fatalf("membersValid(%q): key %v, value %v outside the input", b, k, v)
				}
				return true
			})
			return
		}
		want, _ := skipValue(b, i, 0)
		if got := skipValid(b, i); got != want {
			t.Fatalf("skipValid(%q) = %d, skipValue %d", b, got, want)
		}
		if b[i] != '{' {
			return
		}
		var end int
		wantMs := collect(func(fn func(Span, bool, Span) bool) { _ = members(b, i, 0, fn, &end) })
		gotMs := collect(func(fn func(Span, bool, Span) bool) { membersValid(b, i, fn) })
		if len(gotMs) != len(wantMs) {
			t.Fatalf("membersValid(%q) found %d members, members %d", b, len(gotMs), len(wantMs))
		}
		for j := range wantMs {
			if gotMs[j] != wantMs[j] {
				t.Fatalf("membersValid(%q) member %d = %+v, members %+v", b, j, gotMs[j], wantMs[j])
			}
		}
		for _, m := range wantMs {
			name, ok := unquote(m.key.Of(b))
			if ok && utf8.Valid(m.key.Of(b)) && Member(b, name) != firstNamed(b, wantMs, name) {
				t.Fatalf("Member(%q, %q) = %v, want %v", b, name, Member(b, name), firstNamed(b, wantMs, name))
			}
		}
	})
}

// firstNamed is the value of the first member whose key decodes to name.
func firstNamed(b []byte, ms []member, name string) Span {
	for _, m := range ms {
		if s, ok := unquote(m.key.Of(b)); ok && s == name {
			return m.val
		}
	}
	return Span{}
}

// BenchmarkMember: find a member of a small object, the lookups the pool
// makes on every message's params and _meta.
func BenchmarkMember(b *testing.B) {
	params := []byte(`{"name":"echo","arguments":{"text":"hello world, a typical small tool call","n":42},"_meta":{"progressToken":"tok-1"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if !Member(params, "_meta").Present() {
			b.Fatal("no _meta")
		}
	}
}
