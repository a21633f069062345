package store

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"unicode"
)

// Redacted replaces every secret value the store would otherwise keep.
const Redacted = "[REDACTED]"

// Redact returns a copy of a JSON text with the values of keys that look
// secret (token, secret, password, key, authorization, cookie,
// credential, pwd, signature, ...) replaced by "[REDACTED]", whatever
// their type, and so is the "value" of an object whose "name" or "key"
// names a secret ({"name": "GITHUB_TOKEN", "value": "ghp_..."}). It does
// not need the JSON to be complete or valid: captured payloads are
// prefixes cut at any byte, and a value cut off mid-way is redacted too.
//
// Inside string values it also redacts what RedactText finds in free
// text: "Bearer ..." and "Basic ..." credentials, "name=value" pairs with
// a secret-looking name (query strings, a presigned URL's signature,
// environment assignments), the user information of URLs
// (postgres://app:password@db, with its slashes escaped or not), the
// values of secret keys in JSON that was stringified into a string
// (escaped quotes) and providers' tokens standing alone (redactTokens). A
// string cut off in what may be a URL's user information loses the rest
// of it.
func Redact(b []byte) []byte {
	out := make([]byte, 0, len(b)+16)
	var objs objects
	budget := scanBudget(b)
	for i := 0; i < len(b); {
		if b[i] != '"' {
			objs.see(b[i], i)
			out = append(out, b[i])
			i++
			continue
		}
		end, closed := scanString(b, i)
		colon := skipSpace(b, end)
		if !closed || colon >= len(b) || b[colon] != ':' {
			out = append(out, redactInString(b[i:end], !closed)...)
			i = end
			continue
		}
		// A key and its colon.
		out = append(out, b[i:colon+1]...)
		key := unquote(b[i:end])
		i = colon + 1
		if !isSecretKey(key) && !(isValueKey(key) && objs.named(b, &budget)) {
			continue
		}
		v := skipSpace(b, i)
		out = append(out, b[i:v]...)
		if v < len(b) {
			out = append(out, `"`+Redacted+`"`...)
		}
		i = skipValue(b, v)
	}
	return out
}

// objects follows the objects Redact is inside, innermost last, so that
// a "value" member can be judged by its siblings: {"name": "GITHUB_TOKEN",
// "value": "ghp_..."} holds a secret, which no key names.
type objects []object

type object struct {
	start int  // its '{'
	known bool // named is computed
	named bool // a "name" or "key" member names a secret
}

// see follows the structure: c is a byte of b at i outside any string.
func (o *objects) see(c byte, i int) {
	switch {
	case c == '{':
		*o = append(*o, object{start: i})
	case c == '}' && len(*o) > 0:
		*o = (*o)[:len(*o)-1]
	}
}

// named reports whether the innermost object has a "name" or "key"
// member whose string value names a secret (isSecretName), wherever it
// stands among the members. An object cut off before that is known may
// have one: it counts as named. The answer is kept for the object's other
// "value" keys; budget bounds the bytes looked through, in all, past which
// an object counts as named too.
func (o objects) named(b []byte, budget *int) bool {
	if len(o) == 0 {
		return false
	}
	top := &o[len(o)-1]
	if !top.known {
		top.named, top.known = siblingNames(b, top.start, budget), true
	}
	return top.named
}

// siblingNames reads the members of the object at b[start] (see named).
func siblingNames(b []byte, start int, budget *int) bool {
	i := start + 1
	for {
		i = skipSpace(b, i)
		if i >= len(b) || *budget <= 0 {
			return true // cut off (or too much to read): it may be named
		}
		if b[i] != '"' {
			return false // '}', or no JSON
		}
		end, _ := scanString(b, i)
		colon := skipSpace(b, end)
		if colon >= len(b) {
			return true
		}
		if b[colon] != ':' {
			return false
		}
		v := skipSpace(b, colon+1)
		next := skipValue(b, v)
		*budget -= next - i
		if k := unquote(b[i:end]); v < len(b) && b[v] == '"' && (strings.EqualFold(k, "name") || strings.EqualFold(k, "key")) {
			vend, closed := scanString(b, v)
			if !closed || isSecretName(unquote(b[v:vend])) {
				return true
			}
		}
		if i = skipSpace(b, next); i < len(b) && b[i] == ',' {
			i++
		}
	}
}

// isValueKey reports whether key holds a value that a sibling may name
// ("value", "Value"), as in an environment list or a form's fields.
func isValueKey(key string) bool { return strings.EqualFold(key, "value") }

// scanString returns the index after the string starting at b[i] == '"'
// and whether it was closed before the end of b.
func scanString(b []byte, i int) (end int, closed bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return len(b), false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index after the JSON value at b[i], or len(b) when
// the value is cut off.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		end, _ := scanString(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := scanString(b, j)
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	for j := i; j < len(b); j++ {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
	}
	return len(b)
}

