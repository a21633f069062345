// Package npx starts servers configured as `npx -y PACKAGE ARGS…` without
// npx: it resolves the package once, through npm itself, to the script
// its bin entry names (or to the bin npx finds before installing), and
// the pool runs `node SCRIPT ARGS…` with npx's PATH (launch.go). npx stays
// alive as the parent of the real server (an `npm exec` process of about
// 55 MiB beside every server) and answers the first request several times
// later than node on the same script.
//
// Anything it cannot resolve with certainty (an unknown flag, --call,
// several bins without a match, a bin that is not a node script, no node)
// is run as written, and the reason is shown.
package npx

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Spec is an npx command line, understood.
type Spec struct {
	// Package is what npm installs: "name", "@scope/name", either with
	// "@version" or "@tag".
	Package string
	// Bin is the executable to run, when the command line names one (-p
	// PACKAGE BIN); empty means the package's own.
	Bin string
	// Args follow the executable.
	Args []string

	// shownPackage and shownBin are Package and Bin as configured, their
	// ${VAR} references unexpanded: what notes quote.
	shownPackage, shownBin string
	// yes is what the command line said about installing without asking,
	// the last of -y/--yes ("--yes") and --no/--no-yes ("--no"); "" for
	// nothing.
	yes string
}

// IsNPX reports whether command is npx (by its base name), the only
// wrapper this package resolves.
func IsNPX(command string) bool {
	base := strings.ToLower(filepath.Base(command))
	return base == "npx" || base == "npx.cmd"
}

// Parse reads npx's arguments. Its error says why the command line is not
// resolved with certainty; the caller then runs it as written.
func Parse(args []string) (Spec, error) { return parse(args, args) }

// parse is Parse with shown, args as configured (word for word, their
// ${VAR} references unexpanded), quoted in errors instead of args: an
// expanded word may hold a secret, and the error becomes a note that is
// logged and shown.
func parse(args, shown []string) (Spec, error) {
	if len(shown) != len(args) {
		shown = args
	}
	var spec Spec
	var packages, shownPackages []string
	i := 0
flags:
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			i++
			break flags
		case a == "-y" || a == "--yes":
			spec.yes = "--yes"
		case a == "--no" || a == "--no-yes":
			spec.yes = "--no"
		case a == "-q" || a == "--quiet" || a == "--silent":
		case a == "-p" || a == "--package":
			if i+1 >= len(args) {
				return Spec{}, fmt.Errorf("%s has no package", shown[i])
			}
			i++
			packages = append(packages, args[i])
			shownPackages = append(shownPackages, shown[i])
		case strings.HasPrefix(a, "--package="):
			packages = append(packages, strings.TrimPrefix(a, "--package="))
			shownPackages = append(shownPackages, strings.TrimPrefix(shown[i], "--package="))
		case a == "-c" || a == "--call" || strings.HasPrefix(a, "--call="):
			return Spec{}, fmt.Errorf("npx %s runs a shell command, not a package's bin", shown[i])
		case strings.HasPrefix(a, "-"):
			return Spec{}, fmt.Errorf("npx flag %q is not one that is resolved (-y, --yes, --no, -p, --package, -q)", shown[i])
		default:
			break flags
		}
	}
	rest := args[i:]
	switch len(packages) {
	case 0:
		if len(rest) == 0 {
			return Spec{}, fmt.Errorf("no package named")
		}
		spec.Package, spec.Args = rest[0], rest[1:]
		spec.shownPackage = shown[i]
	case 1:
		if len(rest) == 0 {
			return Spec{}, fmt.Errorf("-p %s names no command to run", shownPackages[0])
		}
		spec.Package, spec.Bin, spec.Args = packages[0], rest[0], rest[1:]
		spec.shownPackage, spec.shownBin = shownPackages[0], shown[i]
	default:
		return Spec{}, fmt.Errorf("several -p packages: the command may need all of them on its PATH")
	}
	if _, err := packageName(spec.Package, spec.shownPackage); err != nil {
		return Spec{}, err
	}
	if spec.Bin != "" && strings.ContainsAny(spec.Bin, `/\`) {
		return Spec{}, fmt.Errorf("%q is a path, not a bin name", spec.shownBin)
	}
	spec.Args = append([]string(nil), spec.Args...)
	return spec, nil
}

// PackageName is a registry package spec's name without its version or
// tag: "@scope/name@1.2" is "@scope/name". Anything that is not a
// registry spec (a path, a URL, a git or tarball spec, an alias, also
// after "name@") is an error: npm resolves those in ways this package
// does not repeat.
func PackageName(spec string) (string, error) { return packageName(spec, spec) }

// packageName is PackageName quoting shown, spec as configured, in its
// error.
func packageName(spec, shown string) (string, error) {
	name, version := spec, ""
	if strings.HasPrefix(spec, "@") {
		slash := strings.IndexByte(spec, '/')
		if slash < 0 {
			return "", fmt.Errorf("%q is not a package name", shown)
		}
		if at := strings.IndexByte(spec[slash:], '@'); at >= 0 {
			name, version = spec[:slash+at], spec[slash+at+1:]
		}
	} else if at := strings.IndexByte(spec, '@'); at >= 0 {
		name, version = spec[:at], spec[at+1:]
	}
	if name == "" || strings.ContainsAny(name, `:\ `) || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "/") ||
		strings.Count(name, "/") > 1 || (!strings.HasPrefix(name, "@") && strings.Contains(name, "/")) {
		return "", fmt.Errorf("%q is not a registry package name (a path, URL or git spec is run as written)", shown)
	}
	// A version, a range or a tag has none of these; "name@file:…",
	// "name@github:…", "name@https://…", "name@npm:other" and
	// "name@owner/repo#ref" install something else under the name, which
	// the registry package of the name would replace in the resolver's
	// own install.
	if strings.ContainsAny(version, `:/#\`) {
		return "", fmt.Errorf("%q is not a registry package spec (a path, URL, git spec or alias after the name is run as written)", shown)
	}
	return name, nil
}

// defaultBin is the bin npx runs for a package without -p: the only one,
// or the one named like the package (without its scope).
func defaultBin(pkg string, bins map[string]string) (string, error) {
	if len(bins) == 1 {
		for name := range bins {
			return name, nil
		}
	}
	short := pkg[strings.LastIndexByte(pkg, '/')+1:]
	if _, ok := bins[short]; ok {
		return short, nil
	}
	if len(bins) == 0 {
		return "", fmt.Errorf("package %s declares no bin", pkg)
	}
	return "", fmt.Errorf("package %s has %d bins and none is named %s", pkg, len(bins), short)
}
