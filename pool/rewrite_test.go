package pool

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// Client to child: a request gets the pool id and, in place of its
// progress token, the pool id again (unique like the id); a legacy
// client's request to a modern child gets _meta; nothing else changes,
// byte for byte.
func TestRewriteRequest(t *testing.T) {
	const meta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`
	tests := []struct {
		name, in, meta, want, token, about string
	}{
		{name: "id only", in: `{"jsonrpc":"2.0","id":"a","method":"tools/list"}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/list"}`},
		{name: "1, \"1\" and 1.0 all become the pool id", in: `{"jsonrpc":"2.0","id":1.0,"method":"ping"}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"ping"}`},
		{name: "progress token", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"tok"}}}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":10}}}`, token: `"tok"`, about: "x"},
		{name: "a token that looks like a pool token is still the client's", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":10},"name":"x"}}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"_meta":{"progressToken":10},"name":"x"}}`, token: `10`, about: "x"},
		{name: "whitespace kept", in: "{ \"jsonrpc\" : \"2.0\", \"id\" : 7 , \"method\":\"tools/call\",\"params\":{ \"name\": \"x\" } }",
			want: "{ \"jsonrpc\" : \"2.0\", \"id\" : 10 , \"method\":\"tools/call\",\"params\":{ \"name\": \"x\" } }", about: "x"},
		{name: "resource uri named", in: `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"uri":"file:///a"}}`, about: "file:///a"},
		{name: "meta into no params", meta: meta, in: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{"_meta":{` + meta + `}}}`},
		{name: "meta into empty params", meta: meta, in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{"_meta":{` + meta + `}}}`},
		{name: "meta beside params", meta: meta, in: `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"u"}}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"_meta":{` + meta + `},"uri":"u"}}`, about: "u"},
		{name: "meta into an empty _meta", meta: meta, in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{}}}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{"_meta":{` + meta + `}}}`},
		{name: "meta into existing _meta with token", meta: meta,
			in:    `{"id":2,"params":{"_meta":{"progressToken":5},"name":"t"},"jsonrpc":"2.0","method":"tools/call"}`,
			want:  `{"id":10,"params":{"_meta":{` + meta + `,"progressToken":10},"name":"t"},"jsonrpc":"2.0","method":"tools/call"}`,
			token: `5`, about: "t"},
	}
	// A legacy client's own _meta members of the keys the pool sets give
	// way to the pool's, as does a _meta that is not an object: a child
	// takes the last of two keys.
	const pv, cc, ci = `"io.modelcontextprotocol/protocolVersion"`, `"io.modelcontextprotocol/clientCapabilities"`,
		`"io.modelcontextprotocol/clientInfo"`
	full := pv + `:"2026-07-28",` + cc + `:{},` + ci + `:{"name":"c","version":"1"}`
	tests = append(tests, []struct{ name, in, meta, want, token, about string }{
		{name: "the pool's members replace the client's", meta: full,
			in:    `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{` + cc + `:{"elicitation":{"form":{}},"sampling":{}},"progressToken":"p",` + pv + `:"2026-07-28"}}}`,
			want:  `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"t","_meta":{` + full + `,"progressToken":10}}}`,
			token: `"p"`, about: "t"},
		{name: "the client's other members stay, in order", meta: full,
			in:   `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"a":1, ` + ci + ` : {"name":"evil"}, "b":[2,{"c":3}]}}}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{"_meta":{` + full + `,"a":1,"b":[2,{"c":3}]}}}`},
		{name: "a key written with escapes is the same key", meta: full,
			in:   `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol\/clientInfo":{}}}}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{"_meta":{` + full + `}}}`},
		{name: "a member the pool does not set stays the client's", meta: full,
			in:   `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/logLevel":"debug",` + pv + `:"x"}}}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{"_meta":{` + full + `,"io.modelcontextprotocol/logLevel":"debug"}}}`},
		{name: "without meta the client's members are its own", in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{` + pv + `:"x"}}}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{"_meta":{` + pv + `:"x"}}}`},
		{name: "_meta null is replaced", meta: full, in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":null}}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"t","_meta":{` + full + `}}}`, about: "t"},
		{name: "_meta not an object is replaced", meta: meta, in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta" : [1,2] ,"a":"b"}}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{"_meta" : {` + meta + `} ,"a":"b"}}`},
		{name: "_meta a string is replaced", meta: meta, in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":"{}"}}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{"_meta":{` + meta + `}}}`},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := jsonrpc.Parse([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if err := jsonrpc.Strict(&msg); err != nil {
				t.Fatal(err)
			}
			before := string(msg.Raw)
			var m []byte
			if tt.meta != "" {
				m = []byte(tt.meta)
			}
			in := rewriteRequest(&msg, 10, m)
			if string(in.line) != tt.want {
				t.Fatalf("got  %s\nwant %s", in.line, tt.want)
			}
			if !json.Valid(in.line) {
				t.Fatal("invalid JSON")
			}
			if err := duplicateKey(in.line); err != nil {
				t.Fatal(err)
			}
			if string(in.origToken) != tt.token || in.name != tt.about {
				t.Fatalf("token %q name %q", in.origToken, in.name)
			}
			if string(msg.Raw) != before {
				t.Fatal("the client's message was changed")
			}
			// The line and the token share an allocation: appending to the
			// line must not reach the token.
			_ = append(in.line, 'X')
			if string(in.origToken) != tt.token {
				t.Fatalf("the token changed under an append to the line: %q", in.origToken)
			}
		})
	}
}

