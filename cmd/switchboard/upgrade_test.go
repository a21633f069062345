//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// upgradeVersion stamps the binary the upgrade tests install.
const upgradeVersion = "9.9.9-upgraded"

// newBuild builds switchboard again, as a package upgrade would install
// it: same source, another version, another path.
func newBuild(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(shortDir(t), "switchboard")
	build := goBuild(raceBuild, "-tags", "sqlite_omit_load_extension",
		"-ldflags", "-X github.com/switchboard-mcp/switchboard/app/version.Version="+upgradeVersion, "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the new switchboard: %v\n%s", err, out)
	}
	return bin
}

func shortDir(t *testing.T) string {
	t.Helper()
	return shortTempDir(t, "sbu")
}

// loadClient keeps inFlight calls of one session running: each answer
// is checked and replaced by the next call, until stop.
type loadClient struct {
	s        *shim
	stop     atomic.Bool
	answered atomic.Int64
	mu       sync.Mutex
	bad      []string
	pending  map[string]bool
	done     chan struct{}
}

func startLoad(t *testing.T, s *shim, name string, inFlight int) *loadClient {
	c := &loadClient{s: s, pending: map[string]bool{}, done: make(chan struct{})}
	n := 0
	call := func() {
		n++
		id := fmt.Sprintf("%s-%d", name, n)
		c.mu.Lock()
		c.pending[id] = true
		c.mu.Unlock()
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, id, id))
	}
	for range inFlight {
		call()
	}
	go func() {
		defer close(c.done)
		r := bufio.NewReader(s.out)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				c.mu.Lock()
				c.bad = append(c.bad, fmt.Sprintf("stdout ended: %v", err))
				c.mu.Unlock()
				return
			}
			var m struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal([]byte(line), &m)
			c.mu.Lock()
			if !c.pending[m.ID] || !strings.Contains(line, `"text":"`+m.ID+`"`) {
				c.bad = append(c.bad, line)
			}
			delete(c.pending, m.ID)
			left := len(c.pending)
			c.mu.Unlock()
			c.answered.Add(1)
			if !c.stop.Load() {
				call()
			} else if left == 0 {
				return
			}
		}
	}()
	return c
}

// startLoads connects n sessions to in's fake server, each keeping
// inFlight calls running (startLoad).
func startLoads(t *testing.T, in *instance, n, inFlight int) []*loadClient {
	t.Helper()
	var load []*loadClient
	for i := range n {
		s := in.connect(t, "fake")
		s.initialize(fmt.Sprintf("client-%d", i))
		load = append(load, startLoad(t, s, fmt.Sprintf("s%d", i), inFlight))
	}
	return load
}

// answeredIn is how many calls the load's sessions have had answered.
func answeredIn(load []*loadClient) (n int64) {
	for _, c := range load {
		n += c.answered.Load()
	}
	return n
}

// stopLoads stops the load's calls, waits until each call made is
// answered, and reports any answer that was not its call's own.
func stopLoads(t *testing.T, load []*loadClient) {
	t.Helper()
	for _, c := range load {
		c.stop.Store(true)
	}
	for _, c := range load {
		waitFor(t, "every call answered", func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return len(c.pending) == 0
		})
		c.mu.Lock()
		if len(c.bad) > 0 {
			t.Errorf("bad answers: %q", c.bad)
		}
		c.mu.Unlock()
	}
}

