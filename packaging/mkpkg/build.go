package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"image"
	"image/png"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
	"golang.org/x/image/draw"

	"github.com/switchboard-mcp/switchboard/app/autostart"
	"github.com/switchboard-mcp/switchboard/app/version"
)

type options struct {
	version  string
	binDir   string
	out      string
	icon     string
	linuxDir string
	license  string
}

// appID names the desktop entry and the icon: the app's ID, which is
// FyneApp.toml's too.
const appID = version.AppID

// iconSizes are the hicolor sizes the icon is installed at, made from
// the one PNG in assets.
var iconSizes = []int{16, 22, 24, 32, 48, 64, 128, 256}

// debDepends are the Debian packages of the libraries the binary links
// (libGL, libwayland-client; `readelf -d`) and of those its windowing
// code loads at run time (X11 and its extensions, EGL, xkbcommon; the
// sonames in the binary). libc6 comes first, with the version the built
// binaries need (glibcNeeds). libwayland-client0 is 1.20 or newer for
// wl_proxy_marshal_flags, which GLFW calls. The package test checks the
// linked ones, and these versions against dpkg-shlibdeps.
var debDepends = []string{
	"libgl1", "libegl1", "libwayland-client0 (>= 1.20.0)", "libwayland-cursor0", "libwayland-egl1",
	"libxkbcommon0", "libx11-6", "libxcursor1", "libxext6", "libxi6", "libxinerama1", "libxrandr2",
	"libxrender1", "libxxf86vm1",
}

// rpmRequires are the same libraries by soname, which every RPM
// distribution's packages provide whatever their names; glibc's come
// first, by the versions the built binaries need (glibcNeeds).
var rpmRequires = []string{
	"libGL.so.1()(64bit)", "libEGL.so.1()(64bit)", "libwayland-client.so.0()(64bit)",
	"libwayland-cursor.so.0()(64bit)", "libwayland-egl.so.1()(64bit)", "libxkbcommon.so.0()(64bit)",
	"libX11.so.6()(64bit)", "libXcursor.so.1()(64bit)", "libXext.so.6()(64bit)", "libXi.so.6()(64bit)",
	"libXinerama.so.1()(64bit)", "libXrandr.so.2()(64bit)", "libXrender.so.1()(64bit)", "libXxf86vm.so.1()(64bit)",
}

// build makes every Linux artifact and returns their paths.
func build(o options) ([]string, error) {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	base := fmt.Sprintf("switchboard_%s_linux_amd64", o.version)

	// The per-user tree: a prefix layout (bin, share) plus install.sh,
	// which copies it into ~/.local with absolute paths filled in.
	tree := filepath.Join(o.out, base)
	if err := stage(o, tree, "switchboard", "%h/.local/bin/switchboard"); err != nil {
		return nil, err
	}
	if err := copyFile(filepath.Join(o.linuxDir, "install.sh"), filepath.Join(tree, "install.sh"), 0o755); err != nil {
		return nil, err
	}
	tarball := tree + ".tar.gz"
	if err := tarGz(tree, tarball); err != nil {
		return nil, err
	}

	// The system tree: the same files under /usr, pointing at /usr/bin.
	root := filepath.Join(o.out, "linux-root")
	if err := stage(o, filepath.Join(root, "usr"), "/usr/bin/switchboard", "/usr/bin/switchboard"); err != nil {
		return nil, err
	}
	needs, err := glibcNeeds(filepath.Join(o.binDir, "switchboard"), filepath.Join(o.binDir, "switchboard-connect"))
	if err != nil {
		return nil, err
	}
	made := []string{tree, tarball}
	for _, format := range []string{"deb", "rpm"} {
		f, err := pack(o, root, format, needs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", format, err)
		}
		made = append(made, f)
	}
	return made, nil
}

// stage lays out the installed files under prefix: the binaries, the
// desktop entry (Exec=exec), the icons, the autostart entry template
// (what `switchboard autostart on` writes, for exec), the systemd user
// unit (ExecStart=unitExec serve) and the licence.
func stage(o options, prefix, exec, unitExec string) error {
	if err := os.RemoveAll(prefix); err != nil {
		return err
	}
	for _, bin := range []string{"switchboard", "switchboard-connect"} {
		if err := copyFile(filepath.Join(o.binDir, bin), filepath.Join(prefix, "bin", bin), 0o755); err != nil {
			return fmt.Errorf("%w (run make build first)", err)
		}
	}
	desktop, err := os.ReadFile(filepath.Join(o.linuxDir, "switchboard.desktop"))
	if err != nil {
		return err
	}
	desktop = regexp.MustCompile(`(?m)^Exec=.*$`).ReplaceAll(desktop, []byte("Exec="+exec))
	if err := writeFile(filepath.Join(prefix, "share", "applications", appID+".desktop"), desktop, 0o644); err != nil {
		return err
	}
	autostartExe := exec
	if !filepath.IsAbs(autostartExe) {
		autostartExe = "switchboard" // install.sh writes the absolute path
	}
	if err := writeFile(filepath.Join(prefix, "share", "switchboard", "autostart", appID+".desktop"),
		[]byte(autostart.DesktopEntry(autostartExe, nil)), 0o644); err != nil {
		return err
	}
	unit, err := os.ReadFile(filepath.Join(o.linuxDir, "switchboard.service"))
	if err != nil {
		return err
	}
	unit = regexp.MustCompile(`(?m)^ExecStart=.*$`).ReplaceAll(unit, []byte("ExecStart="+unitExec+" serve"))
	if err := writeFile(filepath.Join(prefix, "share", "switchboard", "switchboard.service"), unit, 0o644); err != nil {
		return err
	}
	if err := copyFile(o.license, filepath.Join(prefix, "share", "doc", "switchboard", "copyright"), 0o644); err != nil {
		return err
	}
	return writeIcons(o.icon, filepath.Join(prefix, "share", "icons", "hicolor"))
}