// Every other rewrite, both ways, on the message it applies to.
func TestRewrites(t *testing.T) {
	info := serverInfoMember(json.RawMessage(`{"name":"fake", "version":"1"}`))
	if string(info) != `"io.modelcontextprotocol/serverInfo":{"name":"fake", "version":"1"}` { // as the child wrote it
		t.Fatalf("serverInfoMember: %s", info)
	}
	parse := func(s string) *jsonrpc.Message {
		t.Helper()
		m, err := jsonrpc.Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return &m
	}
	tests := []struct {
		name, in string
		rewrite  func(*jsonrpc.Message) []byte
		want     string
	}{
		// Client to child.
		{"a notification is re-written from its members",
			`{"params":{"a":1},"method":"notifications/roots/list_changed","jsonrpc":"2.0"}`,
			notificationForChild, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{"a":1}}`},
		{"a notification without params", `{"jsonrpc":"2.0","method":"notifications/x"}`,
			notificationForChild, `{"jsonrpc":"2.0","method":"notifications/x"}`},
		{"a task-augmented request loses its task: the last member",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","task":{"ttl":60000}}}`,
			func(m *jsonrpc.Message) []byte { return withoutTask(m).Raw },
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}`},
		{"a task-augmented request loses its task: the first member, spaced",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{ "task" : {} , "name":"t"}}`,
			func(m *jsonrpc.Message) []byte { return withoutTask(m).Raw },
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{  "name":"t"}}`},
		{"a task-augmented request loses its task: between two, key escaped",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","t\u0061sk":{"ttl":1},"_meta":{"progressToken":1}}}`,
			func(m *jsonrpc.Message) []byte { return withoutTask(m).Raw },
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":1}}}`},
		{"a task-augmented request loses its task: the only member",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"task":{}}}`,
			func(m *jsonrpc.Message) []byte { return withoutTask(m).Raw },
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`},
		{"a request declares no tasks: the extension out, its other members kept",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":1,"io.modelcontextprotocol/clientCapabilities":{"sampling":{},"extensions":{"io.modelcontextprotocol/tasks":{},"x/y":{}}}}}}`,
			func(m *jsonrpc.Message) []byte { return withoutTasksDeclared(m).Raw },
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":1,"io.modelcontextprotocol/clientCapabilities":{"sampling":{},"extensions":{"x/y":{}}}}}}`},
		{"a request declares no tasks: 2025-11-25's member, and a key written twice or escaped, each",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"tasks":{},"extensions":{"io.modelcontextprotocol/t\u0061sks":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`,
			func(m *jsonrpc.Message) []byte { return withoutTasksDeclared(m).Raw },
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{},"extensions":{}}}}}`},
		{"the pool's cancellation names the pool id", ``,
			func(*jsonrpc.Message) []byte { return cancelForChild(42, `client "a" left`) },
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":42,"reason":"client \"a\" left"}}`},
		{"a client's answer goes back under the child's own id", `{"jsonrpc":"2.0","id":77,"result":{"role":"assistant"}}`,
			func(m *jsonrpc.Message) []byte { return answerForChild(m, []byte(`"srv-1"`)) },
			`{"jsonrpc":"2.0","id":"srv-1","result":{"role":"assistant"}}`},

		// Child to client.
		{"a response gets the client's exact id: 1.0", `{"jsonrpc":"2.0","id":90210,"result":{}}`,
			func(m *jsonrpc.Message) []byte { return responseForClient(nil, m, []byte(`1.0`)) },
			`{"jsonrpc":"2.0","id":1.0,"result":{}}`},
		{"a response gets the client's exact id: \"1\"", `{"id":90210,"jsonrpc":"2.0","error":{"code":-1,"message":"x"}}`,
			func(m *jsonrpc.Message) []byte { return responseForClient(nil, m, []byte(`"1"`)) },
			`{"id":"1","jsonrpc":"2.0","error":{"code":-1,"message":"x"}}`},
		{"a modern client of a legacy child: resultType and cache hints", `{"jsonrpc":"2.0","id":5,"result":{"tools":[]}}`,
			func(m *jsonrpc.Message) []byte { return modernResponse(m, "tools/list", []byte(`"c"`), nil) },
			`{"jsonrpc":"2.0","id":"c","result":{"resultType":"complete","ttlMs":0,"cacheScope":"private","tools":[]}}`},
		{"a modern client of a legacy child: an empty result", `{"jsonrpc":"2.0","id":5,"result":{}}`,
			func(m *jsonrpc.Message) []byte { return modernResponse(m, "tools/call", []byte(`1`), nil) },
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}`},
		{"a modern client of a legacy child: -32002 becomes -32602", `{"jsonrpc":"2.0","id":5,"error":{"code":-32002,"message":"nf"}}`,
			func(m *jsonrpc.Message) []byte { return modernResponse(m, "resources/read", []byte(`1`), info) },
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"nf"}}`},
		{"a legacy client of a modern child: a missing resource, named in data, is -32002",
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"Resource not found","data":{"uri":"nope://x"}}}`,
			func(m *jsonrpc.Message) []byte { return legacyResponse(m, "resources/read", []byte(`"r"`)) },
			`{"jsonrpc":"2.0","id":"r","error":{"code":-32002,"message":"Resource not found","data":{"uri":"nope://x"}}}`},
		{"a legacy client of a modern child: a missing resource, said in the message alone, is -32002",
			`{"jsonrpc":"2.0","id":5,"error":{"message":"resource not found: nope://x","code":-32602}}`,
			func(m *jsonrpc.Message) []byte { return legacyResponse(m, "resources/read", []byte(`1`)) },
			`{"jsonrpc":"2.0","id":1,"error":{"message":"resource not found: nope://x","code":-32002}}`},
		{"a legacy client of a modern child: another -32602 of a read stays",
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"Invalid params: uri is required","data":{"field":"uri"}}}`,
			func(m *jsonrpc.Message) []byte { return legacyResponse(m, "resources/read", []byte(`1`)) },
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params: uri is required","data":{"field":"uri"}}}`},
		{"a legacy client of a modern child: a -32602 naming a uri, of another method, stays",
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"Resource not found","data":{"uri":"nope://x"}}}`,
			func(m *jsonrpc.Message) []byte { return legacyResponse(m, "prompts/get", []byte(`1`)) },
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Resource not found","data":{"uri":"nope://x"}}}`},
		{"a legacy client of a modern child: a read's result keeps its bytes",
			`{"jsonrpc":"2.0","id":5,"result":{"resultType":"complete","contents":[]}}`,
			func(m *jsonrpc.Message) []byte { return legacyResponse(m, "resources/read", []byte(`1`)) },
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","contents":[]}}`},
		{"a modern client of a legacy child: serverInfo", `{"jsonrpc":"2.0","id":5,"result":{"tools":[]}}`,
			func(m *jsonrpc.Message) []byte { return modernResponse(m, "tools/list", []byte(`"c"`), info) },
			`{"jsonrpc":"2.0","id":"c","result":{"resultType":"complete","ttlMs":0,"cacheScope":"private","_meta":{` + string(info) + `},"tools":[]}}`},
		{"a modern client of a legacy child: serverInfo in an empty result", `{"jsonrpc":"2.0","id":5,"result":{}}`,
			func(m *jsonrpc.Message) []byte { return modernResponse(m, "tools/call", []byte(`1`), info) },
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","_meta":{` + string(info) + `}}}`},
		{"a modern client of a legacy child: serverInfo alone", `{"jsonrpc":"2.0","id":5,"result":{"resultType":"complete"}}`,
			func(m *jsonrpc.Message) []byte { return modernResponse(m, "tools/call", []byte(`1`), info) },
			`{"jsonrpc":"2.0","id":1,"result":{"_meta":{` + string(info) + `},"resultType":"complete"}}`},
		{"a modern client of a legacy child: serverInfo joins the result's _meta", `{"jsonrpc":"2.0","id":5,"result":{"content":[],"_meta":{"k":1}}}`,
			func(m *jsonrpc.Message) []byte { return modernResponse(m, "tools/call", []byte(`1`), info) },
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[],"_meta":{` + string(info) + `,"k":1}}}`},
		{"a modern client of a legacy child: serverInfo in an empty _meta", `{"jsonrpc":"2.0","id":5,"result":{"_meta":{ }}}`,
			func(m *jsonrpc.Message) []byte { return modernResponse(m, "tools/call", []byte(`1`), info) },
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","_meta":{` + string(info) + ` }}}`},
		{"a modern client of a legacy child: the child's own serverInfo stays", `{"jsonrpc":"2.0","id":5,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"own"}}}}`,
			func(m *jsonrpc.Message) []byte { return modernResponse(m, "tools/call", []byte(`1`), info) },
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"own"}}}}`},
		{"progress gets the client's own token back",
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":17,"progress":1}}`,
			func(m *jsonrpc.Message) []byte {
				tok, at, ok := poolTokenOf(m)
				if !ok || tok != 17 {
					t.Fatalf("pool token %d %v", tok, ok)
				}
				return progressForClient(m, at, []byte(`"tok"`))
			},
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok","progress":1}}`},
		{"a child's request gets a pool id", `{"jsonrpc":"2.0","id":"srv-1","method":"sampling/createMessage","params":{}}`,
			func(m *jsonrpc.Message) []byte { return requestForClient(m, 99) },
			`{"jsonrpc":"2.0","id":99,"method":"sampling/createMessage","params":{}}`},
		{"a child's cancellation names the pool id its client knows",
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"srv-1","reason":"r"}}`,
			func(m *jsonrpc.Message) []byte {
				childID, at := childCancelTarget(m)
				if string(childID) != `"srv-1"` {
					t.Fatalf("target %s", childID)
				}
				return cancelledForClient(m, at, 99)
			},
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99,"reason":"r"}}`},
		{"a change for a listen is tagged with its id",
			`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"u"}}`,
			func(m *jsonrpc.Message) []byte { return tagNotification(m, []byte(`"L1"`)) },
			`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L1"},"uri":"u"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m *jsonrpc.Message
			before := ""
			if tt.in != "" {
				m = parse(tt.in)
				before = string(m.Raw)
			}
			got := tt.rewrite(m)
			if string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Fatal("invalid JSON")
			}
			if m != nil && string(m.Raw) != before {
				t.Fatal("the message was changed")
			}
		})
	}
	// Tokens the pool never gave are not the pool's.
	for _, tok := range []string{`"17"`, `-1`, `1.5`, `null`} {
		m := parse(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + tok + `}}`)
		if _, _, ok := poolTokenOf(m); ok {
			t.Errorf("%s taken for a pool token", tok)
		}
	}
}

// A URL interaction in each revision's form: a legacy child's -32042
// (URLElicitationRequiredError, 2025-11-25) becomes, for a modern
// client, input_required with an elicitation/create in URL mode per
// elicitation, keyed by its elicitationId and without it (2026-07-28);
// an answer 2025-11-25 does not allow stays as it is. A modern child's
// URL elicitation gets an elicitationId for a legacy client.
func TestURLElicitationRewrites(t *testing.T) {
	const (
		e1 = `{"mode":"url","elicitationId":"e1","url":"https://a.example/c?x=1","message":"Connect A."}`
		e2 = `{"message":"Pay.","url":"https://b.example/pay","elicitationId":"e0","mode":"url","task":{"ttl":1}}`
		q1 = `"e1":{"method":"elicitation/create","params":{"mode":"url","message":"Connect A.","url":"https://a.example/c?x=1"}}`
		q2 = `"e0":{"method":"elicitation/create","params":{"mode":"url","message":"Pay.","url":"https://b.example/pay"}}`
	)
	refusal := func(data string) string {
		return `{"jsonrpc":"2.0","id":90210,"error":{"code":-32042,"message":"m","data":` + data + `}}`
	}
	for _, tt := range []struct{ name, in, want string }{ // want "": not rewritten
		{"one elicitation", refusal(`{"elicitations":[` + e1 + `]}`),
			`{"jsonrpc":"2.0","id":"c","result":{"resultType":"input_required","inputRequests":{` + q1 + `}}}`},
		{"two, each under its own id, in their order, with only 2026-07-28's members", refusal(`{"other":1,"elicitations":[` + e1 + `,` + e2 + `]}`),
			`{"jsonrpc":"2.0","id":"c","result":{"resultType":"input_required","inputRequests":{` + q1 + `,` + q2 + `}}}`},
		{"named by the child's serverInfo", refusal(`{"elicitations":[` + e1 + `]}`),
			`{"jsonrpc":"2.0","id":"c","result":{"resultType":"input_required","inputRequests":{` + q1 + `},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fake"}}}}`},
		{"the child's strings as it wrote them", refusal(`{"elicitations":[{"mode":"url","elicitationId":"e\u0031<&>","url":"https://a.example/?a=<1>&b","message":"caf\u00e9 <b>"}]}`),
			`{"jsonrpc":"2.0","id":"c","result":{"resultType":"input_required","inputRequests":{"e\u0031<&>":{"method":"elicitation/create","params":{"mode":"url","message":"caf\u00e9 <b>","url":"https://a.example/?a=<1>&b"}}}}}`},
		{"no message: an empty one", refusal(`{"elicitations":[{"mode":"url","elicitationId":"e","url":"u"}]}`),
			`{"jsonrpc":"2.0","id":"c","result":{"resultType":"input_required","inputRequests":{"e":{"method":"elicitation/create","params":{"mode":"url","message":"","url":"u"}}}}}`},
		{"a message that is not a string", refusal(`{"elicitations":[{"mode":"url","elicitationId":"e","url":"u","message":7}]}`), ""},
		{"an element that is not an object", refusal(`{"elicitations":[` + e1 + `,7]}`), ""},
		{"another error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"m","data":{"elicitations":[` + e1 + `]}}}`, ""},
		{"a result", `{"jsonrpc":"2.0","id":1,"result":{"elicitations":[` + e1 + `]}}`, ""},
		{"no data", `{"jsonrpc":"2.0","id":1,"error":{"code":-32042,"message":"m"}}`, ""},
		{"no elicitations", refusal(`{"elicitations":[]}`), ""},
		{"elicitations not a list", refusal(`{"elicitations":{"mode":"url"}}`), ""},
		{"a form-mode elicitation", refusal(`{"elicitations":[` + e1 + `,{"mode":"form","elicitationId":"f","message":"m"}]}`), ""},
		{"no elicitationId", refusal(`{"elicitations":[{"mode":"url","url":"https://a.example","message":"m"}]}`), ""},
		{"one elicitationId twice", refusal(`{"elicitations":[` + e1 + `,` + e1 + `]}`), ""},
		{"no url", refusal(`{"elicitations":[{"mode":"url","elicitationId":"e","message":"m"}]}`), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := jsonrpc.Parse([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			var info []byte
			if strings.Contains(tt.name, "serverInfo") {
				info = serverInfoMember(json.RawMessage(`{"name":"fake"}`))
			}
			got, ok := urlElicitationResponse(&msg, []byte(`"c"`), info)
			switch {
			case tt.want == "" && (ok || got != nil):
				t.Fatalf("rewritten: %s", got)
			case tt.want != "" && (!ok || string(got) != tt.want):
				t.Fatalf("got  %s (%v)\nwant %s", got, ok, tt.want)
			case ok && !json.Valid(got):
				t.Fatal("invalid JSON")
			case string(msg.Raw) != tt.in:
				t.Fatal("the message was changed")
			}
		})
	}

	for _, tt := range []struct{ name, in, want string }{
		{"URL mode gets the id, first", `{"mode":"url","message":"m","url":"https://a.example"}`,
			`{"elicitationId":"77","mode":"url","message":"m","url":"https://a.example"}`},
		{"the child's members stay as written", `{ "url":"https://a.example/?a=<1>&b" ,"mode":"url","message":"\u00e9","n":1E400}`,
			`{"elicitationId":"77", "url":"https://a.example/?a=<1>&b" ,"mode":"url","message":"\u00e9","n":1E400}`},
		{"an id of its own is kept", `{"mode":"url","elicitationId":"x","message":"m","url":"u"}`, ""},
		{"form mode", `{"mode":"form","message":"m","requestedSchema":{"type":"object","properties":{}}}`, ""},
		{"no mode: form", `{"message":"m","requestedSchema":{"type":"object","properties":{}}}`, ""},
		{"no params", ``, ""},
	} {
		got := urlQuestionForLegacy(json.RawMessage(tt.in), "77")
		if want := cmp.Or(tt.want, tt.in); string(got) != want {
			t.Errorf("%s: got %s, want %s", tt.name, got, want)
		}
	}
}

// The hot-path rewrites allocate only what they return: the request's
// line (which carries the client's token in the same allocation) and its
// name; the response's line into a buffer the caller reuses, nothing.
func TestHotPathRewritesAllocate(t *testing.T) {
	msg, err := jsonrpc.Parse(benchRequest)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { rewriteRequest(&msg, 12345, nil) }); n > 2 {
		t.Errorf("rewriteRequest: %.0f allocations, want at most 2 (the line, the name)", n)
	}
	// For a modern child, whose _meta members the client's does not name:
	// the members with their comma, no more.
	meta := []byte(`"io.modelcontextprotocol/protocolVersion":"2026-07-28"`)
	if n := testing.AllocsPerRun(100, func() { rewriteRequest(&msg, 12345, meta) }); n > 3 {
		t.Errorf("rewriteRequest with meta: %.0f allocations, want at most 3", n)
	}
	resp, err := jsonrpc.Parse(benchResponse)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { dst = responseForClient(dst[:0], &resp, []byte(`"17"`)) }); n != 0 {
		t.Errorf("responseForClient into a buffer with room: %.0f allocations", n)
	}
	info := serverInfoMember(json.RawMessage(`{"name":"fake","version":"1"}`))
	if n := testing.AllocsPerRun(100, func() { modernResponse(&resp, "tools/call", []byte(`"17"`), info) }); n > 1 {
		t.Errorf("modernResponse: %.0f allocations, want at most 1 (the answer)", n)
	}
}

