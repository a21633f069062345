package pool

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

func TestRewriteRequest(t *testing.T) {
	const meta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`
	tests := []struct {
		name, in, meta, want, token, about string
	}{
		{name: "id only", in: `{"jsonrpc":"2.0","id":"a","method":"tools/list"}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/list"}`},
		{name: "progress token", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"tok"}}}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":101}}}`, token: `"tok"`, about: "x"},
		{name: "meta into no params", meta: meta, in: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{"_meta":{` + meta + `}}}`},
		{name: "meta into empty params", meta: meta, in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{"_meta":{` + meta + `}}}`},
		{name: "meta beside params", meta: meta, in: `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"u"}}`,
			want: `{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"_meta":{` + meta + `},"uri":"u"}}`, about: "u"},
		{name: "meta into existing _meta with token", meta: meta,
			in:    `{"id":2,"params":{"_meta":{"progressToken":5},"name":"t"},"jsonrpc":"2.0","method":"tools/call"}`,
			want:  `{"id":10,"params":{"_meta":{` + meta + `,"progressToken":101},"name":"t"},"jsonrpc":"2.0","method":"tools/call"}`,
			token: `5`, about: "t"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := jsonrpc.Parse([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			var tokens atomic.Uint64
			tokens.Store(100)
			var m []byte
			if tt.meta != "" {
				m = []byte(tt.meta)
			}
			in := rewriteRequest(&msg, 10, &tokens, m)
			if string(in.line) != tt.want {
				t.Fatalf("got  %s\nwant %s", in.line, tt.want)
			}
			if !json.Valid(in.line) {
				t.Fatal("invalid JSON")
			}
			if string(in.origToken) != tt.token || in.name != tt.about {
				t.Fatalf("token %q name %q", in.origToken, in.name)
			}
		})
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

func TestFindPoolID(t *testing.T) {
	for frag, want := range map[string]uint64{`"result":{},"jsonrpc":"2.0","id":123}`: 123, `{"jsonrpc":"2.0","id": 9,"result"`: 9} {
		if got, ok := findPoolID([]byte(frag)); !ok || got != want {
			t.Errorf("%s: %d %v", frag, got, ok)
		}
	}
	if _, ok := findPoolID([]byte(`"id":"x"`)); ok {
		t.Error("string id taken for a pool id")
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
	_ = json.Unmarshal(legacy.initializeResult("2025-11-25"), &init)
	if init.ProtocolVersion != "2025-06-18" || init.Instructions != "hi" {
		t.Fatalf("legacy initialize result: %+v", init)
	}
	for requested, want := range map[string]string{"2025-03-26": "2025-03-26", "2024-11-05": "2024-11-05",
		"2025-06-18": "2025-06-18", "2099-01-01": "2025-06-18", "": "2025-06-18"} {
		init.ProtocolVersion = ""
		_ = json.Unmarshal(legacy.initializeResult(requested), &init)
		if init.ProtocolVersion != want {
			t.Errorf("client asks %q of a 2025-06-18 child: answered %q, want %q", requested, init.ProtocolVersion, want)
		}
	}
	if !bytes.Contains(legacy.discoverResult(), []byte(`"supportedVersions":["2026-07-28","2025-06-18","2025-03-26","2024-11-05"]`)) {
		t.Fatalf("discover from a legacy child: %s", legacy.discoverResult())
	}
	modern, err := parseDiscover([]byte(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"2"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(modern.initializeResult("2025-06-18"), &init)
	if init.ProtocolVersion != "2025-06-18" || !bytes.Contains(modern.initializeResult("x"), []byte(`"name":"m"`)) {
		t.Fatalf("legacy view of a modern child: %s", modern.initializeResult("2025-06-18"))
	}
	if _, err := parseDiscover([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`)); err == nil {
		t.Fatal("an error answer to server/discover must mean legacy")
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
	if c := cap(lr.buf); c > keepBuf {
		t.Fatalf("the reader kept a %d-byte buffer after a small line", c)
	}
}
