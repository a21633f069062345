package main

import (
	"os/exec"
	"strings"
	"testing"
)

// What each program and the pool may link. The pool is the core that the
// small connect program and every front door share: no GUI, no SQL, no
// store, no UI, no test helper. The product binary links no test server
// (the load tool, cmd/switchboard-bench, has it), and the connect program
// stays small: no GUI and no SQLite.
func TestDependencyRules(t *testing.T) {
	const mod = "github.com/switchboard-mcp/switchboard/"
	cases := []struct {
		pkg       string
		forbidden []string
	}{
		{mod + "pool", []string{"fyne.io/", "database/sql", "github.com/mattn/go-sqlite3", mod + "store", mod + "ui", mod + "app", mod + "pool/mcptest", "testing"}},
		{mod + "cmd/switchboard", []string{mod + "pool/mcptest", "testing"}},
		{mod + "cmd/switchboard-connect", []string{"fyne.io/", "database/sql", "github.com/mattn/go-sqlite3", mod + "pool/mcptest", "testing"}},
	}
	for _, c := range cases {
		t.Run(strings.TrimPrefix(c.pkg, mod), func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", c.pkg)
			cmd.Env = append(cmd.Environ(), "GOFLAGS=-tags=sqlite_omit_load_extension")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", c.pkg, err)
			}
			deps := strings.Fields(string(out))
			if len(deps) < 10 {
				t.Fatalf("go list -deps %s listed only %v", c.pkg, deps)
			}
			for _, d := range deps {
				for _, f := range c.forbidden {
					if d == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(d, f)) || strings.HasPrefix(d, f+"/") {
						t.Errorf("%s links %s", c.pkg, d)
					}
				}
			}
		})
	}
}
