package store

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"unicode"
)

// Redacted replaces every secret value the store would otherwise keep.
const Redacted = "[REDACTED]"

// Redact returns a copy of a JSON text with the values of keys that look
// secret (token, secret, password, key, authorization, cookie,
// credential, ...) replaced by "[REDACTED]", whatever their type. It does
// not need the JSON to be complete or valid: captured payloads are
// prefixes cut at any byte, and a value cut off mid-way is redacted too.
//
// Inside string values it also redacts "Bearer ..." credentials,
// "name=value" pairs with a secret-looking name (query strings,
// environment assignments) and the values of secret keys in JSON that was
// stringified into a string (escaped quotes).
func Redact(b []byte) []byte {
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		if b[i] != '"' {
			out = append(out, b[i])
			i++
			continue
		}
		end, closed := scanString(b, i)
		colon := skipSpace(b, end)
		if !closed || colon >= len(b) || b[colon] != ':' {
			out = append(out, redactInString(b[i:end])...)
			i = end
			continue
		}
		// A key and its colon.
		out = append(out, b[i:colon+1]...)
		key := unquote(b[i:end])
		i = colon + 1
		if !isSecretKey(key) {
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
	// bearerRE matches HTTP credentials inside a string.
	bearerRE = regexp.MustCompile(`(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]+`)
	// assignRE matches name=value inside a string (query strings, env).
	assignRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9_.-]*)=([^&\s"\\,;]+)`)
	// escapedKeyRE matches "key": in JSON stringified into a string.
	escapedKeyRE = regexp.MustCompile(`\\"((?:[^"\\]|\\[^"])*)\\"(\s*:\s*)`)
	// userinfoRE matches a URL's user information ("user:password@" or
	// "token@"): all of it may be secret.
	userinfoRE = regexp.MustCompile(`\b([A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#@"\\]+@`)
)

// redactInString redacts credentials inside one JSON string literal
// (quotes included, possibly unterminated).
func redactInString(lit []byte) []byte {
	if len(lit) < 8 {
		return lit
	}
	out := lit
	if containsFold(out, "bearer") || containsFold(out, "basic") {
		out = bearerRE.ReplaceAll(out, []byte("${1}${2}"+Redacted))
	}
	if bytes.IndexByte(out, '=') >= 0 {
		out = assignRE.ReplaceAllFunc(out, func(m []byte) []byte {
			name, _, _ := strings.Cut(string(m), "=")
			if !isSecretKey(name) {
				return m
			}
			return []byte(name + "=" + Redacted)
		})
	}
	if bytes.Contains(out, []byte(`\"`)) {
		out = redactEscaped(out)
	}
	return out
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

// redactEscaped replaces the values of secret keys in stringified JSON:
// \"password\": \"x\" becomes \"password\": \"[REDACTED]\".
func redactEscaped(lit []byte) []byte {
	locs := escapedKeyRE.FindAllSubmatchIndex(lit, -1)
	if locs == nil {
		return lit
	}
	var out []byte
	last := 0
	for _, l := range locs {
		if l[0] < last || !isSecretKey(string(lit[l[2]:l[3]])) {
			continue
		}
		out = append(out, lit[last:l[1]]...)
		v := l[1]
		end := escapedValueEnd(lit, v)
		out = append(out, `\"`+Redacted+`\"`...)
		last = end
	}
	return append(out, lit[last:]...)
}

// escapedValueEnd finds the end of an escaped JSON value starting at i
// inside a string literal: an escaped string \"...\", or anything up to
// the next , } ] or the literal's closing quote.
func escapedValueEnd(lit []byte, i int) int {
	if i+1 < len(lit) && lit[i] == '\\' && lit[i+1] == '"' {
		for j := i + 2; j < len(lit); j++ {
			if lit[j] == '\\' && j+1 < len(lit) {
				if lit[j+1] == '"' {
					return j + 2
				}
				j++
				continue
			}
			if lit[j] == '"' {
				return j // the literal ends: the value was cut off
			}
		}
		return len(lit)
	}
	for j := i; j < len(lit); j++ {
		switch lit[j] {
		case ',', '}', ']', '"':
			return j
		}
	}
	return len(lit)
}

// secretParts are substrings of a normalized key (lower case, separators
// removed) that make it secret.
var secretParts = []string{"token", "secret", "passw", "passphrase", "apikey", "authorization",
	"cookie", "credential", "privatekey", "accesskey", "sessionkey", "signingkey", "clientkey",
	"jwt", "bearer"}

// secretWords are whole words of a key that make it secret: "api_key",
// "primaryKey" and "auth" are, "monkey" and "author" are not.
var secretWords = map[string]bool{"key": true, "auth": true, "pass": true}

// isSecretKey reports whether a key names something secret. It errs on
// the side of redacting, except for MCP's own progressToken and token
// counts (maxTokens), which are not secrets and help when reading a hang.
func isSecretKey(key string) bool {
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
	for _, w := range words {
		if secretWords[w] {
			return true
		}
	}
	return false
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
// ("API_KEY=X") and bearer credentials replaced. Arguments can carry
// expanded ${VAR} values from the config, which must not reach the
// database.
func RedactArgs(argv []string) []string {
	out := make([]string, len(argv))
	copy(out, argv)
	for i := 1; i < len(out); i++ {
		a := out[i]
		if strings.HasPrefix(a, "-") {
			name := strings.TrimLeft(a, "-")
			if k, _, ok := strings.Cut(name, "="); ok {
				if isSecretKey(k) {
					out[i] = a[:len(a)-len(name)] + k + "=" + Redacted
				}
				continue
			}
			if isSecretKey(name) && i+1 < len(out) && !strings.HasPrefix(out[i+1], "-") {
				out[i+1] = Redacted
				i++
			}
			continue
		}
		out[i] = string(redactInString([]byte(a)))
	}
	return out
}

// RedactText redacts free text (a child's error message, a root's URI)
// as Redact does a payload, wherever the text holds what Redact looks
// for: the values of secret keys in JSON it quotes, and, in its JSON
// strings and outside them, bearer credentials, secret name=value pairs
// and secret keys of escaped JSON. It also redacts the user information
// of URLs (https://user:password@host). It is what the history does to
// every error text it keeps, before cutting it, and what the live views
// (status, the dashboard) do to the error texts and stderr lines they
// show, whole.
func RedactText(s string) string {
	if s == "" {
		return s
	}
	b := redactInString(Redact([]byte(s)))
	if bytes.Contains(b, []byte("://")) {
		b = userinfoRE.ReplaceAll(b, []byte("${1}"+Redacted+"@"))
	}
	return string(b)
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
	if !strings.ContainsAny(n, "=@\" \t\n\f\r") {
		return n
	}
	return RedactText(prefix(n, maxNameBytes))
}
