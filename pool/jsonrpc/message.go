// Package jsonrpc is the JSON-RPC 2.0 envelope codec of the pool's hot path.
//
// It locates the top-level members of a message without decoding it, so the
// pool can rewrite an id or a progress token by splicing bytes and forward
// everything else exactly as the peer wrote it. Ids are kept as their
// original bytes: 1, "1" and 1.0 are three different ids.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Kind says what a message is, from which members it has.
type Kind uint8

// The kinds of JSON-RPC message.
const (
	KindInvalid      Kind = iota
	KindRequest           // method and id
	KindNotification      // method, no id
	KindResponse          // id and result or error
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	}
	return "invalid"
}

// Message is one parsed JSON-RPC message: the raw line and where its
// top-level members are. Spans index into Raw.
type Message struct {
	Raw    []byte
	Kind   Kind
	ID     Span
	Method string
	Params Span
	Result Span
	Error  Span
	// Meta is params._meta, when params is an object that has it (of any
	// type: callers check for an object). Where the pool reads a request
	// (its version, capabilities, client, progress token) it is in _meta,
	// read up to five times per request: finding it once here saves as
	// many scans of params, arguments and all.
	Meta Span
	// Task is a request's params.task, from its key to the end of its
	// value, when params is an object that has it: 2025-11-25's task
	// augmentation, which a server that offers no tasks ignores, so the
	// pool takes it out for a child whose tasks it does not offer.
	Task Span

	// keys is what ParseStrict found, on its one pass, for Strict to
	// report.
	keys keyFindings
}

// keyFindings is what Strict is to report about the keys of a message
// (see Strict), as ParseStrict met them.
type keyFindings struct {
	parsed bool  // by ParseStrict: bad is set
	bad    error // the key Strict refuses, or nil
}

// IDBytes returns the exact bytes of the id, or nil.
func (m *Message) IDBytes() []byte {
	if !m.ID.Present() {
		return nil
	}
	return m.ID.Of(m.Raw)
}

// ErrParse marks input that is not JSON at all (JSON-RPC -32700).
var ErrParse = errors.New("parse error")

// ErrInvalid marks JSON that is not a valid JSON-RPC 2.0 message (-32600).
var ErrInvalid = errors.New("invalid request")

// Parse locates the members of one JSON-RPC message. The message's bytes are
// not copied: the returned Message aliases b. Batches (arrays) are refused
// with ErrInvalid: MCP removed batching in 2025-06-18.
func Parse(b []byte) (Message, error) {
	m := Message{Raw: b}
	i, err := objectStart(b)
	if err != nil {
		return m, err
	}
	var e envelope
	err = members(b, i, 0, func(k Span, esc bool, v Span) bool {
		e.member(&m, k, esc, v)
		return true
	}, &e.end)
	if err := e.finish(&m, err, nil); err != nil {
		return m, err
	}
	return m, nil
}

// ParseStrict is Parse for a message Strict will be asked about (a
// client's). It also checks the keys Strict checks, and finds _meta, on
// the same pass: Strict then only reports what it found, and a large
// message is read once.
func ParseStrict(b []byte) (Message, error) {
	m := Message{Raw: b}
	i, err := objectStart(b)
	if err != nil {
		return m, err
	}
	var (
		e   envelope
		ps  paramsScan // of the last params, which is m.Params
		env = keyCheck{known: envelopeKeys, where: "message"}
	)
	err = membersWith(b, i, 0, func(k Span, esc bool, at int) (int, error) {
		if b[at] == '{' && keyIs(b, k, esc, "params") {
			return ps.scan(b, at)
		}
		return skipValue(b, at, 1)
	}, func(k Span, esc bool, v Span) bool {
		env.add(b, k, esc)
		e.member(&m, k, esc, v)
		return true
	}, &e.end)
	if err := e.finish(&m, err, &ps); err != nil {
		return m, err
	}
	// What Strict reports, found on the way: the first key refused in
	// the envelope, else in params, else in _meta.
	m.keys = keyFindings{parsed: true, bad: env.bad}
	if m.keys.bad == nil && m.Params.Present() && b[m.Params.Start] == '{' {
		m.keys.bad = ps.paramsBad
		if m.keys.bad == nil && m.Meta.Present() && b[m.Meta.Start] == '{' {
			m.keys.bad = ps.metaBad
		}
	}
	return m, nil
}

