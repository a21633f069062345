module github.com/switchboard-mcp/switchboard

go 1.26.0

require (
	github.com/alecthomas/kong v1.17.0
	golang.org/x/sync v0.24.0
)

require go.uber.org/goleak v1.3.0 // indirect
