package pool

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// newHeadMirror makes an attached session's head mirror (wire.HeadOffset)
// for heads of up to max bytes: a memfd sealed at its size, mapped, and
// the file to send the shim (the caller closes it once sent: the mapping
// stays). The memfd is sparse: a page is memory only once a head reached
// it.
func newHeadMirror(max int) (*headMirror, *os.File, error) {
	size := wire.HeadOffset + max
	fd, err := unix.MemfdCreate("switchboard-head", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, fmt.Errorf("head memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "switchboard-head")
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("head memfd: %w", err)
	}
	// Sealed before it is mapped or sent: the shim cannot shrink it under
	// the pool's stores (SIGBUS).
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("seal head memfd: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("map head memfd: %w", err)
	}
	punch := func(b []byte) { _ = unix.Madvise(b, unix.MADV_REMOVE) }
	return newHeadMirrorOf(mem, punch, func() { _ = unix.Munmap(mem) }), f, nil
}