func TestLineReader(t *testing.T) {
	in := "a\n\n  \r\nbb\r\n" + strings.Repeat("x", 100) + "\n" + `{"id":7,` + strings.Repeat("y", 100) + "\nlast"
	lr := newLineReader(strings.NewReader(in), 50)
	var got []string
	var tooLong *tooLongError
	for {
		line, err := lr.next()
		if err == io.EOF {
			break
		}
		if e, ok := err.(*tooLongError); ok {
			got = append(got, "TOO LONG")
			tooLong = e
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(line))
	}
	want := []string{"a", "bb", "TOO LONG", "TOO LONG", "last"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q", got)
	}
	if id, ok := findClientID(tooLong.head); !ok || string(id) != "7" {
		t.Fatalf("id from an oversize head: %q %v", id, ok)
	}
}

func TestRing(t *testing.T) {
	r := newRing(3)
	if len(r.tail(5)) != 0 {
		t.Fatal("empty ring has lines")
	}
	for _, l := range []string{"1", "2", "3", "4"} {
		r.add(l)
	}
	if got := strings.Join(r.tail(5), ","); got != "2,3,4" {
		t.Fatalf("tail = %s", got)
	}
	if got := strings.Join(r.tail(2), ","); got != "3,4" {
		t.Fatalf("tail(2) = %s", got)
	}
}

