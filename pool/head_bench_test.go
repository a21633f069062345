//go:build linux

package pool

import (
	"io"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// lineAtATime is a client's pipe that gives one read per message, as a
// client that writes each of its requests as it makes it does.
type lineAtATime struct {
	lines [][]byte
	i     int
}

func (r *lineAtATime) Read(p []byte) (int, error) {
	n := copy(p, r.lines[r.i%len(r.lines)])
	r.i++
	return n, nil
}

// BenchmarkHeadMirror: an attached session's reader splitting its
// client's input into lines without the head mirror ("none") and with it,
// for requests that arrive whole ("whole": the common case, a look at
// the read's last byte) and for requests that each arrive in two reads
// ("split": a copy of the first part and two length stores).
func BenchmarkHeadMirror(b *testing.B) {
	line := append(append([]byte(nil), benchRequest...), '\n')
	for _, bc := range []struct {
		name   string
		mirror bool
		lines  [][]byte
	}{
		{"whole/none", false, [][]byte{line}},
		{"whole/mirror", true, [][]byte{line}},
		{"split/none", false, [][]byte{line[:40], line[40:]}},
		{"split/mirror", true, [][]byte{line[:40], line[40:]}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var r io.Reader = &lineAtATime{lines: bc.lines}
			if bc.mirror {
				m, f, err := newHeadMirror(wire.MaxMessageBytes)
				if err != nil {
					b.Skip(err)
				}
				f.Close()
				defer m.close()
				r = mirrorHead(r, m)
			}
			lr := newLineReader(r, wire.MaxMessageBytes)
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			for range b.N {
				if _, err := lr.next(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