// objectStart returns where the message's object starts, or the error for
// a message that is not an object.
func objectStart(b []byte) (int, error) {
	i := skipSpace(b, 0)
	if i < len(b) && b[i] == '[' {
		if !Valid(b) {
			return 0, fmt.Errorf("%w: %w", ErrParse, errSyntaxOf(b))
		}
		return 0, fmt.Errorf("%w: JSON-RPC batches are not supported", ErrInvalid)
	}
	if i >= len(b) || b[i] != '{' {
		if !Valid(b) {
			return 0, fmt.Errorf("%w: %w", ErrParse, errSyntaxOf(b))
		}
		return 0, fmt.Errorf("%w: message is not an object", ErrInvalid)
	}
	return i, nil
}

// envelope is what a parser keeps of the members it met, until finish.
type envelope struct {
	version, method Span
	methEsc         bool
	end             int // past the message's object
}

// member notes one member of the message's object.
func (e *envelope) member(m *Message, k Span, esc bool, v Span) {
	b := m.Raw
	switch {
	case keyIs(b, k, esc, "id"):
		m.ID = v
	case keyIs(b, k, esc, "method"):
		e.method = v
		if b[v.Start] == '"' {
			_, e.methEsc, _ = skipString(b, v.Start)
		}
	case keyIs(b, k, esc, "params"):
		m.Params = v
	case keyIs(b, k, esc, "result"):
		m.Result = v
	case keyIs(b, k, esc, "error"):
		m.Error = v
	case keyIs(b, k, esc, "jsonrpc"):
		e.version = v
	}
}

// finish checks what the walk (which ended with err) found and gives m
// its kind, method, _meta and task: ps's, when the walk looked into
// params, else looked up in params.
func (e *envelope) finish(m *Message, err error, ps *paramsScan) error {
	b := m.Raw
	if err != nil {
		return fmt.Errorf("%w: %w", ErrParse, err)
	}
	if skipSpace(b, e.end) != len(b) {
		return fmt.Errorf("%w: %w", ErrParse, syntaxErr(e.end, "trailing data after message"))
	}
	if string(e.version.Of(b)) != `"2.0"` {
		return fmt.Errorf("%w: jsonrpc must be \"2.0\"", ErrInvalid)
	}
	if m.ID.Present() {
		switch c := b[m.ID.Start]; {
		case c == '"', c == '-', c >= '0' && c <= '9':
		case c == 'n' && m.Error.Present():
			// A response to a request whose id could not be read.
		default:
			return fmt.Errorf("%w: id must be a string or a number", ErrInvalid)
		}
	}
	switch {
	case e.method.Present():
		if b[e.method.Start] != '"' {
			return fmt.Errorf("%w: method must be a string", ErrInvalid)
		}
		if e.methEsc {
			s, ok := unquote(e.method.Of(b))
			if !ok {
				return fmt.Errorf("%w: bad method string", ErrInvalid)
			}
			m.Method = s
		} else {
			m.Method = internMethod(b[e.method.Start+1 : e.method.End-1])
		}
		if m.Params.Present() && b[m.Params.Start] != '{' && b[m.Params.Start] != '[' {
			return fmt.Errorf("%w: params must be an object or an array", ErrInvalid)
		}
		if m.Params.Present() && b[m.Params.Start] == '{' {
			switch {
			case ps != nil:
				m.Meta = ps.meta
				if m.ID.Present() {
					m.Task = ps.task
				}
			case m.ID.Present():
				m.Meta, m.Task = metaAndTask(b, m.Params.Start)
			default:
				if s := Member(m.Params.Of(b), "_meta"); s.Present() {
					m.Meta = Span{m.Params.Start + s.Start, m.Params.Start + s.End}
				}
			}
		}
		if m.ID.Present() {
			m.Kind = KindRequest
		} else {
			m.Kind = KindNotification
		}
	case m.ID.Present() && (m.Result.Present() != m.Error.Present()):
		m.Kind = KindResponse
	default:
		return fmt.Errorf("%w: neither a request, a notification nor a response", ErrInvalid)
	}
	return nil
}

