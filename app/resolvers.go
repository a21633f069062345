package app

import (
	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/npx"
	"github.com/switchboard-mcp/switchboard/pool"
)

// withResolvers gives every npx server the npx resolver r, so that its
// children run `node SCRIPT` instead of npx, unless its entry says
// "resolve": false. It changes servers in place and returns them.
func withResolvers(servers []pool.ServerConfig, f *config.File, r npx.Resolver) []pool.ServerConfig {
	for i := range servers {
		s := &servers[i]
		if !npx.IsNPX(s.Command) {
			continue
		}
		if e, ok := f.Servers[s.Name]; ok && e.Resolve != nil && !*e.Resolve {
			continue
		}
		s.Resolver = r
	}
	return servers
}
