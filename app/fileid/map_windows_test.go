//go:build windows

package fileid

import (
	"os"
	"testing"

	"golang.org/x/sys/windows"
)

func mapForWriting(t *testing.T, f *os.File, size int) (unmap func()) {
	t.Helper()
	h, err := windows.CreateFileMapping(windows.Handle(f.Fd()), nil, windows.PAGE_READWRITE, 0, uint32(size), nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := windows.MapViewOfFile(h, windows.FILE_MAP_WRITE, 0, 0, uintptr(size))
	windows.CloseHandle(h) // the view keeps the mapping
	if err != nil {
		t.Fatal(err)
	}
	return func() { _ = windows.UnmapViewOfFile(addr) }
}
