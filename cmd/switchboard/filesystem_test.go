package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// serverFilesystem is the real filesystem server, pinned (TOOLCHAIN.md):
// it asks roots/list at start when its client declares roots, and then
// allows only those folders.
const serverFilesystem = "@modelcontextprotocol/server-filesystem@2026.8.31"

// initRoots initializes as a client that declares roots and answers the
// pool's roots/list with dirs.
func (s *shim) initRoots(name string, dirs ...string) {
	s.t.Helper()
	s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":%q,"version":"1.0"}}}`, name))
	if r := s.recvID("0"); r.Error != nil {
		s.t.Fatalf("initialize: %s", r.raw)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	line, err := s.out.ReadString('\n')
	if err != nil {
		s.t.Fatalf("read: %v", err)
	}
	var req reply
	if err := json.Unmarshal([]byte(line), &req); err != nil || req.Method != "roots/list" {
		s.t.Fatalf("want the pool's roots/list, got %q", line)
	}
	roots := make([]map[string]string, 0, len(dirs))
	for _, d := range dirs {
		roots = append(roots, map[string]string{"uri": "file://" + d, "name": filepath.Base(d)})
	}
	res, _ := json.Marshal(map[string]any{"roots": roots})
	s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, res))
}

// fsCall calls a filesystem tool; it reports the text and whether the
// server refused (a tool error or a JSON-RPC error).
func (s *shim) fsCall(id, tool string, args map[string]string) (string, bool) {
	s.t.Helper()
	if args == nil {
		args = map[string]string{}
	}
	a, _ := json.Marshal(args)
	s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, a))
	r := s.recvID(fmt.Sprintf("%q", id))
	var res struct {
		IsError bool `json:"isError"`
	}
	_ = json.Unmarshal(r.Result, &res)
	return toolText(r) + string(r.Error), r.Error != nil || res.IsError
}

// Two sessions with different roots each list and read only their own
// folder through the real server-filesystem, concurrently and after the
// child restarts; two with the same roots share one PID; one with no
// roots keeps the folder the server was started with. On the first edition
// every session of the shared child got the roots of whichever client the
// child's roots/list happened to reach: a security defect. And a
// session's first call, which starts its child, reached the child before
// the child had applied its roots: it ran with the folder the server was
// started with.
func TestFilesystemRootsStayPerSession(t *testing.T) {
	if os.Getenv("SWITCHBOARD_NPX") == "" {
		t.Skip("SWITCHBOARD_NPX is not set")
	}
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("npx not found")
	}
	base, err := filepath.EvalSymlinks(homeDir(t))
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{}
	for _, name := range []string{"alpha", "beta", "argdir"} {
		d := filepath.Join(base, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name+".txt"), []byte("secret of "+name), 0o600); err != nil {
			t.Fatal(err)
		}
		dirs[name] = d
	}
	in := serve(t, fmt.Sprintf(`{"mcpServers":{"fs":{"command":"npx","args":["-y",%q,%q]}}}`, serverFilesystem, dirs["argdir"]))
	type client struct {
		s    *shim
		own  string // the folder it may read
		deny string // a folder it must not read
	}
	a := client{in.connect(t, "fs"), "alpha", "beta"}
	b := client{in.connect(t, "fs"), "beta", "alpha"}
	a2 := client{in.connect(t, "fs"), "alpha", "beta"}
	none := client{in.connect(t, "fs"), "argdir", "alpha"}
	a.s.initRoots("a", dirs["alpha"])
	b.s.initRoots("b", dirs["beta"])
	a2.s.initRoots("a2", dirs["alpha"])
	none.s.initialize("none")

	check := func(round string) {
		var wg sync.WaitGroup
		for i, c := range []client{a, b, a2, none} {
			wg.Go(func() {
				id := fmt.Sprintf("%s-%d", round, i)
				// server-filesystem applies roots after its own roots/list
				// returns: the pool holds the calls until then, the first
				// (which starts the child) included.
				allowed, _ := c.s.fsCall(id+"-list", "list_allowed_directories", nil)
				if !strings.Contains(allowed, dirs[c.own]) {
					t.Errorf("%s: session of %s is allowed only:\n%s", round, c.own, allowed)
					return
				}
				if strings.Contains(allowed, dirs[c.deny]) {
					t.Errorf("%s: session of %s is allowed %s too:\n%s", round, c.own, c.deny, allowed)
				}
				text, refused := c.s.fsCall(id+"-own", "read_text_file", map[string]string{"path": filepath.Join(dirs[c.own], c.own+".txt")})
				if refused || !strings.Contains(text, "secret of "+c.own) {
					t.Errorf("%s: session of %s cannot read its own file: %s", round, c.own, text)
				}
				text, refused = c.s.fsCall(id+"-other", "read_text_file", map[string]string{"path": filepath.Join(dirs[c.deny], c.deny+".txt")})
				if !refused || strings.Contains(text, "secret of") {
					t.Errorf("%s: session of %s read %s's file: %s", round, c.own, c.deny, text)
				}
			})
		}
		wg.Wait()
	}
	check("first")

	st := in.status()
	pids := map[string]int{}
	for _, be := range st.Backends {
		pids[fmt.Sprint(be.Roots)] = be.PID
		if strings.Contains(fmt.Sprint(be.Roots), "alpha") && be.Sessions != 2 {
			t.Errorf("alpha's child serves %d sessions, want 2 (a and a2 share it)", be.Sessions)
		}
	}
	if len(st.Backends) != 3 {
		t.Fatalf("want 3 children (alpha, beta, no roots), status: %+v", st.Backends)
	}

	// A restarted child asks roots/list again: still only its own.
	alphaPID := pids["[file://"+dirs["alpha"]+"]"]
	if alphaPID == 0 {
		t.Fatalf("no child for alpha's roots in %v", pids)
	}
	// The child is npx with node under it, in its own process group.
	if err := syscall.Kill(-alphaPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "alpha's child restarted", func() bool {
		for _, be := range in.status().Backends {
			if strings.Contains(fmt.Sprint(be.Roots), "alpha") && be.PID != 0 && be.PID != alphaPID && be.State == "ready" {
				return true
			}
		}
		return false
	})
	check("after-restart")
}
