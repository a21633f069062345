package app

import "github.com/switchboard-mcp/switchboard/app/home"

// Paths are where a Switchboard instance keeps its files (package home).
type Paths = home.Paths

// ResolvePaths reads SWITCHBOARD_HOME and the OS conventions.
func ResolvePaths() (Paths, error) { return home.Resolve() }
