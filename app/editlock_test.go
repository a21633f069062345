package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/app/config"
)

// Setups of four clients and imports of eight files, all at once into
// one Switchboard config: each reads the config, adds its server and
// writes it back, and without the edit lock one's write drops what
// another added meanwhile, while its client already points at
// `connect NAME`. Every server must be there, and every client rewritten.
func TestConcurrentSetupsAndImportsKeepEveryServer(t *testing.T) {
	paths := sbHome(t)
	user := t.TempDir()
	t.Setenv("HOME", user)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(user, ".config"))
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	t.Chdir(user)
	write := func(path, doc string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	entry := func(name string) string {
		return fmt.Sprintf(`{%q: {"command": "uvx", "args": ["mcp-%s"]}}`, name, name)
	}
	clients := map[string]string{ // client: its file
		"claude-desktop": filepath.Join(user, ".config", "Claude", "claude_desktop_config.json"),
		"claude-code":    filepath.Join(user, ".claude.json"),
		"cursor":         filepath.Join(user, ".cursor", "mcp.json"),
		"vscode":         filepath.Join(user, ".config", "Code", "User", "mcp.json"),
	}
	for c, f := range clients {
		key := "mcpServers"
		if c == "vscode" {
			key = "servers"
		}
		write(f, fmt.Sprintf(`{%q: %s}`, key, entry(c)))
	}
	var imports []string
	for i := range 8 {
		f := filepath.Join(user, "imports", fmt.Sprintf("i%d.json", i))
		write(f, `{"mcpServers": `+entry(fmt.Sprintf("i%d", i))+`}`)
		imports = append(imports, f)
	}

	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, len(clients)+len(imports))
	for c := range clients {
		wg.Go(func() {
			<-start
			if _, err := Setup(context.Background(), c, ""); err != nil {
				errs <- fmt.Errorf("setup %s: %w", c, err)
			}
		})
	}
	for _, f := range imports {
		wg.Go(func() {
			<-start
			if _, err := Import(context.Background(), ImportOptions{From: "claude-desktop", File: f}); err != nil {
				errs <- fmt.Errorf("import %s: %w", f, err)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	f, err := config.Load(paths.Config)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for c := range clients {
		if _, ok := f.Servers[c]; !ok {
			missing = append(missing, c)
		}
	}
	for i := range imports {
		if _, ok := f.Servers[fmt.Sprintf("i%d", i)]; !ok {
			missing = append(missing, fmt.Sprintf("i%d", i))
		}
	}
	if len(missing) > 0 {
		t.Errorf("servers missing from %s: %v", paths.Config, missing)
	}
	for c, file := range clients {
		if data, _ := os.ReadFile(file); !strings.Contains(string(data), `"connect"`) {
			t.Errorf("%s's file was not rewritten:\n%s", c, data)
		}
	}
}
