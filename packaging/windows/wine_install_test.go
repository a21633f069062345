package windows

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nextVersion is the version of the installer built from the same
// programs to install over the first: an upgrade.
const nextVersion = "9.9.9"

// The next version's installer while Switchboard runs from the installed
// programs, whose files Windows keeps while they run: a pool (`serve`, as
// the tray's would) and a client's session through the installed
// switchboard-connect.exe. Its setup /S puts its programs in place (the
// running ones moved aside), the pool upgrades itself to the new
// switchboard.exe and the session carries on with it, and Apps & features
// says the new version. Once the session has ended, the uninstaller
// removes everything, what was moved aside included. The pools never
// recreate their history's journal, which they would on finding another
// file at the journal's path.
func TestUpgradeWhileRunning(t *testing.T) {
	local, _ := installDir()
	serve, session, env := installAndRun(t)
	exe, connect := filepath.Join(local, "switchboard.exe"), filepath.Join(local, "switchboard-connect.exe")
	before := poolStatus(t, env, exe)
	oldExe, oldConnect := inode(t, exe), inode(t, connect)

	next := nextSetup(t)
	if out, err := run(t, env, next, "/S"); err != nil {
		t.Fatalf("setup /S of %s over the running programs: %v\n%s", nextVersion, err, out)
	}
	if inode(t, exe) == oldExe || inode(t, connect) == oldConnect {
		t.Errorf("the installed programs were not replaced")
	}
	if aside, _ := os.ReadDir(filepath.Join(local, "replaced")); len(aside) != 2 {
		t.Errorf("moved aside: %v, want the two running programs", aside)
	}
	if out, _ := run(t, nil, "reg", "query", uninstallKey, "/v", "DisplayVersion"); !strings.Contains(out, nextVersion) {
		t.Errorf("Apps & features after the upgrade:\n%s", out)
	}
	waitFor(t, "the pool to upgrade itself to the installed program", func() bool {
		after := poolStatus(t, env, exe)
		return after.PID != 0 && after.PID != before.PID && after.Upgrade != nil
	})
	waitFor(t, "the earlier pool's process to exit", func() bool { return len(serve.exited) > 0 })
	session.call(t, "after the upgrade")

	session.close()
	uninstallAll(t, env)
	if strings.Contains(serve.log.String(), "recreated the journal") {
		t.Errorf("a pool recreated its journal, its file there all along:\n%s", serve.log.String())
	}
}

// The uninstaller while Switchboard runs from the installed programs: it
// quits the pool; while a client's session still runs
// switchboard-connect.exe it stops there, says so and exits 2, the
// install whole (its Apps & features entry, itself, switchboard.exe), to
// try again; once the session has ended, it removes everything.
func TestUninstallWhileRunning(t *testing.T) {
	local, winLocal := installDir()
	_, session, env := installAndRun(t)
	exe := filepath.Join(local, "switchboard.exe")

	// In place, to have its exit code (uninstall.exe /S returns at once).
	out, err := run(t, env, filepath.Join(local, "uninstall.exe"), "/S", `_?=`+winLocal)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("uninstall /S with a session running switchboard-connect.exe: %v, want exit 2\n%s", err, out)
	}
	if out, err := run(t, env, filepath.Join(dist, "switchboard.exe"), "status", "--json"); err == nil {
		t.Errorf("the pool still runs after the uninstaller:\n%s", out)
	}
	if out, err := run(t, nil, "reg", "query", uninstallKey); err != nil {
		t.Errorf("Apps & features entry after the uninstaller stopped: %v\n%s", err, out)
	}
	for _, f := range []string{"uninstall.exe", "switchboard-connect.exe", "switchboard.exe"} {
		if _, err := os.Stat(filepath.Join(local, f)); err != nil {
			t.Errorf("after the uninstaller stopped: %v", err)
		}
	}
	if out, err := run(t, env, exe, "version"); err != nil {
		t.Errorf("the installed switchboard.exe after the uninstaller stopped: %v\n%s", err, out)
	}

	session.close()
	uninstallAll(t, env)
}

// The next version's installer while a program holds switchboard.exe
// open without sharing it (which no rename gets past): setup /S stops,
// exits 2, and leaves the version installed as it was, Apps & features
// saying so; once the file is free, it installs.
func TestUpgradeWhileAProgramIsHeld(t *testing.T) {
	local, winLocal := installDir()
	t.Cleanup(func() { removeInstall(t, local) })
	if out, err := run(t, nil, firstSetup(t), "/S"); err != nil {
		t.Fatalf("setup /S: %v\n%s", err, out)
	}
	first := displayVersion(t)
	exe := filepath.Join(local, "switchboard.exe")
	was := inode(t, exe)
	next := nextSetup(t)

	holdExe := filepath.Join(t.TempDir(), "hold.exe")
	build := exec.Command("go", "build", "-o", holdExe, "./testdata/hold")
	build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build hold.exe: %v\n%s", err, out)
	}
	hold := command(context.Background(), wine, holdExe, winLocal+`\switchboard.exe`)
	release, _ := hold.StdinPipe()
	said, _ := hold.StdoutPipe()
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { release.Close(); _ = hold.Wait() })
	if line, err := bufio.NewReader(said).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("hold.exe: %q %v", line, err)
	}

	out, err := run(t, nil, next, "/S")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("setup /S with switchboard.exe held: %v, want exit 2\n%s", err, out)
	}
	if v := displayVersion(t); v != first {
		t.Errorf("Apps & features says %s after the failed setup, want %s", v, first)
	}
	if inode(t, exe) != was {
		t.Error("switchboard.exe is another file after the failed setup")
	}
	if left, _ := filepath.Glob(filepath.Join(local, "*.new")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}

	release.Close()
	if err := hold.Wait(); err != nil {
		t.Fatalf("hold.exe: %v", err)
	}
	if out, err := run(t, nil, next, "/S"); err != nil {
		t.Fatalf("setup /S once the file is free: %v\n%s", err, out)
	}
	if v := displayVersion(t); v != nextVersion {
		t.Errorf("Apps & features says %s, want %s", v, nextVersion)
	}
}