// An upgrade to a newly built binary while 16 sessions keep 4 calls each
// in flight: the pool's program is replaced in place (same PID, the new
// binary), the child is the same process before and after (and after a
// second upgrade), and every call is answered once, with its own answer.
func TestUpgradeKeepsChildrenAndSessions(t *testing.T) {
	newBin := newBuild(t)
	in := serve(t, noClientStarts(fakeConfig(t)))
	const sessions, inFlight = 16, 4
	load := startLoads(t, in, sessions, inFlight)
	total := func() int64 { return answeredIn(load) }
	waitFor(t, "calls before the upgrade", func() bool { return total() >= 500 })
	before := in.status()
	if len(before.Backends) != 1 || before.Backends[0].PID == 0 {
		t.Fatalf("backends before: %+v", before.Backends)
	}
	childPID, poolPID := before.Backends[0].PID, in.cmd.Process.Pid

	out, err := in.run("upgrade", "--binary", newBin, "--json")
	if err != nil {
		t.Fatalf("upgrade: %v %s", err, out)
	}
	var res struct {
		PID             int   `json:"pid"`
		CarryChildren   bool  `json:"carryChildren"`
		CarriedChildren []int `json:"carriedChildren"`
		To              struct {
			Version string `json:"version"`
		} `json:"to"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.PID != poolPID || !res.CarryChildren ||
		res.To.Version != upgradeVersion || len(res.CarriedChildren) != 1 || res.CarriedChildren[0] != childPID {
		t.Fatalf("upgrade answered %v %s", err, out)
	}
	mark := total()
	waitFor(t, "calls after the upgrade", func() bool { return total() >= mark+500 })
	// And again: the children stay tied to the main thread, upgrade after
	// upgrade.
	if out, err := in.run("upgrade", "--binary", newBin, "--json"); err != nil || json.Unmarshal([]byte(out), &res) != nil ||
		len(res.CarriedChildren) != 1 || res.CarriedChildren[0] != childPID {
		t.Fatalf("second upgrade: %v %s", err, out)
	}
	mark = total()
	waitFor(t, "calls after the second upgrade", func() bool { return total() >= mark+500 })
	stopLoads(t, load)

	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", poolPID))
	if exe != newBin {
		t.Errorf("the pool process runs %s, want the new binary %s", exe, newBin)
	}
	var st struct {
		Version  string `json:"version"`
		Backends []struct {
			PID         int  `json:"pid"`
			CarriedOver bool `json:"carriedOver"`
		} `json:"backends"`
		Sessions []struct {
			ReattachedFrom string `json:"reattachedFrom"`
		} `json:"sessions"`
	}
	sout, err := in.run("status", "--json")
	if err != nil || json.Unmarshal([]byte(sout), &st) != nil {
		t.Fatalf("status: %v %s", err, sout)
	}
	if st.Version != upgradeVersion || len(st.Backends) != 1 || st.Backends[0].PID != childPID || !st.Backends[0].CarriedOver {
		t.Errorf("status after the upgrade: %s", sout)
	}
	reattached := 0
	for _, s := range st.Sessions {
		if s.ReattachedFrom != "" {
			reattached++
		}
	}
	if reattached != sessions {
		t.Errorf("%d of %d sessions show as reattached", reattached, sessions)
	}
	t.Logf("%d calls answered, all ok; child %d carried over; pool %d now runs %s", total(), childPID, poolPID, upgradeVersion)
}

// The same with a real server started through npx: the node process the
// pool runs is the same before and after the upgrade, and it keeps
// answering the same sessions.
func TestUpgradeKeepsAnNPXServer(t *testing.T) {
	if os.Getenv("SWITCHBOARD_NPX") == "" {
		t.Skip("SWITCHBOARD_NPX is not set")
	}
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("npx not found")
	}
	newBin := newBuild(t)
	in := serve(t, noClientStarts(`{"mcpServers":{"memory":{"command":"npx","args":["-y","@modelcontextprotocol/server-memory"],"env":{"MEMORY_FILE_PATH":"`+homeDir(t)+`/memory.jsonl"}}}}`))
	var shims []*shim
	for i := range 4 {
		s := in.connect(t, "memory")
		s.initialize(fmt.Sprintf("npx-client-%d", i))
		shims = append(shims, s)
	}
	create := func(s *shim, id, entity string) {
		t.Helper()
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"create_entities","arguments":{"entities":[{"name":%q,"entityType":"test","observations":["x"]}]}}}`, id, entity))
		if got := toolText(s.recvID(`"` + id + `"`)); !strings.Contains(got, entity) {
			t.Fatalf("create_entities %s answered %q", entity, got)
		}
	}
	for i, s := range shims {
		create(s, "before", fmt.Sprintf("before-%d", i))
	}
	st := in.status()
	if len(st.Backends) != 1 || st.Backends[0].PID == 0 {
		t.Fatalf("backends: %+v", st.Backends)
	}
	child := st.Backends[0].PID
	if out, err := in.run("upgrade", "--binary", newBin, "--json"); err != nil || !strings.Contains(out, fmt.Sprintf(`"carriedChildren": [
    %d
  ]`, child)) {
		t.Fatalf("upgrade: %v %s", err, out)
	}
	for i, s := range shims {
		create(s, "after", fmt.Sprintf("after-%d", i))
	}
	if st := in.status(); len(st.Backends) != 1 || st.Backends[0].PID != child {
		t.Fatalf("backends after the upgrade: %+v, want child %d", st.Backends, child)
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child))
	t.Logf("the server's process %d (%s) kept running and answering across the upgrade", child, strings.ReplaceAll(string(cmdline), "\x00", " "))
}