// unquote decodes a JSON string literal for matching; escapes such as
// "api\u005fkey" must not hide a key.
func unquote(lit []byte) string {
	if bytes.IndexByte(lit, '\\') < 0 {
		return string(bytes.Trim(lit, `"`))
	}
	var s string
	if json.Unmarshal(lit, &s) != nil {
		return strings.Trim(string(lit), `"`)
	}
	return s
}

var (
	// credentialRE matches an HTTP credential after its scheme's name.
	credentialRE = regexp.MustCompile(`(?i)\b(?:bearer|basic)\s+([A-Za-z0-9._~+/-]+=*)`)
	// escapedKeyRE matches "key": in JSON stringified into a string.
	escapedKeyRE = regexp.MustCompile(`\\"((?:[^"\\]|\\[^"])*)\\"(\s*:\s*)`)
)

// redactInString redacts credentials inside one JSON string literal
// (quotes included, possibly unterminated), or in free text. cut says
// lit is the prefix of a longer one (see cutAt).
func redactInString(lit []byte, cut bool) []byte {
	// URLs first: a scheme taken for a credential ("Bearer postgres://")
	// would hide its user information.
	out := redactUserinfo(lit, cut)
	if len(out) < 8 {
		return out
	}
	if bytes.IndexByte(out, '=') >= 0 {
		out = redactAssignments(out, cut)
	}
	if containsFold(out, "bearer") || containsFold(out, "basic") {
		out = redactCredentials(out, cut)
	}
	if bytes.Contains(out, []byte(`\"`)) {
		out = redactEscaped(out, cut)
	}
	return redactTokens(out, cut)
}

// tokenShape is how a provider's token looks: its fixed prefix, then a
// random part of at least min bytes that are all of its alphabet (exactly
// min with exact), holding a digit if digit says so. The prefix keeps
// the rest of a word from being taken for one ("sk-learn-extension" has
// no digit, "task-1234..." no word start).
type tokenShape struct {
	prefix string
	alpha  func(byte) bool
	min    int
	exact  bool
	digit  bool
}

var tokenShapes = []tokenShape{
	{prefix: "ghp_", alpha: isAlnum, min: 30}, // GitHub: personal, OAuth, user, server, refresh
	{prefix: "gho_", alpha: isAlnum, min: 30},
	{prefix: "ghu_", alpha: isAlnum, min: 30},
	{prefix: "ghs_", alpha: isAlnum, min: 30},
	{prefix: "ghr_", alpha: isAlnum, min: 30},
	{prefix: "github_pat_", alpha: isWordByte, min: 22},             // GitHub's fine-grained token
	{prefix: "xoxb-", alpha: isAlnumDashByte, min: 16, digit: true}, // Slack: bot, user, app, refresh, legacy
	{prefix: "xoxp-", alpha: isAlnumDashByte, min: 16, digit: true},
	{prefix: "xoxa-", alpha: isAlnumDashByte, min: 16, digit: true},
	{prefix: "xoxr-", alpha: isAlnumDashByte, min: 16, digit: true},
	{prefix: "xoxs-", alpha: isAlnumDashByte, min: 16, digit: true},
	{prefix: "AKIA", alpha: isUpperDigit, min: 16, exact: true}, // AWS access key ids, long-lived and temporary
	{prefix: "ASIA", alpha: isUpperDigit, min: 16, exact: true},
	{prefix: "sk-", alpha: isWordDashByte, min: 20, digit: true}, // OpenAI, Anthropic (sk-ant-), and the like
	{prefix: "sk_live_", alpha: isAlnum, min: 16},                // Stripe
	{prefix: "sk_test_", alpha: isAlnum, min: 16},
}

