package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Span is a half-open byte range [Start, End) inside a message. The zero
// Span means "absent": no JSON value can be empty.
type Span struct{ Start, End int }

// Present reports whether the span locates a value.
func (s Span) Present() bool { return s.End > s.Start }

// Of returns the bytes the span covers in b.
func (s Span) Of(b []byte) []byte { return b[s.Start:s.End] }

// errSyntax is wrapped by every scanning error so callers can tell a parse
// error (-32700) from a shape error (-32600).
var errSyntax = errors.New("invalid JSON")

func syntaxErr(off int, what string) error {
	return fmt.Errorf("%w at byte %d: %s", errSyntax, off, what)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipValue validates the JSON value starting at b[i] (no leading space) and
// returns the offset just past it. It is a strict RFC 8259 validator: the
// pool forwards bytes it did not decode, so it must not forward invalid ones.
func skipValue(b []byte, i int, depth int) (int, error) {
	if depth > maxDepth {
		return 0, syntaxErr(i, "nesting too deep")
	}
	if i >= len(b) {
		return 0, syntaxErr(i, "unexpected end of input")
	}
	switch c := b[i]; {
	case c == '{':
		return skipObject(b, i, depth)
	case c == '[':
		return skipArray(b, i, depth)
	case c == '"':
		end, _, err := skipString(b, i)
		return end, err
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	default:
		return 0, syntaxErr(i, fmt.Sprintf("unexpected character %q", c))
	}
}

// maxDepth bounds recursion so a hostile client cannot exhaust the stack.
const maxDepth = 512

func skipLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, syntaxErr(i, "invalid literal")
	}
	return i + len(lit), nil
}