func errSyntaxOf(b []byte) error {
	i := skipSpace(b, 0)
	end, err := skipValue(b, i, 0)
	if err != nil {
		return err
	}
	return syntaxErr(end, "trailing data after message")
}

// knownMethods lets Parse return a method name without allocating for the
// methods that make up nearly all traffic.
var knownMethods = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		"initialize", "notifications/initialized", "ping", "server/discover",
		"tools/list", "tools/call", "resources/list", "resources/read",
		"resources/templates/list", "resources/subscribe", "resources/unsubscribe",
		"prompts/list", "prompts/get", "completion/complete", "logging/setLevel",
		"notifications/cancelled", "notifications/progress", "notifications/message",
		"notifications/tools/list_changed", "notifications/resources/list_changed",
		"notifications/prompts/list_changed", "notifications/resources/updated",
		"notifications/roots/list_changed", "sampling/createMessage",
		"elicitation/create", "roots/list", "subscriptions/listen",
	} {
		m[s] = s
	}
	return m
}()

func internMethod(b []byte) string {
	if s, ok := knownMethods[string(b)]; ok {
		return s
	}
	return string(b)
}

// unquote decodes a JSON string literal.
func unquote(b []byte) (string, bool) {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return "", false
	}
	return s, true
}

// String decodes the JSON string at span s of b; ok is false when the
// value is absent or not a string.
func String(b []byte, s Span) (string, bool) {
	if !s.Present() || b[s.Start] != '"' {
		return "", false
	}
	raw := b[s.Start+1 : s.End-1]
	for _, c := range raw {
		if c == '\\' {
			return unquote(s.Of(b))
		}
	}
	return string(raw), true
}

// Splice returns a new message: b with the bytes at s replaced by val.
// dst is reused when it has room; else the message is one allocation of
// its size, not zeroed before it is written (bytes.Join's).
func Splice(dst, b []byte, s Span, val []byte) []byte {
	if cap(dst) < len(b)-(s.End-s.Start)+len(val) {
		return bytes.Join([][]byte{b[:s.Start], val, b[s.End:]}, nil)
	}
	dst = append(dst[:0], b[:s.Start]...)
	dst = append(dst, val...)
	return append(dst, b[s.End:]...)
}

// AppendUint appends the decimal form of n, the way the pool writes its
// own ids and tokens.
func AppendUint(dst []byte, n uint64) []byte { return strconv.AppendUint(dst, n, 10) }

// ParseUint reads an id or token the pool wrote with AppendUint. Anything
// else (a string, a fraction, a sign, a number past 2^64-1, which must not
// wrap round to one of the pool's) is not one of the pool's.
func ParseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	return n, true
}

// OneLine turns the line breaks (LF and CR) of a message that parsed into
// spaces, in place. A child reads one message per line, and readers
// differ on what ends a line (some end one at a CR too), so a client's
// message that spans lines would reach the child as several messages the
// pool never classified: smuggled requests under ids of their own
// choosing. JSON allows a raw line break only between tokens (inside a
// string it is a parse error), where a space means the same.
func OneLine(b []byte) {
	for _, c := range [...]byte{'\n', '\r'} {
		for i := bytes.IndexByte(b, c); i >= 0; {
			b[i] = ' '
			j := bytes.IndexByte(b[i+1:], c)
			if j < 0 {
				break
			}
			i += 1 + j
		}
	}
}
