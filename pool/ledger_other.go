//go:build !linux

package pool

import (
	"errors"
	"os"
)

// openLedger refuses every ledger: no shim makes one here (it would be a
// memfd), and the pool cannot prove that another file will not shrink
// under its mapping, which would end the pool (SIGBUS) on its next store.
func openLedger(f *os.File) (*ledger, error) {
	f.Close()
	return nil, errors.New("no ledger on this platform")
}
