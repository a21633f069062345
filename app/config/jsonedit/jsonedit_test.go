package jsonedit

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStandardize(t *testing.T) {
	in := "{\n  // line \"comment\", with a comma\n  \"a\": \"not // a comment, \\\" ]\", /* block\n  */ \"b\": [1, 2,],\n}\n"
	got := Standardize([]byte(in))
	if len(got) != len(in) {
		t.Fatalf("length changed: %d -> %d", len(in), len(got))
	}
	var v map[string]any
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatalf("not plain JSON: %v\n%s", err, got)
	}
	want := map[string]any{"a": "not // a comment, \" ]", "b": []any{1.0, 2.0}}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for i := range in {
		if (in[i] == '\n') != (got[i] == '\n') {
			t.Fatalf("newline moved at %d", i)
		}
	}
}

func TestParseSpans(t *testing.T) {
	doc := []byte(`{"a": {"b": [1, "x", null, true]}, "a": 2, "s": "\u00e9\"k"}`)
	v, err := Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(v.Get("a").Raw(doc)); got != "2" {
		t.Errorf("last duplicate should win, got %s", got)
	}
	b := v.Members[0].Value.Get("b")
	if got := string(b.Raw(doc)); got != `[1, "x", null, true]` {
		t.Errorf("b = %s", got)
	}
	kinds := []Kind{}
	for _, e := range b.Elems {
		kinds = append(kinds, e.Kind)
	}
	if !cmp.Equal(kinds, []Kind{Number, String, Null, Bool}) {
		t.Errorf("kinds = %v", kinds)
	}
	if v.Get("missing") != nil || v.Get("s").Get("x") != nil {
		t.Error("Get on a missing key or a non-object should be nil")
	}
	for _, bad := range []string{`{"a" 1}`, `{"a": 1,}`, `[1 2]`, `{"a": tru}`, `"abc`, `{} x`, `{"a": 01}`, "\"a\nb\""} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func TestInsert(t *testing.T) {
	val := []byte(`{"command": "x", "args": ["1"]}`)
	tests := []struct {
		name, in, path, want string
	}{
		{"empty object", `{"mcpServers": {}}`, "mcpServers",
			"{\"mcpServers\": {\n  \"new\": {\n    \"command\": \"x\",\n    \"args\": [\n      \"1\"\n    ]\n  }\n}}"},
		{"indented siblings", "{\n\t\"mcpServers\": {\n\t\t\"a\": {\"command\": \"y\"}\n\t}\n}\n", "mcpServers",
			"{\n\t\"mcpServers\": {\n\t\t\"a\": {\"command\": \"y\"},\n\t\t\"new\": {\n\t\t\t\"command\": \"x\",\n\t\t\t\"args\": [\n\t\t\t\t\"1\"\n\t\t\t]\n\t\t}\n\t}\n}\n"},
		{"compact", `{"mcpServers": {"a": {"command": "y"}}}`, "mcpServers",
			`{"mcpServers": {"a": {"command": "y"}, "new": {"command":"x","args":["1"]}}}`},
		{"jsonc trailing comma and comments", "{\n  \"servers\": {\n    // mine\n    \"a\": {\"command\": \"y\"}, // note, here\n  },\n}\n", "servers",
			"{\n  \"servers\": {\n    // mine\n    \"a\": {\"command\": \"y\"},\n    \"new\": {\n      \"command\": \"x\",\n      \"args\": [\n        \"1\"\n      ]\n    } // note, here\n  },\n}\n"},
		{"empty multi-line object with a comment", "{\n  \"mcpServers\": {\n    // none yet\n  }\n}", "mcpServers",
			"{\n  \"mcpServers\": {\n    \"new\": {\n      \"command\": \"x\",\n      \"args\": [\n        \"1\"\n      ]\n    }\n    // none yet\n  }\n}"},
		{"top level", "{\n  \"other\": 1\n}\n", "",
			"{\n  \"other\": 1,\n  \"new\": {\n    \"command\": \"x\",\n    \"args\": [\n      \"1\"\n    ]\n  }\n}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := []byte(tt.in)
			std := Standardize(doc)
			root, err := Parse(std)
			if err != nil {
				t.Fatal(err)
			}
			obj := root
			if tt.path != "" {
				obj = root.Get(tt.path)
			}
			e, err := Insert(doc, std, obj, "new", val)
			got := wantEdited(t, doc, e, err, tt.want)
			if _, err := Parse(Standardize(got)); err != nil {
				t.Errorf("result does not parse: %v", err)
			}
		})
	}
}

