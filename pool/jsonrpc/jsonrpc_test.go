package jsonrpc

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		kind   Kind
		id     string
		method string
		err    error
	}{
		{"numeric id", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, KindRequest, `1`, "ping", nil},
		{"string id", `{"jsonrpc":"2.0","id":"1","method":"ping"}`, KindRequest, `"1"`, "ping", nil},
		{"float id kept", `{"jsonrpc":"2.0","id":1.0,"method":"ping"}`, KindRequest, `1.0`, "ping", nil},
		{"exponent id kept", `{"jsonrpc":"2.0","id":1e0,"method":"ping"}`, KindRequest, `1e0`, "ping", nil},
		{"id last", `{"method":"tools/list","jsonrpc":"2.0","id":"a b"}`, KindRequest, `"a b"`, "tools/list", nil},
		{"white space", " {\t\"jsonrpc\" : \"2.0\" , \"id\" : 7 , \"method\" : \"x\" } ", KindRequest, `7`, "x", nil},
		{"escaped key", `{"jsonrpc":"2.0","\u0069d":5,"method":"ping"}`, KindRequest, `5`, "ping", nil},
		{"escaped method", `{"jsonrpc":"2.0","id":5,"method":"pi\u006eg"}`, KindRequest, `5`, "ping", nil},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, KindNotification, ``, "notifications/initialized", nil},
		{"result", `{"jsonrpc":"2.0","id":3,"result":{}}`, KindResponse, `3`, "", nil},
		{"error", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`, KindResponse, `null`, "", nil},
		{"not json", `{"jsonrpc":"2.0","id":1,"method":`, KindInvalid, ``, "", ErrParse},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"x"} x`, KindInvalid, ``, "", ErrParse},
		{"bad escape", `{"jsonrpc":"2.0","id":"\x","method":"x"}`, KindInvalid, ``, "", ErrParse},
		{"control char", "{\"jsonrpc\":\"2.0\",\"id\":\"a\x01\",\"method\":\"x\"}", KindInvalid, ``, "", ErrParse},
		{"leading zero", `{"jsonrpc":"2.0","id":01,"method":"x"}`, KindInvalid, ``, "", ErrParse},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"x"}]`, KindInvalid, ``, "", ErrInvalid},
		{"not object", `42`, KindInvalid, ``, "", ErrInvalid},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"x"}`, KindInvalid, ``, "", ErrInvalid},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"x"}`, KindInvalid, ``, "", ErrInvalid},
		{"null id request", `{"jsonrpc":"2.0","id":null,"method":"x"}`, KindInvalid, ``, "", ErrInvalid},
		{"number method", `{"jsonrpc":"2.0","id":1,"method":1}`, KindInvalid, ``, "", ErrInvalid},
		{"string params", `{"jsonrpc":"2.0","id":1,"method":"x","params":"p"}`, KindInvalid, ``, "", ErrInvalid},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":1,"error":{}}`, KindInvalid, ``, "", ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(tt.in))
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind != tt.kind || string(m.IDBytes()) != tt.id || m.Method != tt.method {
				t.Fatalf("got kind %v id %q method %q", m.Kind, m.IDBytes(), m.Method)
			}
		})
	}
}

