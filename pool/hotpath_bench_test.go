package pool

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// The per-message work of the hot path, each step alone: what a client's
// request costs before its write to the child, and what a child's answer
// costs before it is queued for its session. `make bench` reports them
// with -benchmem.

var (
	benchRequest  = []byte(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"echo","arguments":{"text":"s3/17"},"_meta":{"progressToken":"tok-17"}}}`)
	benchResponse = []byte(`{"jsonrpc":"2.0","id":90210,"result":{"content":[{"type":"text","text":"s3/17"}]}}`)
)

// BenchmarkRewriteRequest: parse a client's tools/call with the strict
// key checks, give it a pool id and a pool progress token
// (rewriteRequest).
func BenchmarkRewriteRequest(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchRequest)))
	for i := range b.N {
		msg, err := jsonrpc.ParseStrict(benchRequest)
		if err != nil || jsonrpc.Strict(&msg) != nil {
			b.Fatal(err)
		}
		in := rewriteRequest(&msg, uint64(i), nil)
		if len(in.line) == 0 {
			b.Fatal("empty")
		}
	}
}

// BenchmarkRewriteRequestForModernChild: the same request from a legacy
// client to a 2026-07-28 child, which gets the pool's _meta members too.
func BenchmarkRewriteRequestForModernChild(b *testing.B) {
	meta := []byte(`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchRequest)))
	for i := 0; b.Loop(); i++ {
		msg, err := jsonrpc.ParseStrict(benchRequest)
		if err != nil || jsonrpc.Strict(&msg) != nil {
			b.Fatal(err)
		}
		if in := rewriteRequest(&msg, uint64(i), meta); len(in.line) == 0 {
			b.Fatal("empty")
		}
	}
}

// BenchmarkRewriteLargeRequest: the same for a tools/call carrying 100 KiB
// of text, with the strict check every client message gets: the cost of
// reading every byte of a large message. "code" is a source file (a
// quote or an escape every few words), "base64" an image (none).
func BenchmarkRewriteLargeRequest(b *testing.B) {
	for _, c := range []struct{ name, content string }{
		{"code", strings.Repeat(`\tfmt.Println(\"line of text\")\n`, 100<<10/33)},
		{"base64", strings.Repeat("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ", 100<<10/44)},
	} {
		line := []byte(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/tmp/notes.txt","content":"` +
			c.content + `"},"_meta":{"progressToken":"tok-17"}}}`)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			for i := 0; b.Loop(); i++ {
				msg, err := jsonrpc.ParseStrict(line)
				if err != nil {
					b.Fatal(err)
				}
				if err := jsonrpc.Strict(&msg); err != nil {
					b.Fatal(err)
				}
				if in := rewriteRequest(&msg, uint64(i), nil); in.name != "write_file" {
					b.Fatalf("tool %q", in.name)
				}
			}
		})
	}
}

// BenchmarkRouteResponse: parse a child's answer, find its pending entry
// by pool id, and put the client's own id back (responseForClient).
func BenchmarkRouteResponse(b *testing.B) {
	pending := map[uint64][]byte{90210: []byte(`"17"`)}
	dst := make([]byte, 0, 256)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchResponse)))
	for range b.N {
		msg, err := jsonrpc.Parse(benchResponse)
		if err != nil {
			b.Fatal(err)
		}
		id, ok := jsonrpc.ParseUint(msg.IDBytes())
		if !ok {
			b.Fatal("no pool id")
		}
		dst = responseForClient(dst[:0], &msg, pending[id])
	}
	if !bytes.Contains(dst, []byte(`"id":"17"`)) {
		b.Fatalf("routed %s", dst)
	}
}

// BenchmarkLineReader: split a stream of messages into lines, the framing
// of the child's stdout and of every client.
func BenchmarkLineReader(b *testing.B) {
	const n = 1024
	stream := bytes.Repeat(append(append([]byte(nil), benchResponse...), '\n'), n)
	r := bytes.NewReader(stream)
	lr := newLineReader(r, 4<<20)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchResponse) + 1))
	for i := range b.N {
		if i%n == 0 {
			r.Reset(stream)
			lr.reset(r)
		}
		if _, err := lr.next(); err != nil && err != io.EOF {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordQueue: the three events of a request queued for the
// history store, handed over in batches the size a 64 x 8 load makes in
// one recordDelay (about 1,500 events).
func BenchmarkRecordQueue(b *testing.B) {
	b.ReportAllocs()
	q := newRecordQueue(func(Event) {})
	defer q.close()
	e := Event{Kind: EventRequestReceived, Server: "fake", Session: "s1", Method: "tools/call", Name: "echo", OriginalID: "17"}
	for i := range b.N {
		e.PoolID = uint64(i)
		q.add(&e)
		if i%1500 == 1499 {
			q.flush()
		}
	}
}

// BenchmarkModernResponse: a legacy child's answer as a 2026-07-28 client
// gets it (modernResponse): its own id back, resultType, and the _meta
// naming the server.
func BenchmarkModernResponse(b *testing.B) {
	info := serverInfoMember(json.RawMessage(`{"name":"fakemcp","version":"1.0.0"}`))
	b.ReportAllocs()
	b.SetBytes(int64(len(benchResponse)))
	var out []byte
	for b.Loop() {
		msg, err := jsonrpc.Parse(benchResponse)
		if err != nil {
			b.Fatal(err)
		}
		out = modernResponse(&msg, "tools/call", []byte(`"17"`), info)
	}
	if !bytes.Contains(out, []byte(`"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":`)) {
		b.Fatalf("rewrote %s", out)
	}
}
