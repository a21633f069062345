package npx

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// startLine starts a bin as npx's shell would: node alone for a plain
// node #! line; on Unix the script itself when its line has more (the
// kernel and env read it), on Windows node with the line's words (npm's
// cmd-shim); anything that is not node is not resolved.
func TestStartLine(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		line      string
		mode      os.FileMode // 0: 0o755
		unix, win string      // the command line; "" for an error
		name      string      // the bin file's; "" for "bin"
	}{
		{line: "#!/usr/bin/env node", unix: "NODE S", win: "NODE S"},
		{line: "#!/usr/bin/env -S node", unix: "NODE S", win: "NODE S"},
		{line: "#!/usr/local/bin/node", unix: "/usr/local/bin/node S", win: "NODE S"},
		{line: "#!/usr/bin/env -S node --expose-gc --max-old-space-size=64", unix: "S", win: "NODE --expose-gc --max-old-space-size=64 S"},
		{line: "#!/usr/bin/env -S node --import tsx", unix: "S", win: "NODE --import tsx S"},
		{line: "#!/usr/bin/env -S node --loader ts-node/esm", mode: 0o644, unix: "", win: "NODE --loader ts-node/esm S"},
		{line: "#!/usr/bin/env -S NODE_OPTIONS=--inspect node", unix: "S", win: ""},
		{line: `#!/usr/bin/env -S node --title="a b"`, unix: "S", win: ""},
		{line: "#!/usr/bin/env ts-node", unix: "", win: ""},
		{line: "#!/usr/bin/env nodemon", unix: "", win: ""},
		{line: "#!/bin/sh", unix: "", win: ""},
		{line: "console.log(1)", name: "x.mjs", unix: "NODE S", win: "NODE S"},
		{line: "echo hi", name: "run", unix: "", win: ""},
	} {
		name := tc.name
		if name == "" {
			name = "bin"
		}
		mode := tc.mode
		if mode == 0 {
			mode = 0o755
		}
		script := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(script, []byte(tc.line+"\nconsole.log(1)\n"), mode); err != nil {
			t.Fatal(err)
		}
		for goos, want := range map[string]string{"linux": tc.unix, "windows": tc.win} {
			if goos != runtime.GOOS && runtime.GOOS == "windows" {
				continue // no mode bits to read
			}
			cmd, args, err := startLine(goos, script, filepath.Join(dir, "NODE"))
			got := strings.NewReplacer(script, "S", filepath.Join(dir, "NODE"), "NODE").Replace(strings.Join(append([]string{cmd}, args...), " "))
			if err != nil {
				got = ""
			}
			if got != want {
				t.Errorf("%s on %s: %q, %v; want %q", tc.line, goos, got, err, want)
			}
		}
	}
}

// findIn finds programs as exec.LookPath does on each system: on Windows
// by PATHEXT's extensions and without mode bits (node.exe, npm.cmd, never
// npm's extensionless sh script); on Unix only an executable file.
func TestFindIn(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"node.exe": 0o644, "npm": 0o755, "npm.cmd": 0o644, "tool.js": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, mode); err != nil {
			t.Fatal(err)
		}
	}
	dirs := []string{"", filepath.Join(dir, "missing"), dir}
	for _, tc := range []struct {
		goos, file, pathext, want string
	}{
		{"windows", "node", "", "node.exe"},
		{"windows", "npm", "", "npm.cmd"},
		{"windows", "npm", ".COM;.EXE;.BAT;.CMD;.JS", "npm.cmd"},
		{"windows", "npm", ".EXE", ""},
		{"windows", "node.exe", ".EXE", "node.exe"},
		{"windows", "tool", ".EXE;.JS", "tool.js"},
		{"linux", "node", "", ""},
		{"linux", "node.exe", "", ""}, // not executable
		{"linux", "npm", "", "npm"},
	} {
		got, err := findIn(tc.goos, tc.file, dirs, tc.pathext)
		if err == nil {
			got = filepath.Base(got)
		}
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("findIn(%s, %q, PATHEXT %q) = %q, %v; want %q", tc.goos, tc.file, tc.pathext, got, err, tc.want)
		}
	}
}

