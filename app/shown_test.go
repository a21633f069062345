package app

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/pool"
)

func TestConfiguredCommands(t *testing.T) {
	f := &config.File{Servers: map[string]config.Server{
		"api":  {Command: "api-mcp", Args: []string{"--token", "${API_TOKEN}"}},
		"home": {Command: "${TOOLS:-/opt}/bin/srv"},
	}}
	env := map[string]string{"API_TOKEN": "s3cret"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct {
		name    string
		backend pool.BackendInfo
		want    []string
	}{
		{"expanded secret shown as configured", pool.BackendInfo{Server: "api", Command: []string{"api-mcp", "--token", "s3cret"}},
			[]string{"api-mcp", "--token", "${API_TOKEN}"}},
		{"default shown as configured", pool.BackendInfo{Server: "home", Command: []string{"/opt/bin/srv"}},
			[]string{"${TOOLS:-/opt}/bin/srv"}},
		{"a draining child of an older entry keeps its own", pool.BackendInfo{Server: "api", Command: []string{"api-mcp", "--old"}},
			[]string{"api-mcp", "--old"}},
		{"a server no longer configured", pool.BackendInfo{Server: "gone", Command: []string{"gone-mcp"}},
			[]string{"gone-mcp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs := []pool.BackendInfo{tc.backend}
			configuredCommands(bs, f, lookup)
			if d := cmp.Diff(tc.want, bs[0].Command); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
