// Package jsonedit edits JSON and JSONC documents in place. It finds the
// byte span of a value by path and splices new text into the original
// bytes, so that everything else in the file (key order, indentation,
// comments, fields nobody here knows) stays exactly as it was. Switchboard
// uses it to add servers to its own config and to rewrite the config files
// of other MCP clients, which belong to the user.
package jsonedit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// Kind is the JSON type of a Value.
type Kind uint8

// The JSON types.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

var kindNames = [...]string{"null", "boolean", "number", "string", "array", "object"}

func (k Kind) String() string { return kindNames[k] }

// Value is one parsed JSON value and where its text lies in the document.
type Value struct {
	Kind       Kind
	Start, End int      // doc[Start:End] is the value's text
	Members    []Member // objects, in file order
	Elems      []*Value // arrays
}

// Member is one key of an object.
type Member struct {
	Key      string
	KeyStart int // offset of the key's opening quote
	Value    *Value
}

// Get returns the value of key in an object, or nil. As in encoding/json,
// the last of duplicate keys wins.
func (v *Value) Get(key string) *Value {
	if v == nil || v.Kind != Object {
		return nil
	}
	for i := len(v.Members) - 1; i >= 0; i-- {
		if v.Members[i].Key == key {
			return v.Members[i].Value
		}
	}
	return nil
}

// Raw is the value's text in doc.
func (v *Value) Raw(doc []byte) []byte { return doc[v.Start:v.End] }

// Standardize returns a copy of data with JSONC comments and trailing
// commas replaced by spaces (newlines are kept), so that the copy is plain
// JSON and every offset into it is the same offset into data.
func Standardize(data []byte) []byte {
	out := stripComments(data)
	// A byte order mark, as some Windows editors write.
	if bytes.HasPrefix(out, bom) {
		copy(out, "   ")
	}
	for i := 0; i < len(out); i++ {
		switch out[i] {
		case '"':
			i = skipString(out, i)
		case ',':
			j := i + 1
			for j < len(out) && isSpace(out[j]) {
				j++
			}
			if j < len(out) && (out[j] == '}' || out[j] == ']') {
				out[i] = ' '
			}
		}
	}
	return out
}

var bom = []byte("\xef\xbb\xbf")

// stripComments returns a copy of data with comments replaced by spaces.
func stripComments(data []byte) []byte {
	out := bytes.Clone(data)
	for i := 0; i < len(out); i++ {
		switch c := out[i]; {
		case c == '"':
			i = skipString(out, i)
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			out[i], out[i+1] = ' ', ' '
			for i += 2; i < len(out); i++ {
				if out[i] == '*' && i+1 < len(out) && out[i+1] == '/' {
					out[i], out[i+1] = ' ', ' '
					i++
					break
				}
				if out[i] != '\n' && out[i] != '\r' {
					out[i] = ' '
				}
			}
		}
	}
	return out
}

