package npx

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// launch is how npx starts a package's bin: `npm exec` runs it through a
// shell, from the server's working directory, with a PATH of its making
// (@npmcli/run-script's set-path.js). A resolved child gets that PATH,
// and the node on it.
type launch struct {
	goos    string // runtime.GOOS; a test's choice
	cwd     string // absolute: the child's working directory
	path    string // the server's PATH
	pathext string // the server's PATHEXT (Windows)
	gypBin  string // npm's node-gyp-bin directory; "" when not found
}

// binChain is node_modules/.bin of the working directory and of each of
// its parents, nearest first, as npm puts them on PATH.
func (l launch) binChain() []string {
	var dirs []string
	for p := l.cwd; ; {
		dirs = append(dirs, filepath.Join(p, "node_modules", ".bin"))
		up := filepath.Dir(p)
		if up == p {
			return dirs
		}
		p = up
	}
}

// pathFor is the PATH npm exec gives what it runs: binDir (the .bin of
// what npx installed, or where it found the bin; "" for none), the
// working directory's chain of node_modules/.bin, npm's node-gyp-bin,
// then the server's PATH.
func (l launch) pathFor(binDir string) string {
	var dirs []string
	if binDir != "" {
		dirs = append(dirs, binDir)
	}
	dirs = append(dirs, l.binChain()...)
	if l.gypBin != "" {
		dirs = append(dirs, l.gypBin)
	}
	return strings.Join(append(dirs, l.path), string(os.PathListSeparator))
}

// installBin is the .bin that npx puts first on PATH for the package
// installed at dir: the one beside it, or none when that is one of the
// working directory's own (the project has the package; npm adds no
// directory before its chain then).
func (l launch) installBin(dir, name string) string {
	modules := dir
	for range strings.Count(name, "/") + 1 {
		modules = filepath.Dir(modules)
	}
	bin := filepath.Join(modules, ".bin")
	for _, d := range l.binChain() {
		if d == bin {
			return ""
		}
	}
	return bin
}

// command is what a resolved child runs for script, a package's bin, and
// its environment: npx's PATH, and what npx's shell would start (see
// startLine).
func (l launch) command(script, binDir string, args []string) (pool.Resolution, error) {
	path := l.pathFor(binDir)
	node, err := findIn(l.goos, "node", filepath.SplitList(path), l.pathext)
	if err != nil {
		return pool.Resolution{}, errors.New("no node on the server's PATH")
	}
	cmd, first, err := startLine(l.goos, script, node)
	if err != nil {
		return pool.Resolution{}, err
	}
	return pool.Resolution{Command: cmd, Args: append(first, args...), Env: map[string]string{"PATH": path}}, nil
}

// startLine is how npx's shell starts script, with node the node on its
// PATH: a #! line of node alone (`#!/usr/bin/env node`, `#!/usr/bin/node`)
// is `node SCRIPT`; a node #! line with more (`#!/usr/bin/env -S node
// --flag`) is, on Unix, the script itself, so that the kernel and env
// read its line as they do under npx, and on Windows node with the line's
// words, as npm's cmd-shim writes it. A JavaScript file without a #!
// line is `node SCRIPT`. Anything else (a shell script, ts-node, a native
// binary) is an error: the command is run as written.
func startLine(goos, script, node string) (string, []string, error) {
	f, err := os.Open(script)
	if err != nil {
		return "", nil, err
	}
	line, _ := bufio.NewReader(io.LimitReader(f, 1024)).ReadString('\n')
	f.Close()
	line = strings.TrimSpace(line)
	base := filepath.Base(script)
	if !strings.HasPrefix(line, "#!") {
		if strings.HasSuffix(script, ".js") || strings.HasSuffix(script, ".mjs") || strings.HasSuffix(script, ".cjs") {
			return node, []string{script}, nil
		}
		return "", nil, fmt.Errorf("%s is not a node script", base)
	}
	words := strings.Fields(line[2:])
	viaEnv := len(words) > 0 && progName(words[0]) == "env"
	i, plain := 0, true
	if viaEnv {
		i = 1
		if i < len(words) && words[i] == "-S" {
			i++
		}
		for ; i < len(words) && strings.Contains(words[i], "="); i++ {
			plain = false // env's NAME=VALUE
		}
	}
	if i >= len(words) || progName(words[i]) != "node" {
		return "", nil, fmt.Errorf("%s is not a node script (%s)", base, line)
	}
	flags := words[i+1:]
	switch {
	case plain && len(flags) == 0:
		if !viaEnv && goos != "windows" && strings.HasPrefix(words[i], "/") {
			node = words[i] // the kernel starts that very node
		}
		return node, []string{script}, nil
	case goos != "windows":
		if st, err := os.Stat(script); err != nil || st.Mode()&0o111 == 0 {
			return "", nil, fmt.Errorf("%s is not executable, and its #! line has more than node (%s)", base, line)
		}
		return script, nil, nil
	case !plain || strings.ContainsAny(strings.Join(flags, " "), "\"'%^&|<>"):
		return "", nil, fmt.Errorf("%s: its #! line is not one that is resolved (%s)", base, line)
	}
	return node, append(append([]string(nil), flags...), script), nil
}

