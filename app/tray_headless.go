//go:build headless

package app

import (
	"context"
	"errors"
)

// RunTray is the tray app, which a headless build (-tags headless: the
// cross-compiled serve/connect/pool of the macOS recipe, built without
// cgo) does not have.
func RunTray(context.Context, Options, bool) error {
	return errors.New("this build has no tray app (built with -tags headless): run `switchboard serve`")
}
