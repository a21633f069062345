package store

import "strconv"

// What request_log stores for values a query may filter on (migration
// 0005): an integer wherever the value is one, since SQLite binds and
// keeps an integer for less than a text.

// sessionValue is a session id as stored: the pool's "s<n>" as n, any
// other id as its text.
func sessionValue(s string) any {
	if len(s) > 1 && s[0] == 's' && s[1] != '0' {
		if n, ok := plainInt(s[1:]); ok && n > 0 {
			return n
		}
	}
	return s
}

// idValue is a client's request id (its JSON bytes) as stored: a plain
// JSON integer as the integer, any other (a string, 1.0, 01) as the text.
func idValue(s string) any {
	if n, ok := plainInt(s); ok {
		return n
	}
	return s
}

// plainInt parses s when it is an integer written the one way SQLite
// writes it back (no sign but a minus, no leading zero, at most 18
// digits), so that the stored integer reads back as s.
func plainInt(s string) (int64, bool) {
	digits := s
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 || digits[0] == '0' && len(digits) > 1 || s == "-0" {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