// The pool id of an oversize answer is read from the message's own
// top-level "id", at its head or as its last member, never from an "id"
// inside its result, which may be another request's pool id (the first
// edition took the first "id":N it saw).
func TestOversizePoolID(t *testing.T) {
	for _, tc := range []struct {
		name, head, tail string
		want             uint64
		ok               bool
	}{
		{"id first", `{"jsonrpc":"2.0","id": 9,"result":{"content":[`, `xx"}]}}`, 9, true},
		{"id last", `{"result":{"content":[{"type":"text","text":"`, `xxx"}]},"jsonrpc":"2.0","id":123}` + "\n", 123, true},
		{"nested id at the head", `{"result":{"items":[{"id":7,"name":"a"},`, `xxx"}]}}`, 0, false},
		{"nested id at the head, real id last", `{"result":{"items":[{"id":7},`, `]},"id":41}`, 41, true},
		{"nested id closing the tail", `{"jsonrpc":"2.0","result":{"x":"`, `"},"item":{"id":5}}`, 0, false},
		{"id inside a string", `{"result":{"text":"say \"id\":3 here`, `and \"id\":4}"}}`, 0, false},
		{"string id", `{"jsonrpc":"2.0","id":"x","result":`, `}}`, 0, false},
		{"id cut off by the head's end", `{"jsonrpc":"2.0","id":12`, `}}`, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := headPoolID([]byte(tc.head))
			if !ok {
				got, ok = tailPoolID([]byte(tc.tail))
			}
			if ok != tc.ok || got != tc.want {
				t.Errorf("head %s tail %s: %d %v, want %d %v", tc.head, tc.tail, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestHandshakeResults(t *testing.T) {
	legacy, err := parseInitialize([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"},"instructions":"hi"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
		Instructions    string `json:"instructions"`
	}
	_ = json.Unmarshal(legacy.initializeResult("2025-11-25", false), &init)
	if init.ProtocolVersion != "2025-06-18" || init.Instructions != "hi" {
		t.Fatalf("legacy initialize result: %+v", init)
	}
	for requested, want := range map[string]string{"2025-03-26": "2024-11-05", "2024-11-05": "2024-11-05",
		"2025-06-18": "2025-06-18", "2099-01-01": "2025-06-18", "": "2025-06-18"} {
		init.ProtocolVersion = ""
		_ = json.Unmarshal(legacy.initializeResult(requested, false), &init)
		if init.ProtocolVersion != want {
			t.Errorf("client asks %q of a 2025-06-18 child: answered %q, want %q", requested, init.ProtocolVersion, want)
		}
	}
	if !bytes.Contains(legacy.discoverResult(false), []byte(`"supportedVersions":["2026-07-28","2025-06-18","2024-11-05"]`)) {
		t.Fatalf("discover from a legacy child: %s", legacy.discoverResult(false))
	}
	modern, err := parseDiscover([]byte(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2027-01-01","2026-07-28"],"capabilities":{},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"2"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	// The pool speaks 2026-07-28 to the child and refuses any other
	// revision per request (-32022): a newer one the child also speaks is
	// not the pool's to offer.
	if !bytes.Contains(modern.discoverResult(false), []byte(`"supportedVersions":["2026-07-28","2025-11-25",`)) {
		t.Fatalf("discover from a modern child that speaks a newer revision too: %s", modern.discoverResult(false))
	}
	_ = json.Unmarshal(modern.initializeResult("2025-06-18", false), &init)
	if init.ProtocolVersion != "2025-06-18" || !bytes.Contains(modern.initializeResult("x", false), []byte(`"name":"m"`)) {
		t.Fatalf("legacy view of a modern child: %s", modern.initializeResult("2025-06-18", false))
	}
	if _, err := parseDiscover([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`)); err == nil {
		t.Fatal("an error answer to server/discover must mean legacy")
	}

	// Tasks are offered only to a session whose child is its own: 2025-11-25's
	// capability, and 2026-07-28's extension, other extensions staying.
	tasks, err := parseInitialize([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"list":{}},"extensions":{"io.modelcontextprotocol/tasks":{},"x/y":{}}},"serverInfo":{"name":"s"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range [][]byte{tasks.initializeResult("2025-11-25", false), tasks.discoverResult(false)} {
		if bytes.Contains(res, []byte(`"tasks"`)) || bytes.Contains(res, []byte(`io.modelcontextprotocol/tasks`)) || !bytes.Contains(res, []byte(`"extensions":{"x/y":{}}`)) {
			t.Errorf("a shared child's tasks offered: %s", res)
		}
	}
	for _, res := range [][]byte{tasks.initializeResult("2025-11-25", true), tasks.discoverResult(true)} {
		if !bytes.Contains(res, []byte(`"tasks":{"list":{}}`)) || !bytes.Contains(res, []byte(`io.modelcontextprotocol/tasks`)) {
			t.Errorf("a session's own child's tasks not offered: %s", res)
		}
	}
}

// A session that once sent a huge message does not keep a buffer of its
// size: the next read starts from a small one (8 sessions x 60 MB held
// the pool at 1 GB on the first edition).
func TestLineReaderShrinksAfterALargeLine(t *testing.T) {
	big := strings.Repeat("x", 8<<20)
	lr := newLineReader(strings.NewReader(big+"\nsmall\n"), 64<<20)
	line, err := lr.next()
	if err != nil || len(line) != len(big) {
		t.Fatalf("big line: %d bytes, %v", len(line), err)
	}
	if line, err = lr.next(); err != nil || string(line) != "small" {
		t.Fatalf("small line: %q, %v", line, err)
	}
	if c := cap(lr.buf); c != readBuf {
		t.Fatalf("the reader kept a %d-byte buffer after a small line", c)
	}
}

// Nor does it when what follows the huge message is the start of a
// line of more than half the small buffer: that start is moved to a
// buffer of its size. A client that sent a 64 MiB message and then 40 KiB
// of the next, and nothing more, held 128 MiB of the pool's for as long
// as its session lasted, counted by no bound (neither the 30 s of an
// unfinished line past 1 MiB nor the pool's budget for such lines).
func TestLineReaderShrinksUnderAShortLine(t *testing.T) {
	big := strings.Repeat("x", 8<<20)
	short := strings.Repeat("y", 40<<10)
	lr := newLineReader(strings.NewReader(big+"\n"+short), 64<<20)
	line, err := lr.next()
	if err != nil || len(line) != len(big) {
		t.Fatalf("big line: %d bytes, %v", len(line), err)
	}
	if line, err = lr.next(); err != nil || string(line) != short {
		t.Fatalf("the short line: %d bytes, %v", len(line), err)
	}
	if c := cap(lr.buf); c > 4*len(short) {
		t.Fatalf("the reader held a %d-byte buffer for a %d-byte line", c, len(short))
	}
}

// A long line is read straight into the buffer that returns it, which
// doubles when the line fills it: a 1 MiB message
// (newline included) read 64 KiB at a time ends in a buffer of 1 MiB,
// after four doublings, where append's growth by a quarter took ten
// buffers (each a copy of all before it). Its bytes are not copied from
// a read buffer fragment by fragment.
func TestLineReaderGrowsLongLinesByDoubling(t *testing.T) {
	line := strings.Repeat("0123456789abcdef", 1<<16)[:1<<20-1] + "\n"
	r := strings.NewReader(line)
	pipe := &chunkReader{r: r, max: 64 << 10}
	lr := newLineReader(pipe, 64<<20)
	for range 3 { // the first made its buffers, the others reuse them
		r.Reset(line)
		lr.reset(pipe)
		got, err := lr.next()
		if err != nil || len(got) != len(line)-1 {
			t.Fatalf("read %d bytes, %v", len(got), err)
		}
		if last := pipe.last; &last[len(last)-2] != &got[len(got)-1] {
			t.Fatal("the line's end is not where the last read put it: the reader copied the line")
		}
		if len(lr.buf) != len(line) {
			t.Fatalf("a %d-byte line in a %d-byte buffer", len(line), len(lr.buf))
		}
		lr.shrink()
	}
}

// chunkReader reads r at most max bytes at a time, as a pipe does, and
// keeps what its last read wrote.
type chunkReader struct {
	r    io.Reader
	max  int
	last []byte
}

func (c *chunkReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p[:min(len(p), c.max)])
	if n > 0 {
		c.last = p[:n]
	}
	return n, err
}

// An HTTP body of unknown or large length is read into a buffer that
// doubles, and ends at the reader's end: all of it, and no more.
func TestReadAllDoubles(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	for _, n := range []int{0, 1, 511, 512, 513, 100 << 10, len(data)} {
		got, err := readAll(iotest.OneByteReader(bytes.NewReader(data[:min(n, 4096)])), nil)
		if err != nil || !bytes.Equal(got, data[:min(n, 4096)]) {
			t.Fatalf("one byte at a time, %d bytes: read %d, %v", min(n, 4096), len(got), err)
		}
		got, err = readAll(bytes.NewReader(data[:n]), nil)
		if err != nil || !bytes.Equal(got, data[:n]) {
			t.Fatalf("%d bytes: read %d, %v", n, len(got), err)
		}
	}
	allocs := testing.AllocsPerRun(10, func() {
		if b, _ := readAll(bytes.NewReader(data), nil); len(b) != len(data) {
			t.Fatalf("read %d bytes", len(b))
		}
	})
	std := testing.AllocsPerRun(10, func() {
		if b, _ := io.ReadAll(bytes.NewReader(data)); len(b) != len(data) {
			t.Fatalf("read %d bytes", len(b))
		}
	})
	// 13 buffers (512 B doubled to 1 MiB, and once more to see the end)
	// and the reader; io.ReadAll: 25 here.
	if allocs > 14 || allocs >= std {
		t.Fatalf("%v allocations to read 1 MiB, io.ReadAll %v", allocs, std)
	}
	want := errors.New("connection reset")
	if _, err := readAll(iotest.ErrReader(want), nil); !errors.Is(err, want) {
		t.Fatalf("a failed read: %v", err)
	}
}

// Rewrites live in rewrite.go only, so that a rewrite cannot hide inline
// in a handler. No other file of the package:
//   - splices a message's bytes (jsonrpc.Splice, applyEdits);
//   - encodes (json.Marshal: a message's members edited through a map), or
//     makes a message of (jsonrpc.AppendRequest, AppendNotification,
//     AppendResponse), what it read from a message's params: a .Params, or
//     a variable assigned (or a map's member set), or decoded by
//     json.Unmarshal, from one;
//   - appends _meta members (an append whose arguments name a _meta key
//     constant, "io.modelcontextprotocol/...", or write "_meta").
//
// And no file, rewrite.go included, passes a child's or a client's JSON on
// through a Go map (mapRoundTrips): json.Marshal of a map that
// json.Unmarshal filled, or of one holding raw JSON.
func TestRewritesStayInRewriteGo(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	metaKeys := metaKeyConsts(files)
	if !metaKeys["metaLogLevel"] || !metaKeys["metaProtocolVersion"] {
		t.Fatalf("the _meta key constants are not found: %v", metaKeys)
	}
	for _, f := range files {
		if name := fset.Position(f.Pos()).Filename; name != "rewrite.go" {
			for _, p := range inlineRewrites(f, metaKeys) {
				t.Errorf("%s: %s: rewrites belong in rewrite.go", fset.Position(p.at), p.what)
			}
		}
	}
	raw := rawNames(files)
	if !raw.fields["request"] || !raw.funcs["rawOrEmpty"] {
		t.Fatalf("the package's raw JSON names are not found: %+v", raw)
	}
	for _, f := range files { // rewrite.go too
		for _, p := range mapRoundTrips(f, raw) {
			t.Errorf("%s: %s: a child's or client's bytes go on as they are, edited in place (rewrite.go)", fset.Position(p.at), p.what)
		}
	}
}

// rawJSON are the package's names of raw JSON, declared as
// json.RawMessage: struct fields, and functions that return one.
type rawJSON struct{ fields, funcs map[string]bool }

// isRawType reports whether a type expression is json.RawMessage.
func isRawType(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == "json" && sel.Sel.Name == "RawMessage"
}

// rawNames are the raw JSON names declared in files.
func rawNames(files []*ast.File) rawJSON {
	raw := rawJSON{fields: map[string]bool{}, funcs: map[string]bool{}}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.StructType:
				for _, fld := range n.Fields.List {
					if isRawType(fld.Type) {
						for _, name := range fld.Names {
							raw.fields[name.Name] = true
						}
					}
				}
			case *ast.FuncDecl:
				if r := n.Type.Results; r != nil && len(r.List) > 0 && isRawType(r.List[0].Type) {
					raw.funcs[n.Name.Name] = true
				}
			}
			return true
		})
	}
	return raw
}

// mapRoundTrips are the places in f that pass on a child's or client's
// JSON through a Go map, which json.Marshal writes anew: its keys
// sorted, its white space gone, <, > and & escaped, and nothing at all
// when a piece is not JSON. Two shapes: a map that json.Unmarshal
// filled, encoded again; and a map the function makes (a literal, its
// members set), holding raw JSON (json.RawMessage, a field or a
// function's result declared one, a variable that holds one), encoded.
func mapRoundTrips(f *ast.File, raw rawJSON) []inlineRewrite {
	var found []inlineRewrite
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		found = append(found, roundTripsIn(fn, raw)...)
	}
	return found
}

// roundTripsIn are mapRoundTrips's places in the function fn: which
// variables are maps, filled by json.Unmarshal, or made here holding raw
// JSON, read in the order written, then each json.Marshal of one.
func roundTripsIn(fn *ast.FuncDecl, raw rawJSON) []inlineRewrite {
	maps := map[string]bool{}     // variables of a map type
	decoded := map[string]bool{}  // maps json.Unmarshal filled
	holdsRaw := map[string]bool{} // variables holding raw JSON
	literals := map[string]bool{} // maps made here whose members hold raw JSON
	isMap := func(e ast.Expr) bool {
		if c, ok := e.(*ast.CompositeLit); ok {
			e = c.Type
		}
		_, ok := e.(*ast.MapType)
		return ok
	}
	isRaw := func(e ast.Node) bool {
		return mentions(e, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				name := calleeName(n)
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
					name = sel.Sel.Name
				}
				return isRawType(n.Fun) || raw.funcs[name]
			case *ast.SelectorExpr:
				return raw.fields[n.Sel.Name]
			case *ast.Ident:
				return holdsRaw[n.Name]
			}
			return false
		})
	}
	fields := func(l *ast.FieldList) {
		if l == nil {
			return
		}
		for _, fld := range l.List {
			for _, name := range fld.Names {
				maps[name.Name] = maps[name.Name] || isMap(fld.Type)
				holdsRaw[name.Name] = holdsRaw[name.Name] || isRawType(fld.Type)
			}
		}
	}
	fields(fn.Type.Params)
	fields(fn.Type.Results)
	ast.Inspect(fn.Body, func(n ast.Node) bool { // in the order written
		switch n := n.(type) {
		case *ast.ValueSpec:
			for i, name := range n.Names {
				maps[name.Name] = maps[name.Name] || n.Type != nil && isMap(n.Type)
				holdsRaw[name.Name] = holdsRaw[name.Name] || n.Type != nil && isRawType(n.Type) || i < len(n.Values) && isRaw(n.Values[i])
			}
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				var r ast.Expr
				if len(n.Rhs) == len(n.Lhs) {
					r = n.Rhs[i]
				} else if len(n.Rhs) == 1 {
					r = n.Rhs[0]
				}
				if ix, ok := l.(*ast.IndexExpr); ok { // m[k] = v: m holds v
					if id, ok := ix.X.(*ast.Ident); ok && r != nil && maps[id.Name] && isRaw(r) {
						literals[id.Name] = true
					}
					continue
				}
				id, ok := l.(*ast.Ident)
				if !ok || r == nil {
					continue
				}
				if isMap(r) {
					maps[id.Name] = true
					literals[id.Name] = literals[id.Name] || isRaw(r)
				}
				holdsRaw[id.Name] = holdsRaw[id.Name] || !isMap(r) && isRaw(r)
			}
		case *ast.CallExpr:
			if calleeName(n) == "json.Unmarshal" && len(n.Args) == 2 {
				if u, ok := n.Args[1].(*ast.UnaryExpr); ok && u.Op == token.AND {
					if id, ok := u.X.(*ast.Ident); ok && maps[id.Name] {
						decoded[id.Name] = true
					}
				}
			}
		}
		return true
	})
	var found []inlineRewrite
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || calleeName(call) != "json.Marshal" || len(call.Args) != 1 {
			return true
		}
		arg := call.Args[0]
		switch {
		case mentions(arg, func(n ast.Node) bool { id, ok := n.(*ast.Ident); return ok && decoded[id.Name] }):
			found = append(found, inlineRewrite{call.Pos(), "json.Marshal of a map json.Unmarshal filled"})
		case isMap(arg) && isRaw(arg),
			mentions(arg, func(n ast.Node) bool { id, ok := n.(*ast.Ident); return ok && literals[id.Name] }):
			found = append(found, inlineRewrite{call.Pos(), "json.Marshal of a map holding raw JSON"})
		}
		return true
	})
	return found
}

// metaKeyConsts are the package's constants that name a _meta key: a
// string "io.modelcontextprotocol/...".
func metaKeyConsts(files []*ast.File) map[string]bool {
	keys := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING && strings.HasPrefix(lit.Value, `"io.modelcontextprotocol/`) {
						keys[vs.Names[i].Name] = true
					}
				}
			}
		}
	}
	return keys
}

// inlineRewrite is one place a file rewrites a message.
type inlineRewrite struct {
	at   token.Pos
	what string
}

// inlineRewrites are the places in f that rewrite a message
// (TestRewritesStayInRewriteGo).
func inlineRewrites(f *ast.File, metaKeys map[string]bool) []inlineRewrite {
	var found []inlineRewrite
	ast.Inspect(f, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			switch name := calleeName(call); {
			case name == "jsonrpc.Splice" || name == "applyEdits":
				found = append(found, inlineRewrite{call.Pos(), name + " splices a message"})
			case name == "append" && mentions(call, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.Ident:
					return metaKeys[n.Name]
				case *ast.BasicLit:
					return n.Kind == token.STRING && strings.Contains(n.Value, "_meta")
				}
				return false
			}):
				found = append(found, inlineRewrite{call.Pos(), "append of _meta members"})
			}
		}
		if fn, ok := n.(*ast.FuncDecl); ok && fn.Body != nil {
			found = append(found, reencodes(fn.Body)...)
		}
		return true
	})
	return found
}

// reencodes are the places in body that encode (json.Marshal), or make
// a message of, what they read from a message's params: a .Params, or a
// variable assigned (a map whose member is set), or decoded by
// json.Unmarshal, from an expression that reads one.
func reencodes(body *ast.BlockStmt) []inlineRewrite {
	isParams := func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		return ok && sel.Sel.Name == "Params"
	}
	fromParams := map[string]bool{}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for _, r := range n.Rhs {
				if mentions(r, isParams) {
					for _, l := range n.Lhs {
						if ix, ok := l.(*ast.IndexExpr); ok { // m["k"] = ...: m holds it
							l = ix.X
						}
						if id, ok := l.(*ast.Ident); ok && id.Name != "_" {
							fromParams[id.Name] = true
						}
					}
				}
			}
		case *ast.CallExpr:
			if calleeName(n) == "json.Unmarshal" && len(n.Args) == 2 && mentions(n.Args[0], isParams) {
				if u, ok := n.Args[1].(*ast.UnaryExpr); ok && u.Op == token.AND {
					if id, ok := u.X.(*ast.Ident); ok {
						fromParams[id.Name] = true
					}
				}
			}
		}
		return true
	})
	readsParams := func(n ast.Node) bool {
		return mentions(n, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			return isParams(n) || ok && fromParams[id.Name]
		})
	}
	var found []inlineRewrite
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		switch name := calleeName(call); name {
		case "json.Marshal", "jsonrpc.AppendRequest", "jsonrpc.AppendNotification", "jsonrpc.AppendResponse":
			for _, a := range call.Args {
				if readsParams(a) {
					found = append(found, inlineRewrite{call.Pos(), name + " of what a message's params hold"})
					break
				}
			}
		}
		return true
	})
	return found
}

