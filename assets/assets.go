// Package assets embeds Switchboard's icons, so the binary needs no files
// beside it.
package assets

import _ "embed"

// Icon is the 256x256 application icon.
//
//go:embed icon.png
var Icon []byte

// Tray icons, one per state, for light panels: idle (nothing in flight),
// busy (requests in flight) and hung (a request passed the hang threshold).
var (
	//go:embed tray-idle.png
	TrayIdle []byte
	//go:embed tray-busy.png
	TrayBusy []byte
	//go:embed tray-hung.png
	TrayHung []byte
)

// Tray icons for dark panels.
var (
	//go:embed tray-idle-dark.png
	TrayIdleDark []byte
	//go:embed tray-busy-dark.png
	TrayBusyDark []byte
	//go:embed tray-hung-dark.png
	TrayHungDark []byte
)
