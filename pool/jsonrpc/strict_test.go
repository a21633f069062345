package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func TestStrict(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		ok        bool
	}{
		{"plain request", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"Name":1,"name":2},"_meta":{"progressToken":"t"}}}`, true},
		{"escaped but exact key", `{"jsonrpc":"2.0","\u0069d":1,"method":"ping"}`, true},
		{"unknown keys pass", `{"jsonrpc":"2.0","id":1,"method":"ping","x-trace":"1"}`, true},
		{"case-folded ID", `{"jsonrpc":"2.0","method":"notifications/x","ID":7}`, false},
		{"case-folded Method", `{"jsonrpc":"2.0","method":"notifications/x","Method":"notifications/cancelled"}`, false},
		{"long s fold", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","nam\u017fe":"b"}}`, true},
		{"long s in params key", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progre\u017fsToken":9}}}`, false},
		{"kelvin in params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressTo\u212aen":9}}}`, false},
		{"trailing NUL", `{"jsonrpc":"2.0","method":"notifications/x","id\u0000":7}`, false},
		{"duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, false},
		{"duplicate _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{},"_meta":{"progressToken":5}}}`, false},
		{"duplicate progressToken", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1,"progressToken":5}}}`, false},
		{"duplicate name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ro","name":"delete"}}`, false},
		{"case-folded task", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","Task":{"ttl":1}}}`, false},
		{"duplicate unknown params key", `{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1,"a":2}}`, false},
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\"}}", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.msg))
			if err == nil {
				err = Strict(&m)
			}
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && (err == nil || !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrParse)) {
				t.Fatalf("accepted (err %v)", err)
			}
		})
	}
}

// goView is what a Go child decoding with encoding/json (case-insensitive
// keys, last duplicate wins) sees of a message.
type goView struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name string `json:"name"`
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	} `json:"params"`
}

// FuzzStrict: whatever the pool accepts from a client, a Go child
// decodes to the same id, method, tool name and progress token as the
// pool read; and a JavaScript-like exact-key decode agrees too.
func FuzzStrict(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"t"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/x","ID":7}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressTo\u212aen":9}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"m","params":{"name":"n","name":"m"}}`,
		`{"jsonrpc":"2.0","Id":1,"method":"m"}`,
		`{"jsonrpc":"2.0","params":{"a":1,"a":2},"method":"m","ID":1}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"n":1,"n":2},"params":{"_meta":{"PROGRESSTOKEN":1}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":7,"_meta":{"progresstoken":1}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseStrict(b)
		walked, werr := Parse(b)
		if fmt.Sprint(err) != fmt.Sprint(werr) || err == nil && (m.Meta != walked.Meta || m.Task != walked.Task || m.Params != walked.Params) {
			t.Fatalf("ParseStrict(%q) = %+v, %v; Parse %+v, %v", b, m, err, walked, werr)
		}
		if err != nil {
			return
		}
		// What ParseStrict found on its pass is what walking the keys again
		// finds.
		if got, want := Strict(&m), Strict(&walked); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Strict(%q) = %v from ParseStrict's findings, %v walking the keys", b, got, want)
		}
		if Strict(&m) != nil {
			return
		}
		var g goView
		if err := json.Unmarshal(b, &g); err != nil {
			return // not the child's problem to solve: it refuses too
		}
		if m.ID.Present() && !jsonEqual(g.ID, m.IDBytes()) || !m.ID.Present() && g.ID != nil && string(g.ID) != "null" {
			t.Fatalf("id: pool %q, Go child %q in %q", m.IDBytes(), g.ID, b)
		}
		if g.Method != m.Method {
			t.Fatalf("method: pool %q, Go child %q in %q", m.Method, g.Method, b)
		}
		if !m.Params.Present() || m.Raw[m.Params.Start] != '{' {
			return
		}
		params := m.Params.Of(m.Raw)
		if name, ok := String(params, Member(params, "name")); ok && name != g.Params.Name {
			t.Fatalf("name: pool %q, Go child %q in %q", name, g.Params.Name, b)
		}
		if meta := Member(params, "_meta"); meta.Present() && params[meta.Start] == '{' {
			tok := Member(meta.Of(params), "progressToken")
			if tok.Present() && !jsonEqual(g.Params.Meta.ProgressToken, tok.Of(meta.Of(params))) {
				t.Fatalf("progressToken: pool %q, Go child %q in %q", tok.Of(meta.Of(params)), g.Params.Meta.ProgressToken, b)
			}
		}
		// JavaScript's JSON.parse is exact-key, last duplicate wins.
		var js map[string]json.RawMessage
		if json.Unmarshal(b, &js) == nil && m.ID.Present() && !jsonEqual(js["id"], m.IDBytes()) {
			t.Fatalf("id: pool %q, exact-key decoder %q in %q", m.IDBytes(), js["id"], b)
		}
	})
}

func jsonEqual(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

func BenchmarkParseStrict(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello world, a typical small tool call"},"_meta":{"progressToken":"tok-1"}}}`)
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Parse(line); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse+strict", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m, err := Parse(line)
			if err != nil || Strict(&m) != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parsestrict+strict", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m, err := ParseStrict(line)
			if err != nil || Strict(&m) != nil {
				b.Fatal(err)
			}
		}
	})
}