func TestReplace(t *testing.T) {
	doc := []byte("{\n  // keep me\n  \"mcpServers\": {\n    \"a\": {\"command\": \"npx\", \"env\": {\"K\": \"v\"}},\n    \"b\": {\"url\": \"https://x\"}\n  },\n  \"other\": [1,2]\n}\n")
	std := Standardize(doc)
	root, err := Parse(std)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Replace(std, root.Get("mcpServers").Get("a"), ObjectOf(KV{"command", []byte(`"switchboard"`)}, KV{"args", []byte(`["connect","a"]`)}))
	want := "{\n  // keep me\n  \"mcpServers\": {\n    \"a\": {\n      \"command\": \"switchboard\",\n      \"args\": [\n        \"connect\",\n        \"a\"\n      ]\n    },\n    \"b\": {\"url\": \"https://x\"}\n  },\n  \"other\": [1,2]\n}\n"
	wantEdited(t, doc, e, err, want)
	if _, err := Apply(doc, Edit{Start: 5, End: 10}, Edit{Start: 8, End: 12}); err == nil {
		t.Error("overlapping edits were applied")
	}
}

func TestIndentUnit(t *testing.T) {
	for in, want := range map[string]string{
		`{"a": 1}`:                  "  ",
		"{\n    \"a\": 1\n}":        "    ",
		"{\"a\": {\n\t\t\"b\": 1}}": "\t\t",
		"{\n\t\"a\": 1\n}":          "\t",
	} {
		if got := IndentUnit([]byte(in)); got != want {
			t.Errorf("IndentUnit(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBOMAndCRLF(t *testing.T) {
	doc := []byte("\xef\xbb\xbf{\r\n  \"mcpServers\": {\r\n    \"a\": {\"command\": \"y\"}\r\n  }\r\n}\r\n")
	std := Standardize(doc)
	root, err := Parse(std)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Insert(doc, std, root.Get("mcpServers"), "b", []byte(`{"args":["1"]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := Apply(doc, e)
	want := "\xef\xbb\xbf{\r\n  \"mcpServers\": {\r\n    \"a\": {\"command\": \"y\"},\r\n    \"b\": {\r\n      \"args\": [\r\n        \"1\"\r\n      ]\r\n    }\r\n  }\r\n}\r\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestReplaceWith: a value taken from an older copy of a file goes back
// as that copy has it, comments and all, when it sits at the same
// indentation; else it is laid out afresh; line ends follow the file.
func TestReplaceWith(t *testing.T) {
	src := "{\n  \"s\": {\n    \"a\": {\"command\": \"npx\", // why\n      \"args\": [\"x\"]}\n  }\n}\n"
	for _, tt := range []struct{ name, doc, want string }{
		{"same layout", "{\n  \"n\": 2,\n  \"s\": {\n    \"a\": {\"command\": \"sb\"},\n    \"b\": 1\n  }\n}\n",
			"{\n  \"n\": 2,\n  \"s\": {\n    \"a\": {\"command\": \"npx\", // why\n      \"args\": [\"x\"]},\n    \"b\": 1\n  }\n}\n"},
		{"indented otherwise", "{\n    \"s\": {\n        \"a\": {\"command\": \"sb\"}\n    }\n}\n",
			"{\n    \"s\": {\n        \"a\": {\n            \"command\": \"npx\",\n            \"args\": [\n                \"x\"\n            ]\n        }\n    }\n}\n"},
		{"CRLF", "{\r\n  \"s\": {\r\n    \"a\": {\"command\": \"sb\"}\r\n  }\r\n}\r\n",
			"{\r\n  \"s\": {\r\n    \"a\": {\"command\": \"npx\", // why\r\n      \"args\": [\"x\"]}\r\n  }\r\n}\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc, srcDoc := []byte(tt.doc), []byte(src)
			std, srcStd := Standardize(doc), Standardize(srcDoc)
			root, err := Parse(std)
			if err != nil {
				t.Fatal(err)
			}
			from, err := Parse(srcStd)
			if err != nil {
				t.Fatal(err)
			}
			e, err := ReplaceWith(doc, std, root.Get("s").Get("a"), srcDoc, srcStd, from.Get("s").Get("a"))
			wantEdited(t, doc, e, err, tt.want)
		})
	}
}

// wantEdited applies e (made with err) to doc, and reports where the
// result is not want; it returns the result.
func wantEdited(t *testing.T, doc []byte, e Edit, err error, want string) []byte {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Apply(doc, e)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	return got
}
