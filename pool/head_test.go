package pool

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// headOf is the head mem holds, as a shim reads it.
func headOf(mem []byte) string {
	n := int(binary.LittleEndian.Uint32(mem))
	if n > len(mem)-wire.HeadOffset {
		return "!" // a length past the end: a torn or broken mirror
	}
	return string(mem[wire.HeadOffset : wire.HeadOffset+n])
}

// A head longer than the mirror holds (longer than any message the pool
// takes) is not kept, not kept in part: none is, until its line ends and
// the next begins. A long head's pages are given back once its line
// ends.
func TestHeadMirrorKeepsNoPartOfALineItCannotHold(t *testing.T) {
	mem := make([]byte, wire.HeadOffset+headPunchFrom+64<<10)
	var punched []int
	m := newHeadMirrorOf(mem, func(b []byte) { punched = append(punched, len(b)) }, func() {})
	m.saw([]byte("x\nabc"))
	if got := headOf(mem); got != "abc" {
		t.Fatalf("head %q, want abc", got)
	}
	m.saw([]byte(strings.Repeat("d", len(mem))))
	if got := headOf(mem); got != "" {
		t.Fatalf("a line longer than the mirror left the head %q; want none", got[:min(len(got), 16)])
	}
	m.saw([]byte("e"))
	if got := headOf(mem); got != "" {
		t.Fatalf("more of that line left the head %q; want none", got)
	}
	m.saw([]byte("f\ng"))
	if got := headOf(mem); got != "g" {
		t.Fatalf("after the long line ended the head is %q, want g", got)
	}
	m.saw([]byte(strings.Repeat("h", headPunchFrom+1)))
	m.saw([]byte("\n"))
	if got := headOf(mem); got != "" || len(punched) != 1 {
		t.Fatalf("after a long head ended: head %q, pages given back %v times; want none, once", got, punched)
	}
}