// displayVersion is the version Apps & features shows.
func displayVersion(t *testing.T) string {
	t.Helper()
	out, err := run(t, nil, "reg", "query", uninstallKey, "/v", "DisplayVersion")
	f := strings.Fields(out)
	if err != nil || len(f) == 0 {
		t.Fatalf("DisplayVersion: %v\n%s", err, out)
	}
	return f[len(f)-1]
}

// nextSetup builds the installer of nextVersion from the same programs.
func nextSetup(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("makensis"); err != nil {
		t.Fatalf("makensis is not installed (packaging/linux/deps.sh installs it): %v", err)
	}
	next := filepath.Join(t.TempDir(), "switchboard-"+nextVersion+"-setup.exe")
	// zlib: lzma takes a while, to pack and to unpack.
	build := exec.Command("makensis", "-V2", "-XSetCompressor /FINAL zlib", "-DVERSION="+nextVersion, "-DSRC="+dist, "-DOUT="+next, "switchboard.nsi")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("makensis: %v\n%s", err, out)
	}
	return next
}

// uninstallKey is the installer's Apps & features entry.
const uninstallKey = `HKCU\Software\Microsoft\Windows\CurrentVersion\Uninstall\Switchboard`

// installAndRun installs the built installer and runs a pool from the
// installed switchboard.exe with a session through the installed
// switchboard-connect.exe, in a home of the test's (env). The test's
// cleanup leaves nothing installed.
func installAndRun(t *testing.T) (serve *winProc, s *session, env []string) {
	t.Helper()
	local, _ := installDir()
	t.Cleanup(func() { removeInstall(t, local) })
	if out, err := run(t, nil, firstSetup(t), "/S"); err != nil {
		t.Fatalf("setup /S: %v\n%s", err, out)
	}
	exe := filepath.Join(local, "switchboard.exe")
	_, _, env = fakeHome(t)
	serve = startWine(t, env, exe, "serve")
	waitFor(t, "the installed pool's control pipe", func() bool {
		_, err := run(t, env, exe, "status", "--json")
		return err == nil
	})
	return serve, openSessionWith(t, env, []string{filepath.Join(local, "switchboard-connect.exe"), "fake"}), env
}

// uninstallAll runs uninstall.exe /S as Apps & features does, and checks
// that it removed everything.
func uninstallAll(t *testing.T, env []string) {
	t.Helper()
	local, _ := installDir()
	if out, err := run(t, env, filepath.Join(local, "uninstall.exe"), "/S"); err != nil {
		t.Fatalf("uninstall /S: %v\n%s", err, out)
	}
	// It runs from a copy in %TEMP%, after it returns.
	waitFor(t, "the uninstaller to remove the install folder", func() bool {
		_, err := os.Stat(local)
		return os.IsNotExist(err)
	})
	if out, err := run(t, nil, "reg", "query", uninstallKey); err == nil {
		t.Errorf("Apps & features entry after uninstall:\n%s", out)
	}
}

// poolState is what the test reads of `status --json`.
type poolState struct {
	PID     int
	Upgrade *struct{ At string }
}

// poolStatus is the running pool's status, the zero one while none answers.
func poolStatus(t *testing.T, env []string, exe string) poolState {
	t.Helper()
	var st poolState
	if out, err := run(t, env, exe, "status", "--json"); err == nil {
		_ = json.Unmarshal([]byte(out), &st)
	}
	return st
}

// installDir is where the installer installs, as Linux and Windows name it.
func installDir() (local, windows string) {
	user := os.Getenv("USER")
	if user == "" {
		user = "root"
	}
	local = filepath.Join(prefix, "drive_c", "users", user, "AppData", "Local", "Programs", "Switchboard")
	return local, `C:\users\` + user + `\AppData\Local\Programs\Switchboard`
}

// firstSetup is the installer `make package-windows` built.
func firstSetup(t *testing.T) string {
	t.Helper()
	setup, err := filepath.Glob(filepath.Join(dist, "..", "switchboard-*-setup.exe"))
	if err != nil || len(setup) != 1 {
		t.Fatalf("the installer: %v %v", setup, err)
	}
	return setup[0]
}

// inode is the file's identity, as Linux has it.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// removeInstall leaves no install behind for the next test, whatever
// this one left: its processes are ended first.
func removeInstall(t *testing.T, local string) {
	t.Helper()
	stopWineserver(t)
	_ = os.RemoveAll(local)
	reg := command(context.Background(), wine, "reg", "delete", `HKCU\Software\Microsoft\Windows\CurrentVersion\Uninstall\Switchboard`, "/f")
	_, _ = combined(reg)
}
