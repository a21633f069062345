package pool_test

import (
	"bufio"
	"fmt"
	"os/exec"
	"testing"
)

// BenchmarkRoundTrip measures one echo call at a time, through the pool's
// stdio front door and over a direct pipe to the same fake server, in the
// same run: the difference is the pool's added latency.
func BenchmarkRoundTrip(b *testing.B) {
	b.Run("direct", func(b *testing.B) {
		cmd := exec.Command(fakeBin)
		in, _ := cmd.StdinPipe()
		outPipe, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { in.Close(); cmd.Wait() }()
		out := bufio.NewReader(outPipe)
		fmt.Fprintln(in, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
		out.ReadBytes('\n')
		b.ResetTimer()
		for i := range b.N {
			fmt.Fprintf(in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`+"\n", i+1)
			if _, err := out.ReadBytes('\n'); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pool", func(b *testing.B) {
		tp := newTestPoolTB(b, fake("srv"))
		c := tp.dial(b, "srv")
		c.initialize("b", "")
		b.ResetTimer()
		for i := range b.N {
			c.sendf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, i+1)
			c.recv()
		}
	})
}
