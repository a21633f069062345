package autostart

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fakeRegistry is the Run key in memory.
type fakeRegistry map[string]string

func (f fakeRegistry) Get(name string) (string, bool, error) { v, ok := f[name]; return v, ok, nil }
func (f fakeRegistry) Set(name, value string) error          { f[name] = value; return nil }
func (f fakeRegistry) Delete(name string) error              { delete(f, name); return nil }

// On, on again, status, off, off again, for every format: idempotent and
// reversible, and status reads back the exact path it was given, and the
// environment: none for the default home, else the variables that place
// the home it was turned on with. On the first edition no format
// recorded the home: the app started at login served the default one.
func TestRoundTrips(t *testing.T) {
	exe := `/opt/My Apps/switch"board$1\bin/switch%board`
	for _, env := range []map[string]string{nil,
		{"SWITCHBOARD_HOME": `/home/me/my "sb" $HOME 100% \ <&'>\`},
		{"XDG_CONFIG_HOME": "/home/me/xc", "XDG_STATE_HOME": `C:\Users\me\state\`},
	} {
		t.Run(fmt.Sprint(len(env)), func(t *testing.T) { testRoundTrips(t, exe, env) })
	}
}

func testRoundTrips(t *testing.T, exe string, env map[string]string) {
	for _, tc := range []struct {
		name  string
		entry func(dir string) (Entry, func() int)
	}{
		{"xdg", func(dir string) (Entry, func() int) { return XDG{Dir: dir}, countFiles(dir) }},
		{"launchagent", func(dir string) (Entry, func() int) { return LaunchAgent{Dir: dir}, countFiles(dir) }},
		{"windows-run", func(string) (Entry, func() int) {
			reg := fakeRegistry{"Other": `"C:\other.exe"`}
			return RunValue{Registry: reg}, func() int { return len(reg) - 1 }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, entries := tc.entry(filepath.Join(t.TempDir(), "nested", "autostart"))
			st, err := e.Status()
			if err != nil || st.Enabled {
				t.Fatalf("fresh status: %+v, %v", st, err)
			}
			// status --json has every documented key, off too.
			if b, err := json.Marshal(st); err != nil || !strings.Contains(string(b), `"command":""`) {
				t.Errorf("fresh status as JSON: %s %v, want \"command\": \"\"", b, err)
			}
			for range 2 {
				if err := e.Enable(exe, env); err != nil {
					t.Fatal(err)
				}
			}
			st, err = e.Status()
			if err != nil || !st.Enabled || st.Command != exe || st.Where == "" || !maps.Equal(st.Env, env) {
				t.Fatalf("after on: %+v, %v (want command %q, env %q)", st, err, exe, env)
			}
			if n := entries(); n != 1 {
				t.Fatalf("%d entries after enabling twice", n)
			}
			for range 2 {
				if err := e.Disable(); err != nil {
					t.Fatal(err)
				}
			}
			if st, err = e.Status(); err != nil || st.Enabled {
				t.Fatalf("after off: %+v, %v", st, err)
			}
			if n := entries(); n != 0 {
				t.Fatalf("%d entries left after off", n)
			}
		})
	}
}

func countFiles(dir string) func() int {
	return func() int {
		ents, _ := os.ReadDir(dir)
		return len(ents)
	}
}

func TestFileContents(t *testing.T) {
	home := map[string]string{"SWITCHBOARD_HOME": "/home/me/sb"}
	for _, tc := range []struct{ got, golden string }{
		{DesktopEntry("/usr/bin/switchboard", nil), "switchboard.desktop"},
		{DesktopEntry("/usr/bin/switchboard", home), "switchboard-home.desktop"},
		{LaunchAgentPlist("/Applications/Switchboard.app/Contents/MacOS/switchboard", nil), Label + ".plist"},
		{LaunchAgentPlist("/Applications/Switchboard.app/Contents/MacOS/switchboard", home), Label + "-home.plist"},
	} {
		path := filepath.Join("testdata", tc.golden)
		if *update {
			if err := os.WriteFile(path, []byte(tc.got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if tc.got != string(want) {
			t.Errorf("%s differs (go test -update rewrites it, if the change is intended):\n%s\nwant:\n%s", tc.golden, tc.got, want)
		}
	}
}

// The desktop's own validator accepts the file, odd path and home and all.
func TestDesktopEntryValidates(t *testing.T) {
	validator, err := exec.LookPath("desktop-file-validate")
	if err != nil {
		t.Skip("desktop-file-validate is not installed (Debian: desktop-file-utils)")
	}
	for _, env := range []map[string]string{nil, {"SWITCHBOARD_HOME": `/home/me/100% "my" $sb\`}} {
		x := XDG{Dir: t.TempDir()}
		if err := x.Enable(`/opt/My Apps/switch"board%/switchboard`, env); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(validator, x.path()).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			t.Fatalf("desktop-file-validate: %v\n%s", err, out)
		}
	}
}

// TryExec names the binary, odd path and all, whether Exec starts it
// directly or through env(1): a desktop skips the item once the binary
// is gone, instead of failing to start it at every login.
func TestDesktopEntryTryExecIsTheBinary(t *testing.T) {
	exe := "/opt/My Apps/switch\"board%$\\/switchboard"
	unescape := strings.NewReplacer(`\\`, `\`, `\n`, "\n", `\t`, "\t", `\r`, "\r", `\s`, " ")
	for _, env := range []map[string]string{nil, {"SWITCHBOARD_HOME": "/home/me/sb"}} {
		var tryExec []string
		for _, line := range strings.Split(DesktopEntry(exe, env), "\n") {
			if v, ok := strings.CutPrefix(line, "TryExec="); ok {
				tryExec = append(tryExec, unescape.Replace(v))
			}
		}
		if len(tryExec) != 1 || tryExec[0] != exe {
			t.Errorf("env %v: TryExec %q, want [%q]", env, tryExec, exe)
		}
	}
}

// A program run through env(1) must not look like a variable to set.
func TestDesktopEntryRefusesAnExeWithEquals(t *testing.T) {
	x := XDG{Dir: t.TempDir()}
	if err := x.Enable("/opt/a=b/switchboard", map[string]string{"SWITCHBOARD_HOME": "/sb"}); err == nil {
		t.Error("enabled /opt/a=b/switchboard through env")
	}
	if err := x.Enable("/opt/a=b/switchboard", nil); err != nil {
		t.Errorf("without env: %v", err)
	}
}
