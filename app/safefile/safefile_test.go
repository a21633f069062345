//go:build unix

package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "config.json")
	os.WriteFile(regular, []byte(`{"ok":true}`), 0o600)
	link := filepath.Join(dir, "link.json")
	os.Symlink(regular, link)
	zero := filepath.Join(dir, "zero.json")
	os.Symlink("/dev/zero", zero)
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, make([]byte, 2048), 0o600)
	for _, tc := range []struct {
		path string
		want error
	}{
		{regular, nil},
		{link, nil},
		{zero, ErrNotRegular},
		{fifo, ErrNotRegular}, // returns at once: no writer needed
		{dir, ErrNotRegular},
		{big, ErrTooLarge},
		{filepath.Join(dir, "missing"), os.ErrNotExist},
	} {
		data, err := Read(tc.path, 1024)
		if tc.want == nil && (err != nil || string(data) != `{"ok":true}`) {
			t.Errorf("%s: %q, %v", filepath.Base(tc.path), data, err)
		}
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", filepath.Base(tc.path), err, tc.want)
		}
	}
}