// TestParseFindsMeta: Meta is params._meta, whatever comes before it and
// however its key is written, and nothing else: not a _meta nested in
// arguments, not one of a result, not in array params.
func TestParseFindsMeta(t *testing.T) {
	tests := []struct{ name, in, meta string }{
		{"first", `{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":{"a":1},"name":"n"}}`, `{"a":1}`},
		{"after arguments", `{"jsonrpc":"2.0","id":1,"method":"x","params":{"arguments":{"_meta":{"no":1},"t":"}"},"_meta":{"b":"{"}}}`, `{"b":"{"}`},
		{"escaped key", `{"jsonrpc":"2.0","method":"x","params":{"\u005fmeta":{"c":2}}}`, `{"c":2}`},
		{"not an object", `{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":7}}`, `7`},
		{"only nested", `{"jsonrpc":"2.0","id":1,"method":"x","params":{"arguments":{"_meta":{}}}}`, ``},
		{"array params", `{"jsonrpc":"2.0","id":1,"method":"x","params":[{"_meta":{}}]}`, ``},
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"x"}`, ``},
		{"a result", `{"jsonrpc":"2.0","id":1,"result":{"_meta":{}}}`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if got := string(m.Meta.Of(m.Raw)); got != tt.meta {
				t.Fatalf("Meta = %q, want %q", got, tt.meta)
			}
		})
	}
}

// TestParseFindsTask: Task is a request's params.task member, key and
// value, as Parse and ParseStrict find it, however its key is written;
// not one nested in arguments or _meta, nor a notification's.
func TestParseFindsTask(t *testing.T) {
	tests := []struct{ name, in, task string }{
		{"last", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{},"task":{"ttl":60000}}}`, `"task":{"ttl":60000}`},
		{"first, spaced", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{ "task" : {} ,"name":"n"}}`, `"task" : {}`},
		{"escaped key", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"t\u0061sk":{"ttl":1}}}`, `"t\u0061sk":{"ttl":1}`},
		{"only nested", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"task":{}},"_meta":{"task":{}}}}`, ``},
		{"a notification's", `{"jsonrpc":"2.0","method":"x","params":{"task":{}}}`, ``},
		{"array params", `{"jsonrpc":"2.0","id":1,"method":"x","params":[{"task":{}}]}`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for how, parse := range map[string]func([]byte) (Message, error){"Parse": Parse, "ParseStrict": ParseStrict} {
				m, err := parse([]byte(tt.in))
				if err != nil {
					t.Fatal(err)
				}
				if got := string(m.Task.Of(m.Raw)); got != tt.task {
					t.Fatalf("%s: Task = %q, want %q", how, got, tt.task)
				}
			}
		})
	}
}

func TestSpliceRestoresExactID(t *testing.T) {
	for _, id := range []string{`1`, `"1"`, `1.0`, `-0`, `"\u00e9"`, `1e3`} {
		in := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"a":[1,2]}}`
		m, err := Parse([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		rewritten := Splice(nil, m.Raw, m.ID, AppendUint(nil, 42))
		r, err := Parse(rewritten)
		if err != nil || string(r.IDBytes()) != "42" {
			t.Fatalf("rewrite %s: %s %v", id, rewritten, err)
		}
		back := Splice(nil, r.Raw, r.ID, []byte(id))
		if string(back) != in {
			t.Fatalf("round trip of %s: %s", id, back)
		}
	}
}

