package app

import (
	"io/fs"
	"testing"
)

// TestExecutable: what an upgrade or the tray's restart accepts as a
// program. Windows reports no execute bit on any file, so a check of the
// bits alone refused every binary there ("Restart Switchboard" failed).
func TestExecutable(t *testing.T) {
	for _, tc := range []struct {
		goos, path string
		mode       fs.FileMode
		want       bool
	}{
		{"linux", "/usr/bin/switchboard", 0o755, true},
		{"linux", "/usr/bin/switchboard", 0o700, true},
		{"linux", "/home/me/switchboard", 0o644, false},
		{"linux", "/usr/bin", fs.ModeDir | 0o755, false},
		{"darwin", "/Applications/Switchboard.app/Contents/MacOS/switchboard", 0o755, true},
		{"windows", `C:\Users\me\AppData\Local\Programs\Switchboard\switchboard.exe`, 0o666, true},
		{"windows", `C:\Switchboard\SWITCHBOARD.EXE`, 0o444, true},
		{"windows", `C:\Switchboard\switchboard`, 0o666, false},
		{"windows", `C:\Switchboard\notes.txt`, 0o666, false},
		{"windows", `C:\Switchboard.exe`, fs.ModeDir | 0o777, false},
	} {
		if got := executable(tc.goos, tc.path, tc.mode); got != tc.want {
			t.Errorf("executable(%s, %s, %v) = %v, want %v", tc.goos, tc.path, tc.mode, got, tc.want)
		}
	}
}
