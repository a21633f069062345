package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/pool/mcptest"
)

// The real binaries, built once: the CLI under test and the fake server.
var sbBin, fakeBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if err := defaultParallel(waitingTests); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "sbcli")
	if err != nil {
		panic(err)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		sbBin = filepath.Join(dir, "switchboard")
		// With -race when this test binary has it: the pools, shims and
		// CLI processes the tests start are checked for data races too.
		build := goBuild(raceBuild, "-tags", "sqlite_omit_load_extension", "-o", sbBin, ".")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build switchboard: %v\n%s", err, out)
			return 1
		}
		// As `make build` does: the small relay next to the binary, which
		// `switchboard connect` runs; with cgo only for -race.
		small := goBuild(raceBuild, "-o", filepath.Join(dir, "switchboard-connect"), "../switchboard-connect")
		if !raceBuild {
			small.Env = append(small.Env, "CGO_ENABLED=0")
		}
		if out, err := small.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build switchboard-connect: %v\n%s", err, out)
			return 1
		}
		if fakeBin, err = mcptest.Build(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if raceBuild {
			races := filepath.Join(dir, "races")
			if err := os.Mkdir(races, 0o700); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if err := setRaceLogs(races); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		code := m.Run()
		left := stopLeftoverPools(sbBin)
		if plain.bin != "" {
			left = append(left, stopLeftoverPools(plain.bin)...)
		}
		if len(left) > 0 {
			fmt.Fprintf(os.Stderr, "pools the tests left running, stopped now: %v\n", left)
			code = max(code, 1)
		}
		// Reports no test claimed: written after every test had ended.
		for _, r := range newRaceReports("") {
			fmt.Fprintf(os.Stderr, "DATA RACE in a process the tests started: %s\n", r)
			code = max(code, 1)
		}
		if code == 0 {
			// fyne's process-wide event queue, started as the package
			// loads (app imports fyne); it has no way to stop.
			if err := goleak.Find(goleak.IgnoreTopFunction("fyne.io/fyne/v2/internal/async.(*UnboundedChan[...]).processing")); err != nil {
				fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
				code = 1
			}
		}
		return code
	}()
	os.Exit(code)
}

// waitingTests is how many of this package's parallel tests run at once
// unless -parallel says otherwise. Each spends most of its time waiting
// out a timer of the product's (a question's 15 s bound, a connect's wait
// for its user to start a pool, its backoff), not on the CPU: with
// -parallel's default, GOMAXPROCS (2 on the CI machine), they would wait
// two at a time. The tests that load the CPU or measure memory or time
// do not call t.Parallel, and never run beside these: the parallel tests
// run once every other one has ended.
const waitingTests = 8

// defaultParallel sets -test.parallel to n when the command line did not.
func defaultParallel(n int) error {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if given {
		return nil
	}
	if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
		return fmt.Errorf("set -test.parallel: %w", err)
	}
	return nil
}