// calleeName is the function a call calls, as written: "append",
// "json.Marshal"; "" for any other form.
func calleeName(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		if x, ok := f.X.(*ast.Ident); ok {
			return x.Name + "." + f.Sel.Name
		}
	}
	return ""
}

// mentions reports whether any node under n satisfies is.
func mentions(n ast.Node, is func(ast.Node) bool) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		found = found || n != nil && is(n)
		return !found
	})
	return found
}

func TestProgressKey(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{`"q-tok"`, `"q-tok"`, true},
		{`"q-tok"`, `"q\u002dtok"`, true}, // one string, written two ways
		{`7`, `7`, true},
		{`"7"`, `7`, false}, // a string is not the number
		{`"q"`, `"r"`, false},
	} {
		if got := progressKey([]byte(tc.a)) == progressKey([]byte(tc.b)); got != tc.same {
			t.Errorf("progressKey(%s) == progressKey(%s): %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
	for _, raw := range []string{"", `"unterminated`} {
		if k := progressKey([]byte(raw)); k != "" {
			t.Errorf("progressKey(%q) = %q, want none", raw, k)
		}
	}
}

// A call retried after an input round carries the client's answers and
// the child's requestState in its params, which are otherwise the call's
// own, byte for byte and in their order: the child gets its arguments as
// the client wrote them.
func TestRetryParams(t *testing.T) {
	answers := map[string]json.RawMessage{"b": json.RawMessage(`{"action":"accept","content":{"n":123456789012345678901234567890}}`),
		"a": json.RawMessage(`{"roots":[]}`)}
	const ans = `"inputResponses":{"a":{"roots":[]},"b":{"action":"accept","content":{"n":123456789012345678901234567890}}}`
	tests := []struct {
		name, params, state, want string
		fails                     bool
	}{
		{name: "params absent", params: "", state: `"s"`, fails: true},
		{name: "params empty", params: `{}`, state: `"s"`, want: `{` + ans + `,"requestState":"s"}`},
		{name: "params not an object", params: `[1,2]`, want: `{` + ans + `}`},
		{name: "order kept, members added last", params: `{"name":"t","arguments":{"z":1,"a":2},"_meta":{"progressToken":10}}`, state: `"s"`,
			want: `{"name":"t","arguments":{"z":1,"a":2},"_meta":{"progressToken":10},` + ans + `,"requestState":"s"}`},
		{name: "numbers kept exact", params: `{"arguments":{"big":123456789012345678901234567890,"f":1.0,"e":1E400,"neg":-0.000}}`,
			want: `{"arguments":{"big":123456789012345678901234567890,"f":1.0,"e":1E400,"neg":-0.000},` + ans + `}`},
		{name: "strings kept as written", params: `{"arguments":{"q":"<a&b>","u":"\u00e9"}}`,
			want: `{"arguments":{"q":"<a&b>","u":"\u00e9"},` + ans + `}`},
		{name: "whitespace kept", params: "{ \"name\" : \"t\" }",
			want: "{ \"name\" : \"t\" ," + ans + "}"},
		{name: "inputResponses replaced where it is", params: `{"inputResponses":{"old":1},"name":"t"}`, state: `"s"`,
			want: `{` + ans + `,"name":"t","requestState":"s"}`},
		{name: "requestState replaced where it is", params: `{"requestState":"old","name":"t"}`, state: `{"k":[1]}`,
			want: `{"requestState":{"k":[1]},"name":"t",` + ans + `}`},
		{name: "requestState dropped without a state, last", params: `{"name":"t","requestState":"old"}`,
			want: `{"name":"t",` + ans + `}`},
		{name: "requestState dropped without a state, first", params: `{"requestState":"old" , "name":"t"}`,
			want: `{ "name":"t",` + ans + `}`},
		{name: "requestState dropped without a state, alone", params: `{ "requestState" : {"x":"}"} }`,
			want: `{  ` + ans + `}`},
		{name: "requestState written with escapes dropped", params: `{"a\"b":1,"request\u0053tate":"old"}`,
			want: `{"a\"b":1,` + ans + `}`},
		{name: "both there, requestState dropped", params: `{"requestState":"old","inputResponses":{}}`,
			want: `{` + ans + `}`},
		{name: "both there, both replaced", params: `{"inputResponses":{},"x":1,"requestState":"old"}`, state: `7`,
			want: `{` + ans + `,"x":1,"requestState":7}`},
		{name: "a state on several lines is one line", params: `{}`, state: "{ \"a\" :\n 1 }",
			want: `{` + ans + `,"requestState":{"a":1}}`},
		{name: "a null state is sent", params: `{}`, state: `null`, want: `{` + ans + `,"requestState":null}`},
		{name: "a state that is not JSON", params: `{}`, state: `{`, fails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line := `{"jsonrpc":"2.0","id":3,"method":"tools/call"}`
			if tt.params != "" {
				line = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":` + tt.params + `}`
			}
			msg, err := jsonrpc.Parse([]byte(line))
			if err != nil {
				t.Fatal(err)
			}
			got, ok := retryParams(&msg, answers, json.RawMessage(tt.state))
			switch {
			case ok == tt.fails:
				t.Fatalf("ok %v: %s", ok, got)
			case string(msg.Raw) != line:
				t.Fatal("the message was changed")
			case tt.fails:
				return
			case string(got) != tt.want:
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			case !json.Valid(got):
				t.Fatal("invalid JSON")
			}
		})
	}
}

// Each of a modern child's input requests is asked of a legacy client
// as a request of its own, under the pool's id: the child's params as
// the child wrote them, but for the elicitationId a URL-mode elicitation
// needs there.
func TestLegacyQuestion(t *testing.T) {
	for _, tt := range []struct{ name, method, params, want string }{
		{"a URL-mode elicitation gets the pool's id as its elicitationId", "elicitation/create",
			`{"mode":"url","message":"m","url":"https://a.example/?q=<x>&y","_meta":{"n":123456789012345678901234567890}}`,
			`{"jsonrpc":"2.0","id":18446744073709551615,"method":"elicitation/create","params":{"elicitationId":"18446744073709551615","mode":"url","message":"m","url":"https://a.example/?q=<x>&y","_meta":{"n":123456789012345678901234567890}}}`},
		{"one with its own elicitationId keeps it", "elicitation/create", `{"elicitationId":"c","mode":"url","url":"u","message":"m"}`,
			`{"jsonrpc":"2.0","id":18446744073709551615,"method":"elicitation/create","params":{"elicitationId":"c","mode":"url","url":"u","message":"m"}}`},
		{"a form is asked as it is", "elicitation/create", `{"requestedSchema":{"type":"object"},"message":"m"}`,
			`{"jsonrpc":"2.0","id":18446744073709551615,"method":"elicitation/create","params":{"requestedSchema":{"type":"object"},"message":"m"}}`},
		{"sampling is asked as it is", "sampling/createMessage", `{"mode":"url","maxTokens":1e2,"messages":[]}`,
			`{"jsonrpc":"2.0","id":18446744073709551615,"method":"sampling/createMessage","params":{"mode":"url","maxTokens":1e2,"messages":[]}}`},
		{"no params", "roots/list", ``, `{"jsonrpc":"2.0","id":18446744073709551615,"method":"roots/list"}`},
	} {
		var params json.RawMessage
		if tt.params != "" {
			params = json.RawMessage(tt.params)
		}
		got := legacyQuestion(1<<64-1, tt.method, params)
		if string(got) != tt.want || !json.Valid(got) {
			t.Errorf("%s:\ngot  %s\nwant %s", tt.name, got, tt.want)
		}
		if string(params) != tt.params {
			t.Errorf("%s: the params were changed: %s", tt.name, params)
		}
	}
}

// A bare request of a legacy client, fitted for the modern child that
// writes it: its session's _meta members, and the log level it asks
// unless it names its own; nothing else changes, byte for byte.
func TestFitRequest(t *testing.T) {
	const pv = `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`
	const ll = `"io.modelcontextprotocol/logLevel"`
	debug := uint8(logSeverity["debug"] + 1)
	for _, tt := range []struct {
		name, line, meta string
		logs             uint8
		want             string
	}{
		{name: "no meta: as it is", line: `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`, logs: debug,
			want: `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`},
		{name: "not a message: as it is", line: `{"jsonrpc":`, meta: pv, want: `{"jsonrpc":`},
		{name: "meta into params absent", line: `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`, meta: pv,
			want: `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{` + pv + `}}}`},
		{name: "the level asked", line: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","arguments":{"n":123456789012345678901234567890}}}`,
			meta: pv, logs: debug,
			want: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"_meta":{` + pv + `,` + ll + `:"debug"},"name":"t","arguments":{"n":123456789012345678901234567890}}}`},
		{name: "into the request's own _meta", line: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":4,"x":1.0}}}`,
			meta: pv, logs: debug,
			want: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","_meta":{` + pv + `,` + ll + `:"debug","progressToken":4,"x":1.0}}}`},
		{name: "a level of its own stays", line: `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{` + ll + `:"error"}}}`,
			meta: pv, logs: debug,
			want: `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{` + pv + `,` + ll + `:"error"}}}`},
		{name: "a setLevel's level is its own", line: `{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"info"}}`,
			meta: pv, logs: debug,
			want: `{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"_meta":{` + pv + `},"level":"info"}}`},
		{name: "_meta not an object gives way", line: `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":[1]}}`,
			meta: pv, logs: debug,
			want: `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{` + pv + `,` + ll + `:"debug"}}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var meta []byte
			if tt.meta != "" {
				// The session's, with room after it that no request may
				// write in: every request shares it.
				meta = append(make([]byte, 0, len(tt.meta)+64), tt.meta...)
			}
			got := fitRequest([]byte(tt.line), 4, meta, tt.logs)
			if string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			if meta != nil && string(meta[:cap(meta)][len(meta):]) != string(make([]byte, 64)) {
				t.Fatal("the session's meta was written past its end")
			}
		})
	}
}

// One reader finds a message's progress token, as it is written: a
// request's in params._meta, a progress notification's in params.
func TestProgressTokenAt(t *testing.T) {
	for _, tt := range []struct{ line, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":"a\"b"}}}`, `"a\"b"`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"x":1, "progressToken" : 123456789012345678901234567890 }}}`, `123456789012345678901234567890`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1.0}}}`, `1.0`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"progressToken":7}}`, ``},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":"progressToken"}}`, ``},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{}}}`, ``},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[{"_meta":{"progressToken":1}}]}`, ``},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, ``},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1,"progressToken":"q"}}`, `"q"`},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"_meta":{"progressToken":"m"}}}`, ``},
		{`{"jsonrpc":"2.0","method":"notifications/progress"}`, ``},
		{`{"jsonrpc":"2.0","id":2,"method":"notifications/progress","params":{"progressToken":"p","_meta":{"progressToken":"m"}}}`, `"m"`},
	} {
		msg, err := jsonrpc.Parse([]byte(tt.line))
		if err != nil {
			t.Fatal(err)
		}
		at := progressTokenAt(&msg)
		if got := string(at.Of(msg.Raw)); got != tt.want || at.Present() != (tt.want != "") {
			t.Errorf("%s: token %q at %v, want %q", tt.line, got, at, tt.want)
		}
		if in, of := progressTokenIn(&msg), progressTokenOf(&msg); string(in) != tt.want || string(of) != tt.want || (in == nil) != (tt.want == "") || (of == nil) != (tt.want == "") {
			t.Errorf("%s: progressTokenIn %q, progressTokenOf %q, want %q", tt.line, in, of, tt.want)
		}
	}
}

