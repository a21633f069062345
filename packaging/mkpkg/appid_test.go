package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/app/autostart"
	"github.com/switchboard-mcp/switchboard/app/version"
)

// One application ID everywhere. The app runs with version.AppID (fyne's
// app ID, which it gives Wayland as the window's app_id), and a desktop
// ties a window to its launcher by the launcher's file name: so the
// desktop entry is installed as AppID.desktop, its icon is AppID too, and
// FyneApp.toml (what `fyne package` names the macOS bundle by), the
// LaunchAgent, install.sh and the package test say the same. On X11 the
// window's WM_CLASS is its title, which the desktop entry names in
// StartupWMClass (the GUI smoke test compares it with the real window's).
func TestOneAppID(t *testing.T) {
	id := version.AppID
	root := filepath.Join("..", "..")
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	field := func(path, pattern string) string {
		t.Helper()
		m := regexp.MustCompile(`(?m)` + pattern).FindStringSubmatch(read(path))
		if m == nil {
			t.Errorf("%s has no line matching %s", path, pattern)
			return ""
		}
		return m[1]
	}
	for _, tc := range []struct{ what, got string }{
		{"FyneApp.toml's ID", field("FyneApp.toml", `^\s*ID\s*=\s*"(.*)"`)},
		{"the desktop entry's Icon", field("packaging/linux/switchboard.desktop", `^Icon=(.*)$`)},
		{"the name mkpkg installs the desktop entry and icons as", appID},
		{"install.sh's id", field("packaging/linux/install.sh", `^id=(\S*)`)},
		{"test-packages.sh's id", field("packaging/linux/test-packages.sh", `^id=(\S*)`)},
		{"the LaunchAgent label", autostart.Label},
	} {
		if tc.got != id {
			t.Errorf("%s is %q, the app's ID %q", tc.what, tc.got, id)
		}
	}
	if entry := autostart.DesktopEntry("/usr/bin/switchboard", nil); !strings.Contains(entry, "\nIcon="+id+"\n") {
		t.Errorf("the login item's icon is not %q:\n%s", id, entry)
	}
	if class := field("packaging/linux/switchboard.desktop", `^StartupWMClass=(.*)$`); class == "" {
		t.Error("the desktop entry has no StartupWMClass: a desktop cannot tie the dashboard window to it on X11")
	}
}
