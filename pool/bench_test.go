package pool_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkRoundTrip measures one echo call at a time, through the pool's
// stdio front door and over a direct pipe to the same fake server, in the
// same run: the difference is the pool's added latency. The 100KiB case
// is a tool call carrying a file's contents both ways, where the pool's
// cost is in reading every byte, not in waking up.
func BenchmarkRoundTrip(b *testing.B) {
	for _, size := range []struct {
		name string
		text string
	}{{"small", "x"}, {"100KiB", strings.Repeat("0123456789abcdef", 100<<10/16)}} {
		// The call's bytes are made once: only its id changes, so the
		// client's own work stays out of the figures.
		tail := fmt.Sprintf(`,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`+"\n", size.text)
		call := func(w *bufio.Writer, i int) error {
			w.WriteString(`{"jsonrpc":"2.0","id":`)
			w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(i+1), 10))
			w.WriteString(tail)
			return w.Flush()
		}
		b.Run(size.name+"/direct", func(b *testing.B) {
			cmd := exec.Command(fakeBin)
			in, _ := cmd.StdinPipe()
			outPipe, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() { in.Close(); cmd.Wait() }()
			out := bufio.NewReaderSize(outPipe, 256<<10)
			fmt.Fprintln(in, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
			out.ReadBytes('\n')
			w := bufio.NewWriterSize(in, 256<<10)
			b.SetBytes(int64(2 * len(size.text)))
			b.ResetTimer()
			for i := range b.N {
				if err := call(w, i); err != nil {
					b.Fatal(err)
				}
				if _, err := out.ReadBytes('\n'); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(size.name+"/pool", func(b *testing.B) {
			tp := newTestPoolTB(b, fake("srv"))
			conn, err := net.Dial("unix", tp.sock)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			// Raw lines both ways, as over the direct pipe: the harness's
			// client would decode every answer.
			out := bufio.NewReaderSize(conn, 256<<10)
			fmt.Fprintln(conn, `{"server":"srv"}`)
			fmt.Fprintln(conn, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
			for range 2 { // the welcome, the initialize answer
				if _, err := out.ReadBytes('\n'); err != nil {
					b.Fatal(err)
				}
			}
			w := bufio.NewWriterSize(conn, 256<<10)
			b.SetBytes(int64(2 * len(size.text)))
			b.ResetTimer()
			for i := range b.N {
				if err := call(w, i); err != nil {
					b.Fatal(err)
				}
				line, err := out.ReadBytes('\n')
				if err != nil || !bytes.Contains(line, []byte(`"result"`)) {
					b.Fatalf("answer %q: %v", line, err)
				}
			}
		})
	}
}