// skipString returns the offset past the closing quote and whether the
// string contains escapes. It looks at eight bytes at a time while none
// of them needs a second look (a quote, a backslash or a control
// character): a file's contents or an image in a tool call is one long
// string, and the pool scans every message it carries.
func skipString(b []byte, i int) (int, bool, error) {
	start := i
	i++ // opening quote
	escaped := false
	for i < len(b) {
		if len(b)-i >= 8 {
			m := stringStops(binary.LittleEndian.Uint64(b[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3 // the first stop is exact
		}
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

// Eight bytes at a time: lanes holds 0x01 in each byte, high 0x80.
const (
	lanes = 0x0101010101010101
	high  = 0x8080808080808080
)

// zeroBytes marks the bytes of x that are zero. Only the lowest mark is
// exact: a borrow may also mark bytes above it, which the callers never
// look at.
func zeroBytes(x uint64) uint64 { return (x - lanes) & ^x & high }

// stringStops marks, in the eight bytes of v (little-endian), the quotes,
// backslashes and control characters: where a string scanner must stop
// and look. The lowest mark is exact.
func stringStops(v uint64) uint64 {
	return zeroBytes(v^(lanes*'"')) | zeroBytes(v^(lanes*'\\')) | (v-lanes*0x20)&^v&high
}

// quoteStops marks the quotes and backslashes in v: all that matters in
// a string already known to be valid.
func quoteStops(v uint64) uint64 {
	return zeroBytes(v^(lanes*'"')) | zeroBytes(v^(lanes*'\\'))
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func skipNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return 0, syntaxErr(start, "invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return 0, syntaxErr(start, "invalid number")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0, syntaxErr(start, "invalid number")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, nil
}

func skipArray(b []byte, i int, depth int) (int, error) {
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = skipValue(b, i, depth+1); err != nil {
			return 0, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return 0, syntaxErr(i, "unterminated array")
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return 0, syntaxErr(i, "expected ',' or ']'")
		}
	}
}

func skipObject(b []byte, i int, depth int) (int, error) {
	end := 0
	err := members(b, i, depth, func(Span, bool, Span) bool { return true }, &end)
	return end, err
}

// members walks the object at b[i], calling fn with each member's key span
// (including quotes), whether the key has escapes, and its value span. fn
// returns false to stop early (then *end is not set). It validates as it goes.
func members(b []byte, i int, depth int, fn func(key Span, keyEscaped bool, val Span) bool, end *int) error {
	return membersWith(b, i, depth, nil, fn, end)
}

// membersWith is members with the values skipped by skip (which must
// validate them) instead of skipValue, when skip is not nil: so that a
// caller can look inside a member's value on the same pass.
func membersWith(b []byte, i int, depth int, skip func(key Span, keyEscaped bool, at int) (int, error),
	fn func(key Span, keyEscaped bool, val Span) bool, end *int) error {
	if i >= len(b) || b[i] != '{' {
		return syntaxErr(i, "expected object")
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		*end = i + 1
		return nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return syntaxErr(i, "expected object key")
		}
		kEnd, kEsc, err := skipString(b, i)
		if err != nil {
			return err
		}
		key := Span{i, kEnd}
		i = skipSpace(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return syntaxErr(i, "expected ':'")
		}
		i = skipSpace(b, i+1)
		var vEnd int
		if skip != nil && i < len(b) {
			vEnd, err = skip(key, kEsc, i)
		} else {
			vEnd, err = skipValue(b, i, depth+1)
		}
		if err != nil {
			return err
		}
		if !fn(key, kEsc, Span{i, vEnd}) {
			return nil
		}
		i = skipSpace(b, vEnd)
		if i >= len(b) {
			return syntaxErr(i, "unterminated object")
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			*end = i + 1
			return nil
		default:
			return syntaxErr(i, "expected ',' or '}'")
		}
	}
}

// keyIs reports whether the quoted key at span k in b equals name. Keys with
// escapes are compared after decoding, so "\u0069d" is "id".
func keyIs(b []byte, k Span, escaped bool, name string) bool {
	raw := b[k.Start+1 : k.End-1]
	if !escaped {
		return string(raw) == name
	}
	s, ok := unquote(b[k.Start:k.End])
	return ok && s == name
}

// Valid reports whether b is exactly one JSON value, optionally surrounded by
// white space.
func Valid(b []byte) bool {
	i := skipSpace(b, 0)
	end, err := skipValue(b, i, 0)
	return err == nil && skipSpace(b, end) == len(b)
}

// Member returns the span of the value of member name in the JSON object
// obj (which must be valid: a part of a message Parse accepted). Absent
// members, or obj not being an object, give the zero Span. It reads obj
// with the skipping scanner, since Parse has validated it already.
func Member(obj []byte, name string) Span {
	i := skipSpace(obj, 0)
	var found Span
	membersValid(obj, i, func(k Span, esc bool, v Span) bool {
		if keyIs(obj, k, esc, name) {
			found = v
			return false
		}
		return true
	})
	return found
}

// Members returns the spans of the values of every member named name in
// the JSON object obj (valid, as Member's), in order: a key written
// twice, or once as it is and once with escapes, names two members,
// which a rewrite that takes a member out or edits it must each see.
// None, or obj not an object: nil.
func Members(obj []byte, name string) []Span {
	var found []Span
	membersValid(obj, skipSpace(obj, 0), func(k Span, esc bool, v Span) bool {
		if keyIs(obj, k, esc, name) {
			found = append(found, v)
		}
		return true
	})
	return found
}

// metaAndTask finds, in one walk of the params object at b[at], its
// first _meta's value and its first task member, key and value (as
// ParseStrict's pass finds them).
func metaAndTask(b []byte, at int) (meta, task Span) {
	membersValid(b, at, func(k Span, esc bool, v Span) bool {
		switch {
		case !meta.Present() && keyIs(b, k, esc, "_meta"):
			meta = v
		case !task.Present() && keyIs(b, k, esc, "task"):
			task = Span{k.Start, v.End}
		}
		return true
	})
	return meta, task
}

// The skipping scanner. Parse validates every byte of a message once;
// what reads the message after that (Member, Strict) only needs to find
// where values end, which is a matter of strings and brackets. On invalid
// input these functions return offsets within b and never fail, but what
// they find is then unspecified.

// membersValid walks the object at b[i] as members does, calling fn with
// each member's key span (with its quotes), whether the key has escapes,
// and its value span, until fn returns false.
func membersValid(b []byte, i int, fn func(key Span, keyEscaped bool, val Span) bool) {
	if i >= len(b) || b[i] != '{' {
		return
	}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] == '"' {
		kEnd, kEsc := skipValidString(b, i)
		if kEnd-i < 2 {
			return // unterminated: not what Parse accepts
		}
		key := Span{i, kEnd}
		i = skipSpace(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return
		}
		i = skipSpace(b, i+1)
		vEnd := skipValid(b, i)
		if !fn(key, kEsc, Span{i, vEnd}) {
			return
		}
		i = skipSpace(b, vEnd)
		if i >= len(b) || b[i] != ',' {
			return
		}
		i = skipSpace(b, i+1)
	}
}

// skipValid returns the offset just past the valid JSON value at b[i]
// (no leading space), looking only at strings and brackets.
func skipValid(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i = skipValidStringLong(b, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth <= 0 {
				return i + 1
			}
		default:
			if depth == 0 { // a number or a literal
				for i < len(b) && !isSpace(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
					i++
				}
				return i
			}
		}
		i++
	}
	return len(b)
}

// skipValidStringLong returns the offset past the closing quote of the
// valid string at b[i]. It jumps from quote to quote: a quote preceded by
// an odd run of backslashes is escaped, one preceded by an even run ends
// the string. The next quote is looked for eight bytes at a time for
// 16 bytes (source code in a string has one every few words), then
// with bytes.IndexByte (which reads far more at a time, for base64 and
// prose).
func skipValidStringLong(b []byte, i int) int {
	start := i
	i++ // opening quote
	for {
		q := -1
		for range 2 {
			if len(b)-i < 8 {
				break
			}
			if m := zeroBytes(binary.LittleEndian.Uint64(b[i:]) ^ (lanes * '"')); m != 0 {
				q = i + bits.TrailingZeros64(m)>>3
				break
			}
			i += 8
		}
		if q < 0 {
			j := bytes.IndexByte(b[i:], '"')
			if j < 0 {
				return len(b)
			}
			q = i + j
		}
		run := 0
		for j := q - 1; j > start && b[j] == '\\'; j-- {
			run++
		}
		i = q + 1
		if run%2 == 0 {
			return i
		}
	}
}

// skipValidString returns the offset past the closing quote of the valid
// string at b[i], and whether it has escapes, reading eight bytes at a
// time where they hold no quote and no backslash.
func skipValidString(b []byte, i int) (int, bool) {
	i++ // opening quote
	escaped := false
	for i < len(b) {
		if len(b)-i >= 8 {
			m := quoteStops(binary.LittleEndian.Uint64(b[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		}
		switch b[i] {
		case '"':
			return i + 1, escaped
		case '\\':
			escaped = true
			i += 2 // the escaped byte; a \\u escape's hex digits are plain bytes
		default:
			i++
		}
	}
	return len(b), escaped
}
