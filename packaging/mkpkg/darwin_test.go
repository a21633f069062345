package main

import (
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboard-mcp/switchboard/app/autostart"
)

var update = flag.Bool("update", false, "rewrite the packaged templates from the code that writes them")

// bundleExe is the tray app's executable in the macOS bundle.
const bundleExe = "/Applications/Switchboard.app/Contents/MacOS/switchboard"

// The LaunchAgent shipped in packaging/darwin is exactly what `switchboard
// autostart on` writes for the bundle's executable, so the two cannot
// drift.
func TestDarwinLaunchAgentMatchesAutostart(t *testing.T) {
	path := filepath.Join("..", "darwin", autostart.Label+".plist")
	want := autostart.LaunchAgentPlist(bundleExe, nil)
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s differs from autostart.LaunchAgentPlist (go test ./packaging/mkpkg -update rewrites it):\n%s", path, got)
	}
}

// The keys merged into the bundle's Info.plist make it a menu-bar-only
// app (no Dock icon), which is what a tray app is.
func TestDarwinInfoPlistIsTrayOnly(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "darwin", "Info-extra.plist"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Dict struct {
			Items []struct {
				XMLName xml.Name
				Text    string `xml:",chardata"`
			} `xml:",any"`
		} `xml:"dict"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	items := doc.Dict.Items
	for i := 0; i+1 < len(items); i++ {
		if items[i].XMLName.Local == "key" && items[i].Text == "LSUIElement" {
			if items[i+1].XMLName.Local != "true" {
				t.Fatalf("LSUIElement is <%s>, want <true/>", items[i+1].XMLName.Local)
			}
			return
		}
	}
	t.Fatal("Info-extra.plist has no LSUIElement")
}
