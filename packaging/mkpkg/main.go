// Command mkpkg builds Switchboard's Linux artifacts from the built
// binaries: a staged install tree (what `make install` copies into
// ~/.local), the per-user tarball of that tree, and the .deb and .rpm,
// made with nfpm as a library so no packaging tool is needed on the
// machine.
//
//	go run ./packaging/mkpkg -version 0.1.0 -bin bin -out dist
//
// With -winres it instead writes the Windows resources (icon, version
// information) as .syso objects into the given package directories, for
// the mingw-w64 build that follows.
//
// `make package-linux` and `make package-windows` run it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	var o options
	flag.StringVar(&o.version, "version", "", "package version (FyneApp.toml's)")
	flag.StringVar(&o.binDir, "bin", "bin", "directory with switchboard and switchboard-connect")
	flag.StringVar(&o.out, "out", "dist", "where the artifacts go")
	flag.StringVar(&o.icon, "icon", "assets/icon.png", "the application icon (PNG)")
	flag.StringVar(&o.linuxDir, "linux", "packaging/linux", "the Linux packaging files")
	flag.StringVar(&o.license, "license", "packaging/LICENSE", "the licence")
	winresDirs := flag.String("winres", "", "comma-separated package directories to write Windows resources into (and nothing else)")
	flag.Parse()
	if o.version == "" {
		fmt.Fprintln(os.Stderr, "mkpkg: -version is required")
		os.Exit(2)
	}
	var made []string
	var err error
	if *winresDirs != "" {
		made, err = writeWinres(o, strings.Split(*winresDirs, ","))
	} else {
		made, err = build(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkpkg:", err)
		os.Exit(1)
	}
	for _, f := range made {
		fmt.Println(f)
	}
}
