package main

import (
	"bufio"
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The glibc the packages require is what the binaries' version needs
// say, as the dynamic loader reads them: for a real cgo build, per
// library the newest GLIBC_x.y that readelf lists; for a static build
// (switchboard-connect is one), none; for both together, the cgo one's.
func TestGlibcNeedsOfRealBinaries(t *testing.T) {
	readelf, err := exec.LookPath("readelf")
	if err != nil {
		t.Fatalf("readelf (binutils, which cgo's gcc comes with) is needed: %v", err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module needs\n\ngo 1.26\n")
	write("main.go", "package main\n\n// #include <math.h>\n// #include <stdio.h>\n"+
		"// static void hi(double x) { printf(\"%f\\n\", exp(x)); }\n// #cgo LDFLAGS: -lm\nimport \"C\"\n\n"+
		"func main() { C.hi(1) }\n")
	build := func(out string, cgo string) string {
		t.Helper()
		cmd := exec.Command("go", "build", "-o", out, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo, "GOFLAGS=")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build (CGO_ENABLED=%s): %v\n%s", cgo, err, b)
		}
		return filepath.Join(dir, out)
	}
	dynamic := build("dynamic", "1")
	write("main.go", "package main\n\nfunc main() { println(\"hi\") }\n")
	static := build("static", "0")

	out, err := exec.Command(readelf, "-V", "--wide", dynamic).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := readelfNeeds(t, out)
	if want["libc.so.6"] == "" {
		t.Fatalf("readelf lists no GLIBC version of libc.so.6 for a cgo binary:\n%s", out)
	}
	t.Logf("a cgo binary needs %v", want)
	for _, tc := range []struct {
		bins []string
		want map[string]string
	}{
		{[]string{dynamic}, want},
		{[]string{static}, map[string]string{}},
		{[]string{static, dynamic}, want},
	} {
		got, err := glibcNeeds(tc.bins...)
		if err != nil || !maps.Equal(got, tc.want) {
			t.Errorf("glibcNeeds(%q) = %v, %v; want %v", tc.bins, got, err, tc.want)
		}
	}

	newest := newestGlibc(want)
	if got := debGlibc(want); got != "libc6 (>= "+newest+")" {
		t.Errorf("the .deb's Depends on glibc is %q, want libc6 (>= %s)", got, newest)
	}
	if got := rpmGlibc(want); !slices.Contains(got, "libc.so.6(GLIBC_"+want["libc.so.6"]+")(64bit)") {
		t.Errorf("the .rpm's Requires on glibc are %q, want libc.so.6(GLIBC_%s)(64bit) among them", got, want["libc.so.6"])
	}
	if got := debGlibc(nil); got != "libc6" {
		t.Errorf("with no version needs the .deb's Depends on glibc is %q, want libc6", got)
	}
}

// readelfNeeds is, per library in `readelf -V` output's version needs
// section, its newest GLIBC_x.y.
func readelfNeeds(t *testing.T, out []byte) map[string]string {
	t.Helper()
	needs := map[string]string{}
	lib, inNeeds := "", false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) > 0 && strings.HasPrefix(sc.Text(), "Version needs section"):
			inNeeds = true
		case len(f) > 0 && strings.HasPrefix(sc.Text(), "Version ") && strings.Contains(sc.Text(), "section"):
			inNeeds = false
		case inNeeds && len(f) >= 5 && f[3] == "File:":
			lib = f[4]
		case inNeeds && len(f) >= 3 && f[1] == "Name:" && strings.HasPrefix(f[2], "GLIBC_"):
			v := strings.TrimPrefix(f[2], "GLIBC_")
			if parseVersion(v) == nil {
				continue
			}
			if cur := needs[lib]; cur == "" || slices.Compare(parseVersion(cur), parseVersion(v)) < 0 {
				needs[lib] = v
			}
		}
	}
	return needs
}
