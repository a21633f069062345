package main

import (
	"debug/elf"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// glibcNeeds is, for each glibc library the binaries need versioned
// symbols from (libc.so.6, libm.so.6), the newest GLIBC_x.y they need:
// the dynamic loader refuses to start a binary whose version needs
// (its .gnu.version_r) the system's glibc lacks ("GLIBC_2.34 not
// found"), so the packages must not install where that glibc is older.
// A static binary needs none.
func glibcNeeds(paths ...string) (map[string]string, error) {
	need := map[string]string{}
	for _, p := range paths {
		f, err := elf.Open(p)
		if err != nil {
			return nil, fmt.Errorf("read the glibc versions %s needs: %w", p, err)
		}
		libs, err := f.DynamicVersionNeeds()
		f.Close()
		if errors.Is(err, elf.ErrNoSymbols) {
			continue // static: no dynamic section
		}
		if err != nil {
			return nil, fmt.Errorf("read the glibc versions %s needs: %w", p, err)
		}
		for _, lib := range libs {
			for _, dep := range lib.Needs {
				v, ok := strings.CutPrefix(dep.Dep, "GLIBC_")
				// A weak need only makes the loader warn; GLIBC_PRIVATE
				// and the like are no release.
				if !ok || dep.Flags&elf.VER_FLG_WEAK != 0 || parseVersion(v) == nil {
					continue
				}
				if cur, ok := need[lib.Name]; !ok || slices.Compare(parseVersion(cur), parseVersion(v)) < 0 {
					need[lib.Name] = v
				}
			}
		}
	}
	return need, nil
}

// parseVersion is "2.3.4" as numbers, or nil if it is not one.
func parseVersion(v string) []int {
	var n []int
	for _, part := range strings.Split(v, ".") {
		i, err := strconv.Atoi(part)
		if err != nil || i < 0 {
			return nil
		}
		n = append(n, i)
	}
	return n
}

// newestGlibc is the newest version of needs (what glibc itself must be,
// libc and libm coming together), "" for none.
func newestGlibc(needs map[string]string) string {
	newest := ""
	for _, v := range needs {
		if newest == "" || slices.Compare(parseVersion(newest), parseVersion(v)) < 0 {
			newest = v
		}
	}
	return newest
}

// debGlibc is the .deb's dependency on libc6 for needs.
func debGlibc(needs map[string]string) string {
	if v := newestGlibc(needs); v != "" {
		return "libc6 (>= " + v + ")"
	}
	return "libc6"
}

// rpmGlibc are the .rpm's requirements for needs, in the form rpm's own
// dependency generator writes and every RPM distribution's glibc
// provides: libc.so.6(GLIBC_2.34)(64bit).
func rpmGlibc(needs map[string]string) []string {
	var reqs []string
	for _, lib := range slices.Sorted(maps.Keys(needs)) {
		reqs = append(reqs, lib+"(GLIBC_"+needs[lib]+")(64bit)")
	}
	return reqs
}
