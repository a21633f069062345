package pool

import (
	"bytes"
	"cmp"
	"encoding/json"
	"maps"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// A tool's inputSchema may mark properties with x-mcp-header; a
// 2026-07-28 client mirrors their values into Mcp-Param-{Name} headers,
// and a server that reads the body must refuse (400, -32020) a call whose
// headers do not match it, a header left out for a value the body has
// included (basic/transports/streamable-http, "Custom Headers from Tool
// Parameters"). A child reads stdio and never sees a header: the pool
// checks them.
//
// It learns each server's annotations from the tools/list answers of its
// children, whoever asked (a client of either era, by either front door),
// page by page, and keeps them across children and config changes. What
// it has not seen listed it cannot check: a call of a tool no answer has
// listed yet goes to the child unchecked. So that a client that calls
// without listing through the pool (it kept an earlier list) is not
// unchecked for long, the pool lists a child's tools itself once the
// first call to a server it has learned nothing of is answered; the call
// does not wait for it. An annotation the child has since dropped still
// refuses a call without its header until a client lists the tools
// again, as the spec tells a refused client to do.

// toolParams is a server's annotated tools, by name. A tool with no
// annotated property is absent: a call to a server whose tools declare
// none costs one map lookup.
type toolParams map[string][]paramHeader

// paramHeader is one annotated property: the header that mirrors it and
// the property's path under arguments (properties keys, outermost first).
type paramHeader struct {
	header string // canonical: Mcp-Param-Region
	path   []string
}

// maxParamDepth bounds how deep in nested properties annotations are
// looked for.
const maxParamDepth = 16

// toolParams is what the server's tools mirror into headers; nil until a
// tools/list answer was seen.
func (s *server) toolParams() toolParams {
	if tp := s.params.Load(); tp != nil {
		return *tp
	}
	return nil
}

// learnToolParams takes the annotations of one tools/list result (one
// page: only the tools it names change).
func (s *server) learnToolParams(result []byte) {
	cur := s.params.Load()
	if cur != nil && len(*cur) == 0 && !bytes.Contains(result, []byte("x-mcp-header")) {
		return // none before, none now
	}
	page, ok := paramsOfTools(result)
	if !ok {
		return
	}
	for {
		next := make(toolParams, len(page))
		if cur != nil {
			maps.Copy(next, *cur)
		}
		for name, ps := range page {
			if len(ps) == 0 {
				delete(next, name)
			} else {
				next[name] = ps
			}
		}
		if s.params.CompareAndSwap(cur, &next) {
			return
		}
		cur = s.params.Load()
	}
}

// askToolParams has a ready child of the server list its tools for the
// pool, once, while no tools/list answer taught it the annotations.
func (s *server) askToolParams(sess *session) {
	if s.params.Load() != nil || !s.paramsAsked.CompareAndSwap(false, true) {
		return
	}
	if b, err := s.backendFor(sess); err != nil || !b.listToolsForParams() {
		s.paramsAsked.Store(false) // the next call asks again
	}
}

// listToolsForParams lists a ready child's tools for the pool; finish
// learns the answer. It reports false when the child has not completed a
// handshake yet, so its era (what the request needs) is unknown.
func (b *backend) listToolsForParams() bool {
	b.mu.Lock()
	hs := b.hs
	b.mu.Unlock()
	if hs == nil {
		return false
	}
	params := []byte("{}")
	if hs.era == EraModern { // a 2026-07-28 child refuses a request without its _meta
		params, _ = json.Marshal(map[string]any{"_meta": b.p.ownMeta()})
	}
	b.internalRequest("tools/list", params)
	return true
}

// paramsOfTools reads a tools/list result: each tool it lists, with its
// annotated properties (none for most).
func paramsOfTools(result []byte) (map[string][]paramHeader, bool) {
	var r struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if json.Unmarshal(result, &r) != nil || r.Tools == nil {
		return nil, false
	}
	page := make(map[string][]paramHeader, len(r.Tools))
	for _, t := range r.Tools {
		var ps []paramHeader
		var schema map[string]json.RawMessage
		if bytes.Contains(t.InputSchema, []byte("x-mcp-header")) && json.Unmarshal(t.InputSchema, &schema) == nil {
			ps = annotatedProperties(schema, nil, nil)
			slices.SortFunc(ps, func(a, b paramHeader) int { return cmp.Compare(a.header, b.header) })
		}
		page[t.Name] = ps
	}
	return page, true
}

// annotatedProperties appends to out the properties of the schema node
// that carry x-mcp-header, and those of its nested objects' properties:
// the spec allows an annotation only on a property reached through
// properties keys alone.
func annotatedProperties(node map[string]json.RawMessage, path []string, out []paramHeader) []paramHeader {
	var props map[string]json.RawMessage
	if len(path) == maxParamDepth || json.Unmarshal(node["properties"], &props) != nil {
		return out
	}
	for key, raw := range props {
		var prop map[string]json.RawMessage
		if json.Unmarshal(raw, &prop) != nil {
			continue
		}
		at := append(slices.Clip(path), key)
		var name string
		if json.Unmarshal(prop["x-mcp-header"], &name) == nil && name != "" {
			out = append(out, paramHeader{header: textproto.CanonicalMIMEHeaderKey("Mcp-Param-" + name), path: at})
		}
		out = annotatedProperties(prop, at, out)
	}
	return out
}

// checkToolParams checks the Mcp-Param headers of a tools/call against
// its arguments, when the tool has annotated properties.
func checkToolParams(h http.Header, params []byte, tools toolParams) *httpRefusal {
	name, _ := jsonrpc.String(params, jsonrpc.Member(params, "name"))
	want := tools[name]
	if len(want) == 0 {
		return nil
	}
	var args []byte
	if a := jsonrpc.Member(params, "arguments"); a.Present() {
		args = a.Of(params)
	}
	for _, p := range want {
		where := "arguments." + strings.Join(p.path, ".")
		val, ok := argumentAt(args, p.path)
		if !ok {
			return refuse(errParamAmbiguous, where)
		}
		hv := h[p.header]
		if val == nil {
			if len(hv) > 0 {
				return refuse(errParamNotInBody, p.header, truncate(strings.Join(hv, ", "), 200), where)
			}
			continue // no value, no header
		}
		if len(hv) != 1 || !paramMatches(val, hv[0]) {
			return headerMismatch(p.header, hv, truncate(bodyText(val), 200))
		}
	}
	return nil
}

// argumentAt is the value at path in args: nil when absent or null; ok is
// false when an object on the way names the key twice, or in another case
// or a Unicode fold of it (decoders take these differently: the header
// must mirror the value the child will read).
func argumentAt(args []byte, path []string) (val []byte, ok bool) {
	val = args
	for _, key := range path {
		if len(val) == 0 || val[0] != '{' {
			return nil, true
		}
		if val, ok = memberOnce(val, key); !ok {
			return nil, false
		}
	}
	if string(val) == "null" {
		return nil, true
	}
	return val, true
}

// memberOnce is the value of the one member of obj named key.
func memberOnce(obj []byte, key string) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	var val []byte
	for dec.More() {
		t, err := dec.Token()
		k, isKey := t.(string)
		if err != nil || !isKey {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		switch {
		case k == key:
			if val != nil {
				return nil, false
			}
			val = v
		case strings.EqualFold(strings.TrimRight(k, "\x00"), key):
			return nil, false
		}
	}
	return val, true
}

// paramMatches reports whether header, an Mcp-Param value as sent
// (Base64 decoded first), mirrors val, the body's JSON value: a string as
// it is, a boolean as true or false, a number by its value (42 and 42.0
// are one, as the spec advises).
func paramMatches(val []byte, header string) bool {
	got, ok := decodeHeaderValue(header)
	if !ok {
		return false
	}
	switch c := val[0]; {
	case c == '"':
		s, ok := jsonrpc.String(val, jsonrpc.Span{End: len(val)})
		return ok && s == got
	case c == 't' || c == 'f':
		return got == string(val)
	case c == '-' || c >= '0' && c <= '9':
		a, okA := parseDecimal(string(val))
		b, okB := parseDecimal(got)
		return okA && okB && a == b
	}
	return false // an object or an array has no header form
}

// decimal is a JSON number's exact value, 0.digits × 10^point: its
// significant digits, without leading or trailing zeros. Zero has none,
// and no sign. Compared as float64, 9007199254740993 would equal
// 9007199254740992 and 1e-400 would equal 0.
type decimal struct {
	neg    bool
	digits string
	point  int64
}

// parseDecimal reads s, a JSON number, in time linear in its length
// whatever its exponent (both sides are a client's). False if s is not
// one, or its exponent does not fit in 32 bits.
func parseDecimal(s string) (decimal, bool) {
	digitsFrom := func(i int) int {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i
	}
	neg := strings.HasPrefix(s, "-")
	i := 0
	if neg {
		i++
	}
	j := digitsFrom(i)
	whole := s[i:j]
	if whole == "" || len(whole) > 1 && whole[0] == '0' {
		return decimal{}, false
	}
	var frac string
	if j < len(s) && s[j] == '.' {
		k := digitsFrom(j + 1)
		if frac = s[j+1 : k]; frac == "" {
			return decimal{}, false
		}
		j = k
	}
	var exp int64
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		end := digitsFrom(k)
		if end == k {
			return decimal{}, false
		}
		e, err := strconv.ParseInt(s[j+1:end], 10, 32)
		if err != nil {
			return decimal{}, false
		}
		exp, j = e, end
	}
	if j != len(s) {
		return decimal{}, false
	}
	digits := whole + frac
	trimmed := strings.TrimLeft(digits, "0")
	point := int64(len(whole)) + exp - int64(len(digits)-len(trimmed))
	if trimmed = strings.TrimRight(trimmed, "0"); trimmed == "" {
		return decimal{}, true // 0, -0.0, 0e99: one value
	}
	return decimal{neg: neg, digits: trimmed, point: point}, true
}

// bodyText is a body value as an error message quotes it: a string's
// text, else its JSON.
func bodyText(val []byte) string {
	if s, ok := jsonrpc.String(val, jsonrpc.Span{End: len(val)}); ok {
		return s
	}
	return string(val)
}
