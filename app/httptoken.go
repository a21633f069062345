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

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/control"
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

// loadOrCreateToken reads the token, making it on first use. A file
// holding no token (empty or blank: a crash between its creation and its
// write, a write that failed, a user truncating it) is replaced by a new
// one. The token file is only ever made by renaming (or linking) a
// complete, synced temporary file into place, so a failed write leaves
// no empty file behind.
func loadOrCreateToken(path string) (string, error) {
	if err := config.DanglingLink(path); err != nil {
		return "", fmt.Errorf("make the HTTP token file: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	// A few rounds at most: another process may make the file, or empty
	// it, between two steps here.
	for range 3 {
		tok, err := readToken(path)
		switch {
		case err == nil && tok != "":
			return tok, nil
		case err == nil: // there, holding no token: replace it
			if _, err := replaceToken(path, newToken()); err != nil {
				return "", err
			}
			// Read it back: another process may have replaced it at the
			// same moment, and the file says which token stands.
		case errors.Is(err, fs.ErrNotExist):
			tok, err := createToken(path)
			if !errors.Is(err, fs.ErrExist) {
				return tok, err
			}
			// Another process made it first: read theirs.
		default:
			return "", err
		}
	}
	return "", fmt.Errorf("the HTTP token file %s keeps changing", path)
}

// readToken reads the token file: "" with no error for a file that holds
// no token.
func readToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("read the HTTP token: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// createToken makes the token file with a new token, unless it exists
// (then fs.ErrExist): the token is written to a temporary file, synced,
// and linked into place, which fails if another process made the file
// first. Where links are not supported it is renamed into place.
func createToken(path string) (string, error) {
	tok := newToken()
	tmp, err := writeTokenTemp(path, tok)
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp)
	switch err := os.Link(tmp, path); {
	case err == nil:
	case errors.Is(err, fs.ErrExist):
		return "", fs.ErrExist
	default:
		if err := os.Rename(tmp, path); err != nil {
			return "", fmt.Errorf("create the HTTP token: %w", err)
		}
	}
	syncDir(filepath.Dir(path))
	return tok, nil
}

// replaceToken replaces the token file's content with tok, atomically:
// a reader sees the old file or the new one, whole.
func replaceToken(path, tok string) (string, error) {
	tmp, err := writeTokenTemp(path, tok)
	if err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("replace the HTTP token: %w", err)
	}
	syncDir(filepath.Dir(path))
	return tok, nil
}

// writeTokenTemp writes tok to a new temporary 0600 file, unique to this
// write, beside path and synced, and returns its name. On error nothing
// is left behind.
func writeTokenTemp(path, tok string) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		if dangling := config.DanglingLink(path); dangling != nil {
			err = dangling
		}
		return "", fmt.Errorf("write the HTTP token: %w", err)
	}
	_, werr := f.WriteString(tok + "\n")
	if werr == nil {
		werr = f.Chmod(0o600) // CreateTemp makes 0600 already; Windows ignores it
	}
	if werr == nil {
		werr = f.Sync()
	}
	if err := errors.Join(werr, f.Close()); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write the HTTP token: %w", err)
	}
	return f.Name(), nil
}

// syncDir makes a rename or link in dir durable where the OS can sync a
// directory (not Windows, where opening one fails).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
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

// takeTokenTurn waits for this instance's turn to change the token file,
// until ctx ends. The turn is a channel, not a mutex, because it is held
// across file I/O: a rotation waiting for it gives up with its caller.
// Give it back with giveTokenTurn.
func (inst *Instance) takeTokenTurn(ctx context.Context) error {
	select {
	case inst.tokenTurn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the HTTP token file: %w", context.Cause(ctx))
	}
}

func (inst *Instance) giveTokenTurn() { <-inst.tokenTurn }

// replaceTokenFile is replaceToken; tests stall it.
var replaceTokenFile = replaceToken

// RotateHTTPToken replaces the HTTP front door's token, at once
// (control.Backend): what the old token let in (legacy sessions, their
// GET streams, 2026-07-28 requests and listens) is ended. Rotations take
// turns from writing the file to ending what the old token let in, so
// that two at once leave the file and the pool holding the same token;
// the pool's token is never locked (the front door reads it at every
// request).
func (inst *Instance) RotateHTTPToken(ctx context.Context) (string, error) {
	if err := inst.takeTokenTurn(ctx); err != nil {
		return "", err
	}
	defer inst.giveTokenTurn()
	tok, err := replaceTokenFile(HTTPTokenFile(inst.Paths), newToken())
	if err != nil {
		return "", err
	}
	inst.httpToken.Store(&tok)
	if inst.Pool != nil {
		inst.Pool.HTTPTokenRotated()
	}
	return tok, nil
}

// CurrentHTTPToken is the token the front door takes now
// (control.Backend). A token file that holds none (deleted, emptied) is
// given it back, rather than a new one the pool would refuse.
func (inst *Instance) CurrentHTTPToken(ctx context.Context) (string, error) {
	if err := inst.takeTokenTurn(ctx); err != nil {
		return "", err
	}
	defer inst.giveTokenTurn()
	tok := inst.currentToken()
	path := HTTPTokenFile(inst.Paths)
	if tok == "" {
		// None could be made at start (its directory missing): make it
		// now if it can be, and the front door takes it.
		tok, err := loadOrCreateToken(path)
		if err != nil {
			return "", err
		}
		inst.httpToken.Store(&tok)
		return tok, nil
	}
	switch held, err := readToken(path); {
	case err == nil && held != "":
		// Kept as it is, also when it differs (written by hand, for the
		// next start): the pool's token is the one that works now.
	case err == nil, errors.Is(err, fs.ErrNotExist):
		if _, err := replaceTokenFile(path, tok); err != nil {
			return "", err
		}
	default:
		return "", err
	}
	return tok, nil
}

// HTTPToken is `switchboard http-token [--rotate]`: the token, made if
// there is none; rotate replaces it. When a pool runs, it is asked: its
// token is the one the front door takes, and a rotation applies at once.
func HTTPToken(ctx context.Context, rotate bool) (string, error) {
	paths, err := ResolvePaths()
	if err != nil {
		return "", err
	}
	c, err := Control()
	if err != nil {
		return "", err
	}
	if !rotate {
		switch tok, err := c.HTTPToken(ctx); {
		case err == nil:
			return tok, nil
		case errors.Is(err, ErrNoPool), errors.Is(err, errors.ErrUnsupported), errors.Is(err, control.ErrUnresponsive):
			// No pool, one that predates the question, or one that does
			// not answer (stopped, stuck): the file's.
			return loadOrCreateToken(HTTPTokenFile(paths))
		default:
			return "", err
		}
	}
	switch tok, err := c.RotateHTTPToken(ctx); {
	case err == nil:
		return tok, nil
	case errors.Is(err, ErrNoPool):
		return replaceToken(HTTPTokenFile(paths), newToken())
	default:
		return "", err
	}
}
