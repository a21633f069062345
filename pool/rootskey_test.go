package pool

import (
	"fmt"
	"slices"
	"testing"
)

// Different sets of roots name different partitions, whatever bytes their
// URIs hold: a key that only joined them with a separator let one URI
// holding it name another session's partition (and reach its child).
func TestRootsKeyTellsEverySetApart(t *testing.T) {
	sets := [][]string{
		nil,
		{""},
		{"", ""},
		{"file:///a"},
		{"file:///a", "file:///b"},
		{"file:///a\nfile:///b"},
		{"file:///a\n", "file:///b"},
		{"file:///a", "\nfile:///b"},
		{"9:file:///a"},
		{"file:///a9:", "file:///b"},
		{"10:file:///a", "10:file:///b"},
		{"file:///a\x00file:///b"},
		{"file:///a", "file:///b", "file:///c"},
		{"file:///a\nfile:///b", "file:///c"},
	}
	seen := map[string][]string{}
	for _, roots := range sets {
		k := rootsKey(roots)
		if other, ok := seen[k]; ok {
			t.Errorf("roots %q and %q have one key %q", other, roots, k)
		}
		seen[k] = roots
	}
	if rootsKey(nil) != rootsKey([]string{}) {
		t.Errorf("no roots: key %q for nil, %q for an empty list", rootsKey(nil), rootsKey([]string{}))
	}
}

// A root URI holding a control character is no URI (RFC 3986): the
// pool leaves it out of the session's roots, as it does one with no
// URI, and keeps the others.
func TestParseRootsLeavesOutControlCharacters(t *testing.T) {
	for _, tc := range []struct {
		result  string
		want    []string
		refused int
	}{
		{`{"roots":[{"uri":"file:///a"},{"uri":"file:///b"}]}`, []string{"file:///a", "file:///b"}, 0},
		{`{"roots":[{"uri":"file:///a\nfile:///b","name":"ab"},{"uri":"file:///c","name":"c"}]}`, []string{"file:///c"}, 1},
		{`{"roots":[{"uri":"file:///a\r"},{"uri":"file:///a\t"},{"uri":"file:///a\u0000"},{"uri":"file:///a\u007f"},{"uri":"file:///a\u0085"}]}`, nil, 5},
		{`{"roots":[{"uri":""},{"uri":"file:///my%20folder"},{"uri":"file:///my folder"},{"uri":"file:///caf\u00e9"}]}`, []string{"file:///caf\u00e9", "file:///my folder", "file:///my%20folder"}, 0},
	} {
		got, names, refused := parseRoots([]byte(tc.result))
		if !slices.Equal(got, tc.want) || refused != tc.refused {
			t.Errorf("parseRoots(%s) = %q, %d refused, want %q, %d", tc.result, got, refused, tc.want, tc.refused)
		}
		for u := range names {
			if !slices.Contains(got, u) {
				t.Errorf("parseRoots(%s) names %q, which it left out", tc.result, u)
			}
		}
	}
}

// The key is made on every request of a session in a shared server.
func BenchmarkRootsKey(b *testing.B) {
	roots := make([]string, 4)
	for i := range roots {
		roots[i] = fmt.Sprintf("file:///home/someone/projects/project-%d", i)
	}
	b.ReportAllocs()
	for b.Loop() {
		rootsKey(roots)
	}
}
