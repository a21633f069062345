//go:build unix && !linux

package pool_test

import (
	"os"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// newLedger: the shim makes no ledger here (it would be a memfd), so the
// session is attached without one.
func newLedger(*testing.T) (*os.File, func() []wire.Lost) {
	return nil, func() []wire.Lost { return nil }
}
