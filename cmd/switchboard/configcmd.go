package main

import (
	"context"
	"os"

	"github.com/switchboard-mcp/switchboard/app"
)

type configCmd struct {
	Check configCheckCmd `cmd:"" help:"Validate a config file and show what it would change in the running pool."`
}

type configCheckCmd struct {
	File string `arg:"" optional:"" type:"path" help:"Config file (default: the running pool's, else $SWITCHBOARD_HOME/config.json)."`
}

func (c *configCheckCmd) Run(ctx context.Context) error {
	return app.CheckConfig(ctx, c.File, os.Stdout)
}

type importCmd struct {
	From          string `required:"" enum:"claude-desktop,claude-code,cursor,vscode" placeholder:"CLIENT" help:"Client to import from: claude-desktop, claude-code, cursor or vscode."`
	File          string `type:"path" placeholder:"PATH" help:"Read this file instead of the client's known locations."`
	Config        string `type:"path" placeholder:"PATH" help:"Switchboard config to merge into (default: the running pool's, else $SWITCHBOARD_HOME/config.json)."`
	DryRun        bool   `help:"Show what would be done; write nothing."`
	RewriteClient bool   `help:"Also rewrite the client's config so that each server now in Switchboard runs 'switchboard connect NAME' (a timestamped backup is written next to it)."`
}

func (c *importCmd) Run(ctx context.Context) error {
	return app.Import(ctx, app.ImportOptions{From: c.From, File: c.File, Config: c.Config,
		DryRun: c.DryRun, RewriteClient: c.RewriteClient}, os.Stdout)
}