// pathFor is npm exec's PATH: what npx installed, the .bin chain from the
// working directory up, npm's node-gyp-bin, the server's PATH.
func TestPathFor(t *testing.T) {
	root := t.TempDir()
	cwd := filepath.Join(root, "a", "b")
	l := launch{cwd: cwd, path: "/usr/bin" + string(os.PathListSeparator) + "/bin", gypBin: "/npm/node-gyp-bin"}
	got := filepath.SplitList(l.pathFor("/cache/node_modules/.bin"))
	want := []string{"/cache/node_modules/.bin", filepath.Join(cwd, "node_modules", ".bin"), filepath.Join(root, "a", "node_modules", ".bin"),
		filepath.Join(root, "node_modules", ".bin")}
	if !slices.Equal(got[:len(want)], want) || !slices.Equal(got[len(got)-3:], []string{"/npm/node-gyp-bin", "/usr/bin", "/bin"}) ||
		got[len(got)-4] != filepath.Join(filepath.VolumeName(root)+string(filepath.Separator), "node_modules", ".bin") {
		t.Errorf("pathFor = %q", got)
	}
	// npx adds no directory before the project's own.
	if bin := l.installBin(filepath.Join(root, "a", "node_modules", "@s", "p"), "@s/p"); bin != "" {
		t.Errorf("a package of the project: %q", bin)
	}
	if bin := l.installBin(filepath.Join("/cache", "node_modules", "@s", "p"), "@s/p"); bin != filepath.Join("/cache", "node_modules", ".bin") {
		t.Errorf("an installed package: %q", bin)
	}
}

// npmReason keeps what npm says went wrong, not where its log is.
func TestNPMReason(t *testing.T) {
	for _, tc := range []struct{ stderr, want string }{
		{stderr: `npm warn exec The following package was not found and will be installed: x@1.0.0
npm error code E404
npm error 404 Not Found - GET http://127.0.0.1:4899/@x%2fnope - Not found
npm error 404
npm error 404  The requested resource '@x/nope@*' could not be found or you do not have permission to access it.
npm error 404
npm error 404 Note that you can also install from a
npm error A complete log of this run can be found in: /c/_logs/debug-0.log
`, want: "code E404; 404 Not Found - GET http://127.0.0.1:4899/@x%2fnope - Not found; 404 The requested resource '@x/nope@*' could not be found or you do not have permission to access it."},
		{stderr: `npm error code ECONNREFUSED
npm error syscall connect
npm error errno ECONNREFUSED
npm error FetchError: request to http://127.0.0.1:9/x failed, reason: connect ECONNREFUSED 127.0.0.1:9
npm error     at ClientRequest.<anonymous> (/npm/index.js:130:14)
npm error   code: 'ECONNREFUSED',
npm error }
npm error
npm error If you are behind a proxy, please make sure that the 'proxy' config is set properly.  See: 'npm help config'
npm error A complete log of this run can be found in: /c/_logs/debug-0.log
`, want: "code ECONNREFUSED; FetchError: request to http://127.0.0.1:9/x failed, reason: connect ECONNREFUSED 127.0.0.1:9; If you are behind a proxy, please make sure that the 'proxy' config is set properly. See: 'npm help config'"},
		{stderr: "npm ERR! code ETARGET\r\nnpm ERR! notarget No matching version found for x@9.\r\n", want: "code ETARGET; notarget No matching version found for x@9."},
		{stderr: "sh: 1: node: not found\n", want: "sh: 1: node: not found"},
		{stderr: "npm error " + strings.Repeat("é", 300) + "\n", want: strings.Repeat("é", 200) + " …"},
	} {
		if got := npmReason(tc.stderr); got != tc.want {
			t.Errorf("npmReason:\n got %q\nwant %q", got, tc.want)
		}
	}
}

// -y/--yes and --no are passed on to npm as written; nothing else is
// said for a command line without them.
func TestParseYes(t *testing.T) {
	for args, want := range map[string]string{
		"pkg": "", "-y pkg": "--yes", "--yes pkg": "--yes", "--no pkg": "--no", "--no-yes pkg": "--no", "-y --no pkg": "--no",
		"-p pkg -y bin": "--yes",
	} {
		spec, err := Parse(strings.Fields(args))
		if err != nil || strings.Join(yesFlag(spec), " ") != want {
			t.Errorf("%s: %q, %v; want %q", args, yesFlag(spec), err, want)
		}
	}
}
