package shim

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// newLedger makes the session's ledger (wire.Ledger): memory the shim
// owns and the pool writes, so that the requests in flight are known
// here when the pool dies. It is sealed at its size: the pool maps only
// a ledger that cannot shrink under it. nil if the system has no memfd,
// or cannot seal one.
func newLedger() *os.File {
	fd, err := unix.MemfdCreate("switchboard-ledger", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil
	}
	if err := unix.Ftruncate(fd, wire.LedgerSize); err != nil {
		unix.Close(fd)
		return nil
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), "switchboard-ledger")
}

// clearLedger frees every slot of f, and the pages they took: the size
// is sealed, so it punches a hole where it once truncated.
func clearLedger(f *os.File) {
	if unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, wire.LedgerSize) != nil {
		_, _ = f.WriteAt(make([]byte, wire.LedgerSize), 0)
	}
}