func isAlnum(c byte) bool         { return isLetter(c) || c >= '0' && c <= '9' }
func isUpperDigit(c byte) bool    { return c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
func isAlnumDashByte(c byte) bool { return isAlnum(c) || c == '-' }
func isWordDashByte(c byte) bool  { return isWordByte(c) || c == '-' }

// redactTokens replaces the random part of the providers' tokens
// (tokenShapes) that b holds bare, with no key or name=value to say so
// (a child's "401 Bad credentials for ghp_..."), and keeps the prefix,
// which says whose token it was: "ghp_[REDACTED]". A token must start a
// word; where b may have been cut in it (cutAt), its prefix and one byte
// are enough.
func redactTokens(b []byte, cut bool) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(b); i++ {
		if !tokenStarts[b[i]] || !startsWord(b, i) {
			continue
		}
		start, end, ok := tokenAt(b, i, cut)
		if !ok {
			continue
		}
		out = append(append(out, b[last:start]...), Redacted...)
		last, i = end, end-1
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// startsWord reports whether a word may start at b[i]: after no letter,
// digit, '_' or '-', or after a JSON escape such as the \n of a logged
// line.
func startsWord(b []byte, i int) bool {
	switch {
	case i == 0 || !isWordByte(b[i-1]) && b[i-1] != '-':
		return true
	case i >= 2 && b[i-2] == '\\':
		return strings.IndexByte("nrtbf", b[i-1]) >= 0
	}
	return false
}

// tokenStarts holds the first byte of each tokenShapes prefix.
var tokenStarts = func() (t [256]bool) {
	for _, s := range tokenShapes {
		t[s.prefix[0]] = true
	}
	return t
}()

// tokenAt returns the random part of the token at b[i], if one starts
// there (see redactTokens).
func tokenAt(b []byte, i int, cut bool) (start, end int, ok bool) {
	for _, t := range tokenShapes {
		if b[i] != t.prefix[0] || !bytes.HasPrefix(b[i:], []byte(t.prefix)) {
			continue
		}
		start = i + len(t.prefix)
		end, digit := start, false
		for end < len(b) && t.alpha(b[end]) {
			digit = digit || b[end] >= '0' && b[end] <= '9'
			end++
		}
		n := end - start
		switch {
		case n == 0:
		case cutAt(b, end, cut) && (!t.exact || n <= t.min):
			return start, end, true
		case n >= t.min && (!t.exact || n == t.min) && (!t.digit || digit):
			return start, end, true
		}
	}
	return 0, 0, false
}

// redactUserinfo replaces the user information of the URLs in b
// ("user:password@" or "token@": all of it may be secret) and, if b is
// cut from a longer text, what may be the start of it at its end: an
// authority that is all there is after its scheme. "postgres://app:pw@db"
// becomes "postgres://[REDACTED]@db", and "postgres://app:p", cut,
// "postgres://[REDACTED]". A URL in JSON may have its slashes escaped
// (https:\/\/). It scans each byte a bounded number of times: payloads
// are long strings full of URLs.
func redactUserinfo(b []byte, cut bool) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(b); i++ {
		c := bytes.IndexByte(b[i:], ':')
		if c < 0 {
			break
		}
		i += c
		start := authorityStart(b, last, i)
		if start < 0 {
			continue
		}
		end := start
		for end < len(b) && strings.IndexByte(" \t\n\f\r/?#@\"\\", b[end]) < 0 {
			end++
		}
		if end == start || !(end < len(b) && b[end] == '@' || end == len(b) && cut) {
			continue
		}
		out = append(append(out, b[last:start]...), Redacted...)
		last, i = end, end
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// authorityStart returns where the authority of a URL starts whose
// scheme ends at b[i] == ':' ("https://", or "https:\/\/" in JSON): a
// letter at a word's start, then letters, digits, '+', '.' or '-', none
// before b[from]. It returns -1 for no URL.
func authorityStart(b []byte, from, i int) int {
	var start int
	switch {
	case bytes.HasPrefix(b[i+1:], []byte("//")):
		start = i + 3
	case bytes.HasPrefix(b[i+1:], []byte(`\/\/`)):
		start = i + 5
	default:
		return -1
	}
	j := i
	for j > from && (isLetter(b[j-1]) || b[j-1] >= '0' && b[j-1] <= '9' || strings.IndexByte("+.-", b[j-1]) >= 0) {
		j--
	}
	for p := j; p < i; p++ {
		if isLetter(b[p]) && (p == 0 || !isWordByte(b[p-1])) {
			return start
		}
	}
	return -1
}

func isWordByte(c byte) bool { return isLetter(c) || c >= '0' && c <= '9' || c == '_' }

// cutAt reports whether a token that ends at b[i] may have been cut
// there, and so be the start of a credential whatever its shape: b ends
// there and is the prefix of a longer text (cut), or the "…" that marks
// a cut stderr line follows.
func cutAt(b []byte, i int, cut bool) bool {
	return i == len(b) && cut || bytes.HasPrefix(b[i:], []byte("…"))
}

// containsFold reports whether b contains the lower-case ASCII word w in
// any case, without allocating.
func containsFold(b []byte, w string) bool {
	for i := 0; i+len(w) <= len(b); i++ {
		j := 0
		for j < len(w) && b[i+j]|0x20 == w[j] {
			j++
		}
		if j == len(w) {
			return true
		}
	}
	return false
}

// redactAssignments replaces the values of name=value pairs with a
// secret name (isSecretName): query strings, environment assignments,
// flags. A quoted value ("x", 'x', or \"x\" in a JSON string) loses what
// its quotes hold; another ends at its own end (valueEnd). A bare "key"
// (?key=AIza...) is a secret unless its value is a word of fewer than 8
// letters ("key=value"), and so are "sig" and "signature"; "pwd" unless
// its value is a path (keptValue).
// Names are found from each '=', not left to right: "a=TOKEN=x" hides
// nothing.
func redactAssignments(b []byte, cut bool) []byte {
	var out []byte
	last := 0
	for p := 0; p < len(b); p++ {
		if b[p] != '=' {
			continue
		}
		n := p
		for n > last && isNameByte(b[n-1]) {
			n--
		}
		for n < p && !isLetter(b[n]) {
			n++
		}
		if n == p || !isSecretName(string(b[n:p])) {
			continue
		}
		start, end := assignedValue(b, p+1)
		if start == end || bytes.HasPrefix(b[start:], []byte(Redacted)) {
			continue
		}
		if !cutAt(b, end, cut) && keptValue(b[n:p], b[start:end], b[start:]) {
			continue
		}
		out = append(append(out, b[last:start]...), Redacted...)
		last, p = end, end-1
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// keptValue reports whether the value of a secret-looking name=value
// pair is what prose or a shell puts there rather than a secret: a word
// of fewer than 8 letters after "key", "sig" or "signature"
// ("key=value", "signature=invalid"), and a path after "pwd" (the
// shell's PWD=/home/u, not ODBC's Pwd=hunter2). rest is the text from
// the value on: a Windows path's backslash ends a bare value.
func keptValue(name, value, rest []byte) bool {
	switch n := string(name); {
	case strings.EqualFold(n, "key") || strings.EqualFold(n, "sig") || strings.EqualFold(n, "signature"):
		return !looksLikeCredential(value, 8)
	case strings.EqualFold(n, "pwd"):
		return isPath(rest)
	}
	return false
}

// isPath reports whether v starts as an absolute path does: "/", "~/",
// "~" alone, or a drive's "C:\" or "C:/".
func isPath(v []byte) bool {
	switch {
	case len(v) == 0:
		return false
	case v[0] == '/' || v[0] == '~' && (len(v) == 1 || v[1] == '/'):
		return true
	}
	return len(v) >= 3 && isLetter(v[0]) && v[1] == ':' && (v[2] == '\\' || v[2] == '/')
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isNameByte(c byte) bool {
	return isLetter(c) || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// assignedValue returns where the value assigned at b[v] starts and
// ends: inside its quotes when quoted (up to the line's end when they do
// not close on it), else up to valueEnd. A quote that a name follows
// once closed, as in {"env":"TOKEN=","n":1}, ends a JSON string that the
// pair ends: the value is empty.
func assignedValue(b []byte, v int) (start, end int) {
	if v >= len(b) {
		return v, v
	}
	switch {
	case b[v] == '"':
		end, closed := scanString(b, v)
		if closed && end < len(b) && isNameByte(b[end]) {
			return v, v
		}
		if closed {
			end--
		}
		return v + 1, lineEnd(b, v+1, end)
	case b[v] == '\'':
		end := len(b)
		if i := bytes.IndexByte(b[v+1:], '\''); i >= 0 {
			end = v + 1 + i
		}
		return v + 1, lineEnd(b, v+1, end)
	case quoteLen(b, v, true) == 2:
		end, closed := stringEnd(b, v, true)
		if closed && end < len(b) && isNameByte(b[end]) {
			return v, v
		}
		if closed {
			end -= 2
		}
		return v + 2, lineEnd(b, v+2, end)
	}
	return v, valueEnd(b, v)
}

// lineEnd is where the first line of b[start:end] ends.
func lineEnd(b []byte, start, end int) int {
	if i := bytes.IndexByte(b[start:end], '\n'); i >= 0 {
		return start + i
	}
	return end
}

// valueEnd returns the end of a bare value starting at b[i]: the next
// space, quote, backslash, &, comma or semicolon, or a closing ) ] } or '
// that the end of the text, a space or punctuation follows: the text's
// own, as in "(--api-key=x)". One that more of the value follows, as in
// "pa)ss", is the value's.
func valueEnd(b []byte, i int) int {
	for j := i; j < len(b); j++ {
		switch b[j] {
		case ' ', '\t', '\n', '\r', '\f', '\v', '"', '\\', '&', ',', ';':
			return j
		case ')', ']', '}', '\'':
			k := j + 1
			for k < len(b) && strings.IndexByte(")]}'", b[k]) >= 0 {
				k++
			}
			if k == len(b) || strings.IndexByte(" \t\n\r\f\v\"\\&,;.:", b[k]) >= 0 {
				return j
			}
			j = k - 1
		}
	}
	return len(b)
}

// looksLikeCredential reports whether tok, found where a credential may
// be, is shaped like one rather than like a word: it holds a digit, a
// symbol or a byte that is not ASCII, mixes capitals into lower case, or
// has at least minWord letters. "health", "Tokens" and "NONE" are words;
// "sk-2", "dXNlcjpwYXNz" and, for minWord 8, "abcdefghijk" are not.
func looksLikeCredential(tok []byte, minWord int) bool {
	upper := 0
	for _, c := range tok {
		switch {
		case c >= 'A' && c <= 'Z':
			upper++
		case c < 'a' || c > 'z':
			return true
		}
	}
	word := upper == 0 || upper == len(tok) || upper == 1 && tok[0] <= 'Z'
	return !word || len(tok) >= minWord
}

// credentialWords follow "Bearer" or "Basic" in prose, and are no
// credential whatever their length.
var credentialWords = map[string]bool{"authentication": true, "authorization": true,
	"credential": true, "credentials": true}

// redactCredentials replaces the credential after "Bearer" or "Basic":
// a token shaped like one (looksLikeCredential, from 8 letters on), one
// with base64's padding, or, where the text may have been cut in it
// (cutAt), any. A Basic credential is the base64 of
// user:password, never a word; one cut short or mangled would not
// decode, so its shape is what counts, as a Bearer token's. "Running
// basic health checks", "Bearer tokens" and the parameter of "Bearer
// realm=..." keep their words.
func redactCredentials(b []byte, cut bool) []byte {
	var out []byte
	last := 0
	for _, l := range credentialRE.FindAllSubmatchIndex(b, -1) {
		tok, end := b[l[2]:l[3]], l[3]
		word := bytes.TrimRight(tok, "=")
		param := len(tok)-len(word) == 1 && end < len(b) && (b[end] == '"' || isNameByte(b[end]))
		if credentialWords[strings.ToLower(string(tok))] ||
			!cutAt(b, end, cut) && !looksLikeCredential(word, 8) && (param || len(word) == len(tok)) {
			continue
		}
		out = append(append(out, b[last:l[2]]...), Redacted...)
		last = l[3]
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// redactEscaped replaces the values of secret keys in stringified JSON:
// \"password\": \"x\" becomes \"password\": \"[REDACTED]\" (see
// secretValue).
func redactEscaped(lit []byte, cut bool) []byte {
	var out []byte
	last, resume, budget := 0, 0, scanBudget(lit)
	for _, l := range escapedKeyRE.FindAllSubmatchIndex(lit, -1) {
		if l[0] < resume || !isSecretName(string(lit[l[2]:l[3]])) {
			continue
		}
		end, redact := secretValue(lit, l[1], true, cut, &budget)
		if !redact {
			continue
		}
		out = append(append(out, lit[last:l[1]]...), `\"`+Redacted+`\"`...)
		last, resume = end, end
		if _, closed := stringEnd(lit, l[1], true); closed && lit[l[1]] == '\\' {
			resume = end - 2 // the closing quote may open the next key
		}
	}
	if out == nil {
		return lit
	}
	return append(out, lit[last:]...)
}

// maxKeyBytes bounds a quoted key in free text.
const maxKeyBytes = 256

// scanBudget is how many bytes the objects and arrays of secret keys in
// b may be looked through for their ends, in all: twice b, so that the
// work stays linear in b however it is made. An object looked for past
// it is taken as cut off (redacted to the end, if JSON).
func scanBudget(b []byte) int { return 2*len(b) + 4096 }

// redactTextJSON replaces the values of secret keys (isSecretName) in
// JSON that free text quotes ("apiKey": "sk-1"). Unlike Redact it reads
// prose that may hold JSON: a key may start at any quote (a stray quote
// before it hides nothing), and only what is a value (secretValue) is
// redacted, never the rest of a sentence ("password": must be ...).
func redactTextJSON(b []byte, cut bool) []byte {
	var out []byte
	last, budget := 0, scanBudget(b)
	named := -1 // the end of the member before, if it named a secret
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		end, ok := keyEnd(b, i)
		if !ok {
			continue
		}
		colon := skipSpace(b, end)
		if colon >= len(b) || b[colon] != ':' {
			continue
		}
		v := skipSpace(b, colon+1)
		key := unquote(b[i:end])
		vend, redact := 0, false
		if isSecretName(key) || isValueKey(key) && (named >= 0 && nextMember(b, named) == i || namesNext(b, v)) {
			vend, redact = secretValue(b, v, false, cut, &budget)
		}
		named = -1
		if e, ok := namesSecret(b, i); ok {
			named = e
		}
		if !redact {
			i = colon
			continue
		}
		out = append(append(out, b[last:v]...), `"`+Redacted+`"`...)
		last, i = vend, vend-1
		if _, closed := scanString(b, v); closed && b[v] == '"' {
			i = vend - 2 // the closing quote may open the next key
		}
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// namesSecret reports whether the member at b[i] is a "name" or "key"
// whose string value names a secret (isSecretName), as "GITHUB_TOKEN"
// does in {"name": "GITHUB_TOKEN", "value": "ghp_..."}, and where that
// value ends.
func namesSecret(b []byte, i int) (int, bool) {
	end, ok := keyEnd(b, i)
	if !ok {
		return 0, false
	}
	if k := unquote(b[i:end]); !strings.EqualFold(k, "name") && !strings.EqualFold(k, "key") {
		return 0, false
	}
	colon := skipSpace(b, end)
	if colon >= len(b) || b[colon] != ':' {
		return 0, false
	}
	v := skipSpace(b, colon+1)
	vend, ok := keyEnd(b, v)
	if v >= len(b) || b[v] != '"' || !ok || !isSecretName(unquote(b[v:vend])) {
		return 0, false
	}
	return vend, true
}

// nextMember returns where the member after a value ending at b[i]
// starts: past a comma and spaces; -1 for none.
func nextMember(b []byte, i int) int {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ',' {
		return -1
	}
	return skipSpace(b, i+1)
}

// namesNext reports whether the member after the value at b[v], a
// string, names a secret (namesSecret): {"value": "x", "name": "TOKEN"}.
func namesNext(b []byte, v int) bool {
	if v >= len(b) || b[v] != '"' {
		return false
	}
	end, closed := scanString(b, v)
	if !closed {
		return false
	}
	n := nextMember(b, end)
	if n < 0 || n >= len(b) || b[n] != '"' {
		return false
	}
	_, ok := namesSecret(b, n)
	return ok
}

// keyEnd returns the index after a key's closing quote, for a quote at
// b[i] that opens one: a string closed within maxKeyBytes, on one line.
func keyEnd(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b) && j <= i+maxKeyBytes; j++ {
		switch b[j] {
		case '\\':
			j++
		case '\n':
			return 0, false
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// secretValue returns the end of the value at b[v] of a secret key in
// free text, and whether it is one to redact: a non-empty string (to its
// closing quote, or cut off, to the end; not one a colon follows: that
// is the next key), a number, true or false; an
// object or array to its closing bracket (and what sticks to it, as in
// "{SSHA}hash"), or, cut off, to the end; and anything else, up to its
// own end (valueEnd), only if it is shaped like a credential ("hunter2",
// not "must" or "{missing") or may have been cut (cutAt). null is kept.
// With esc, the JSON is stringified: its quotes are \" and an unescaped
// quote ends it. budget is what is left of scanBudget.
func secretValue(b []byte, v int, esc, cut bool, budget *int) (end int, redact bool) {
	if v >= len(b) {
		return v, false
	}
	if q := quoteLen(b, v, esc); q > 0 {
		end, closed := stringEnd(b, v, esc)
		if c := skipSpace(b, end); closed && c < len(b) && b[c] == ':' {
			return v, false // the next key: this one has no value
		}
		return end, end-v > q && !(closed && end-v == 2*q)
	}
	if b[v] == '{' || b[v] == '[' {
		if m, ok := matchBracket(b, v, esc, budget); ok {
			return valueEnd(b, m), true
		}
		if jsonShaped(b, v, esc) {
			return jsonEnd(b, v, esc), true
		}
	}
	end = valueEnd(b, v)
	switch tok := string(b[v:end]); {
	case tok == "":
		return v, false
	case tok == "null":
		return end, false
	case tok == "true" || tok == "false" || tok[0] >= '0' && tok[0] <= '9' || len(tok) > 1 && tok[0] == '-' && tok[1] >= '0' && tok[1] <= '9':
		return end, true
	}
	return end, cutAt(b, end, cut) || looksLikeCredential(bytes.TrimLeft(b[v:end], "{['"), math.MaxInt)
}

// quoteLen is the length of the quote at b[i]: 1 for ", or 2 for \" in
// stringified JSON (esc); 0 for none.
func quoteLen(b []byte, i int, esc bool) int {
	switch {
	case !esc && i < len(b) && b[i] == '"':
		return 1
	case esc && i+1 < len(b) && b[i] == '\\' && b[i+1] == '"':
		return 2
	}
	return 0
}

// stringEnd returns the index after the string whose quote (quoteLen) is
// at b[i] and whether it closed; cut off, its end is the end of b or,
// stringified (esc), the unescaped quote that ends the JSON.
func stringEnd(b []byte, i int, esc bool) (int, bool) {
	if !esc {
		return scanString(b, i)
	}
	for j := i + 2; j < len(b); j++ {
		switch {
		case b[j] == '"':
			return j, false
		case b[j] != '\\' || j+1 == len(b):
		case b[j+1] == '"':
			return j + 2, true
		case b[j+1] == '\\' && j+2 < len(b) && b[j+2] == '\\':
			j += 3 // \\\" or \\\\: an escape of the string itself
		default:
			j++
		}
	}
	return len(b), false
}

// matchBracket returns the index after the bracket that closes the one
// at b[i], if one does within budget bytes, and takes those it looked
// through from budget; strings are skipped.
func matchBracket(b []byte, i int, esc bool, budget *int) (int, bool) {
	lim := min(len(b), i+max(*budget, 0))
	depth, j, ok := 0, i, false
loop:
	for ; j < lim; j++ {
		if quoteLen(b, j, esc) > 0 {
			end, closed := stringEnd(b, j, esc)
			if j = end - 1; !closed {
				break
			}
			continue
		}
		switch b[j] {
		case '"':
			break loop // esc: the stringified JSON ends
		case '\\':
			j++
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				ok = true
				break loop
			}
		}
	}
	*budget -= j + 1 - i
	return j + 1, ok
}

// jsonShaped reports whether the bracket at b[i] opens JSON, which the
// text was cut in: a member, an element or the close follows it (or
// nothing), not prose such as "{missing field".
func jsonShaped(b []byte, i int, esc bool) bool {
	j := skipSpace(b, i+1)
	if j >= len(b) || quoteLen(b, j, esc) > 0 {
		return true
	}
	if b[i] == '{' {
		return b[j] == '}'
	}
	return strings.IndexByte("[{]-0123456789", b[j]) >= 0
}

// jsonEnd is where JSON cut off at b[i] ends: the end of the text, or,
// stringified (esc), the unescaped quote that ends the JSON.
func jsonEnd(b []byte, i int, esc bool) int {
	for j := i; esc && j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return len(b)
}

// secretParts are substrings of a normalized key (lower case, separators
// removed) that make it secret.
var secretParts = []string{"token", "secret", "passw", "passphrase", "apikey", "authorization",
	"cookie", "credential", "privatekey", "accesskey", "sessionkey", "signingkey", "clientkey",
	"jwt", "bearer"}

// secretWords are whole words of a key that make it secret: "api_key",
// "primaryKey", "auth" and "db_pwd" are, "monkey" and "author" are not.
var secretWords = map[string]bool{"key": true, "auth": true, "pass": true, "pwd": true}

// plainKeys are words that, before "key", say it names no secret: a key
// of a table, an index, a map or a store ("primary_key", "sortKey").
var plainKeys = map[string]bool{"primary": true, "foreign": true, "sort": true, "partition": true,
	"range": true, "hash": true, "cluster": true, "clustering": true, "unique": true, "composite": true,
	"index": true, "lookup": true, "cache": true, "row": true, "object": true, "routing": true,
	"idempotency": true, "public": true}

// isSecretKey reports whether a key names something secret. It errs on
// the side of redacting, except for MCP's own progressToken and token
// counts (maxTokens), which are not secrets and help when reading a hang.
func isSecretKey(key string) bool { return secretKey(key, false) }

// isSecretName is isSecretKey for a name in free text (name=value, a
// quoted "name": value), where "key" is as often a table's or a map's:
// a name secret only for a "key" that plainKeys qualifies is not.
func isSecretName(name string) bool { return secretKey(name, true) }

func secretKey(key string, text bool) bool {
	words := splitWords(key)
	norm := strings.Join(words, "")
	if norm == "" || norm == "progresstoken" || strings.HasSuffix(norm, "tokens") {
		return false
	}
	for _, p := range secretParts {
		if strings.Contains(norm, p) {
			return true
		}
	}
	for i, w := range words {
		if secretWords[w] && !(text && w == "key" && i > 0 && plainKeys[words[i-1]]) {
			return true
		}
	}
	return isSignature(words)
}

// isSignature reports whether a key's words name a signature, the
// credential of a presigned URL: "sig" (Azure's SAS) as the whole key,
// or "signature" as its last word ("X-Amz-Signature", "Signature",
// "webhookSignature"); not "signed", "sigma", "SignatureVersion" or
// "signatureHelp".
func isSignature(words []string) bool {
	return len(words) == 1 && words[0] == "sig" || len(words) > 0 && words[len(words)-1] == "signature"
}

// splitWords splits a key into lower-case words at separators and at
// camelCase boundaries: "X-API-Key" and "xApiKey" give x, api, key.
func splitWords(s string) []string {
	if ascii, simple := isSimpleKey(s); simple {
		return []string{ascii}
	}
	var words []string
	var cur []rune
	rs := []rune(s)
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	for i, r := range rs {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
			continue
		case unicode.IsUpper(r) && i > 0:
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

// isSimpleKey reports whether s is one lower-case ASCII word (most JSON
// keys: "id", "method", "params"), the case splitWords need not split.
func isSimpleKey(s string) (string, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return "", false
		}
	}
	return s, true
}

// RedactArgs returns a copy of a command line with secret-looking flag
// values ("--token X", "--api-key=X"), environment assignments
// ("API_KEY=X"), bearer credentials, the user information of URLs
// ("postgres://app:pw@db") and the values of secret headers
// ("--header 'Authorization: token X'", see redactHeader) and the values
// of secret keys in JSON an argument holds ("--config '{"apiKey": X}'")
// replaced.
// Arguments can carry expanded ${VAR} values from the config, which must
// not reach the database.
func RedactArgs(argv []string) []string {
	out := make([]string, len(argv))
	copy(out, argv)
	for i := 1; i < len(out); i++ {
		a := out[i]
		if strings.HasPrefix(a, "-") {
			name := strings.TrimLeft(a, "-")
			if k, v, ok := strings.Cut(name, "="); ok {
				if isSecretKey(k) {
					out[i] = a[:len(a)-len(name)] + k + "=" + Redacted
				} else if h, ok := redactHeader(v); ok && isHeaderFlag(k) {
					out[i] = a[:len(a)-len(v)] + h
				} else {
					out[i] = string(redactInString([]byte(a), false))
				}
				continue
			}
			if i+1 == len(out) || strings.HasPrefix(out[i+1], "-") {
				continue
			}
			if isSecretKey(name) {
				out[i+1] = Redacted
				i++
			} else if h, ok := redactHeader(out[i+1]); ok && isHeaderFlag(name) {
				out[i+1] = h
				i++
			}
			continue
		}
		out[i] = string(redactInString([]byte(a), false))
	}
	for i := 1; i < len(out); i++ {
		out[i] = redactArgJSON(out[i])
	}
	return out
}

// redactArgJSON is a with the values of secret keys in the JSON it holds
// redacted, as RedactText has them: an object given whole as an argument
// (Smithery's --config '{"apiKey": ...}', an --env '{"API_KEY": ...}'),
// or as a flag's value (--config={...}).
func redactArgJSON(a string) string {
	if !strings.ContainsAny(a, "{[") {
		return a
	}
	return string(redactTextJSON([]byte(a), false))
}

// isHeaderFlag reports whether a flag's value is an HTTP header: curl's
// -H, mcp-remote's --header.
func isHeaderFlag(name string) bool { return name == "header" || name == "H" }

// redactHeader returns an HTTP header ("Name: value") with the value of
// a secret-looking one (isSecretKey: Authorization, Cookie, X-API-Key,
// ...) replaced; an Authorization header keeps its scheme ("Bearer
// [REDACTED]", "token [REDACTED]"). ok is false for h that is no secret
// header.
func redactHeader(h string) (string, bool) {
	name, _, found := strings.Cut(h, ":")
	if !found || name == "" || strings.ContainsAny(name, " \t") || !isSecretKey(name) {
		return h, false
	}
	v := skipBlanks(h, len(name)+1)
	if strings.Contains(strings.ToLower(name), "authorization") {
		s := v
		for s < len(h) && isNameByte(h[s]) {
			s++
		}
		if s > v && s < len(h) && h[s] == ' ' {
			if c := skipBlanks(h, s); c < len(h) {
				v = c
			}
		}
	}
	if v == len(h) {
		return h, true
	}
	return h[:v] + Redacted, true
}

// skipBlanks returns the index of the first byte of s from i on that is
// no space or tab.
func skipBlanks(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// RedactText redacts free text (a child's error message or stderr line,
// a root's URI): the values of secret keys in JSON it quotes, plain or
// stringified (escaped quotes), bearer and basic credentials, the values
// of secret name=value pairs, the user information of URLs
// (https://user:password@host) and providers' tokens standing alone
// (ghp_..., xoxb-..., AKIA..., sk-...). The "value" of a quoted JSON
// object goes when the member just before or after it is a "name" or
// "key" naming a secret. Unlike Redact it reads prose, which names
// secrets without holding them, and keeps the rest of each sentence: a
// secret key's value goes only when it is one ("password": "x", 12,
// {...}, or a token shaped like a credential, not "password": must be
// ...), a name=value pair's value up to its own end, and what follows
// Bearer or Basic only when shaped like a credential. It is what the
// history does to every error text it keeps, before cutting it, and what
// the live views (status, the dashboard) do to the error texts and
// stderr lines they show, whole.
func RedactText(s string) string { return redactText(s, false) }

// redactText is RedactText for s, which is the prefix of a longer text
// if cut: a token at its end may be part of a credential.
func redactText(s string, cut bool) string {
	if s == "" {
		return s
	}
	return string(redactInString(redactTextJSON([]byte(s), cut), cut))
}

// mayHoldToken reports whether s holds a tokenShapes prefix.
func mayHoldToken(s string) bool {
	for _, t := range tokenShapes {
		if strings.Contains(s, t.prefix) {
			return true
		}
	}
	return false
}

// RedactName is a request's name as the history keeps it: redacted
// (redactName) and cut to 1 KiB. The live views (status, hangs, the
// dashboard) show it so too, never more than the history holds.
func RedactName(n string) string { return cut(redactName(n), maxNameBytes, len(n)) }

// RedactRoot is one root's URI as the history keeps it: redacted (it may
// carry a password or a token) and cut to maxRootBytes. The live views
// show it so too.
func RedactRoot(r string) string { return redactedCut(r, maxRootBytes) }

// redactName is what the history keeps of a request's name (a tool's, a
// prompt's, or a resource's URI, which may carry a password or a token):
// its first maxNameBytes redacted as a root's are (RedactText), to be cut
// to maxNameBytes by the caller. A name with none of the characters
// RedactText needs to find something (most names: a tool's) is kept as
// it is, without its cost.
func redactName(n string) string {
	if !strings.ContainsAny(n, "=@\" \t\n\f\r") && !mayHoldToken(n) {
		return n
	}
	return redactText(prefix(n, maxNameBytes), len(n) > maxNameBytes)
}
