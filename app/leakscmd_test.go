package app

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/pool"
)

func TestServersForMatching(t *testing.T) {
	t.Setenv("SB_TEST_DIR", "/opt/mcp")
	cfg := &config.File{Servers: map[string]config.Server{
		"memory": {Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}},
		"local":  {Command: "${SB_TEST_DIR}/bin/server", Args: []string{"--root", "${SB_TEST_UNSET}", "${SB_TEST_UNSET:-x}"}, Cwd: "${SB_TEST_DIR}", Disabled: true},
		"remote": {URL: "https://example.com/mcp"},
	}}
	want := []pool.ServerConfig{
		{Name: "local", Command: "/opt/mcp/bin/server", Args: []string{"--root", "", "x"}, Cwd: "/opt/mcp"},
		{Name: "memory", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}},
	}
	if diff := cmp.Diff(want, serversForMatching(cfg)); diff != "" {
		t.Errorf("servers (-want +got):\n%s", diff)
	}
	if serversForMatching(nil) != nil {
		t.Error("nil config")
	}
}
