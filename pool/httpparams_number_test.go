package pool

import (
	"strings"
	"testing"
)

// A number's Mcp-Param header matches the body's number by its exact
// value: 42.0 is 42, but no two numbers are one because a float64 cannot
// tell them apart.
func TestParamNumbersCompareExactly(t *testing.T) {
	for _, tc := range []struct {
		body, header string
		want         bool
	}{
		{"42", "42", true},
		{"42", "42.0", true},
		{"42", "4.2e1", true},
		{"42", "4200E-2", true},
		{"42", "0.42e+2", true},
		{"-1.5", "-15e-1", true},
		{"0", "-0.0", true},
		{"0", "0e999", true},
		{"0.001", "1e-3", true},
		{"1e-400", "1e-400", true},
		{"1e400", "10e399", true},
		{"9007199254740993", "9007199254740992", false},
		{"1e-400", "0", false},
		{"1e400", "1e401", false},
		{"42", "-42", false},
		{"42", "43", false},
		{"42", "042", false},  // not a JSON number
		{"42", "42.", false},  // not a JSON number
		{"42", "+42", false},  // not a JSON number
		{"42", " 42", false},  // not a JSON number
		{"42", "4.2e", false}, // not a JSON number
		{"42", "", false},
		{"42", "forty-two", false},
		{"1", "1e99999999999", false}, // an exponent beyond 32 bits is refused
		{"1e99999999999", "1e99999999999", false},
	} {
		if got := paramMatches([]byte(tc.body), tc.header); got != tc.want {
			t.Errorf("body %s, header %q: match %v, want %v", tc.body, tc.header, got, tc.want)
		}
	}
	// A long number is compared in time linear in its length.
	long := "1." + strings.Repeat("0", 1<<20) + "1e-2147483648"
	if !paramMatches([]byte(long), long) || paramMatches([]byte(long), "1") {
		t.Error("a long number with the largest exponent was not compared by its value")
	}
}
