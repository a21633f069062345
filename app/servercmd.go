package app

import (
	"context"
	"fmt"
	"io"
)

// RestartServer is `switchboard restart NAME`: the server's children are
// restarted gracefully, and a failed server gets a fresh restart budget
// without a config edit.
func RestartServer(ctx context.Context, name string) error {
	c, err := Control()
	if err != nil {
		return err
	}
	if err := c.RestartServer(ctx, name); err != nil {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	return nil
}

// StopServer is `switchboard stop NAME`: the server's children stop now;
// the next request starts them again.
func StopServer(ctx context.Context, name string) error {
	c, err := Control()
	if err != nil {
		return err
	}
	if err := c.StopServer(ctx, name); err != nil {
		return fmt.Errorf("stop %s: %w", name, err)
	}
	return nil
}

// Stacks is `switchboard stacks`: the running pool's goroutine stacks,
// written to w. When a request hangs, they show what each part of the
// pool is waiting on; attach them to a bug report.
func Stacks(ctx context.Context, w io.Writer) error {
	c, err := Control()
	if err != nil {
		return err
	}
	if err := c.Stacks(ctx, w); err != nil {
		return fmt.Errorf("stacks: %w", err)
	}
	return nil
}