// A binary that cannot take the children over (another hand-over format)
// still upgrades: the children restart, the sessions resume, no call
// fails.
func TestUpgradeToAnIncompatibleBinaryRestartsChildren(t *testing.T) {
	other := filepath.Join(shortDir(t), "switchboard")
	script := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = version ]; then echo '{\"version\":\"0.0.1-other\",\"handover\":0}'; exit 0; fi\nexec %s \"$@\"\n", sbBin)
	if err := os.WriteFile(other, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	in := serve(t, noClientStarts(fakeConfig(t)))
	load := startLoads(t, in, 4, 2)
	total := func() int64 { return answeredIn(load) }
	waitFor(t, "calls before the upgrade", func() bool { return total() >= 100 })
	child := in.status().Backends[0].PID
	out, err := in.run("upgrade", "--binary", other, "--json")
	var res struct {
		CarryChildren   bool   `json:"carryChildren"`
		Why             string `json:"why"`
		CarriedChildren []int  `json:"carriedChildren"`
	}
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || res.CarryChildren || !strings.Contains(res.Why, "format 0") || len(res.CarriedChildren) != 0 {
		t.Fatalf("upgrade: %v %s", err, out)
	}
	mark := total()
	waitFor(t, "calls after the upgrade", func() bool { return total() >= mark+100 })
	stopLoads(t, load)
	if st := in.status(); len(st.Backends) != 1 || st.Backends[0].PID == child {
		t.Errorf("backends after the upgrade: %+v (child before: %d)", st.Backends, child)
	}
}

// Installing a new binary over the one the pool runs (as a package
// manager does: write aside, rename over) upgrades the pool in place by
// itself: same child, sessions resume, no call fails.
func TestInstallingANewBinaryUpgradesThePool(t *testing.T) {
	newBin := newBuild(t)
	installed := filepath.Join(shortDir(t), "switchboard")
	copyFile(t, sbBin, installed)
	home := homeDir(t)
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(noClientStarts(fakeConfig(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	in := serveBinary(t, installed, home)
	load := startLoads(t, in, 4, 2)
	waitFor(t, "calls before the install", func() bool { return load[0].answered.Load() >= 20 })
	child := in.status().Backends[0].PID

	copyFile(t, newBin, installed+".new")
	if err := os.Rename(installed+".new", installed); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pool to run the installed binary", func() bool {
		out, err := in.run("status", "--json")
		return err == nil && strings.Contains(out, `"version": "`+upgradeVersion+`"`)
	})
	mark := load[0].answered.Load()
	waitFor(t, "calls after the install", func() bool { return load[0].answered.Load() >= mark+20 })
	stopLoads(t, load)
	if st := in.status(); len(st.Backends) != 1 || st.Backends[0].PID != child {
		t.Errorf("backends after the install: %+v, want child %d", st.Backends, child)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// Where the program cannot be replaced in place (Windows; here forced with
// SWITCHBOARD_UPGRADE_SPAWN) and no child is carried, an upgrade starts the
// new binary as a process of its own and the old one exits: the new one
// takes the instance lock, the sessions resume with it, no call fails.
// The new program starts slowly, as a race-built one on a loaded machine
// does: well after the old one has exited.
func TestUpgradeBySpawningANewProcess(t *testing.T) {
	dir := shortDir(t)
	other, spawnedLog := filepath.Join(dir, "switchboard"), filepath.Join(dir, "spawned.log")
	// The new program writes its log to a file: the old one's output is a
	// pipe the test stops reading a second after the old one exits
	// (serveWith's WaitDelay), and a Go program whose log write finds that
	// pipe closed dies of SIGPIPE.
	script := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = version ]; then echo '{\"version\":\"0.0.2-spawned\",\"handover\":0}'; exit 0; fi\nsleep 2\nexec %s \"$@\" >>%s 2>&1\n", sbBin, spawnedLog)
	if err := os.WriteFile(other, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // last, once the new pool has stopped
		if b, _ := os.ReadFile(spawnedLog); t.Failed() {
			t.Logf("the new program's log:\n%s", b)
		}
	})
	home := homeDir(t)
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(noClientStarts(fakeConfig(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range poolsOf(home) {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
		waitFor(t, "the spawned pool to stop", func() bool { return len(poolsOf(home)) == 0 })
	})
	in := serveBinary(t, sbBin, home, "SWITCHBOARD_UPGRADE_SPAWN=1")
	load := startLoads(t, in, 4, 2)
	waitFor(t, "calls before the upgrade", func() bool { return load[0].answered.Load() >= 20 })
	old := in.cmd.Process.Pid
	if out, err := in.run("upgrade", "--binary", other, "--json"); err != nil || !strings.Contains(out, `"carryChildren": false`) {
		t.Fatalf("upgrade: %v %s", err, out)
	}
	select {
	case err := <-in.done:
		in.done <- err // for the cleanup
	case <-time.After(30 * time.Second):
		t.Fatal("the old pool did not exit")
	}
	mark := load[0].answered.Load()
	waitFor(t, "calls after the upgrade", func() bool { return load[0].answered.Load() >= mark+20 })
	stopLoads(t, load)
	if pools := poolsOf(home); len(pools) != 1 || pools[0] == old {
		t.Errorf("pools after the upgrade: %v (the old one: %d)", pools, old)
	}
}

// Upgrades back to back while sessions come and go, as a load tool's
// short runs do: a session may be handed back while it starts, or between
// its calls, and a shim may start while the pool has no socket (between
// the old program's last breath and the new one's listen). Each call must
// still be answered once, with its own answer, within 10 s; a shim that
// starts then waits for the upgraded pool, whether or not clients may
// start a pool, and starts none.
func TestUpgradesWhileSessionsComeAndGo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config func(string) string
	}{
		{"clients may start the pool", func(c string) string { return c }},
		{"clients may not", noClientStarts},
	} {
		t.Run(tc.name, func(t *testing.T) { upgradesWhileSessionsComeAndGo(t, tc.config(fakeConfig(t))) })
	}
}

