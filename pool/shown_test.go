package pool

import (
	"slices"
	"testing"
)

// What snapshots and events show of a command line is the configured
// line: a ${VAR} that expanded to a secret is shown as written, in the
// command as configured and in what it resolved to (npx -> node).
func TestShownCommandLines(t *testing.T) {
	cfg := ServerConfig{Command: "npx", Args: []string{"-y", "api-mcp", "--token", "s3cret"},
		Shown: []string{"npx", "-y", "api-mcp", "--token", "${API_TOKEN}"}}
	plain := ServerConfig{Command: "srv", Args: []string{"--port", "7"}}
	for _, tc := range []struct {
		name      string
		got, want []string
	}{
		{"configured", cfg.shownLine(), []string{"npx", "-y", "api-mcp", "--token", "${API_TOKEN}"}},
		{"resolved", cfg.shownResolved([]string{"/usr/bin/node", "/cache/api-mcp/cli.js", "--token", "s3cret"}),
			[]string{"/usr/bin/node", "/cache/api-mcp/cli.js", "--token", "${API_TOKEN}"}},
		{"not resolved", cfg.shownResolved(nil), nil},
		{"without Shown", plain.shownLine(), []string{"srv", "--port", "7"}},
		{"without Shown, resolved", plain.shownResolved([]string{"/bin/srv", "--port", "7"}), []string{"/bin/srv", "--port", "7"}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}
