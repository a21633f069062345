package ui

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"fyne.io/fyne/v2"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/safefile"
)

// dashState is what the dashboard keeps across runs, in Options.StateFile:
// its size, its view and the waterfall's zoom. It is a file of the UI's
// own, written whole when the window closes and before the app quits,
// rather than fyne's preferences, whose writes are deferred to a goroutine
// that may not run before the process ends.
type dashState struct {
	Width  float32 `json:"width,omitempty"`
	Height float32 `json:"height,omitempty"`
	Tab    string  `json:"tab,omitempty"`
	// SpanMs is the waterfall's span; Follow whether it follows now.
	SpanMs int64 `json:"waterfallSpanMs,omitempty"`
	Follow *bool `json:"waterfallFollow,omitempty"`
}

// maxStateFile bounds what loadState reads: the file is a few fields.
const maxStateFile = 64 << 10

// loadState reads the state at path; a missing file (a first run) or an
// unreadable one gives the defaults, the latter with a log line.
func (u *UI) loadState() dashState {
	var s dashState
	path := u.opts.StateFile
	if path == "" {
		return s
	}
	// On the UI goroutine: a FIFO or an endless file put there must not
	// stall it (safefile).
	data, err := safefile.Read(path, maxStateFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s
	case err == nil:
		err = json.Unmarshal(data, &s)
	}
	if err != nil {
		u.log.Warn("the dashboard's saved size and view are unreadable; using the defaults", "file", path, "err", err)
		return dashState{}
	}
	return s
}

// saveState writes s to the state file, replacing it whole.
func (u *UI) saveState(s dashState) {
	path := u.opts.StateFile
	if path == "" {
		return
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o700)
	}
	if err == nil {
		err = config.WriteFile(path, append(data, '\n'), 0o600)
	}
	if err != nil {
		u.log.Warn("could not save the dashboard's size and view", "file", path, "err", err)
	}
}

// defaultSize is the dashboard's first size: two overview cards wide.
var defaultSize = fyne.NewSize(1000, 660)

// restore gives the window the size, tab and waterfall zoom it had.
func (d *dashboard) restore() {
	s := d.u.loadState()
	size := defaultSize
	if s.Width > 0 && s.Height > 0 {
		size = fyne.NewSize(s.Width, s.Height)
	}
	d.win.Resize(fyne.NewSize(max(size.Width, 480), max(size.Height, 320)))
	tab := tabOverview
	if _, ok := d.tabOf[s.Tab]; ok {
		tab = s.Tab
	}
	d.selectTab(tab)
	w := d.waterfall
	if s.SpanMs > 0 {
		w.v.Span = min(max(time.Duration(s.SpanMs)*time.Millisecond, minSpan), maxSpan)
	}
	w.v.Follow = s.Follow == nil || *s.Follow
	w.showFollow()
}

// state is what save keeps of the window as it is.
func (d *dashboard) state() dashState {
	var s dashState
	if size := d.win.Canvas().Size(); size.Width > 0 && size.Height > 0 {
		s.Width, s.Height = size.Width, size.Height
	}
	if t := d.tabs.Selected(); t != nil {
		for name, ti := range d.tabOf {
			if ti == t {
				s.Tab = name
			}
		}
	}
	s.SpanMs = int64(d.waterfall.v.Span / time.Millisecond)
	follow := d.waterfall.v.Follow || d.waterfall.hist != nil
	s.Follow = &follow
	return s
}

// save keeps the window's size, tab and waterfall zoom for the next run.
func (d *dashboard) save() { d.u.saveState(d.state()) }

// SaveState keeps the dashboard's size, view and waterfall zoom for the
// next run, if it was opened. The app calls it on the UI goroutine
// (fyne.DoAndWait) as it quits, before the window toolkit stops.
func (u *UI) SaveState() {
	if u.dash != nil {
		u.dash.save()
	}
}