// A legacy child's question, carried to a modern client as an entry of
// inputRequests: its method and its params as the child wrote them.
func TestQuestionOf(t *testing.T) {
	for _, tt := range []struct{ line, want string }{
		{`{"jsonrpc":"2.0","id":"c1","method":"roots/list"}`, `{"method":"roots/list"}`},
		{`{"jsonrpc":"2.0","id":"c1","method":"sampling/createMessage","params":{"z":1,"a":{"big":123456789012345678901234567890,"f":1.0}}}`,
			`{"method":"sampling/createMessage","params":{"z":1,"a":{"big":123456789012345678901234567890,"f":1.0}}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"<b>&amp;</b>","requestedSchema":{ "type" : "object" }}}`,
			`{"method":"elicitation/create","params":{"message":"<b>&amp;</b>","requestedSchema":{ "type" : "object" }}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"x/\u00e9\"q","params":[1,2]}`, `{"method":"x/é\"q","params":[1,2]}`},
	} {
		msg, err := jsonrpc.Parse([]byte(tt.line))
		if err != nil {
			t.Fatal(err)
		}
		if got := questionOf(&msg); string(got) != tt.want || !json.Valid(got) {
			t.Errorf("%s:\ngot  %s\nwant %s", tt.line, got, tt.want)
		}
		if string(msg.Raw) != tt.line {
			t.Errorf("%s: the message was changed", tt.line)
		}
	}
}

