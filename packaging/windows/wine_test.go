// Package windows holds the Windows installer and the tests that run the
// Windows build under Wine (make test-windows).
package windows

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The Windows artifacts, built by `make package-windows`, and the test
// helpers `make test-windows` builds next to them (the fake MCP server and
// the stand-in bcryptprimitives.dll Wine 8 lacks).
var (
	dist    = os.Getenv("SWITCHBOARD_WINE_DIST")
	helpers = os.Getenv("SWITCHBOARD_WINE_HELPERS")
	wine    = "/usr/lib/wine/wine64"
)

// prefix is one Wine prefix for the whole run: creating one takes seconds.
var prefix string

func TestMain(m *testing.M) {
	if dist == "" || helpers == "" {
		fmt.Println("skipping the Wine tests: SWITCHBOARD_WINE_DIST and SWITCHBOARD_WINE_HELPERS are not set (make test-windows sets them)")
		os.Exit(0)
	}
	if _, err := os.Stat(wine); err != nil {
		fmt.Fprintln(os.Stderr, "wine64 is not installed (packaging/linux/deps.sh installs it)")
		os.Exit(1)
	}
	code := func() int {
		dir, err := os.MkdirTemp("", "sbwine")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		prefix = filepath.Join(dir, "prefix")
		boot := command(context.Background(), wine, "wineboot", "-i")
		if out, err := combined(boot); err != nil {
			fmt.Fprintf(os.Stderr, "wineboot: %v\n%s", err, out)
			return 1
		}
		dll, err := os.ReadFile(filepath.Join(helpers, "bcryptprimitives.dll"))
		if err == nil {
			err = os.WriteFile(filepath.Join(prefix, "drive_c", "windows", "system32", "bcryptprimitives.dll"), dll, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() {
			kill := exec.Command(filepath.Join(filepath.Dir(wine), "wineserver"), "-k")
			kill.Env = wineEnv()
			_ = kill.Run()
		}()
		return m.Run()
	}()
	os.Exit(code)
}

func wineEnv(extra ...string) []string {
	env := append(os.Environ(), "WINEPREFIX="+prefix, "WINEDEBUG=-all", "WINEDLLOVERRIDES=mscoree,mshtml=", "DISPLAY=")
	return append(env, extra...)
}

// winPath is a Linux path as Wine's Z: drive shows it.
func winPath(p string) string { return `Z:` + strings.ReplaceAll(p, "/", `\`) }

// run runs a Windows program to completion.
func run(t *testing.T, env []string, exe string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := command(ctx, wine, append([]string{exe}, args...)...)
	cmd.Env = wineEnv(env...)
	return combined(cmd)
}

// command is a Wine command in the test prefix. Wine's own services
// (wineserver, winedevice.exe) start from the first command and may keep
// its output pipes open long after it exited: WaitDelay stops waiting on
// them.
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = wineEnv()
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// combined runs cmd and returns its output; pipes held open by Wine's
// services after cmd exited are not an error.
func combined(cmd *exec.Cmd) (string, error) {
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil
	}
	return out.String(), err
}

// winProc is a Windows program the test started under Wine and keeps
// running: its output, and its exit.
type winProc struct {
	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan error
}

// startWine starts exe under Wine with env added; the test's cleanup
// kills it, and shows its output when the test failed.
func startWine(t *testing.T, env []string, exe string, args ...string) *winProc {
	t.Helper()
	p := &winProc{cmd: command(context.Background(), wine, append([]string{exe}, args...)...),
		log: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd.Env = wineEnv(env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
		}
		if t.Failed() {
			t.Logf("%s's output:\n%s", filepath.Base(exe), p.log.String())
		}
	})
	return p
}

// fakeHome is a SWITCHBOARD_HOME with the Windows fake server configured
// as "fake", marker in its command line (to find the child's process),
// and the environment that points Switchboard at it.
func fakeHome(t *testing.T) (home, marker string, env []string) {
	t.Helper()
	home = t.TempDir()
	marker = fmt.Sprintf("sbwine%d", time.Now().UnixNano())
	config := fmt.Sprintf(`{"mcpServers":{"fake":{"command":%q,"args":["-log",%q]}}}`,
		winPath(filepath.Join(helpers, "fakemcp.exe")), winPath(filepath.Join(home, "child-"+marker+".log")))
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return home, marker, []string{"SWITCHBOARD_HOME=" + winPath(home)}
}

func TestVersion(t *testing.T) {
	out, err := run(t, nil, filepath.Join(dist, "switchboard.exe"), "version", "--json")
	if err != nil {
		t.Fatalf("version: %v\n%s", err, out)
	}
	var v struct{ Version, Go string }
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Version == "" || v.Version == "dev" || v.Go == "" {
		t.Fatalf("version --json: %v\n%s", err, out)
	}
	t.Logf("switchboard.exe %s (%s)", v.Version, v.Go)
}

// The named pipe's own tests (app/localsock, built for Windows): the
// pool's pipe is the user's, and a pipe of its name that another owner
// created first is refused by the client and by the pool.
func TestLocalsock(t *testing.T) {
	out, err := run(t, nil, filepath.Join(helpers, "localsock.test.exe"), "-test.v")
	if err != nil || !strings.Contains(out, "\nPASS") {
		t.Fatalf("localsock tests under Wine: %v\n%s", err, out)
	}
	t.Log(out)
	checkSkips(t, out, map[string]string{
		"TestListenTwiceSaysTheUserHoldsIt": "Wine 8 does not enforce FILE_FLAG_FIRST_PIPE_INSTANCE (a second Listen joins the pipe); only real Windows can check it",
	})
}

// Package app/fileid's tests, built for Windows (make test-windows), run
// under Wine: a file put in another's place at a path is another file, and
// a file mapped for writing (the history's journal) is itself.
func TestFileIdentityUnderWine(t *testing.T) {
	out, err := run(t, nil, filepath.Join(helpers, "fileid.test.exe"), "-test.v")
	if err != nil {
		t.Fatalf("fileid.test.exe: %v\n%s", err, out)
	}
	checkSkips(t, out, nil)
}

// serve with the Windows fake MCP server, `switchboard-connect.exe`
// through the named pipe, a call answered; then the pool is killed
// (SIGKILL of its process) and its child dies with it: the kill-on-close
// Job Object the pool holds ends it.
func TestServeConnectAndJobObject(t *testing.T) {
	_, marker, env := fakeHome(t)
	serve := startWine(t, env, filepath.Join(dist, "switchboard.exe"), "serve")
	waitFor(t, "the control pipe", func() bool {
		_, err := run(t, env, filepath.Join(dist, "switchboard.exe"), "status", "--json")
		return err == nil
	})
	openSession(t, env, marker) // one call answered, one child
	if err := serve.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the child to die with the pool (Job Object)", func() bool { return len(linuxPIDsOf(marker)) == 0 })
}

// The installer installs per user with a Start-menu entry and an Apps &
// features entry; the installed binary runs; start at login writes and
// removes the real (Wine) registry's Run value; the uninstaller removes
// everything it installed.
func TestInstallerRoundTrip(t *testing.T) {
	setup, err := filepath.Glob(filepath.Join(dist, "..", "switchboard-*-setup.exe"))
	if err != nil || len(setup) != 1 {
		t.Fatalf("the installer: %v %v", setup, err)
	}
	if out, err := run(t, nil, setup[0], "/S"); err != nil {
		t.Fatalf("setup /S: %v\n%s", err, out)
	}
	user := os.Getenv("USER")
	if user == "" {
		user = "root"
	}
	local := filepath.Join(prefix, "drive_c", "users", user, "AppData", "Local", "Programs", "Switchboard")
	menu := filepath.Join(prefix, "drive_c", "users", user, "AppData", "Roaming", "Microsoft", "Windows", "Start Menu", "Programs", "Switchboard.lnk")
	for _, f := range []string{"switchboard.exe", "switchboard-connect.exe", "LICENSE.txt", "uninstall.exe"} {
		if _, err := os.Stat(filepath.Join(local, f)); err != nil {
			t.Fatalf("installed %s: %v", f, err)
		}
	}
	if _, err := os.Stat(menu); err != nil {
		t.Errorf("Start-menu entry: %v", err)
	}
	const key = `HKCU\Software\Microsoft\Windows\CurrentVersion\Uninstall\Switchboard`
	if out, err := run(t, nil, "reg", "query", key); err != nil || !strings.Contains(out, "DisplayVersion") {
		t.Errorf("Apps & features entry: %v\n%s", err, out)
	}
	installed := filepath.Join(local, "switchboard.exe")
	if out, err := run(t, nil, installed, "version"); err != nil {
		t.Errorf("the installed switchboard.exe: %v\n%s", err, out)
	}
	const runKey = `HKCU\Software\Microsoft\Windows\CurrentVersion\Run`
	if out, err := run(t, nil, installed, "autostart", "on"); err != nil {
		t.Fatalf("autostart on: %v\n%s", err, out)
	}
	if out, _ := run(t, nil, "reg", "query", runKey, "/v", "Switchboard"); !strings.Contains(out, `switchboard.exe`) {
		t.Errorf("Run value after autostart on:\n%s", out)
	}

	if out, err := run(t, nil, filepath.Join(local, "uninstall.exe"), "/S"); err != nil {
		t.Fatalf("uninstall /S: %v\n%s", err, out)
	}
	// The uninstaller runs from a copy in %TEMP%, after it returns.
	waitFor(t, "the uninstaller to remove the install folder", func() bool {
		_, err := os.Stat(local)
		return os.IsNotExist(err)
	})
	if _, err := os.Stat(menu); !os.IsNotExist(err) {
		t.Errorf("Start-menu entry after uninstall: %v", err)
	}
	if out, err := run(t, nil, "reg", "query", key); err == nil {
		t.Errorf("Apps & features entry after uninstall:\n%s", out)
	}
	if out, _ := run(t, nil, "reg", "query", runKey, "/v", "Switchboard"); strings.Contains(out, "switchboard.exe") {
		t.Errorf("Run value after uninstall:\n%s", out)
	}
}

// linuxPIDsOf lists the processes whose command line contains s.
func linuxPIDsOf(s string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(s)) || bytes.Contains(b, []byte("windows.test")) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join(d, "stat")); err == nil {
			f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
			if len(f) > 0 && f[0] == "Z" {
				continue // a zombie has exited
			}
		}
		out = append(out, filepath.Base(d))
	}
	return out
}

// checkSkips fails the test for each test a Windows test binary's -test.v
// output says it skipped, unless allowed names it with the reason Wine
// cannot run it; those are logged. A "PASS" alone hides skips.
func checkSkips(t *testing.T, out string, allowed map[string]string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "--- SKIP: ")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, " (")
		if why, ok := allowed[name]; ok {
			t.Logf("%s skipped under Wine, allowed: %s", name, why)
		} else {
			t.Errorf("%s skipped under Wine (its reason is in the output above); run it, or allow it here with why Wine cannot", name)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// `switchboard.exe setup claude-desktop` on Windows: Claude Desktop's
// config in %APPDATA% is rewritten to run the small
// switchboard-connect.exe with the server's name (no exec there turns
// `switchboard connect` into it); the rewritten entry, run as the client
// runs it, starts the pool and answers a call; --undo puts the file back.
func TestSetupUnderWine(t *testing.T) {
	user := os.Getenv("USER")
	if user == "" {
		user = "root"
	}
	dir := filepath.Join(prefix, "drive_c", "users", user, "AppData", "Roaming", "Claude")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	clientFile := filepath.Join(dir, "claude_desktop_config.json")
	original := fmt.Sprintf(`{"mcpServers": {"fake": {"command": %q, "args": []}}}`, winPath(filepath.Join(helpers, "fakemcp.exe")))
	if err := os.WriteFile(clientFile, []byte(original), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(clientFile) })
	home := t.TempDir()
	env := []string{"SWITCHBOARD_HOME=" + winPath(home)}
	t.Cleanup(func() { stopWineserver(t) }) // the pool the client started

	if out, err := run(t, env, filepath.Join(dist, "switchboard.exe"), "setup", "claude-desktop"); err != nil {
		t.Fatalf("setup: %v\n%s", err, out)
	}
	data, err := os.ReadFile(clientFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		MCPServers map[string]struct {
			Command string
			Args    []string
			Env     map[string]string
		}
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	entry := f.MCPServers["fake"]
	if !strings.HasSuffix(entry.Command, `\switchboard-connect.exe`) || len(entry.Args) != 1 || entry.Args[0] != "fake" ||
		entry.Env["SWITCHBOARD_HOME"] != winPath(home) {
		t.Fatalf("the rewritten entry: %+v\n%s", entry, data)
	}

	// Run it as the client does: the shim starts the pool.
	t.Cleanup(func() {
		if t.Failed() {
			poolLog, _ := os.ReadFile(filepath.Join(home, "logs", "pool.log"))
			t.Logf("the pool's log:\n%s", poolLog)
		}
	})
	s := openSessionWith(t, []string{"SWITCHBOARD_HOME=" + entry.Env["SWITCHBOARD_HOME"]}, append([]string{entry.Command}, entry.Args...))
	s.close()

	if out, err := run(t, env, filepath.Join(dist, "switchboard.exe"), "setup", "--undo", "claude-desktop"); err != nil {
		t.Fatalf("setup --undo: %v\n%s", err, out)
	}
	if back, err := os.ReadFile(clientFile); err != nil || string(back) != original {
		t.Errorf("after --undo: %v\n%s", err, back)
	}
}
