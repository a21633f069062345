//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/switchboard-mcp/switchboard/app/npx/npxtest"
)

// A resolved npx server runs one version until the user asks for another.
// npx's cache is shared by every `npx PACKAGE` on the machine: another
// `npx -y PACKAGE` after `latest` moved updates the package there in
// place. A crash restart still runs the version the server was resolved
// to (it used to run the new files, under a note naming the old version);
// `restart NAME` looks `latest` up again. Two servers of one version run
// one install of it.
func TestNPXServerKeepsItsVersionAcrossACrash(t *testing.T) {
	npxtest.NeedNPM(t)
	const pkg = "sbt-pinned"
	reg := npxtest.NewRegistry(t)
	for _, v := range []string{"1.0.0", "2.0.0"} {
		reg.Publish(t, pkg, v, map[string]string{
			"package.json": fmt.Sprintf(`{"name":%q,"version":%q,"bin":{%[1]q:"server.js"}}`, pkg, v),
			"server.js":    npxtest.Server,
		})
	}
	reg.SetLatest(pkg, "1.0.0")
	npmEnv := reg.Env(t.TempDir())
	envJSON, _ := json.Marshal(npmEnv)
	in := serve(t, noClientStarts(fmt.Sprintf(`{"mcpServers":{
		"pin":  {"command":"npx","args":["-y",%[1]q],"env":%[2]s},
		"same": {"command":"npx","args":["-y",%[1]q],"env":%[2]s}}}`, pkg, envJSON)))
	version := func(server string) string {
		t.Helper()
		s := in.connect(t, server)
		defer s.close()
		s.initialize("c")
		s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"version","arguments":{}}}`)
		return toolText(s.recvID("1"))
	}
	backend := func(server string) (pid int, state string, resolved []string, note string) {
		t.Helper()
		out, err := in.run("status", "--json")
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Backends []struct {
				Server, State, ResolveNote string
				PID                        int
				ResolvedCommand            []string
			}
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		for _, b := range st.Backends {
			if b.Server == server {
				return b.PID, b.State, b.ResolvedCommand, b.ResolveNote
			}
		}
		return 0, "", nil, ""
	}
	for _, server := range []string{"pin", "same"} {
		if v := version(server); v != "1.0.0" {
			t.Fatalf("%s runs %q, want 1.0.0", server, v)
		}
	}
	pid, _, resolved, _ := backend("pin")
	_, _, same, _ := backend("same")
	if len(resolved) != 2 || len(same) != 2 || resolved[1] != same[1] {
		t.Errorf("one version, two scripts: %q and %q", resolved, same)
	}

	// Another npx, once latest moved on.
	reg.SetLatest(pkg, "2.0.0")
	other := exec.Command("npm", "exec", "--yes", "--package="+pkg, "--", "node", "-e", "")
	other.Env = os.Environ()
	for k, v := range npmEnv {
		other.Env = append(other.Env, k+"="+v)
	}
	if out, err := other.CombinedOutput(); err != nil {
		t.Fatalf("another npx: %v\n%s", err, out)
	}
	shared, _ := filepath.Glob(filepath.Join(npmEnv["npm_config_cache"], "_npx", "*", "node_modules", pkg, "package.json"))
	if b, err := os.ReadFile(strings.Join(shared, "")); err != nil || !strings.Contains(string(b), `"2.0.0"`) {
		t.Fatalf("npx's cache was not moved on to 2.0.0 (%q: %v)", shared, err)
	}

	// The child crashes, and is started again.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pin's next child", func() bool {
		p, state, _, _ := backend("pin")
		return p != 0 && p != pid && state == "ready"
	})
	if v := version("pin"); v != "1.0.0" {
		_, _, resolved, note := backend("pin")
		t.Fatalf("after a crash pin runs %q, want 1.0.0 (%s: %q)", v, note, resolved)
	}

	// The user asks for the package again.
	pid, _, _, _ = backend("pin")
	if out, err := in.run("restart", "pin"); err != nil {
		t.Fatalf("restart: %v\n%s", err, out)
	}
	waitFor(t, "pin's restarted child", func() bool {
		p, state, _, _ := backend("pin")
		return p != 0 && p != pid && state == "ready"
	})
	if v := version("pin"); v != "2.0.0" {
		t.Fatalf("after restart pin runs %q, want 2.0.0", v)
	}
	if _, _, resolved, note := backend("pin"); !strings.Contains(note, pkg+" 2.0.0") || len(resolved) != 2 ||
		!strings.HasPrefix(resolved[1], filepath.Join(in.home, "npx")+string(filepath.Separator)) {
		t.Errorf("after restart: note %q, resolved %q", note, resolved)
	}
}