// skipString returns the offset of the closing quote of the string that
// opens at i (or len-1 if it never closes).
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(b) - 1
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SyntaxError is a parse failure at a line and column.
type SyntaxError struct {
	Offset       int
	Line, Column int
	Msg          string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

// Parse parses a plain JSON document (Standardize a JSONC one first).
func Parse(doc []byte) (*Value, error) {
	p := &parser{doc: doc}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(doc) {
		return nil, p.errorf("unexpected %q after the top-level value", doc[p.i])
	}
	return v, nil
}

type parser struct {
	doc []byte
	i   int
}

const maxDepth = 1000

func (p *parser) errorf(format string, args ...any) error {
	line, col := Position(p.doc, p.i)
	return &SyntaxError{Offset: p.i, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

// Position turns a byte offset into a 1-based line and column.
func Position(doc []byte, off int) (line, col int) {
	line, col = 1, 1
	for i := 0; i < off && i < len(doc); i++ {
		if doc[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

func (p *parser) space() {
	for p.i < len(p.doc) && isSpace(p.doc[p.i]) {
		p.i++
	}
}

func (p *parser) value(depth int) (*Value, error) {
	if depth > maxDepth {
		return nil, p.errorf("nested too deeply")
	}
	if p.i >= len(p.doc) {
		return nil, p.errorf("unexpected end of the file")
	}
	start := p.i
	switch c := p.doc[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		if err := p.str(); err != nil {
			return nil, err
		}
		return &Value{Kind: String, Start: start, End: p.i}, nil
	case c == 't':
		return p.literal("true", Bool)
	case c == 'f':
		return p.literal("false", Bool)
	case c == 'n':
		return p.literal("null", Null)
	case c == '-' || (c >= '0' && c <= '9'):
		for p.i < len(p.doc) && bytes.IndexByte([]byte("+-.eE0123456789"), p.doc[p.i]) >= 0 {
			p.i++
		}
		if !json.Valid(p.doc[start:p.i]) {
			p.i = start
			return nil, p.errorf("invalid number")
		}
		return &Value{Kind: Number, Start: start, End: p.i}, nil
	default:
		return nil, p.errorf("unexpected %q", c)
	}
}

func (p *parser) literal(word string, k Kind) (*Value, error) {
	start := p.i
	if !bytes.HasPrefix(p.doc[p.i:], []byte(word)) {
		return nil, p.errorf("unexpected %q", p.doc[p.i])
	}
	p.i += len(word)
	return &Value{Kind: k, Start: start, End: p.i}, nil
}

func (p *parser) str() error {
	start := p.i
	for p.i++; p.i < len(p.doc); p.i++ {
		switch c := p.doc[p.i]; {
		case c == '\\':
			p.i++
		case c == '"':
			p.i++
			if !json.Valid(p.doc[start:p.i]) {
				p.i = start
				return p.errorf("invalid string")
			}
			return nil
		case c < 0x20:
			return p.errorf("control character in a string (a newline inside quotes?)")
		}
	}
	p.i = start
	return p.errorf("string never closes")
}

func (p *parser) object(depth int) (*Value, error) {
	v := &Value{Kind: Object, Start: p.i}
	p.i++
	p.space()
	if p.i < len(p.doc) && p.doc[p.i] == '}' {
		p.i++
		v.End = p.i
		return v, nil
	}
	for {
		p.space()
		if p.i >= len(p.doc) || p.doc[p.i] != '"' {
			if p.i >= len(p.doc) {
				return nil, p.errorf("unexpected end of the file in an object")
			}
			return nil, p.errorf("expected a quoted key, found %q", p.doc[p.i])
		}
		keyStart := p.i
		if err := p.str(); err != nil {
			return nil, err
		}
		var key string
		if err := json.Unmarshal(p.doc[keyStart:p.i], &key); err != nil {
			return nil, p.errorf("bad key: %v", err)
		}
		p.space()
		if p.i >= len(p.doc) || p.doc[p.i] != ':' {
			return nil, p.errorf("expected ':' after key %q", key)
		}
		p.i++
		p.space()
		val, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v.Members = append(v.Members, Member{Key: key, KeyStart: keyStart, Value: val})
		p.space()
		if p.i >= len(p.doc) {
			return nil, p.errorf("unexpected end of the file in an object")
		}
		switch p.doc[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			v.End = p.i
			return v, nil
		default:
			return nil, p.errorf("expected ',' or '}' after the value of %q (a missing comma?)", key)
		}
	}
}

func (p *parser) array(depth int) (*Value, error) {
	v := &Value{Kind: Array, Start: p.i}
	p.i++
	p.space()
	if p.i < len(p.doc) && p.doc[p.i] == ']' {
		p.i++
		v.End = p.i
		return v, nil
	}
	for {
		p.space()
		el, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v.Elems = append(v.Elems, el)
		p.space()
		if p.i >= len(p.doc) {
			return nil, p.errorf("unexpected end of the file in an array")
		}
		switch p.doc[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			v.End = p.i
			return v, nil
		default:
			return nil, p.errorf("expected ',' or ']' in an array (a missing comma?)")
		}
	}
}

// Edit replaces doc[Start:End] with Text.
type Edit struct {
	Start, End int
	Text       []byte
}

// Apply applies non-overlapping edits to doc and returns the new document.
func Apply(doc []byte, edits ...Edit) ([]byte, error) {
	sorted := append([]Edit(nil), edits...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Start < sorted[j].Start })
	var out bytes.Buffer
	at := 0
	for _, e := range sorted {
		if e.Start < at || e.End < e.Start || e.End > len(doc) {
			return nil, errors.New("jsonedit: overlapping or out-of-range edits")
		}
		out.Write(doc[at:e.Start])
		out.Write(e.Text)
		at = e.End
	}
	out.Write(doc[at:])
	return out.Bytes(), nil
}

// Replace returns the edit that replaces v with value (any JSON text),
// indented to sit where v is.
func Replace(doc []byte, v *Value, value []byte) (Edit, error) {
	text, err := indent(value, lineIndent(doc, v.Start), IndentUnit(doc))
	if err != nil {
		return Edit{}, err
	}
	return Edit{Start: v.Start, End: v.End, Text: lineEnds(doc, text)}, nil
}

// ReplaceWith returns the edit that replaces v, a value of doc, with w, a
// value of another document src: w's text as src has it, comments and
// all, when it would sit at the same indentation in doc (and the two
// documents indent alike); else w laid out afresh to sit where v is. std
// and srcStd are doc and src standardized, which v and w were parsed
// from. It is how an entry taken from an older copy of a file goes back
// into the file as it is now.
func ReplaceWith(doc, std []byte, v *Value, src, srcStd []byte, w *Value) (Edit, error) {
	text := src[w.Start:w.End]
	oneLine := bytes.IndexByte(text, '\n') < 0
	if lineIndent(std, v.Start) == lineIndent(srcStd, w.Start) && (oneLine || IndentUnit(std) == IndentUnit(srcStd)) {
		text = bytes.ReplaceAll(text, []byte("\r\n"), []byte("\n"))
		return Edit{Start: v.Start, End: v.End, Text: lineEnds(doc, text)}, nil
	}
	return Replace(std, v, srcStd[w.Start:w.End])
}

// lineEnds makes new text use the document's line ends (CRLF files stay
// CRLF).
func lineEnds(doc, text []byte) []byte {
	if bytes.Contains(doc, []byte("\r\n")) {
		return bytes.ReplaceAll(text, []byte("\n"), []byte("\r\n"))
	}
	return text
}

// Insert returns the edit that adds key: value as the last member of the
// object obj, laid out like its siblings. std is the standardized document
// obj was parsed from; doc is the original, which may hold comments and
// trailing commas.
func Insert(doc, std []byte, obj *Value, key string, value []byte) (Edit, error) {
	if obj.Kind != Object {
		return Edit{}, fmt.Errorf("jsonedit: insert %q into a %s", key, obj.Kind)
	}
	k, _ := json.Marshal(key)
	unit := IndentUnit(std)
	if len(obj.Members) == 0 {
		parent := lineIndent(std, obj.Start)
		inner := std[obj.Start+1 : obj.End-1]
		val, err := indent(value, parent+unit, unit)
		if err != nil {
			return Edit{}, err
		}
		member := fmt.Sprintf("\n%s%s%s: %s", parent, unit, k, val)
		if bytes.IndexByte(inner, '\n') < 0 {
			// "{}" or "{ }": lay the object out afresh.
			return Edit{Start: obj.Start + 1, End: obj.End - 1, Text: lineEnds(std, []byte(member+"\n"+parent))}, nil
		}
		return Edit{Start: obj.Start + 1, End: obj.Start + 1, Text: lineEnds(std, []byte(member))}, nil
	}
	first, last := obj.Members[0], obj.Members[len(obj.Members)-1]
	at := last.Value.End
	sep := ","
	// A JSONC trailing comma after the last member: insert after it.
	cs := stripComments(doc)
	for j := at; j < len(std) && isSpace(std[j]); j++ {
		if cs[j] == ',' {
			at, sep = j+1, ""
			break
		}
	}
	if !ownLine(std, first.KeyStart) {
		// A compact, one-line object stays one line.
		var c bytes.Buffer
		if err := json.Compact(&c, value); err != nil {
			return Edit{}, err
		}
		return Edit{Start: at, End: at, Text: fmt.Appendf(nil, "%s %s: %s", sep, k, c.Bytes())}, nil
	}
	mi := lineIndent(std, first.KeyStart)
	val, err := indent(value, mi, unit)
	if err != nil {
		return Edit{}, err
	}
	return Edit{Start: at, End: at, Text: lineEnds(std, fmt.Appendf(nil, "%s\n%s%s: %s", sep, mi, k, val))}, nil
}

// IndentUnit guesses one level of the document's indentation from its
// first member that sits on a line of its own; two spaces by default.
func IndentUnit(std []byte) string {
	v, err := Parse(std)
	if err != nil || v.Kind != Object {
		return "  "
	}
	var walk func(*Value) string
	walk = func(v *Value) string {
		if v.Kind != Object {
			return ""
		}
		for _, m := range v.Members {
			if ownLine(std, m.KeyStart) {
				outer, inner := lineIndent(std, v.Start), lineIndent(std, m.KeyStart)
				if len(inner) > len(outer) && inner[:len(outer)] == outer {
					return inner[len(outer):]
				}
			}
			if u := walk(m.Value); u != "" {
				return u
			}
		}
		return ""
	}
	if u := walk(v); u != "" {
		return u
	}
	return "  "
}

// lineIndent is the leading whitespace of the line that holds pos.
func lineIndent(doc []byte, pos int) string {
	start := bytes.LastIndexByte(doc[:pos], '\n') + 1
	end := start
	for end < pos && (doc[end] == ' ' || doc[end] == '\t') {
		end++
	}
	return string(doc[start:end])
}

// ownLine says whether only whitespace precedes pos on its line.
func ownLine(doc []byte, pos int) bool {
	start := bytes.LastIndexByte(doc[:pos], '\n') + 1
	return len(bytes.TrimLeft(doc[start:pos], " \t")) == 0 && bytes.LastIndexByte(doc[:pos], '\n') >= 0
}

// indent lays out value with prefix on every line after the first.
func indent(value []byte, prefix, unit string) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Indent(&b, value, prefix, unit); err != nil {
		return nil, fmt.Errorf("jsonedit: %w", err)
	}
	return b.Bytes(), nil
}

// ObjectOf builds the text of a JSON object from members in order; values
// are JSON texts. It is how callers assemble a new entry whose key order
// they care about.
func ObjectOf(members ...KV) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.Key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.Value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// KV is one member for ObjectOf.
type KV struct {
	Key   string
	Value []byte
}