func upgradesWhileSessionsComeAndGo(t *testing.T, config string) {
	newBin := newBuild(t)
	in := serve(t, config)
	const upgrades, calls = 6, 20
	var done atomic.Int32
	stop := make(chan struct{})
	upgraded := make(chan error, 1)
	go func() {
		defer close(upgraded)
		for range upgrades {
			select {
			case <-stop:
				return
			default:
			}
			if out, err := in.run("upgrade", "--binary", newBin, "--json"); err != nil {
				upgraded <- fmt.Errorf("upgrade %d: %v %s", done.Load()+1, err, out)
				return
			}
			done.Add(1)
		}
	}()
	defer func() {
		close(stop)
		if err := <-upgraded; err != nil {
			t.Error(err)
		}
	}()
	sessions := 0
	for ; done.Load() < upgrades; sessions++ {
		s := in.connect(t, "fake")
		out := s.stdout.(*os.File)
		if err := out.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		s.initialize(fmt.Sprintf("client-%d", sessions))
		for i := 1; i <= calls; i++ {
			id := fmt.Sprintf("%d-%d", sessions, i)
			if err := out.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, id, id))
			if r := s.recvID(strconv.Quote(id)); r.Error != nil || toolText(r) != id {
				t.Fatalf("session %d (after %d upgrades), call %s: %s", sessions, done.Load(), id, r.raw)
			}
		}
		s.stdin.Close() // as the load tool ends a session: its input closes
		select {
		case err := <-s.done:
			s.done <- err
		case <-time.After(10 * time.Second):
			t.Fatalf("session %d: its shim did not exit after its input closed", sessions)
		}
	}
	if log, err := os.ReadFile(filepath.Join(in.home, "logs", "pool.log")); err == nil && strings.Contains(string(log), "started by a client") {
		t.Errorf("a shim started a second pool during an upgrade:\n%s", log)
	}
	t.Logf("%d sessions of %d calls each through %d upgrades", sessions, calls, upgrades)
}

