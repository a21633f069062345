// Command fakemcp is the fake MCP server (package fake) as its own
// program, for tests: mcptest.Build builds it.
package main

import (
	"os"

	"github.com/switchboard-mcp/switchboard/pool/mcptest/fake"
)

func main() { fake.Main(os.Args[1:]) }
