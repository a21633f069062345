//go:build unix

package pool

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// openLedger maps the ledger a shim sent. f is closed: the mapping stays.
func openLedger(f *os.File) (*ledger, error) {
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if st.Size() != wire.LedgerSize {
		return nil, fmt.Errorf("ledger of %d bytes, want %d", st.Size(), wire.LedgerSize)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	var mem []byte
	var merr error
	if err := rc.Control(func(fd uintptr) {
		mem, merr = unix.Mmap(int(fd), 0, wire.LedgerSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if merr != nil {
		return nil, fmt.Errorf("map ledger: %w", merr)
	}
	return &ledger{mem: mem, drop: func() { _ = unix.Munmap(mem) }}, nil
}
