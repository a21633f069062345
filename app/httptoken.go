package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The HTTP front door's bearer token: made at first start, kept in a 0600
// file next to the config (`$SWITCHBOARD_HOME/http-token`), the same across
// restarts because HTTP clients store it in their config. `switchboard
// http-token` prints it, `--rotate` replaces it (a running pool takes the
// new one at once).

// HTTPTokenFile is where the token lives.
func HTTPTokenFile(paths Paths) string {
	return filepath.Join(filepath.Dir(paths.Config), "http-token")
}

// loadOrCreateToken reads the token, making it on first use.
func loadOrCreateToken(path string) (string, error) {
	if data, err := os.ReadFile(path); err == nil {
		if tok := strings.TrimSpace(string(data)); tok != "" {
			return tok, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read the HTTP token: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	tok := newToken()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return loadOrCreateToken(path) // another process made it first
	}
	if err != nil {
		return "", fmt.Errorf("create the HTTP token: %w", err)
	}
	_, werr := f.WriteString(tok + "\n")
	if err := errors.Join(werr, f.Close()); err != nil {
		return "", fmt.Errorf("write the HTTP token: %w", err)
	}
	return tok, nil
}

// rotateToken replaces the token file's content with a new token.
func rotateToken(path string) (string, error) {
	tok := newToken()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write the HTTP token: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("replace the HTTP token: %w", err)
	}
	return tok, nil
}

func newToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// currentToken is the pool's Options.HTTPToken.
func (inst *Instance) currentToken() string {
	if p := inst.httpToken.Load(); p != nil {
		return *p
	}
	return ""
}

// RotateHTTPToken replaces the HTTP front door's token, at once
// (control.Backend).
func (inst *Instance) RotateHTTPToken() (string, error) {
	tok, err := rotateToken(HTTPTokenFile(inst.Paths))
	if err != nil {
		return "", err
	}
	inst.httpToken.Store(&tok)
	return tok, nil
}

// HTTPToken is `switchboard http-token [--rotate]`: the token, made if
// there is none; rotate replaces it, through the running pool when there
// is one so that it applies at once.
func HTTPToken(ctx context.Context, rotate bool) (string, error) {
	paths, err := ResolvePaths()
	if err != nil {
		return "", err
	}
	if !rotate {
		return loadOrCreateToken(HTTPTokenFile(paths))
	}
	c, err := Control()
	if err != nil {
		return "", err
	}
	switch tok, err := c.RotateHTTPToken(ctx); {
	case err == nil:
		return tok, nil
	case errors.Is(err, ErrNoPool):
		return rotateToken(HTTPTokenFile(paths))
	default:
		return "", err
	}
}
