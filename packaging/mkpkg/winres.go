package main

import (
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tc-hib/winres"
	"github.com/tc-hib/winres/version"
)

// sysoName is the resource object go build links into a Windows amd64
// binary of the package it sits in (and ignores for every other target).
const sysoName = "rsrc_windows_amd64.syso"

// writeWinres writes the Windows resources (the application icon and the
// version information Explorer shows) as a .syso into each package
// directory, for the next Windows build of those packages, and the icon
// as switchboard.ico into o.out for the installer.
func writeWinres(o options, dirs []string) ([]string, error) {
	f, err := os.Open(o.icon)
	if err != nil {
		return nil, err
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.icon, err)
	}
	icon, err := winres.NewIconFromResizedImage(img, []int{16, 24, 32, 48, 64, 128, 256})
	if err != nil {
		return nil, fmt.Errorf("icon: %w", err)
	}
	// The same icon for the installer (NSIS takes a .ico file).
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	ico := filepath.Join(o.out, "switchboard.ico")
	out, err := os.Create(ico)
	if err != nil {
		return nil, err
	}
	if err := icon.SaveICO(out); err != nil {
		out.Close()
		return nil, err
	}
	if err := out.Close(); err != nil {
		return nil, err
	}
	made := []string{ico}
	for _, dir := range dirs {
		exe := filepath.Base(dir) + ".exe"
		rs := winres.ResourceSet{}
		if err := rs.SetIcon(winres.Name("APPICON"), icon); err != nil {
			return nil, err
		}
		vi := version.Info{}
		vi.SetFileVersion(fourPart(o.version))
		vi.SetProductVersion(fourPart(o.version))
		for k, v := range map[string]string{
			version.ProductName:      "Switchboard",
			version.FileDescription:  describe(exe),
			version.CompanyName:      "The Switchboard authors",
			version.LegalCopyright:   "Copyright (c) 2026 The Switchboard authors. MIT License.",
			version.OriginalFilename: exe,
			version.InternalName:     strings.TrimSuffix(exe, ".exe"),
			version.ProductVersion:   o.version,
			version.FileVersion:      o.version,
		} {
			if err := vi.Set(version.LangDefault, k, v); err != nil {
				return nil, err
			}
		}
		rs.SetVersionInfo(vi)
		path := filepath.Join(dir, sysoName)
		out, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		if err := rs.WriteObject(out, winres.ArchAMD64); err != nil {
			out.Close()
			return nil, err
		}
		if err := out.Close(); err != nil {
			return nil, err
		}
		made = append(made, path)
	}
	return made, nil
}

func describe(exe string) string {
	if exe == "switchboard-connect.exe" {
		return "Switchboard relay for one MCP client session"
	}
	return "Switchboard: one shared MCP server pool for all your AI coding sessions"
}

// fourPart is a Windows file version "a.b.c.d" from "a.b.c" (anything
// after a '-' or '+' dropped, missing parts 0).
func fourPart(v string) string {
	v, _, _ = strings.Cut(v, "-")
	v, _, _ = strings.Cut(v, "+")
	parts := strings.Split(v, ".")
	out := make([]string, 4)
	for i := range out {
		out[i] = "0"
		if i < len(parts) {
			if n, err := strconv.Atoi(parts[i]); err == nil {
				out[i] = strconv.Itoa(n)
			}
		}
	}
	return strings.Join(out, ".")
}
