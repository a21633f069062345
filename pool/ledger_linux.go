package pool

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// ledgerSeals are the seals a ledger must carry: the pool stores into its
// mapping on every request, and a store past the end of a file that
// shrank under it raises SIGBUS, which would end the pool and every
// session on it. Growing is refused too, so that the size checked is the
// size for good.
const ledgerSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW

// openLedger maps the ledger a shim sent: a memfd sealed against
// resizing (ledgerSeals), of wire.LedgerSize bytes. f is closed: the
// mapping stays.
func openLedger(f *os.File) (*ledger, error) {
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	var mem []byte
	var lerr error
	if err := rc.Control(func(fd uintptr) { mem, lerr = mapSealed(int(fd)) }); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if lerr != nil {
		return nil, lerr
	}
	return &ledger{mem: mem, drop: func() { _ = unix.Munmap(mem) }}, nil
}

// mapSealed maps fd once its seals say its size cannot change, and its
// size is then the ledger's.
func mapSealed(fd int) ([]byte, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil { // EINVAL: not a memfd, nor anything else that seals
		return nil, fmt.Errorf("ledger not sealed: %w", err)
	}
	if seals&ledgerSeals != ledgerSeals {
		return nil, fmt.Errorf("ledger seals %#x lack %#x: it could shrink under the pool", seals, ledgerSeals&^seals)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if st.Size != wire.LedgerSize {
		return nil, fmt.Errorf("ledger of %d bytes, want %d", st.Size, wire.LedgerSize)
	}
	mem, err := unix.Mmap(fd, 0, wire.LedgerSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map ledger: %w", err)
	}
	return mem, nil
}
