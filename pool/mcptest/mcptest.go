// Package mcptest holds the fake MCP server the tests run as a real child
// process, and helpers to build it and read what it saw.
package mcptest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Build compiles the fake MCP server into dir and returns its path. Tests
// call it once from TestMain.
func Build(dir string) (string, error) {
	out := filepath.Join(dir, "fakemcp")
	cmd := exec.Command("go", "build", "-o", out, "github.com/switchboard-mcp/switchboard/pool/mcptest/fakemcp")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build fakemcp: %w\n%s", err, b)
	}
	return out, nil
}

// ReadLog parses the fake's -log file: every line it received, in order.
func ReadLog(path string) ([]map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}
