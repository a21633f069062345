//go:build windows

package store

import (
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// mapFile maps the first size bytes of f, shared: stores reach the file
// (the system cache) as they are made, and stay there if the process
// dies.
func mapFile(f *os.File, size int) ([]byte, func() error, error) {
	h, err := windows.CreateFileMapping(windows.Handle(f.Fd()), nil, windows.PAGE_READWRITE, 0, uint32(size), nil)
	if err != nil {
		return nil, nil, err
	}
	addr, err := windows.MapViewOfFile(h, windows.FILE_MAP_WRITE, 0, 0, uintptr(size))
	windows.CloseHandle(h) // the view keeps the mapping
	if err != nil {
		return nil, nil, err
	}
	mem := unsafe.Slice((*byte)(unsafe.Pointer(addr)), size)
	return mem, func() error { return windows.UnmapViewOfFile(addr) }, nil
}
