package leaks

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

func TestMatches(t *testing.T) {
	memory := pool.ServerConfig{Name: "memory", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}}
	memoryPinned := pool.ServerConfig{Name: "memory", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory@2025.8.4"}}
	fetch := pool.ServerConfig{Name: "fetch", Command: "uvx", Args: []string{"mcp-server-fetch"}}
	script := pool.ServerConfig{Name: "mine", Command: "node", Args: []string{"dist/index.js", "--stdio"}, Cwd: "/home/u/mine"}
	module := pool.ServerConfig{Name: "mod", Command: "python3", Args: []string{"-m", "mcp_server_git", "--repository", "."}}
	binary := pool.ServerConfig{Name: "gh", Command: "/usr/local/bin/github-mcp-server", Args: []string{"stdio"}}
	pkgFlag := pool.ServerConfig{Name: "pf", Command: "npx", Args: []string{"--package", "@acme/tools@1", "acme-mcp"}}
	npmExec := pool.ServerConfig{Name: "ne", Command: "npm", Args: []string{"exec", "--yes", "@acme/mcp"}}

	links := map[string]string{
		"/home/u/.npm/_npx/15b0/node_modules/.bin/mcp-server-memory": "/home/u/.npm/_npx/15b0/node_modules/@modelcontextprotocol/server-memory/dist/index.js",
		"/home/u/.npm/_npx/99aa/node_modules/.bin/other-server":      "/home/u/.npm/_npx/99aa/node_modules/@other/server/dist/index.js",
	}
	resolve := func(p string) string { return links[p] }

	cases := []struct {
		name string
		argv []string
		cfg  pool.ServerConfig
		want bool
	}{
		{"npx itself", []string{"node", "/usr/bin/npx", "-y", "@modelcontextprotocol/server-memory"}, memory, true},
		{"npx retitled by npm", []string{"npm", "exec", "@modelcontextprotocol/server-memory"}, memory, true},
		{"npx exact argv", []string{"npx", "-y", "@modelcontextprotocol/server-memory"}, memory, true},
		{"node through the .bin link", []string{"node", "/home/u/.npm/_npx/15b0/node_modules/.bin/mcp-server-memory"}, memory, true},
		{"node inside the package", []string{"node", "/x/node_modules/@modelcontextprotocol/server-memory/dist/index.js"}, memory, true},
		{"another package's .bin", []string{"node", "/home/u/.npm/_npx/99aa/node_modules/.bin/other-server"}, memory, false},
		{"a similar package name", []string{"npm", "exec", "@modelcontextprotocol/server-memory-plus"}, memory, false},
		{"a package merely mentioned as a flag value", []string{"node", "app.js", "--plugin=@modelcontextprotocol/server-memory"}, memory, false},
		{"pinned config, other version running", []string{"npm", "exec", "@modelcontextprotocol/server-memory@2025.9.0"}, memoryPinned, true},
		{"uvx by exact argv", []string{"uvx", "mcp-server-fetch"}, fetch, true},
		{"uvx's installed tool", []string{"/home/u/.cache/uv/archive-v0/ab/bin/python", "/home/u/.cache/uv/archive-v0/ab/bin/mcp-server-fetch"}, fetch, true},
		{"uvx: a bare word is not a path", []string{"grep", "mcp-server-fetch-extra"}, fetch, false},
		{"script by absolute path from cwd", []string{"node", "/home/u/mine/dist/index.js", "--stdio"}, script, true},
		{"script exact argv", []string{"node", "dist/index.js", "--stdio"}, script, true},
		{"another project's index.js", []string{"node", "/srv/other/dist/index.js"}, script, false},
		{"python -m module", []string{"/usr/bin/python3", "-m", "mcp_server_git", "--repository", "/r"}, module, true},
		{"python running something else", []string{"/usr/bin/python3", "-m", "http.server"}, module, false},
		{"binary exact", []string{"/usr/local/bin/github-mcp-server", "stdio"}, binary, true},
		{"binary by base name", []string{"github-mcp-server", "stdio"}, binary, true},
		{"binary with other args", []string{"/usr/local/bin/github-mcp-server", "http"}, binary, false},
		{"binary at another path", []string{"/opt/github-mcp-server", "stdio"}, binary, false},
		{"npx --package names the package", []string{"npm", "exec", "--package", "@acme/tools@1.2", "acme-mcp"}, pkgFlag, true},
		{"npm exec skips the subcommand", []string{"node", "/usr/bin/npm", "exec", "--yes", "@acme/mcp"}, npmExec, true},
		{"empty argv (kernel thread)", nil, memory, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := matches(c.argv, c.cfg, resolve); got != c.want {
				t.Errorf("matches(%q, %s %q) = %v, want %v (key %+v)", c.argv, c.cfg.Command, c.cfg.Args, got, c.want, keyOperand(c.cfg))
			}
		})
	}
}

func TestKeyOperand(t *testing.T) {
	cases := []struct {
		command string
		args    []string
		want    key
	}{
		{"npx", []string{"-y", "@modelcontextprotocol/server-memory@latest"}, key{kind: keyPackage, name: "@modelcontextprotocol/server-memory"}},
		{"npx.cmd", []string{"-y", "pkg@1.0.0", "--flag"}, key{kind: keyPackage, name: "pkg"}},
		{"pipx", []string{"run", "mcp-x==1.2"}, key{kind: keyPackage, name: "mcp-x"}},
		{"uv", []string{"run", "--with", "mcp", "server.py"}, key{kind: keyScript, name: "server.py"}},
		{"bun", []string{"run", "./src/server.ts"}, key{kind: keyScript, name: "./src/server.ts"}},
		{"node", []string{"--inspect", "server.js"}, key{kind: keyScript, name: "server.js"}},
		{"java", []string{"-jar", "mcp.jar"}, key{kind: keyScript, name: "mcp.jar"}},
		{"python3.12", []string{"-m", "mod"}, key{kind: keyModule, name: "mod"}},
		{"docker", []string{"run", "-i", "--rm", "mcp/memory"}, key{}},
		{"github-mcp-server", []string{"stdio"}, key{}},
		{"npx", []string{"-y"}, key{}},
	}
	for _, c := range cases {
		if got := keyOperand(pool.ServerConfig{Command: c.command, Args: c.args}); got != c.want {
			t.Errorf("keyOperand(%s %q) = %+v, want %+v", c.command, c.args, got, c.want)
		}
	}
}
