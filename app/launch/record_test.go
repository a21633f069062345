package launch

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/switchboard-mcp/switchboard/app/home"
)

// A pool a client starts runs the config file the last pool recorded, as
// long as that file exists; the default file otherwise.
func TestRecordedConfig(t *testing.T) {
	dir := t.TempDir()
	paths := home.Paths{Config: filepath.Join(dir, "config.json"), Run: filepath.Join(dir, "run")}
	if err := os.MkdirAll(paths.Run, 0o700); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(dir, "own.json")
	if err := os.WriteFile(own, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	record := func(content string) {
		t.Helper()
		if err := os.WriteFile(paths.ConfigRecordFile(), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := ConfigOf(paths); got != paths.Config {
		t.Errorf("no record: %q, want the default %q", got, paths.Config)
	}
	for _, c := range []struct{ record, want string }{
		{own + "\n", own},
		{own + "\r\n", own},
		{filepath.Join(dir, "gone.json") + "\n", paths.Config},
		{dir + "\n", paths.Config},
		{"own.json\n", paths.Config},
		{"", paths.Config},
	} {
		record(c.record)
		if got := ConfigOf(paths); got != c.want {
			t.Errorf("record %q: %q, want %q", c.record, got, c.want)
		}
	}
	record(own + "\n")
	if args := Args(RecordedConfig(paths)); !slices.Equal(args[len(args)-2:], []string{"--config", own}) {
		t.Errorf("args: %q", args)
	}
	if args := Args(""); slices.Contains(args, "--config") {
		t.Errorf("args for the default file: %q", args)
	}
}

// fromClients off in the recorded file keeps clients from starting a pool.
func TestAllowedReadsTheRecordedConfig(t *testing.T) {
	dir := t.TempDir()
	paths := home.Paths{Config: filepath.Join(dir, "config.json"), Run: filepath.Join(dir, "run")}
	if err := os.MkdirAll(paths.Run, 0o700); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(dir, "own.json")
	if err := os.WriteFile(own, []byte(`{"autostart": {"fromClients": false}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths.ConfigRecordFile(), []byte(own+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if Allowed(ConfigOf(paths)) {
		t.Error("clients may start a pool, though the recorded file says they may not")
	}
}
