//go:build unix

package importer

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/safefile"
)

// TestImportRefusesAFIFO: a FIFO in place of the client's file made the
// import wait for a writer forever, holding the edit lock.
func TestImportRefusesAFIFO(t *testing.T) {
	work, opts := setup(t, importCases[0])
	opts.File = filepath.Join(work, "fifo.json")
	if err := syscall.Mkfifo(opts.File, 0o600); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := Import(opts)
		errc <- err
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, safefile.ErrNotRegular) {
			t.Errorf("err = %v, want ErrNotRegular", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the import is stuck on the FIFO")
	}
}