// writeIcons scales the icon to every hicolor size.
func writeIcons(src, hicolor string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	for _, n := range iconSizes {
		dst := image.NewNRGBA(image.Rect(0, 0, n, n))
		draw.CatmullRom.Scale(dst, dst.Bounds(), img, img.Bounds(), draw.Src, nil)
		path := filepath.Join(hicolor, fmt.Sprintf("%dx%d", n, n), "apps", appID+".png")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		out, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := png.Encode(out, dst); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
	return nil
}

// pack builds one package of the system tree root, requiring the glibc
// versions of needs.
func pack(o options, root, format string, needs map[string]string) (string, error) {
	var contents files.Contents
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		dst := "/" + filepath.ToSlash(rel)
		mode := fs.FileMode(0o644)
		if strings.HasPrefix(dst, "/usr/bin/") {
			mode = 0o755
		}
		if dst == "/usr/share/switchboard/switchboard.service" {
			dst = "/usr/lib/systemd/user/switchboard.service"
		}
		if format == "rpm" && dst == "/usr/share/doc/switchboard/copyright" {
			dst = "/usr/share/licenses/switchboard/LICENSE"
		}
		contents = append(contents, &files.Content{Source: path, Destination: dst, FileInfo: &files.ContentFileInfo{Mode: mode}})
		return nil
	})
	if err != nil {
		return "", err
	}
	if format == "rpm" {
		// rpm -e removes only the directories a package owns: without
		// these its own would stay behind, empty.
		for _, dir := range ownDirs(contents) {
			contents = append(contents, &files.Content{Destination: dir, Type: files.TypeDir, FileInfo: &files.ContentFileInfo{Mode: 0o755}})
		}
	}
	scripts := filepath.Join(o.out, "scripts")
	refresh := filepath.Join(scripts, "refresh-desktop-caches.sh")
	if err := writeFile(refresh, []byte(refreshScript), 0o755); err != nil {
		return "", err
	}
	info := &nfpm.Info{
		Name:        "switchboard",
		Arch:        "amd64",
		Platform:    "linux",
		Version:     o.version,
		Section:     "devel",
		Priority:    "optional",
		Maintainer:  "Switchboard maintainers <switchboard-mcp@users.noreply.github.com>",
		Description: "One shared, supervised copy of each MCP server for all your AI coding sessions\nSwitchboard is a tray app that runs one child per MCP server and multiplexes\nevery Claude Code, Cursor, Claude Desktop and VS Code session onto it, with\nlive sessions, request history and leak detection.",
		Vendor:      "Switchboard",
		Homepage:    "https://github.com/switchboard-mcp/switchboard",
		License:     "MIT",
		Overridables: nfpm.Overridables{
			Contents: contents,
			Scripts:  nfpm.Scripts{PostInstall: refresh, PostRemove: refresh},
		},
	}
	if format == "deb" {
		info.Depends = append([]string{debGlibc(needs)}, debDepends...)
	} else {
		info.Depends = append(rpmGlibc(needs), rpmRequires...)
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, format); err != nil {
		return "", err
	}
	pkgr, err := nfpm.Get(format)
	if err != nil {
		return "", err
	}
	path := filepath.Join(o.out, pkgr.ConventionalFileName(info))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := pkgr.Package(info, f); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

// ownDirs are the directories of contents that are Switchboard's own
// (a "switchboard" in their path: /usr/share/switchboard/autostart), not
// the system's (/usr/bin, /usr/share/icons/…), sorted.
func ownDirs(contents files.Contents) []string {
	own := map[string]bool{}
	for _, c := range contents {
		for dir := path.Dir(c.Destination); dir != "/"; dir = path.Dir(dir) {
			if strings.Contains(dir+"/", "/switchboard/") {
				own[dir] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(own))
}

// refreshScript runs after install and removal: desktops find the new
// entry and icons without a re-login. Missing tools are not an error.
const refreshScript = `#!/bin/sh
if command -v update-desktop-database >/dev/null 2>&1; then
  update-desktop-database -q /usr/share/applications || true
fi
if command -v gtk-update-icon-cache >/dev/null 2>&1; then
  gtk-update-icon-cache -q -t /usr/share/icons/hicolor || true
fi
exit 0
`

// tarGz archives dir as dir's base name, with its modes.
func tarGz(dir, dst string) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	gz := gzip.NewWriter(out)
	tw := tar.NewWriter(gz)
	parent := filepath.Dir(dir)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(parent, path)
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return out.Close()
}

func copyFile(src, dst string, mode fs.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return writeFile(dst, b, mode)
}

func writeFile(path string, b []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, b, mode); err != nil {
		return err
	}
	return os.Chmod(path, mode) // WriteFile keeps an existing file's mode
}
