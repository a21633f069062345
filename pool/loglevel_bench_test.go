package pool

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// BenchmarkLegacyLogNobodyAsked: a legacy child's notifications/message
// that no session of it asked for, with requests of its in flight: it is
// dropped without a copy, and without a look at the requests.
func BenchmarkLegacyLogNobodyAsked(b *testing.B) {
	r := newEndingRig(b)
	for i := range 64 {
		r.add(uint64(i+1), "1", stWritten, true)
	}
	msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","data":"x"}}`))
	if err != nil {
		b.Fatal(err)
	}
	params := msg.Params.Of(msg.Raw)
	b.ReportAllocs()
	for b.Loop() {
		r.b.routeLog(&msg, params)
	}
	if len(r.s.out) != 0 {
		b.Fatal("a session that asked for no logs was sent one")
	}
}

// BenchmarkModernChildLogMeta: the _meta level a legacy session that set
// a level adds to each request to a modern child (logsAsked).
func BenchmarkModernChildLogMeta(b *testing.B) {
	r := newEndingRig(b)
	hs, err := parseDiscover([]byte(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"logging":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"2"}}}}`))
	if err != nil {
		b.Fatal(err)
	}
	if !r.s.setLogLevel(r.b, hs, &handshakeWait{id: []byte("1")}, []byte(`{"level":"warning"}`)) {
		b.Fatal("the pool did not take the level")
	}
	msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`))
	if err != nil {
		b.Fatal(err)
	}
	meta := []byte(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28"`)
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		_, out = r.s.logsAsked(&msg, true, meta)
	}
	if want := `,"io.modelcontextprotocol/logLevel":"warning"`; string(out[len(meta):]) != want {
		b.Fatalf("added %s, want %s", out[len(meta):], want)
	}
}
