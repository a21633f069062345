package main

import (
	"os/exec"
	"strings"
	"testing"
)

// What each program and the pool may link, on each desktop system. The
// pool is the core that the small connect program and every front door
// share: no GUI, no SQL, no store, no UI, no test helper. The product
// binary links no test server and no load generator (the load tool,
// cmd/switchboard-bench, has them), and the connect program stays small:
// no GUI and no SQLite.
func TestDependencyRules(t *testing.T) {
	const mod = "github.com/switchboard-mcp/switchboard/"
	testOnly := []string{mod + "pool/mcptest", mod + "app/loadgen", "testing", "net/http/httptest"}
	cases := []struct {
		pkg       string
		forbidden []string
	}{
		{mod + "pool", append([]string{"fyne.io/", "database/sql", "github.com/mattn/go-sqlite3", mod + "store", mod + "ui", mod + "app"}, testOnly...)},
		{mod + "cmd/switchboard", testOnly},
		{mod + "cmd/switchboard-connect", append([]string{"fyne.io/", "database/sql", "github.com/mattn/go-sqlite3"}, testOnly...)},
	}
	for _, goos := range []string{"linux", "darwin", "windows"} {
		for _, c := range cases {
			t.Run(goos+"/"+strings.TrimPrefix(c.pkg, mod), func(t *testing.T) {
				checkDeps(t, goos, c.pkg, c.forbidden)
			})
		}
	}
}

// checkDeps fails t for each package pkg links, built for goos, that
// forbidden names (a package, its subpackages, or a prefix ending in /).
func checkDeps(t *testing.T, goos, pkg string, forbidden []string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", pkg)
	cmd.Env = append(cmd.Environ(), "GOFLAGS=-tags=sqlite_omit_load_extension", "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps %s listed only %v", pkg, deps)
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(d, f)) || strings.HasPrefix(d, f+"/") {
				t.Errorf("%s links %s", pkg, d)
			}
		}
	}
}