// The capability views take out what a client must not be promised and
// leave the rest of the child's (or client's) bytes as they are: key
// order, white space, escapes, <, > and &; every member of a name, a key
// written twice or with escapes; capabilities that are not an object (or
// not JSON) as they are.
func TestCapabilityViews(t *testing.T) {
	const keep = `"experimental":{"note":"<a&b> caf\u00e9","z":1,"a":2}`
	views := map[string]func([]byte) []byte{
		"legacy":   func(b []byte) []byte { return legacyView(b) },
		"unlogged": func(b []byte) []byte { return unloggedView(b) },
		"untasked": untaskedCaps,
	}
	for _, tt := range []struct{ view, name, in, want string }{
		{"legacy", "list changes and subscribe out, order and bytes kept",
			`{"tools":{"listChanged":true},` + keep + `,"resources":{ "subscribe" : true , "listChanged":true, "x":"<>"},"logging":{}}`,
			`{"tools":{},` + keep + `,"resources":{  "x":"<>"},"logging":{}}`},
		{"legacy", "prompts, spaced, with a member after", `{ "prompts" : { "listChanged" : false , "a" : 1 } }`, `{ "prompts" : {  "a" : 1 } }`},
		{"legacy", "a key written twice, and with escapes", `{"tools":{"listChanged":true},"tools":{"list\u0043hanged":true,"x":1}}`, `{"tools":{},"tools":{"x":1}}`},
		{"legacy", "nothing to take out: as it is", `{"tools":{},` + keep + `}`, `{"tools":{},` + keep + `}`},
		{"legacy", "a capability that is not an object", `{"tools":true,"prompts":null}`, `{"tools":true,"prompts":null}`},
		{"legacy", "listChanged elsewhere stays", `{"experimental":{"listChanged":true}}`, `{"experimental":{"listChanged":true}}`},
		{"unlogged", "logging out, order and bytes kept", `{"tools":{"listChanged":true},"logging":{},` + keep + `}`, `{"tools":{"listChanged":true},` + keep + `}`},
		{"unlogged", "the only member, spaced", `{ "logging" : {} }`, `{  }`},
		{"unlogged", "written twice, and with escapes", `{"logging":{},"a":1,"l\u006fgging":null}`, `{"a":1}`},
		{"unlogged", "none: as it is", `{"a": 1}`, `{"a": 1}`},
		{"untasked", "tasks and the tasks extension out, other extensions kept",
			`{"tools":{},"tasks":{"list":{}},"extensions":{"io.modelcontextprotocol/tasks":{},"x/y":{"<":"&"}},` + keep + `}`,
			`{"tools":{},"extensions":{"x/y":{"<":"&"}},` + keep + `}`},
		{"untasked", "extensions written twice: each", `{"extensions":{"io.modelcontextprotocol/tasks":{}},"extensions":{"io.modelcontextprotocol/t\u0061sks":{},"a":1}}`,
			`{"extensions":{},"extensions":{"a":1}}`},
		{"untasked", "none: as it is", `{"extensions":{"x/y":{}},"sampling":{}}`, `{"extensions":{"x/y":{}},"sampling":{}}`},
	} {
		t.Run(tt.view+": "+tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			got := views[tt.view](in)
			if string(got) != tt.want || !json.Valid(got) {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			if string(in) != tt.in {
				t.Fatal("the input was changed")
			}
		})
	}
	for name, view := range views {
		for _, notObject := range []string{``, `null`, `[{"logging":{}}]`, `"tasks"`, `7`, `{"logging":{}`, `{"tasks":{}} x`} {
			if got := view([]byte(notObject)); string(got) != notObject {
				t.Errorf("%s view of %q: %q, want it as it is", name, notObject, got)
			}
		}
	}
}

