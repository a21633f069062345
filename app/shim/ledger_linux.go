package shim

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// newLedger makes the session's ledger (wire.Ledger): memory the shim
// owns and the pool writes, so that the requests in flight are known
// here when the pool dies. nil if the system has no memfd.
func newLedger() *os.File {
	fd, err := unix.MemfdCreate("switchboard-ledger", unix.MFD_CLOEXEC)
	if err != nil {
		return nil
	}
	if err := unix.Ftruncate(fd, wire.LedgerSize); err != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), "switchboard-ledger")
}
