package jsonrpc

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Strict refuses what different JSON decoders read differently, so that
// what a child decodes from a client's message is what the pool routed:
//
//   - invalid UTF-8 (a strict child dies on it, taking every session's
//     calls with it);
//   - a duplicate key (the pool's Member takes the first, most children
//     take the last);
//   - a key that some decoder takes for a member it is not: a case variant
//     ("ID", "Method": Go's encoding/json matches keys case-insensitively),
//     a Unicode fold ("ſ" U+017F for s, "K" U+212A for k), or a trailing
//     NUL ("id\u0000"): the go-sdk advisories GHSA-wvj2-96wp-fq3f and
//     GHSA-q382-vc8q-7jhj describe both.
//
// It checks the levels the pool reads or rewrites: the envelope, params
// and params._meta. Duplicates are refused at those levels whatever the
// key. The error wraps ErrInvalid (-32600, for that client only). m must
// be what Parse returned without error: Strict does not check the JSON
// again.
func Strict(m *Message) error {
	if !utf8.Valid(m.Raw) {
		return fmt.Errorf("%w: the message is not valid UTF-8", ErrInvalid)
	}
	if err := checkObject(m.Raw, skipSpace(m.Raw, 0), envelopeKeys, "message"); err != nil {
		return err
	}
	if !m.Params.Present() || m.Raw[m.Params.Start] != '{' {
		return nil
	}
	if err := checkObject(m.Raw, m.Params.Start, paramsKeys, "params"); err != nil {
		return err
	}
	if m.Meta.Present() && m.Raw[m.Meta.Start] == '{' {
		return checkObject(m.Raw, m.Meta.Start, metaKeys, "params._meta")
	}
	return nil
}

// The members the pool reads, per level: a key that folds to one of these
// without being it is refused.
var (
	envelopeKeys = []string{"jsonrpc", "id", "method", "params", "result", "error"}
	paramsKeys   = []string{"_meta", "name", "uri", "requestId", "progressToken", "level", "reason",
		"arguments", "protocolVersion", "capabilities", "clientInfo", "requestState", "inputResponses"}
	metaKeys = []string{"progressToken", "io.modelcontextprotocol/protocolVersion",
		"io.modelcontextprotocol/clientCapabilities", "io.modelcontextprotocol/clientInfo",
		"io.modelcontextprotocol/logLevel"}
)

// checkObject checks the members of the object at b[i]. It allocates
// only for keys with escapes or non-ASCII letters, which ordinary traffic
// does not have: it runs on every client message.
func checkObject(b []byte, i int, known []string, where string) error {
	var seenBuf [16][]byte
	seen := seenBuf[:0]
	var bad error
	membersValid(b, i, func(k Span, esc bool, _ Span) bool {
		key := b[k.Start+1 : k.End-1]
		if esc {
			s, ok := unquote(b[k.Start:k.End])
			if !ok {
				bad = fmt.Errorf("%w: bad key in %s", ErrInvalid, where)
				return false
			}
			key = []byte(s)
		}
		for _, s := range seen {
			if string(s) == string(key) {
				bad = fmt.Errorf("%w: duplicate key %q in %s", ErrInvalid, key, where)
				return false
			}
		}
		seen = append(seen, key)
		if name := lookalike(key, known); name != "" {
			bad = fmt.Errorf("%w: key %q in %s is not %q (keys are case-sensitive)", ErrInvalid, key, where, name)
			return false
		}
		return true
	})
	return bad
}

// lookalike returns the known name key would be taken for by a decoder
// that folds case (Unicode simple folding, as encoding/json does) or
// stops at a NUL, when key is not exactly that name; else "".
func lookalike(key []byte, known []string) string {
	for _, name := range known {
		if string(key) == name {
			return ""
		}
	}
	trimmed := bytes.TrimRight(key, "\x00")
	ascii := true
	for _, c := range trimmed {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	for _, name := range known {
		if ascii && len(trimmed) == len(name) && asciiEqualFold(trimmed, name) ||
			!ascii && strings.EqualFold(string(trimmed), name) {
			return name
		}
	}
	return ""
}

func asciiEqualFold(b []byte, s string) bool {
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
