//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A server configured as `npx -y PACKAGE` runs as `node SCRIPT`: no npm or
// npx process in its child's tree, its tools work, status says what it was
// configured as and started as, shutdown ends it, and it carries the run
// marker that leak detection reads. The same server with "resolve": false
// runs npx as written (so the check can fail), and a command line with a
// flag that is not resolved falls back to running as written, saying why.
func TestNPXServerRunsWithoutItsWrapper(t *testing.T) {
	if os.Getenv("SWITCHBOARD_NPX") == "" {
		t.Skip("SWITCHBOARD_NPX is not set")
	}
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("npx not found")
	}
	const pkg = "@modelcontextprotocol/server-sequential-thinking"
	// Clients may not start a pool: at the SIGTERM below, the connects
	// would start one for their sessions, which would outlive the test.
	in := serve(t, noClientStarts(fmt.Sprintf(`{"mcpServers":{
		"seq":      {"command":"npx","args":["-y",%[1]q]},
		"written":  {"command":"npx","args":["-y",%[1]q],"resolve":false},
		"fallback": {"command":"npx","args":["--prefer-offline","-y",%[1]q]}}}`, pkg)))
	pids := map[string]int{}
	for _, server := range []string{"seq", "written", "fallback"} {
		s := in.connect(t, server)
		s.initialize("c-" + server)
		s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sequentialthinking","arguments":{"thought":"one","thoughtNumber":1,"totalThoughts":1,"nextThoughtNeeded":false}}}`)
		if r := s.recvID("1"); r.Error != nil || !strings.Contains(r.raw, "thoughtNumber") {
			t.Fatalf("%s: sequentialthinking: %s", server, r.raw)
		}
	}
	st := statusBackends(t, in)
	for _, b := range st {
		pids[b.Server] = b.PID
		tree := processTree(b.PID)
		wrapped := slices.ContainsFunc(tree, func(argv string) bool {
			first := filepath.Base(strings.Fields(argv + " x")[0])
			return first == "npm" || first == "npx" || strings.Contains(argv, "npm-cli.js") || strings.Contains(argv, "npx-cli.js")
		})
		t.Logf("%s: %s\n  tree: %q", b.Server, b.ResolveNote, tree)
		switch b.Server {
		case "seq":
			if len(b.ResolvedCommand) != 2 || filepath.Base(b.ResolvedCommand[0]) != "node" ||
				!strings.Contains(b.ResolvedCommand[1], "node_modules/"+pkg+"/") || b.Command[0] != "npx" ||
				!strings.HasPrefix(b.ResolveNote, "npx "+pkg+" resolved to "+pkg+" ") {
				t.Errorf("seq: command %q resolved %q note %q", b.Command, b.ResolvedCommand, b.ResolveNote)
			}
			if wrapped {
				t.Errorf("seq: npm/npx in the child's tree: %q", tree)
			}
		case "written":
			if len(b.ResolvedCommand) != 0 || b.ResolveNote != "" || !wrapped {
				t.Errorf("written: resolved %q note %q tree %q", b.ResolvedCommand, b.ResolveNote, tree)
			}
		case "fallback":
			if len(b.ResolvedCommand) != 0 || b.ResolveNote != `started as written: npx flag "--prefer-offline" is not one that is resolved (-y, --yes, --no, -p, --package, -q)` || !wrapped {
				t.Errorf("fallback: resolved %q note %q tree %q", b.ResolvedCommand, b.ResolveNote, tree)
			}
		}
	}
	// The marker every child carries, by which leaks of ended runs are found.
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pids["seq"]))
	if err != nil || !bytes.Contains(env, []byte("\x00SWITCHBOARD_RUN=")) || !bytes.Contains(env, []byte("\x00SWITCHBOARD_SERVER=seq")) {
		t.Errorf("the resolved child's environment lacks the run marker (%v)", err)
	}
	if err := in.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the children to end with the pool", func() bool {
		for _, pid := range pids {
			if alive(pid) {
				return false
			}
		}
		return true
	})
}

type backendStatus struct {
	Server          string   `json:"server"`
	PID             int      `json:"pid"`
	Command         []string `json:"command"`
	ResolvedCommand []string `json:"resolvedCommand"`
	ResolveNote     string   `json:"resolveNote"`
}

func statusBackends(t *testing.T, in *instance) []backendStatus {
	t.Helper()
	out, err := in.run("status", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Backends []backendStatus `json:"backends"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	return st.Backends
}

// processTree lists the command lines of pid and its descendants.
func processTree(pid int) []string {
	var out []string
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err != nil {
			continue
		}
		out = append(out, strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " ")))
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			for _, c := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(c); err == nil {
					queue = append(queue, n)
				}
			}
		}
	}
	return out
}