// A spliced message is one allocation of its size (an answer on its way
// to a client took three appends' worth), and none into a buffer with
// room; either way the bytes are the same.
func TestSpliceAllocatesOnce(t *testing.T) {
	m, err := Parse([]byte(`{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 300) + `"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	id := []byte(`"a client's id"`)
	want := strings.Replace(string(m.Raw), "12345", string(id), 1)
	var got []byte
	if n := testing.AllocsPerRun(100, func() { got = Splice(nil, m.Raw, m.ID, id) }); n != 1 || string(got) != want {
		t.Errorf("into nil: %.0f allocations, %d bytes of %d", n, len(got), len(want))
	}
	dst := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { got = Splice(dst, m.Raw, m.ID, id) }); n != 0 || string(got) != want {
		t.Errorf("into a buffer with room: %.0f allocations, %d bytes of %d", n, len(got), len(want))
	}
}

func TestMember(t *testing.T) {
	obj := []byte(`{"a":1,"_meta":{"progressToken":"t"},"name":"echo"}`)
	meta := Member(obj, "_meta")
	if string(meta.Of(obj)) != `{"progressToken":"t"}` {
		t.Fatalf("_meta: %s", meta.Of(obj))
	}
	if s, ok := String(obj, Member(obj, "name")); !ok || s != "echo" {
		t.Fatalf("name: %q %v", s, ok)
	}
	if Member(obj, "missing").Present() {
		t.Fatal("missing member found")
	}
	// Not an object (an absent _meta is an empty one): nothing, and no
	// error made on the way (every request without _meta asks).
	for _, notObject := range []string{``, ` `, `7`, `[{"a":1}]`, `"{"`} {
		b := []byte(notObject)
		if Member(b, "a").Present() {
			t.Errorf("member of %q found", notObject)
		}
		if n := testing.AllocsPerRun(10, func() { Member(b, "a") }); n != 0 {
			t.Errorf("Member(%q) allocates %v times", notObject, n)
		}
	}
}

// Members finds every member of a name, however its key is written, in
// order; none in what is not an object.
func TestMembers(t *testing.T) {
	obj := []byte(`{"a":1, "b":{"a":2},"\u0061" : [3],"a":"4"}`)
	var got []string
	for _, sp := range Members(obj, "a") {
		got = append(got, string(sp.Of(obj)))
	}
	if strings.Join(got, " ") != `1 [3] "4"` {
		t.Fatalf("members a: %q", got)
	}
	for _, notObject := range []string{``, `7`, `[{"a":1}]`, `"{"`, `{}`} {
		if sp := Members([]byte(notObject), "a"); sp != nil {
			t.Errorf("members of %q: %v", notObject, sp)
		}
	}
}

// ParseUint takes the decimal forms AppendUint writes and nothing else: a
// number past 2^64-1 is no id of the pool's, and must not wrap round to
// one ("18446744073709551673" read as 57 would route a stranger's answer
// to the pool's request 57).
func TestParseUint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true},
		{"42", 42, true},
		{"042", 0, false},
		{"-1", 0, false},
		{`"1"`, 0, false},
		{"1.0", 0, false},
		{"", 0, false},
		{"18446744073709551615", 1<<64 - 1, true},
		{"18446744073709551616", 0, false},
		{"18446744073709551673", 0, false},
		{"19999999999999999999", 0, false},
		{"99999999999999999999", 0, false},
		{"100000000000000000000", 0, false},
		{"10000000000000000000", 1e19, true},
	} {
		if got, ok := ParseUint([]byte(tc.in)); ok != tc.ok || got != tc.want {
			t.Errorf("ParseUint(%q) = %d, %v, want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestErrorResponse(t *testing.T) {
	out := AppendErrorResponse(nil, []byte(`"x"`), &Error{Code: -32003, Message: "died", Data: map[string]any{"retryable": true}})
	var v struct {
		ID    string `json:"id"`
		Error Error  `json:"error"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.ID != "x" || v.Error.Code != -32003 {
		t.Fatalf("%s %v", out, err)
	}
}

// FuzzParse checks the scanner agrees with encoding/json on validity, and
// that an id survives a rewrite round trip byte for byte.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"a\"b","method":"x","params":{"_meta":{"progressToken":1}}}`,
		`{"jsonrpc":"2.0","id":1.5e3,"result":[1,{"a":null}]}`,
		`[1,2]`, `{"a":"\ud83d\ude00"}`, `{`, `"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if Valid(b) != json.Valid(b) {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, Valid(b), json.Valid(b))
		}
		m, err := Parse(b)
		if err == nil && m.Kind != KindResponse && m.Params.Present() && b[m.Params.Start] == '{' {
			params := m.Params.Of(b)
			if got, want := m.Meta.Of(b), Member(params, "_meta").Of(params); string(got) != string(want) {
				t.Fatalf("Meta of %q is %q, params._meta is %q", b, got, want)
			}
		} else if m.Meta.Present() {
			t.Fatalf("Meta of %q is %q, without object params", b, m.Meta.Of(b))
		}
		if err != nil || !m.ID.Present() {
			return
		}
		id := append([]byte(nil), m.IDBytes()...)
		rewritten := Splice(nil, b, m.ID, AppendUint(nil, 7))
		r, err := Parse(rewritten)
		if err != nil {
			t.Fatalf("rewritten message does not parse: %q: %v", rewritten, err)
		}
		back := Splice(nil, r.Raw, r.ID, id)
		if string(back) != string(b) {
			t.Fatalf("round trip changed the message: %q -> %q", b, back)
		}
	})
}

func TestOneLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","method":"m"}`, `{"jsonrpc":"2.0","method":"m"}`},
		{"{\n\"jsonrpc\":\"2.0\",\n\"method\":\"m\"\n}", `{ "jsonrpc":"2.0", "method":"m" }`},
		{"{\r\n\"jsonrpc\":\r\"2.0\",\"method\":\"m\"}\r", `{  "jsonrpc": "2.0","method":"m"} `},
		{`{"jsonrpc":"2.0","method":"m","params":{"a":"x\ny\r"}}`, `{"jsonrpc":"2.0","method":"m","params":{"a":"x\ny\r"}}`}, // escapes stay escapes
	} {
		b := []byte(tc.in)
		if _, err := ParseStrict(b); err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		OneLine(b)
		if string(b) != tc.want {
			t.Errorf("OneLine(%q) = %q, want %q", tc.in, b, tc.want)
		}
	}
}