// An upgrade while the config file is broken (the running pool kept its
// last good config): the new program runs the config the old one ran,
// handed over with the children, so the child is carried and the session
// goes on; status shows the file's error, as before the upgrade; the
// fixed file is then applied. On the first edition the new program loaded
// the broken file and exited: the carried children died with it, and
// every client's connect started pools in a loop.
func TestUpgradeWithABrokenConfigKeepsTheChildren(t *testing.T) {
	in := serve(t, noClientStarts(fakeConfig(t)))
	s := in.connect(t, "fake")
	s.initialize("through-a-broken-config")
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pid","arguments":{}}}`)
	child := toolText(s.recvID("1"))
	cfg := filepath.Join(in.home, "config.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"fake": {"command": `), 0o600); err != nil {
		t.Fatal(err)
	}
	const want = "unexpected end of the file"
	waitFor(t, "the config error in status", func() bool {
		st := in.status()
		return st.ConfigError != nil && strings.Contains(*st.ConfigError, want)
	})

	up := exec.Command(sbBin, "upgrade", "--binary", sbBin, "--json")
	up.Env = append(os.Environ(), "SWITCHBOARD_HOME="+in.home)
	var upOut syncBuffer
	up.Stdout, up.Stderr = &upOut, &upOut
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	upDone := make(chan error, 1)
	go func() { upDone <- up.Wait() }()
	select {
	case err := <-upDone:
		var res struct {
			CarriedChildren []int `json:"carriedChildren"`
		}
		if err != nil || json.Unmarshal([]byte(upOut.String()), &res) != nil || len(res.CarriedChildren) != 1 || strconv.Itoa(res.CarriedChildren[0]) != child {
			t.Fatalf("upgrade: %v %s (the child: %s)", err, upOut.String(), child)
		}
	case err := <-in.done:
		in.done <- err
		_ = up.Process.Kill()
		t.Fatalf("the upgraded pool exited: %v", err)
	case <-time.After(30 * time.Second):
		_ = up.Process.Kill()
		t.Fatal("the upgrade did not finish within 30 s")
	}
	st := in.status()
	if st.ConfigError == nil || !strings.Contains(*st.ConfigError, want) || len(st.Backends) != 1 || strconv.Itoa(st.Backends[0].PID) != child {
		t.Fatalf("after the upgrade: configError %v, backends %+v (the child was %s)", st.ConfigError, st.Backends, child)
	}
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pid","arguments":{}}}`)
	if got := toolText(s.recvID("2")); got != child {
		t.Fatalf("the session after the upgrade reached child %q, want the carried %s", got, child)
	}
	// Fixed: applied by hot reload, the child kept.
	if err := os.WriteFile(cfg, []byte(noClientStarts(fakeConfig(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the fixed config applied", func() bool { return in.status().ConfigError == nil })
	s.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"pid","arguments":{}}}`)
	if got := toolText(s.recvID("3")); got != child {
		t.Fatalf("after the fix the session reached child %q, want %s", got, child)
	}
}

// An upgrade to a binary that answers `version --json` but cannot serve:
// the pool execs it and is gone, a client starts a new pool (another PID,
// not an upgraded one), and `switchboard upgrade` says so at once, naming
// the new pool. On the first edition it waited for an upgraded program
// that could no longer come, and failed only after 2 minutes.
func TestUpgradeToABinaryThatCannotStartFailsAtOnce(t *testing.T) {
	bad := filepath.Join(shortDir(t), "switchboard")
	script := "#!/bin/sh\nif [ \"$1\" = version ]; then echo '{\"version\":\"0.0.3-cannot-serve\",\"handover\":0}'; exit 0; fi\necho 'this binary cannot serve' >&2\nexit 1\n"
	if err := os.WriteFile(bad, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	home := coldHome(t, `{"idleExit": "1m"}`)
	s := coldShim(t, home)
	s.initialize("through-a-failed-upgrade")
	pools := poolsOf(home)
	if len(pools) != 1 {
		t.Fatalf("pools: %v", pools)
	}
	// Well short of the 2 minutes the command would wait for an upgraded
	// program.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up := exec.CommandContext(ctx, sbBin, "upgrade", "--binary", bad)
	up.Env = clientEnv(home)
	var upOut syncBuffer
	up.Stdout, up.Stderr = &upOut, &upOut
	start := time.Now()
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	upDone := make(chan error, 1)
	go func() { upDone <- up.Wait() }()
	waitFor(t, "the pool to exit into the binary that cannot serve", func() bool { return !alive(pools[0]) })
	// The client sends on: it starts a pool of its own.
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	if got := toolText(s.recvID("1")); got != "hi" {
		t.Fatalf("echo through the pool the client started: %q", got)
	}
	now := poolsOf(home)
	if len(now) != 1 || now[0] == pools[0] {
		t.Fatalf("pools after the failed upgrade: %v (the upgraded one: %d)", now, pools[0])
	}
	err := <-upDone
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("switchboard upgrade still waited after %s (killed): %s", took.Round(time.Millisecond), upOut.String())
	}
	want := fmt.Sprintf("a new pool (pid %d)", now[0])
	if err == nil || !strings.Contains(upOut.String(), "exited during the upgrade") || !strings.Contains(upOut.String(), want) {
		t.Fatalf("switchboard upgrade: %v after %s, said %q; want an error naming %q", err, took.Round(time.Millisecond), upOut.String(), want)
	}
	t.Logf("switchboard upgrade failed after %s: %s", took.Round(time.Millisecond), strings.TrimSpace(upOut.String()))
}
