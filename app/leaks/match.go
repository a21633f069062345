package leaks

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/pool"
)

// launchers run a package named by their first operand (npx -y PKG, uvx
// PKG, pipx run PKG, npm exec PKG, ...): the running server's command line
// names the package, not the launcher.
var launchers = []string{"npx", "pnpx", "bunx", "uvx", "pipx", "npm", "pnpm", "yarn", "bun", "uv", "deno"}

// interpreters run a script named by their first operand (node
// server.js, python -m pkg): the script identifies the server.
var interpreters = []string{"node", "nodejs", "python", "python3", "ruby", "php", "perl", "java", "tsx", "ts-node"}

// subcommands of launchers that come before the package operand.
var subcommands = []string{"exec", "x", "dlx", "run", "tool"}

// valueFlags take the next argument as their value; --package and --from
// name the package itself.
var valueFlags = []string{"-p", "--package", "--from", "--with", "--python", "--directory",
	"--project", "--cache", "--cache-dir", "--registry", "--userconfig", "--spec", "--index-url",
	"-c", "--call", "-r", "--require", "--import", "--loader", "--config"}

// matches reports whether a process with command line argv runs server
// c: either exactly c's command (by base name, or by path when c gives a
// path) with exactly c's args, or a command line that names c's key
// operand: the package of a launcher (npx -y PKG), the module of
// `python -m`, or the script of an interpreter (node /abs/server.js). A
// plain binary must match exactly. resolve follows the symlinks of an
// absolute path ("" if none), so that node_modules/.bin/NAME leads to its
// package.
func matches(argv []string, c pool.ServerConfig, resolve func(string) string) bool {
	if len(argv) == 0 || c.Command == "" {
		return false
	}
	if sameCommand(argv[0], c.Command) && slices.Equal(argv[1:], c.Args) {
		return true
	}
	k := keyOperand(c)
	if k.name == "" {
		return false
	}
	for _, a := range argv[1:] {
		if a == "" || strings.HasPrefix(a, "-") {
			continue
		}
		if k.namedBy(a) {
			return true
		}
		if r := resolve(a); r != "" && k.namedBy(r) {
			return true
		}
	}
	return false
}

// sameCommand compares an argv[0] with a configured command: by full path
// when both are paths, else by base name.
func sameCommand(arg0, command string) bool {
	if filepath.IsAbs(arg0) && filepath.IsAbs(command) {
		return filepath.Clean(arg0) == filepath.Clean(command)
	}
	return baseName(arg0) == baseName(command)
}

// baseName is a command's name without directory or Windows suffix.
func baseName(cmd string) string {
	b := filepath.Base(strings.ReplaceAll(cmd, `\`, "/"))
	for _, ext := range []string{".exe", ".cmd", ".bat"} {
		b = strings.TrimSuffix(b, ext)
	}
	return b
}

// Kinds of key operand.
const (
	keyPackage = iota + 1 // npx PKG, uvx PKG: package name, any version
	keyModule             // python -m MODULE
	keyScript             // node SCRIPT: a path, relative to the server's cwd
)

// key is what identifies a server started through a launcher or an
// interpreter.
type key struct {
	kind int
	name string // without a version
	cwd  string // the server's cwd, for relative scripts
}

// keyOperand finds c's key operand; the zero key for other commands.
func keyOperand(c pool.ServerConfig) key {
	base := baseName(c.Command)
	isLauncher := slices.Contains(launchers, base)
	if !isLauncher && !slices.Contains(interpreters, base) && !isPython(base) {
		return key{}
	}
	args := c.Args
	first := firstOperand(args)
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-m" && i+1 < len(args): // python -m module
			return key{kind: keyModule, name: args[i+1]}
		case a == "-jar" && i+1 < len(args): // java -jar x.jar
			return key{kind: keyScript, name: args[i+1], cwd: c.Cwd}
		case isLauncher && (a == "-p" || a == "--package" || a == "--from") && i+1 < len(args):
			return key{kind: keyPackage, name: stripVersion(args[i+1])}
		case isLauncher && (strings.HasPrefix(a, "--package=") || strings.HasPrefix(a, "--from=")):
			return key{kind: keyPackage, name: stripVersion(a[strings.IndexByte(a, '=')+1:])}
		case slices.Contains(valueFlags, a):
			i++
		case strings.HasPrefix(a, "-"):
		case isLauncher && i == first && slices.Contains(subcommands, a):
		case isLauncher && !looksLikePath(a):
			return key{kind: keyPackage, name: stripVersion(a)}
		default:
			return key{kind: keyScript, name: a, cwd: c.Cwd}
		}
	}
	return key{}
}

func isPython(base string) bool {
	return strings.HasPrefix(base, "python3.") || strings.HasPrefix(base, "python2")
}

func looksLikePath(a string) bool {
	return strings.HasPrefix(a, ".") || filepath.IsAbs(a) ||
		strings.HasSuffix(a, ".js") || strings.HasSuffix(a, ".ts") || strings.HasSuffix(a, ".py")
}

// firstOperand is the index of the first argument that is not a flag.
func firstOperand(args []string) int {
	for i := 0; i < len(args); i++ {
		if slices.Contains(valueFlags, args[i]) {
			i++
			continue
		}
		if !strings.HasPrefix(args[i], "-") {
			return i
		}
	}
	return -1
}

// stripVersion drops an npm "@version" or a pip "==version" suffix:
// "@scope/pkg@1.2" -> "@scope/pkg", "mcp-server-fetch==1.0" -> "mcp-server-fetch".
func stripVersion(spec string) string {
	if i := strings.Index(spec, "=="); i > 0 {
		spec = spec[:i]
	}
	if i := strings.LastIndexByte(spec, '@'); i > 0 && !strings.ContainsRune(spec[i:], '/') {
		spec = spec[:i]
	}
	return spec
}

// namedBy reports whether one argument of a running process names k.
//
//   - package: the same package with any version ("@scope/pkg@1"), a path
//     into node_modules/PKG/, or, for an unscoped name, an executable
//     file called PKG (uvx installs mcp-server-fetch as .../bin/mcp-server-fetch);
//   - module: the same module name;
//   - script: the same path, a relative one taken from the server's cwd.
//     A bare file name never matches a different directory's file of
//     that name (index.js is everywhere).
func (k key) namedBy(arg string) bool {
	switch k.kind {
	case keyPackage:
		if arg == k.name || stripVersion(arg) == k.name {
			return true
		}
		slashed := filepath.ToSlash(arg)
		if strings.Contains(slashed, "/node_modules/"+k.name+"/") {
			return true
		}
		return !strings.HasPrefix(k.name, "@") && strings.Contains(slashed, "/") && baseName(arg) == k.name
	case keyModule:
		return arg == k.name
	case keyScript:
		if arg == k.name {
			return true
		}
		want := k.name
		if !filepath.IsAbs(want) && k.cwd != "" {
			want = filepath.Join(k.cwd, want)
		}
		return filepath.IsAbs(want) && filepath.IsAbs(arg) && filepath.Clean(want) == filepath.Clean(arg)
	}
	return false
}
