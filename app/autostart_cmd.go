package app

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/switchboard-mcp/switchboard/app/autostart"
)

// Autostart turns starting at login "on" or "off" for this binary, or
// reports its "status", in the OS's own format (package autostart). The
// login item names the binary by the path setup writes (stableBinary),
// which outlives an upgrade.
func Autostart(action string) (autostart.Status, error) {
	e, err := autostart.ForThisOS()
	if err != nil {
		return autostart.Status{}, err
	}
	switch action {
	case "on":
		exe, err := stableBinary(os.Args[0])
		if err != nil {
			return autostart.Status{}, err
		}
		err = e.Enable(exe)
		if err != nil {
			return autostart.Status{}, fmt.Errorf("autostart on: %w", err)
		}
	case "off":
		if err := e.Disable(); err != nil {
			return autostart.Status{}, fmt.Errorf("autostart off: %w", err)
		}
	case "status", "":
	default:
		return autostart.Status{}, fmt.Errorf("autostart %q: say on, off or status", action)
	}
	return e.Status()
}

// thisBinary is the running switchboard's absolute path, links resolved:
// the file this process runs, whatever path it was called by.
func thisBinary() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this program: %w", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return exe, nil
}
