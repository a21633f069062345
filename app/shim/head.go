package shim

import (
	"encoding/binary"
	"os"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// takeHead reads the head that the pool which went away kept in f
// (wire.HeadOffset): the start of a line its client had not ended, which
// that pool read from the client's pipe, for the next pool to read ahead
// of the rest. It closes f; nil f, or a head it does not hold, is none.
func takeHead(f *os.File) []byte {
	if f == nil {
		return nil
	}
	defer f.Close()
	var word [wire.HeadOffset]byte
	if _, err := f.ReadAt(word[:], 0); err != nil {
		return nil
	}
	n := int64(binary.LittleEndian.Uint32(word[:]))
	st, err := f.Stat()
	if err != nil || n == 0 || n > st.Size()-wire.HeadOffset {
		return nil
	}
	head := make([]byte, n)
	if _, err := f.ReadAt(head, wire.HeadOffset); err != nil {
		return nil
	}
	return head
}

// dropHead closes f, a head the shim does not need: the pool ended the
// session with a Farewell, whose Pending holds the head already.
func dropHead(f *os.File) {
	if f != nil {
		f.Close()
	}
}
