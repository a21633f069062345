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
// be what Parse or ParseStrict returned without error: Strict does not
// check the JSON again. After ParseStrict, which checked the keys on its
// one pass, Strict only reports what it found.
func Strict(m *Message) error {
	if !utf8.Valid(m.Raw) {
		return fmt.Errorf("%w: the message is not valid UTF-8", ErrInvalid)
	}
	if m.keys.parsed { // ParseStrict checked the keys on its way
		return m.keys.bad
	}
	params := m.Params.Present() && m.Raw[m.Params.Start] == '{'
	meta := params && m.Meta.Present() && m.Raw[m.Meta.Start] == '{'
	if err := checkObject(m.Raw, skipSpace(m.Raw, 0), envelopeKeys, "message"); err != nil {
		return err
	}
	if !params {
		return nil
	}
	if err := checkObject(m.Raw, m.Params.Start, paramsKeys, "params"); err != nil {
		return err
	}
	if meta {
		return checkObject(m.Raw, m.Meta.Start, metaKeys, "params._meta")
	}
	return nil
}

// The members the pool reads, per level: a key that folds to one of these
// without being it is refused.
var (
	envelopeKeys = []string{"jsonrpc", "id", "method", "params", "result", "error"}
	paramsKeys   = []string{"_meta", "name", "uri", "requestId", "progressToken", "level", "reason",
		"arguments", "protocolVersion", "capabilities", "clientInfo", "requestState", "inputResponses", "task"}
	metaKeys = []string{"progressToken", "io.modelcontextprotocol/protocolVersion",
		"io.modelcontextprotocol/clientCapabilities", "io.modelcontextprotocol/clientInfo",
		"io.modelcontextprotocol/logLevel"}
)

// checkObject checks the members of the object at b[i], for a Message
// that did not come from Parse.
func checkObject(b []byte, i int, known []string, where string) error {
	c := keyCheck{known: known, where: where}
	membersValid(b, i, func(k Span, esc bool, _ Span) bool {
		c.add(b, k, esc)
		return c.bad == nil
	})
	return c.bad
}

// keyCheck checks the keys of one object as they are met, and keeps the
// first it refuses. It remembers keys as spans of the message, so that it
// lives on the stack, and allocates only for keys with escapes or
// non-ASCII letters, or past the 16th, which ordinary traffic does not
// have: it runs on every message.
type keyCheck struct {
	known   []string // the names a lookalike is refused for
	where   string   // the object, for the error
	seen    [16]Span // the first keys met, in the message
	escaped uint16   // which of seen have escapes
	n       int      // keys met
	more    []string // the keys past len(seen), decoded
	bad     error    // the first key refused
}

// add checks the key at span k of b (esc: it has escapes).
func (c *keyCheck) add(b []byte, k Span, esc bool) {
	if c.bad != nil {
		return
	}
	key, ok := keyText(b, k, esc)
	if !ok {
		c.bad = fmt.Errorf("%w: bad key in %s", ErrInvalid, c.where)
		return
	}
	for j := range min(c.n, len(c.seen)) {
		prev, _ := keyText(b, c.seen[j], c.escaped&(1<<j) != 0)
		if string(prev) == string(key) {
			c.bad = fmt.Errorf("%w: duplicate key %q in %s", ErrInvalid, key, c.where)
			return
		}
	}
	for _, prev := range c.more {
		if prev == string(key) {
			c.bad = fmt.Errorf("%w: duplicate key %q in %s", ErrInvalid, key, c.where)
			return
		}
	}
	if c.n < len(c.seen) {
		c.seen[c.n] = k
		if esc {
			c.escaped |= 1 << c.n
		}
	} else {
		c.more = append(c.more, string(key))
	}
	c.n++
	if name := lookalike(key, c.known); name != "" {
		c.bad = fmt.Errorf("%w: key %q in %s is not %q (keys are case-sensitive)", ErrInvalid, key, c.where, name)
	}
}

// keyText is the key at span k of b, decoded when it has escapes.
func keyText(b []byte, k Span, esc bool) ([]byte, bool) {
	if !esc {
		return b[k.Start+1 : k.End-1], true
	}
	s, ok := unquote(b[k.Start:k.End])
	return []byte(s), ok
}

// paramsScan is what Parse finds in one params object on its way through
// it: where _meta and task are, and the first params and _meta keys
// Strict refuses.
type paramsScan struct {
	meta               Span // the first _meta, of any type
	task               Span // the first task member, key and value (Message.Task)
	paramsBad, metaBad error
}

// scan validates the params object at b[at] and returns the offset past
// it, filling ps (a later params replaces an earlier one's findings).
func (ps *paramsScan) scan(b []byte, at int) (int, error) {
	*ps = paramsScan{}
	pc := keyCheck{known: paramsKeys, where: "params"}
	var end int
	err := membersWith(b, at, 1, func(k Span, esc bool, v int) (int, error) {
		if b[v] == '{' && !ps.meta.Present() && keyIs(b, k, esc, "_meta") {
			mc := keyCheck{known: metaKeys, where: "params._meta"}
			var mEnd int
			err := members(b, v, 2, func(k Span, esc bool, _ Span) bool {
				mc.add(b, k, esc)
				return true
			}, &mEnd)
			ps.metaBad = mc.bad
			return mEnd, err
		}
		return skipValue(b, v, 2)
	}, func(k Span, esc bool, v Span) bool {
		pc.add(b, k, esc)
		switch {
		case !ps.meta.Present() && keyIs(b, k, esc, "_meta"):
			ps.meta = v
		case !ps.task.Present() && keyIs(b, k, esc, "task"):
			ps.task = Span{k.Start, v.End}
		}
		return true
	}, &end)
	ps.paramsBad = pc.bad
	return end, err
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