// The results the pool assembles hold the child's (or client's) pieces as
// they were written, in an envelope of the pool's, and are JSON whatever
// the pieces: one that is not JSON gives way to the pool's default.
func TestAssembledResults(t *testing.T) {
	const (
		caps = `{"tools":{ "listChanged":true },"experimental":{"n":"<a&b> caf\u00e9"}}`
		info = `{"version":"1","name":"<s>"}`
	)
	member := serverInfoMember(json.RawMessage(info))
	for _, tt := range []struct{ name, got, want string }{
		{"serverInfo, as the child wrote it", string(member), `"io.modelcontextprotocol/serverInfo":` + info},
		{"serverInfo: none", string(serverInfoMember(nil)), `"io.modelcontextprotocol/serverInfo":{"name":"switchboard","version":"dev"}`},
		{"serverInfo: not JSON", string(serverInfoMember(json.RawMessage(`{"name"`))), ``},
		{"initialize", string(initializeResultJSON("2025-06-18", []byte(caps), []byte(info), "Use <b> & </b>.")),
			`{"protocolVersion":"2025-06-18","capabilities":` + caps + `,"serverInfo":` + info + `,"instructions":"Use <b> & </b>."}`},
		{"initialize: no instructions, no serverInfo", string(initializeResultJSON("2025-11-25", []byte(`{}`), nil, "")),
			`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"switchboard","version":"dev"}}`},
		{"initialize: pieces that are not JSON", string(initializeResultJSON("2025-11-25", []byte(`{"tools"`), []byte(`x`), "")),
			`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"switchboard","version":"dev"}}`},
		{"discover", string(discoverResultJSON([]string{"2026-07-28", "2025-11-25"}, 5, "public", []byte(caps), []byte(info), "hi\n")),
			`{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25"],"ttlMs":5,"cacheScope":"public","capabilities":` + caps +
				`,"instructions":"hi\n","_meta":{"io.modelcontextprotocol/serverInfo":` + info + `}}`},
		{"discover: pieces that are not JSON", string(discoverResultJSON([]string{"2026-07-28"}, 0, "private", []byte(`[`), []byte(`}`), "")),
			`{"resultType":"complete","supportedVersions":["2026-07-28"],"ttlMs":0,"cacheScope":"private","capabilities":{},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"switchboard","version":"dev"}}}`},
		{"input required, the question as the child wrote it",
			string(inputRequiredResult("sb-1", questionOf(mustParse(t, `{"jsonrpc":"2.0","id":"q","method":"elicitation/create","params":{"requestedSchema":{},"message":"<b> & caf\u00e9", "z" : 1}}`)), "sb1.00", member)),
			`{"resultType":"input_required","inputRequests":{"sb-1":{"method":"elicitation/create","params":{"requestedSchema":{},"message":"<b> & caf\u00e9", "z" : 1}}},"requestState":"sb1.00","_meta":{` + string(member) + `}}`},
		{"input required, no serverInfo", string(inputRequiredResult("sb-2", []byte(`{"method":"roots/list"}`), "sb1.01", nil)),
			`{"resultType":"input_required","inputRequests":{"sb-2":{"method":"roots/list"}},"requestState":"sb1.01"}`},
		{"input required, a question that is not JSON", string(inputRequiredResult("sb-3", []byte(`{"method"`), "sb1.02", nil)),
			`{"resultType":"input_required","inputRequests":{"sb-3":{}},"requestState":"sb1.02"}`},
		{"a listen acknowledged under the client's id", string(listenAcknowledged([]byte(`"<L&1>"`), []byte(`{"toolsListChanged":true}`))),
			`{"_meta":{"io.modelcontextprotocol/subscriptionId":"<L&1>"},"notifications":{"toolsListChanged":true}}`},
		{"a listen's end", string(listenEndResult([]byte(`1.0`))), `{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":1.0}}`},
		{"a listen's cancellation", string(listenCancelled([]byte(`"\u0041"`), `server "s" <gone>`)),
			`{"requestId":"\u0041","reason":"server \"s\" <gone>"}`},
	} {
		if tt.got != tt.want {
			t.Errorf("%s:\n got  %s\n want %s", tt.name, tt.got, tt.want)
		}
		if tt.want != "" && !strings.HasPrefix(tt.want, `"`) && !json.Valid([]byte(tt.got)) {
			t.Errorf("%s: invalid JSON %s", tt.name, tt.got)
		}
	}
}

func mustParse(t *testing.T, s string) *jsonrpc.Message {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return &m
}

// A change for a listen names it in its params' _meta, first, the
// child's params otherwise as it wrote them.
func TestTaggedParams(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"no params", ``, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"}}`},
		{"params that are not an object", `[1]`, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"}}`},
		{"params that are not JSON", `{"uri"`, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"}}`},
		{"empty params", `{ }`, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"} }`},
		{"params without _meta, order and bytes kept", `{"uri":"a<&>b","\u0061":1, "z" : 2}`,
			`{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"},"uri":"a<&>b","\u0061":1, "z" : 2}`},
		{"a _meta of the child's", `{"uri":"u","_meta":{"k":"<v>", "j":1}}`,
			`{"uri":"u","_meta":{"io.modelcontextprotocol/subscriptionId":"L","k":"<v>", "j":1}}`},
		{"a _meta naming a subscription already", `{"_meta":{"io.modelcontextprotocol/subscriptionId":"X","k":1}}`,
			`{"_meta":{"io.modelcontextprotocol/subscriptionId":"L","k":1}}`},
		{"a _meta naming it alone", `{"_meta":{ "io.modelcontextprotocol/subscriptionId":"X" }}`,
			`{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"}}`},
		{"a _meta that is not an object", `{"_meta":null,"uri":"u"}`, `{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"},"uri":"u"}`},
		{"a _meta written twice: the last kept", `{"_meta":{"a":1},"uri":"u","\u005fmeta":{"b":2}}`,
			`{"uri":"u","\u005fmeta":{"io.modelcontextprotocol/subscriptionId":"L","b":2}}`},
	} {
		got := taggedParams([]byte(tt.in), []byte(`"L"`))
		if string(got) != tt.want || !json.Valid(got) {
			t.Errorf("%s:\n got  %s\n want %s", tt.name, got, tt.want)
		}
	}
}
