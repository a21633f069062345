// Package assets embeds Switchboard's icons, so the binary needs no files
// beside it. The PNGs are drawn by gen/main.go (`go run assets/gen/main.go`
// from the repository root) and committed.
package assets

import _ "embed"

// Icon is the 256x256 application icon (window, dashboard, desktop file).
//
//go:embed icon.png
var Icon []byte

// Tray icons, 64x64, for light panels, one per state of the pool.
var (
	// TrayIdle is shown while nothing is in flight.
	//
	//go:embed tray-idle.png
	TrayIdle []byte

	// TrayBusy is shown while requests are in flight, none past the hang
	// threshold.
	//
	//go:embed tray-busy.png
	TrayBusy []byte

	// TrayHung is shown while a request is past the hang threshold or a
	// server is marked failed.
	//
	//go:embed tray-hung.png
	TrayHung []byte
)

// Tray icons, 64x64, for dark panels: the same states in light colours.
var (
	// TrayIdleDark is TrayIdle for a dark panel.
	//
	//go:embed tray-idle-dark.png
	TrayIdleDark []byte

	// TrayBusyDark is TrayBusy for a dark panel.
	//
	//go:embed tray-busy-dark.png
	TrayBusyDark []byte

	// TrayHungDark is TrayHung for a dark panel.
	//
	//go:embed tray-hung-dark.png
	TrayHungDark []byte
)
