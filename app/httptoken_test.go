package app

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/control/controltest"
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

// tokenInstance is an instance with a token file in a new directory, its
// token (first) the front door's.
func tokenInstance(t *testing.T) (inst *Instance, first string) {
	t.Helper()
	inst = &Instance{Paths: Paths{Config: filepath.Join(t.TempDir(), "config.json")}, tokenTurn: make(chan struct{}, 1)}
	first, err := loadOrCreateToken(HTTPTokenFile(inst.Paths))
	if err != nil {
		t.Fatal(err)
	}
	inst.httpToken.Store(&first)
	return inst, first
}

// TestConcurrentRotationsAgree: rotations at the same moment (two
// `http-token --rotate`, the dashboard's button) leave the file and the
// pool's token the same, and every rotation succeeds. On the first
// edition they shared one temporary file and wrote the file and the
// token outside one lock: one could fail, and the pool could keep token
// A while the file held B.
func TestConcurrentRotationsAgree(t *testing.T) {
	inst, _ := tokenInstance(t)
	for round := range 50 {
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { _, errs[i] = inst.RotateHTTPToken(context.Background()) })
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
	if left := tempFiles(t, filepath.Dir(inst.Paths.Config)); len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestHTTPTokenIsTheRunningPools: `switchboard http-token` prints the
// token the running pool's front door takes, and gives a token file that
// holds none (emptied, deleted) that token back. On the first edition it
// read the file itself, and replaced an empty one with a new token: it
// printed a token the pool refused (401), and the file no longer held the
// one the pool took.
func TestHTTPTokenIsTheRunningPools(t *testing.T) {
	paths := sbHome(t)
	inst, _ := startIn(t, Options{})
	runInstance(t, inst)
	eventually(t, 5*time.Second, "the control API answers", func() bool {
		_, err := FetchStatus(context.Background())
		return err == nil
	})
	running := inst.currentToken()
	for _, spoil := range []func(string) error{func(p string) error { return os.Truncate(p, 0) }, os.Remove} {
		if err := spoil(HTTPTokenFile(paths)); err != nil {
			t.Fatal(err)
		}
		printed, err := HTTPToken(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		if printed != running || inst.currentToken() != running {
			t.Errorf("http-token printed %.8s…, the running pool takes %.8s… (%.8s… at start)", printed, inst.currentToken(), running)
		}
		if held, err := readToken(HTTPTokenFile(paths)); held != running {
			t.Errorf("the file holds %.8s… (%v), the running pool takes %.8s…", held, err, running)
		}
	}
}

// TestRotationStuckInTheFile: a rotation whose file write does not return
// (a stalled disk or network home) keeps the others from interleaving
// their files with it, and they give up when their callers do; the front
// door's token is read meanwhile. On the first edition the rotation held
// a mutex across the write: every rotation after it, and the question
// for the token, waited for it without end.
func TestRotationStuckInTheFile(t *testing.T) {
	inst, first := tokenInstance(t)
	entered, release := make(chan struct{}), make(chan struct{})
	replaceTokenFile = func(path, tok string) (string, error) {
		close(entered)
		<-release
		return replaceToken(path, tok)
	}
	t.Cleanup(func() { replaceTokenFile = replaceToken })
	stuck := make(chan error, 1)
	go func() {
		_, err := inst.RotateHTTPToken(context.Background())
		stuck <- err
	}()
	<-entered
	if got := inst.currentToken(); got != first {
		t.Fatalf("the token while a rotation writes the file: %.8s…, want %.8s…", got, first)
	}
	for name, ask := range map[string]func(context.Context) (string, error){
		"another rotation": inst.RotateHTTPToken, "the question for the token": inst.CurrentHTTPToken} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := ask(ctx)
			done <- err
		}()
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s, its caller gone: %v, want context.Canceled", name, err)
			}
		case <-time.After(5 * time.Second):
			close(release) // let it end, for the report
			t.Fatalf("%s waits for the stuck rotation although its caller is gone", name)
		}
	}
	close(release)
	if err := <-stuck; err != nil {
		t.Fatal(err)
	}
	if held, err := readToken(HTTPTokenFile(inst.Paths)); err != nil || held != inst.currentToken() || held == first {
		t.Fatalf("the file holds %.8s… (%v), the pool takes %.8s…, the first was %.8s…", held, err, inst.currentToken(), first)
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

// TestHTTPTokenOfAPoolThatDoesNotAnswer: a pool whose control socket
// takes the question and never answers (stopped, stuck) gets the
// question's bound, not the client's minute, and `http-token` then
// prints the file's token, as it does with no pool, instead of an error.
func TestHTTPTokenOfAPoolThatDoesNotAnswer(t *testing.T) {
	paths := sbHome(t)
	want, err := loadOrCreateToken(HTTPTokenFile(paths))
	if err != nil {
		t.Fatal(err)
	}
	controltest.ListenSilent(t, paths.ControlSocket())
	defer func(d time.Duration) { control.QuestionTimeout = d }(control.QuestionTimeout)
	control.QuestionTimeout = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := HTTPToken(ctx, false)
	if err != nil || got != want {
		t.Errorf("http-token with a pool that does not answer: %.8q, %v; want the file's token %.8s…", got, err, want)
	}
}

// TestRotationEndsOldTokenSessions: `http-token --rotate` cuts off a
// client of the running pool let in with the old token, at once: its
// GET stream ends and its session with it. On the first edition the
// rotation only stored the new token: the stream went on carrying the
// session's messages.
func TestRotationEndsOldTokenSessions(t *testing.T) {
	inst, addr := runFrontDoor(t)
	url, old := "http://"+addr+"/mcp/a", inst.currentToken()
	send := func(method, sid, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+old)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	opened := send(http.MethodPost, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}`)
	io.Copy(io.Discard, opened.Body)
	sid := opened.Header.Get("Mcp-Session-Id")
	if opened.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %s, session %q", opened.Status, sid)
	}
	stream := send(http.MethodGet, sid, "")
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET: %s", stream.Status)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, stream.Body)
		ended <- err
	}()
	if _, err := inst.RotateHTTPToken(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("the GET stream: %v, want its end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the GET stream opened with the old token goes on after the rotation")
	}
	if n := len(inst.Pool.Snapshot().Sessions); n != 0 {
		t.Fatalf("%d sessions after the rotation, want the old token's ended", n)
	}
}