// stopLeftoverPools kills the processes still running binary once every
// test has ended (a pool a test's client started and nobody stopped), and
// lists them: each is a test that does not clean up after itself.
func stopLeftoverPools(binary string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	var left []string
	for _, exe := range procs {
		if target, err := os.Readlink(exe); err != nil || target != binary {
			continue
		}
		dir := filepath.Dir(exe)
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		left = append(left, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '})))
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return left
}

// instance is a `switchboard serve` process with its own SWITCHBOARD_HOME.
type instance struct {
	t    *testing.T
	home string
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan error
}

// goAway stops in's pool, with SIGKILL when kill is set, else SIGTERM,
// and waits for it to exit.
func goAway(t *testing.T, in *instance, kill bool) {
	t.Helper()
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	if err := in.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	err := <-in.done
	in.done <- err
}

func homeDir(t *testing.T) string {
	t.Helper()
	return shortTempDir(t, "sbh")
}

// shortTempDir is a new directory of a short path (a socket's path must
// be short) below the system's temporary one, removed when the test ends;
// it also watches the test for races (watchRaces).
func shortTempDir(t *testing.T, prefix string) string {
	t.Helper()
	watchRaces(t)
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// serve writes config and starts `switchboard serve`, waiting until its
// control socket answers.
func serve(t *testing.T, config string) *instance {
	t.Helper()
	home := homeDir(t)
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return serveHome(t, home)
}

// serveHome starts `switchboard serve` on an existing home.
func serveHome(t *testing.T, home string) *instance {
	t.Helper()
	return serveBinary(t, sbBin, home)
}

// serveBinary starts `BINARY serve` on an existing home, with env added
// to its environment.
func serveBinary(t *testing.T, binary, home string, env ...string) *instance {
	t.Helper()
	return serveWith(t, exec.Command(binary, "serve"), home, env...)
}

// serveWith starts cmd, a `switchboard serve` with its arguments, on an
// existing home, with env added to its environment.
func serveWith(t *testing.T, cmd *exec.Cmd, home string, env ...string) *instance {
	t.Helper()
	in := &instance{t: t, home: home, log: &syncBuffer{}, done: make(chan error, 1)}
	in.cmd = cmd
	in.cmd.Env = append(append(os.Environ(), "SWITCHBOARD_HOME="+home), env...)
	in.cmd.Stdout, in.cmd.Stderr = in.log, in.log
	// If the test binary dies (a timeout panic), the pool dies with it.
	in.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// A program it starts (an upgrade by spawning) may hold its output
	// open: Wait returns soon after the pool itself exits all the same.
	in.cmd.WaitDelay = time.Second
	done, err := startPinned(in.cmd)
	if err != nil {
		t.Fatal(err)
	}
	go func() { in.done <- <-done }()
	t.Cleanup(func() {
		_ = in.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-in.done:
		case <-time.After(15 * time.Second):
			_ = in.cmd.Process.Kill()
			<-in.done
		}
		if t.Failed() {
			t.Logf("serve log:\n%s", in.log.String())
		}
	})
	waitFor(t, "the control socket", func() bool {
		_, err := in.run("status", "--json")
		return err == nil
	})
	return in
}

// run runs the CLI against this instance. A failure's error carries
// what the command said on stderr, for the test's message.
func (in *instance) run(args ...string) (string, error) {
	cmd := exec.Command(sbBin, args...)
	cmd.Env = append(os.Environ(), "SWITCHBOARD_HOME="+in.home)
	out, err := cmd.Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && len(ee.Stderr) > 0 {
		err = fmt.Errorf("%w; stderr: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	return string(out), err
}

type statusJSON struct {
	Sessions []struct {
		ID         string `json:"id"`
		ClientName string `json:"clientName"`
		Transport  string `json:"transport"`
		InFlight   int    `json:"inFlight"`
		PID        int    `json:"pid"`
		Attached   bool   `json:"attached"`
	} `json:"sessions"`
	Backends []struct {
		Server    string   `json:"server"`
		PID       int      `json:"pid"`
		State     string   `json:"state"`
		StartedAt string   `json:"startedAt"`
		Sessions  int      `json:"sessions"`
		Restarts  int      `json:"restarts"`
		Roots     []string `json:"roots"`
	} `json:"backends"`
	InFlight []struct {
		Session        string `json:"session"`
		Server         string `json:"server"`
		Method         string `json:"method"`
		Name           string `json:"name"`
		PID            int    `json:"pid"`
		AgeMs          int64  `json:"ageMs"`
		WrittenToChild bool   `json:"writtenToChild"`
	} `json:"inFlight"`
	Counters struct {
		Requests uint64 `json:"requests"`
		Evicted  uint64 `json:"evicted"`
	} `json:"counters"`
	History struct {
		Path             string `json:"path"`
		Journaled        int    `json:"journaled"`
		JournaledWritten int    `json:"journaledWritten"`
	} `json:"history"`
	ConfigError *string `json:"configError"`
}

func (in *instance) status() statusJSON {
	in.t.Helper()
	out, err := in.run("status", "--json")
	if err != nil {
		in.t.Fatalf("status: %v", err)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		in.t.Fatalf("status JSON: %v\n%s", err, out)
	}
	return st
}

// shim is one `switchboard connect` process, as an MCP client starts it.
type shim struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Closer
	out    *bufio.Reader
	errb   *syncBuffer
	done   chan error
}

func (in *instance) connect(t testing.TB, server string) *shim {
	t.Helper()
	return startShim(t, server, append(os.Environ(), "SWITCHBOARD_HOME="+in.home))
}

// startShim runs `switchboard connect server` with env, as a client does.
func startShim(t testing.TB, server string, env []string) *shim {
	t.Helper()
	return startShimIn(t, server, env, "")
}

// startShimIn is startShim run in the working directory dir.
func startShimIn(t testing.TB, server string, env []string, dir string) *shim {
	t.Helper()
	cmd := exec.Command(sbBin, "connect", server)
	cmd.Env, cmd.Dir = env, dir
	return startShimCmd(t, cmd)
}

// startShimCmd is startShim for cmd, a shim's command line.
func startShimCmd(t testing.TB, cmd *exec.Cmd) *shim {
	t.Helper()
	s := &shim{t: t, errb: &syncBuffer{}, done: make(chan error, 1), cmd: cmd}
	s.cmd.Stderr = s.errb
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.out, s.stdout = bufio.NewReaderSize(stdout, 1<<20), stdout
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		// The client goes away: it closes both ends (closing stdin alone
		// is a half-close, which waits for the answers in flight).
		s.stdin.Close()
		s.stdout.Close()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

// close is the client going away now, as at the test's end: both ends
// closed, and the shim's exit waited for.
func (s *shim) close() {
	s.stdin.Close()
	s.stdout.Close()
	err := <-s.done
	s.done <- err // for the cleanup
}

func (s *shim) send(line string) {
	if _, err := io.WriteString(s.stdin, line+"\n"); err != nil {
		s.t.Errorf("write to shim: %v", err)
	}
}

type reply struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	raw    string
}

// recvID reads until the response with id, skipping notifications.
func (s *shim) recvID(id string) reply {
	s.t.Helper()
	return s.recvWhere(func(r reply) bool { return r.Method == "" && string(r.ID) == id })
}

// recvMethod reads until a message with method (a notification or a
// request), skipping the others.
func (s *shim) recvMethod(method string) reply {
	s.t.Helper()
	return s.recvWhere(func(r reply) bool { return r.Method == method })
}

// recvWhere reads until a message that want takes, skipping the others.
func (s *shim) recvWhere(want func(reply) bool) reply {
	s.t.Helper()
	for {
		line, err := s.out.ReadString('\n')
		if err != nil {
			s.t.Fatalf("read from shim: %v (stderr: %s)", err, s.errb.String())
		}
		var r reply
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			s.t.Fatalf("shim wrote invalid JSON: %q", line)
		}
		r.raw = line
		if want(r) {
			return r
		}
	}
}

func (s *shim) initialize(name string) {
	s.t.Helper()
	s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":%q,"version":"1.0"}}}`, name))
	if r := s.recvID("0"); r.Error != nil {
		s.t.Fatalf("initialize: %s", r.raw)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

func toolText(r reply) string {
	var v struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(r.Result, &v)
	if len(v.Content) == 0 {
		return ""
	}
	return v.Content[0].Text
}

func fakeConfig(t *testing.T, extra ...string) string {
	args, _ := json.Marshal(extra)
	return fmt.Sprintf(`{"mcpServers":{"fake":{"command":%q,"args":%s}}}`, fakeBin, args)
}

// Two Claude-Code-style stdio clients share one child, and status shows it.
func TestTwoClientsShareOneChild(t *testing.T) {
	in := serve(t, fakeConfig(t))
	a, b := in.connect(t, "fake"), in.connect(t, "fake")
	a.initialize("claude-code")
	b.initialize("claude-code")
	pids := map[string]bool{}
	for _, s := range []*shim{a, b} {
		s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pid","arguments":{}}}`)
		pids[toolText(s.recvID("1"))] = true
	}
	if len(pids) != 1 {
		t.Fatalf("the two clients reached %d different children: %v", len(pids), pids)
	}
	st := in.status()
	if len(st.Backends) != 1 || len(st.Sessions) != 2 || st.Backends[0].Sessions != 2 || st.Backends[0].State != "ready" {
		t.Fatalf("status: %+v", st)
	}
	for pid := range pids {
		if strconv.Itoa(st.Backends[0].PID) != pid {
			t.Fatalf("status pid %d, child says %s", st.Backends[0].PID, pid)
		}
	}
	if st.Sessions[0].ClientName != "claude-code" || st.Sessions[0].Transport != "stdio" || st.ConfigError != nil {
		t.Fatalf("session: %+v", st.Sessions[0])
	}
	// In flight: a slow call shows up with its age and written bit.
	a.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":60000}}}`)
	waitFor(t, "the call in status", func() bool {
		st := in.status()
		return len(st.InFlight) == 1 && st.InFlight[0].WrittenToChild && st.InFlight[0].Name == "sleep" &&
			st.InFlight[0].Method == "tools/call" && st.InFlight[0].PID == st.Backends[0].PID
	})
	// Closing its stdin is a half-close: the client still listens, so the
	// session stays while its call is in flight.
	a.stdin.Close()
	waitFor(t, "the half-closed session to stay with its call", func() bool {
		st := in.status()
		return len(st.Sessions) == 2 && len(st.InFlight) == 1
	})
	// The client goes away (nobody reads its stdout): cancelled at once,
	// and the shim exits 0.
	a.stdout.Close()
	select {
	case err := <-a.done:
		a.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("shim exit: %v (%s)", err, a.errb.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the shim did not exit after its client went away")
	}
	waitFor(t, "the session to end and its call to be cancelled", func() bool {
		st := in.status()
		return len(st.Sessions) == 1 && len(st.InFlight) == 0
	})
}

// TestConnectRunsTheSmallShim: `switchboard connect` becomes the
// switchboard-connect next to it (the process a client keeps per session
// does not carry the GUI and SQLite code); with
// SWITCHBOARD_INPROCESS_CONNECT set, or without that file, it relays
// in-process. Both relay the same bytes.
func TestConnectRunsTheSmallShim(t *testing.T) {
	in := serve(t, fakeConfig(t))
	for _, tc := range []struct {
		env, exe string
		attached bool
	}{
		{"", "switchboard-connect", true},
		{"SWITCHBOARD_INPROCESS_CONNECT", "switchboard", true},
		{"SWITCHBOARD_NO_ATTACH", "switchboard-connect", false}, // the relay
	} {
		t.Run(tc.exe+"/"+tc.env, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(tc.env, "1")
			}
			s := in.connect(t, "fake")
			s.initialize("exe-test")
			s.send(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"echo","arguments":{"text":"through"}}}`)
			if got := toolText(s.recvID(`"x"`)); !strings.Contains(got, "through") {
				t.Fatalf("echo through %s: %q", tc.exe, got)
			}
			exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", s.cmd.Process.Pid))
			if err != nil {
				t.Skipf("no /proc: %v", err)
			}
			if filepath.Base(exe) != tc.exe {
				t.Fatalf("the connect process runs %s, want %s", exe, tc.exe)
			}
			var attached []bool
			for _, ses := range in.status().Sessions {
				if ses.PID == s.cmd.Process.Pid {
					attached = append(attached, ses.Attached)
				}
			}
			if len(attached) != 1 || attached[0] != tc.attached {
				t.Fatalf("session of shim %d: attached %v, want [%v]", s.cmd.Process.Pid, attached, tc.attached)
			}
			if rollup, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", s.cmd.Process.Pid)); err == nil {
				for _, l := range strings.Split(string(rollup), "\n") {
					if strings.HasPrefix(l, "Pss:") {
						t.Logf("%s: %s", tc.exe, strings.Join(strings.Fields(l), " "))
					}
				}
			}
		})
	}
}

// No such server: one clear line on stderr, non-zero exit (no pool and
// no autostart: TestConnectWithoutAutostart).
func TestConnectErrors(t *testing.T) {
	in := serve(t, fakeConfig(t))
	cmd := exec.Command(sbBin, "connect", "nope")
	cmd.Env = append(os.Environ(), "SWITCHBOARD_HOME="+in.home)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), `no such server "nope" (configured: fake)`) {
		t.Fatalf("unknown server: err %v, output %q", err, out)
	}
}

// SIGTERM, SIGINT and SIGHUP (the terminal running `switchboard serve`
// closed) are a planned stop: a call in flight gets the stop's grace to
// finish and is answered, the pool exits 0, the child and its grandchild
// are gone. On the first edition SIGHUP killed the pool outright: exit
// "signal: hangup", the call answered with -32003, the grandchild left.
// (Clients may not start a pool here: the connect, handed its session
// back, would start one for it, which outlived the test.)
func TestServeStopSignalsStopCleanly(t *testing.T) {
	for name, sig := range map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT, "SIGHUP": syscall.SIGHUP} {
		t.Run(name, func(t *testing.T) {
			dir := homeDir(t)
			pidfile, gpidfile := filepath.Join(dir, "child.pid"), filepath.Join(dir, "grandchild.pid")
			in := serve(t, noClientStarts(fakeConfig(t, "-pidfile", pidfile, "-grandchild", "-grandchild-pidfile", gpidfile)))
			s := in.connect(t, "fake")
			s.initialize("c")
			child, grandchild := readPID(t, pidfile), readPID(t, gpidfile)
			// Its first progress notification says the call runs at the
			// child; it is answered about 1.2 s later, within the grace.
			// (Waiting for it in status, a call of a fixed length could
			// end between two looks on a loaded machine.)
			s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress","arguments":{"steps":2,"ms":600},"_meta":{"progressToken":"p"}}}`)
			s.recvMethod("notifications/progress")
			if err := in.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-in.done:
				in.done <- err // for the cleanup
				if err != nil {
					t.Fatalf("serve exit after %v: %v\n%s", sig, err, in.log.String())
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("serve did not exit after %v", sig)
			}
			if r := s.recvID("1"); toolText(r) != "done" {
				t.Errorf("the call in flight at %v was answered %s %s", sig, r.Result, r.Error)
			}
			for _, pid := range []int{child, grandchild} {
				waitFor(t, fmt.Sprintf("pid %d to be gone", pid), func() bool { return !alive(pid) })
			}
		})
	}
}

// A pool started with SIGHUP ignored (nohup, or a shell's trap ignoring
// HUP) keeps ignoring it: only one that hears it stops on it.
func TestServeUnderNohupIgnoresSIGHUP(t *testing.T) {
	nohup := filepath.Join(homeDir(t), "nohup")
	if err := os.WriteFile(nohup, []byte("#!/bin/sh\ntrap '' HUP\nexec \"$SB\" \"$@\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	home := homeDir(t)
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(fakeConfig(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	in := serveBinary(t, nohup, home, "SB="+sbBin)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", in.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if mask, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			if ign, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64); err != nil || ign&(1<<(syscall.SIGHUP-1)) == 0 {
				t.Errorf("the pool started under nohup does not ignore SIGHUP: %s", line)
			}
			return
		}
	}
	t.Fatalf("no SigIgn in /proc/PID/status:\n%s", status)
}

// SIGKILL of the pool leaves no child alive on Linux (Pdeathsig).
func TestServeSIGKILLLeavesNoChild(t *testing.T) {
	dir := homeDir(t)
	pidfile := filepath.Join(dir, "child.pid")
	in := serve(t, noClientStarts(fakeConfig(t, "-pidfile", pidfile)))
	s := in.connect(t, "fake")
	s.initialize("c")
	child := readPID(t, pidfile)
	goAway(t, in, true)
	waitFor(t, "the child to die with the pool", func() bool { return !alive(child) })
}

// noClientStarts turns autostart.fromClients off in a config: a test that
// kills its pool while a connect is attached then gets no new pool from
// that connect (it would reattach to one; see reattach_test.go).
func noClientStarts(config string) string {
	return strings.TrimSuffix(strings.TrimSpace(config), "}") + `, "autostart": {"fromClients": false}}`
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, "pid file "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// alive reports whether pid runs (a zombie counts as gone).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitForWithin(t, 20*time.Second, what, cond)
}

// waitForWithin is waitFor with a deadline of its own.
func waitForWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for a process's output and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// A client that closes its input has finished sending, not stopped
// listening: `printf 'initialize…\ntools/call…\n' | switchboard connect
// NAME` prints both answers, as the same pipe into the server does, with
// the pool reading the pipes itself and through the relay. On the first
// edition it printed nothing: EOF ended the session and cancelled the call.
func TestPipedHalfCloseGetsEveryAnswer(t *testing.T) {
	in := serve(t, fakeConfig(t))
	input := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep_echo","arguments":{"ms":300,"text":"late"}}}
{"jsonrpc":"2.0","id":3,"method":"tools/list"}
`
	for _, mode := range []string{"attached", "relay"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(sbBin, "connect", "fake")
			cmd.Env = append(os.Environ(), "SWITCHBOARD_HOME="+in.home)
			if mode == "relay" {
				cmd.Env = append(cmd.Env, "SWITCHBOARD_NO_ATTACH=1")
			}
			cmd.Stdin = strings.NewReader(input)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("exit: %v\n%s", err, out)
			}
			ids := map[string]bool{}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				var r reply
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("bad line %q", line)
				}
				ids[string(r.ID)] = true
				if string(r.ID) == "2" && toolText(r) != "late" {
					t.Errorf("the slow call's answer: %s", line)
				}
			}
			if !ids["1"] || !ids["2"] || !ids["3"] {
				t.Fatalf("answers for %v, want 1, 2 and 3:\n%s", ids, out)
			}
		})
	}
}
