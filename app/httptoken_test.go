package app

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestTokenFileLeftEmpty: a token file left empty (a crash between its
// creation and its write, a failed write, a user truncating it) or holding
// only whitespace is replaced by a new token, written whole; a good one is
// kept. On the first edition an empty file made loadOrCreateToken call
// itself until the stack overflowed: `serve`, the tray and `http-token`
// all crashed.
func TestTokenFileLeftEmpty(t *testing.T) {
	for name, content := range map[string]string{"empty": "", "blank": " \n\t\n"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "http-token")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			tok, err := loadOrCreateToken(path)
			if err != nil || len(tok) != 64 {
				t.Fatalf("loadOrCreateToken = %q, %v; want a new 64-digit token", tok, err)
			}
			data, err := os.ReadFile(path)
			if err != nil || string(data) != tok+"\n" {
				t.Fatalf("the file holds %q (%v), want the token %q", data, err, tok)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("token file mode: %v %v", fi.Mode(), err)
			}
			if again, err := loadOrCreateToken(path); err != nil || again != tok {
				t.Fatalf("read again: %q, %v; want %q", again, err, tok)
			}
			if left := tempFiles(t, dir); len(left) > 0 {
				t.Fatalf("temporary files left: %v", left)
			}
		})
	}
}

// TestTokenMadeOnceByConcurrentStarts: processes (here goroutines) that
// find no token at the same moment all end with the one token the file
// holds.
func TestTokenMadeOnceByConcurrentStarts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "http-token")
	const n = 16
	toks := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { toks[i], errs[i] = loadOrCreateToken(path) })
	}
	wg.Wait()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if errs[i] != nil || toks[i]+"\n" != string(data) {
			t.Fatalf("start %d: %q, %v; the file holds %q", i, toks[i], errs[i], data)
		}
	}
	if left := tempFiles(t, filepath.Dir(path)); len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestConcurrentRotationsAgree: rotations at the same moment (two
// `http-token --rotate`, the dashboard's button) leave the file and the
// pool's token the same, and every rotation succeeds. On the first
// edition they shared one temporary file and wrote the file and the
// token outside one lock: one could fail, and the pool could keep token
// A while the file held B.
func TestConcurrentRotationsAgree(t *testing.T) {
	dir := t.TempDir()
	inst := &Instance{Paths: Paths{Config: filepath.Join(dir, "config.json")}}
	first, err := loadOrCreateToken(HTTPTokenFile(inst.Paths))
	if err != nil {
		t.Fatal(err)
	}
	inst.httpToken.Store(&first)
	for round := range 50 {
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { _, errs[i] = inst.RotateHTTPToken() })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, rotation %d: %v", round, i, err)
			}
		}
		data, err := os.ReadFile(HTTPTokenFile(inst.Paths))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(data)); got != inst.currentToken() {
			t.Fatalf("round %d: the file holds %q, the pool takes %q", round, got, inst.currentToken())
		}
	}
	if left := tempFiles(t, dir); len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// tempFiles lists the files in dir other than the token itself.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.Name() != "http-token" {
			out = append(out, e.Name())
		}
	}
	return out
}
