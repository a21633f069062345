package app

import (
	"context"
	"fmt"
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