// progName is a #! line's program without its directory or .exe.
func progName(word string) string {
	word = word[strings.LastIndexAny(word, `/\`)+1:]
	return strings.TrimSuffix(strings.ToLower(word), ".exe")
}

// binAt resolves to bin in binDir, the bin npx runs without installing
// anything (found in a node_modules/.bin or among the global bins). Its
// errors name the bin as shown (as configured).
func (l launch) binAt(binDir, bin, shown string, args []string) (pool.Resolution, error) {
	script, err := filepath.EvalSymlinks(filepath.Join(binDir, bin))
	if err != nil {
		return pool.Resolution{}, fmt.Errorf("npx runs the bin %s in %s, which cannot be read", shown, binDir)
	}
	res, err := l.command(script, binDir, args)
	if err != nil {
		return pool.Resolution{}, fmt.Errorf("npx runs the bin %s in %s: %w", shown, binDir, err)
	}
	return res, nil
}

// found is what npx runs for `npx NAME` (no -p) without installing: as
// libnpmexec looks before it installs, a bin named NAME in the
// node_modules/.bin of npm's local prefix or of one of its parents, then
// among the global bins, then the package if installed globally. ok is
// false when npx would install the package (or find it in the project's
// node_modules): npm exec --package does the rest.
func (l launch) found(ctx context.Context, npm string, spec Spec, name string, env []string) (res pool.Resolution, ok bool, err error) {
	local := localPrefix(l.cwd)
	if m, err := readManifest(local); err == nil && m.bins[spec.Package] != "" {
		return res, true, fmt.Errorf("npx %s runs the bin of the package in %s (npx installs that package to run it)", spec.shownPackage, local)
	}
	for _, dir := range (launch{cwd: local}).binChain() {
		if isFile(filepath.Join(dir, spec.Package)) {
			res, err = l.binAt(dir, spec.Package, spec.shownPackage, spec.Args)
			res.Note = fmt.Sprintf("npx %s runs the bin in %s, as npx finds it before installing", spec.shownPackage, dir)
			return res, true, err
		}
	}
	prefix, err := globalPrefix(ctx, npm, l.cwd, env)
	if err != nil || samePath(l.goos, prefix, local) {
		return res, err != nil, err // npm has no global prefix apart from the local one: npx does not look
	}
	globalBin, globalModules := filepath.Join(prefix, "bin"), filepath.Join(prefix, "lib", "node_modules")
	if l.goos == "windows" {
		globalBin, globalModules = prefix, filepath.Join(prefix, "node_modules")
	}
	if isFile(filepath.Join(globalBin, spec.Package)) {
		res, err = l.binAt(globalBin, spec.Package, spec.shownPackage, spec.Args)
		res.Note = fmt.Sprintf("npx %s runs the global bin in %s", spec.shownPackage, globalBin)
		return res, true, err
	}
	// The package installed globally, when the project has none that fits
	// (npm exec --package looks in the project as npx does).
	want := spec.Package[len(name):]
	decidable := want == "" || exactVersion.MatchString(want[1:])
	if m, err := readManifest(filepath.Join(local, "node_modules", filepath.FromSlash(name))); err == nil &&
		(!decidable || want == "" || want[1:] == m.Version) {
		return res, false, nil
	}
	m, err := readManifest(filepath.Join(globalModules, filepath.FromSlash(name)))
	if err != nil {
		return res, false, nil
	}
	if !decidable {
		return res, true, fmt.Errorf("npx %s may run the global %s %s (npx asks the registry whether that is the version it names)", spec.shownPackage, name, m.Version)
	}
	if want != "" && want[1:] != m.Version {
		return res, false, nil
	}
	bin, err := defaultBin(name, m.bins)
	if err != nil || !isFile(filepath.Join(globalBin, bin)) {
		return res, false, nil
	}
	res, err = l.binAt(globalBin, bin, bin, spec.Args)
	res.Note = fmt.Sprintf("npx %s runs the global %s %s, bin %s", spec.shownPackage, name, m.Version, bin)
	return res, true, err
}

// exactVersion is a version as npm writes it: npx matches "pkg@1.2.3"
// with an installed "1.2.3" by those words.
var exactVersion = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// localPrefix is npm's local prefix for dir: the nearest directory, dir
// or a parent, holding a package.json or a node_modules directory; dir
// when there is none. (npm also climbs to a workspace root; not here.)
func localPrefix(dir string) string {
	for p := dir; ; {
		if isFile(filepath.Join(p, "package.json")) {
			return p
		}
		if st, err := os.Stat(filepath.Join(p, "node_modules")); err == nil && st.IsDir() {
			return p
		}
		up := filepath.Dir(p)
		if up == p {
			return dir
		}
		p = up
	}
}

// globalPrefix asks npm for its global prefix, as the server's
// environment and npmrc files set it.
func globalPrefix(ctx context.Context, npm, cwd string, env []string) (string, error) {
	cmd := exec.Command(npm, "prefix", "--global")
	cmd.Dir, cmd.Env = cwd, env
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := pool.RunHelper(ctx, cmd); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("npm prefix --global: %w", ctx.Err())
		}
		return "", fmt.Errorf("npm prefix --global: %v: %s", err, npmReason(stderr.String()))
	}
	prefix := strings.TrimSpace(stdout.String())
	if !filepath.IsAbs(prefix) {
		return "", fmt.Errorf("npm prefix --global said %q", prefix)
	}
	return prefix, nil
}

func samePath(goos, a, b string) bool {
	a, b = filepath.Clean(a), filepath.Clean(b)
	if goos == "windows" {
		return strings.EqualFold(a, b)
	}
	return a == b
}

// isFile is libnpmexec's fileExists: a file, or a link to one.
func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// yesFlag is what the command line said about installing without asking
// (-y, --yes, --no), passed on to npm as said: npm's own rules (npmrc's
// yes, no terminal on stdin) decide the rest as they do for npx.
func yesFlag(spec Spec) []string {
	if spec.yes == "" {
		return nil
	}
	return []string{spec.yes}
}

// npmReason is what npm's stderr says went wrong: its "npm error" lines
// (npm 6: "npm ERR!") without the stack, the object dump, the empty ones
// and the pointer to its log, at most three lines and 400 bytes. Failing
// those, its last line.
func npmReason(stderr string) string {
	var kept []string
	last := ""
	for _, line := range strings.Split(stderr, "\n") {
		line = strings.TrimRight(line, "\r \t")
		if strings.TrimSpace(line) != "" {
			last = strings.TrimSpace(line)
		}
		rest, ok := strings.CutPrefix(line, "npm error ")
		if !ok {
			rest, ok = strings.CutPrefix(line, "npm ERR! ")
		}
		if !ok || len(kept) == 3 || rest == "" || rest[0] == ' ' || rest == "{" || rest == "}" ||
			strings.HasPrefix(rest, "A complete log of this run") || strings.HasPrefix(rest, "syscall ") ||
			strings.HasPrefix(rest, "errno ") || strings.TrimSpace(rest) == "404" {
			continue
		}
		kept = append(kept, strings.Join(strings.Fields(rest), " "))
	}
	msg := strings.Join(kept, "; ")
	if msg == "" {
		msg = last
	}
	if len(msg) > 400 {
		msg = strings.ToValidUTF8(msg[:400], "") + " …"
	}
	return msg
}

// lookPath is exec.LookPath against a given PATH (the child's, which the
// server's env may change) and PATHEXT.
func lookPath(file, path, pathext string) (string, error) {
	return findIn(runtime.GOOS, file, filepath.SplitList(path), pathext)
}

// findIn is exec.LookPath's search of dirs as on goos: on Windows, file
// with each of PATHEXT's extensions (.com .exe .bat .cmd by default),
// after file itself when it has an extension, and no mode bits; on Unix
// an executable file.
func findIn(goos, file string, dirs []string, pathext string) (string, error) {
	var exts []string
	if goos == "windows" {
		for _, e := range strings.Split(strings.ToLower(pathext), ";") {
			if strings.HasPrefix(e, ".") {
				exts = append(exts, e)
			}
		}
		if len(exts) == 0 {
			exts = []string{".com", ".exe", ".bat", ".cmd"}
		}
	}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, file)
		if goos != "windows" {
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				return p, nil
			}
			continue
		}
		candidates := make([]string, 0, len(exts)+1)
		if strings.LastIndex(file, ".") > strings.LastIndexAny(file, `:\/`) {
			candidates = append(candidates, p)
		}
		for _, e := range exts {
			candidates = append(candidates, p+e)
		}
		for _, c := range candidates {
			if st, err := os.Stat(c); err == nil && !st.IsDir() {
				return c, nil
			}
		}
	}
	return "", exec.ErrNotFound
}

// nodeGypBin is npm's node-gyp-bin directory, which npm exec puts on PATH
// after the node_modules/.bin chain: in npm's own files, found from npm
// (a link into them, as /usr/bin/npm, or a shim beside them, as
// nodejs\npm.cmd). "" when not there.
func nodeGypBin(npm string) string {
	real, err := filepath.EvalSymlinks(npm)
	if err != nil {
		return ""
	}
	for _, root := range []string{filepath.Dir(filepath.Dir(real)), filepath.Join(filepath.Dir(real), "node_modules", "npm")} {
		dir := filepath.Join(root, "node_modules", "@npmcli", "run-script", "lib", "node-gyp-bin")
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return dir
		}
	}
	return ""
}
