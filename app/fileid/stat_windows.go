//go:build windows

package fileid

import (
	"io/fs"
	"os"

	"golang.org/x/sys/windows"
)

// Stat is os.Stat of path with the file's identity (volume and file
// index) read now, through a handle that asks for no access and shares
// everything: it conflicts with no other handle, a mapping's or a running
// program's included.
func Stat(path string) (os.FileInfo, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	h, err := windows.CreateFile(p, 0, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(h), path)
	defer f.Close()
	return f.Stat()
}
