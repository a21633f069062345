package windows

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The tray app, as a Windows user starts it, under Wine in an X server of
// its own: the tray icon sits in Wine's system tray and its menu opens on a
// right click, a session is served through the named pipe, a second launch
// asks the first for its dashboard, which opens and is drawn (the overview,
// then the live waterfall), Restart Switchboard in the tray menu starts a
// new process that the session carries on with, and Quit in its menu ends
// it and its child; the dashboard's view is kept, and no child opens a
// console window. Screenshots (tray.png, tray-menu.png, dashboard.png,
// waterfall.png, and tray-menu- and dashboard-restarted.png) go to
// $ARTIFACTS/windows when ARTIFACTS is set.
func TestTrayUnderWine(t *testing.T) {
	x, home, env, marker, shots := trayTestSetup(t)
	exe := filepath.Join(dist, "switchboard.exe")

	tray := startWine(t, env, exe)
	exited, log := tray.exited, tray.log

	var systray xwindow
	waitFor(t, "the tray icon in Wine's system tray", func() bool {
		w, ok := x.find(`^Wine System Tray$`)
		systray = w
		return ok && x.viewable(w.id) && x.hasWindow(`^SystrayMonitor$`)
	})
	session := openSession(t, env, marker)
	if w, ok := x.find(`fakemcp\.exe$`); ok {
		t.Errorf("the child opened a console window: %+v", w)
	}

	// A second launch finds the first and asks it for its dashboard.
	if out, err := run(t, env, exe, "--dashboard"); err != nil || !strings.Contains(out, "already running") {
		t.Fatalf("a second launch: %v\n%s", err, out)
	}
	var dash xwindow
	waitFor(t, "the dashboard window", func() bool {
		w, ok := x.find(`^Switchboard$`)
		dash = w
		return ok && x.viewable(w.id)
	})
	overview := filepath.Join(shots, "dashboard.png")
	waitFor(t, "the dashboard to be drawn, its overview's card too", func() bool {
		colours, background := x.shot(dash.id, overview)
		return colours >= 16 && background < 0.9
	})
	// Ctrl+2, to the window under the pointer (no window manager), is the
	// live waterfall, painted off the UI goroutine.
	x.run(t, "xdotool", "mousemove", fmt.Sprint(dash.x+dash.w/2), fmt.Sprint(dash.y+dash.h/2), "key", "ctrl+2")
	waterfall := filepath.Join(shots, "waterfall.png")
	waitFor(t, "the waterfall", func() bool {
		colours, _ := x.shot(dash.id, waterfall)
		return colours >= 16 && !sameFile(overview, waterfall)
	})

	// Restart Switchboard, the item above Quit: a new process takes over
	// (Windows has no exec), the session carries on through its shim.
	pid := statusPID(t, env)
	x.run(t, "xdotool", "windowraise", systray.id) // the dashboard covers the tray's corner
	waitFor(t, "the tray icon to be drawn", func() bool {
		colours, _ := x.shot(systray.id, filepath.Join(shots, "tray.png"))
		return colours >= 4
	})
	menu := x.openTrayMenu(t, systray, filepath.Join(shots, "tray-menu.png"))
	x.clickItem(t, menu, 1)
	select {
	case err := <-exited:
		if errors.Is(err, exec.ErrWaitDelay) {
			err = nil // exit 0; the new process holds the output open
		}
		if err != nil {
			t.Fatalf("Restart: the first process ended with %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("Restart: the first process is still running a minute later")
	}
	waitFor(t, "the restarted process to serve", func() bool {
		out, err := run(t, env, exe, "status", "--json")
		return err == nil && !strings.Contains(out, fmt.Sprintf(`"pid": %d,`, pid))
	})
	session.call(t, "after the restart")
	waitFor(t, "the restarted process to show the session", func() bool {
		out, err := run(t, env, exe, "status", "--json")
		return err == nil && strings.Contains(out, `"clientName": "wine-test"`)
	})
	// Its dashboard opens on a second launch too: its window toolkit runs
	// (the tray's menu is built anew as it starts, and a click on a menu
	// opened before that is lost).
	if out, err := run(t, env, exe, "--dashboard"); err != nil || !strings.Contains(out, "already running") {
		t.Fatalf("a launch after the restart: %v\n%s", err, out)
	}
	waitFor(t, "the restarted process's dashboard", func() bool {
		w, ok := x.find(`^Switchboard$`)
		dash = w
		return ok && x.viewable(w.id)
	})
	waitFor(t, "the restarted process's dashboard to be drawn", func() bool {
		colours, background := x.shot(dash.id, filepath.Join(shots, "dashboard-restarted.png"))
		return colours >= 16 && background < 0.9
	})
	systray, _ = x.find(`^Wine System Tray$`)

	// Quit, the menu's last item.
	menu = x.openTrayMenu(t, systray, filepath.Join(shots, "tray-menu-restarted.png"))
	// The restarted process has no console (a detached start), and its
	// child is a console program: it runs without a console window, which
	// would have opened by now.
	if w, ok := x.find(`fakemcp\.exe$`); ok {
		t.Errorf("the child opened a console window after the restart: %+v", w)
	}
	x.clickItem(t, menu, 0)
	waitFor(t, "the app to end", func() bool {
		_, err := run(t, env, exe, "status", "--json")
		return err != nil
	})
	waitFor(t, "the child to end with the app", func() bool { return len(linuxPIDsOf(marker)) == 0 })
	if strings.Contains(log.String(), "panic:") {
		t.Fatalf("the app panicked:\n%s", log.String())
	}
	// The dashboard was open at the restart, on the waterfall: its view is kept.
	if state, err := os.ReadFile(filepath.Join(home, "dashboard.json")); err != nil || !bytes.Contains(state, []byte(`"tab": "Waterfall"`)) {
		t.Errorf("the dashboard's state: %v %s", err, state)
	}
}

// trayTestSetup gives a tray test an X server, a home with the fake
// server "fake" configured (marker in its command line), the environment
// that points Wine at both, and where screenshots go.
func trayTestSetup(t *testing.T) (x *xserver, home string, env []string, marker, shots string) {
	t.Helper()
	for _, tool := range []string{"Xvfb", "xwininfo", "xdotool", "import"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (packaging/linux/deps.sh installs it): %v", tool, err)
		}
	}
	shots = t.TempDir()
	if a := os.Getenv("ARTIFACTS"); a != "" {
		shots = filepath.Join(a, "windows")
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	x = startXvfb(t)
	// Wine's system tray lives in its explorer.exe, which the first window
	// of the prefix starts with that process's display: the tests before
	// this one ran without one, or with another, so their wineserver goes.
	stopWineserver(t)
	t.Cleanup(func() { stopWineserver(t) })

	home, marker, env = fakeHome(t)
	return x, home, append(env, "DISPLAY="+x.display), marker, shots
}

// A client's shim finds no pool and starts one: on Windows that is the
// tray app (a login always has a desktop), detached and without a console.
// Its tray icon comes up, the client's call is answered, the child opens
// no console window, and Quit in the tray menu ends the pool and its
// child, with nothing wrong in the pool's log.
func TestClientStartsTheTrayUnderWine(t *testing.T) {
	x, home, env, marker, shots := trayTestSetup(t)
	exe := filepath.Join(dist, "switchboard.exe")
	if _, err := run(t, env, exe, "status", "--json"); err == nil {
		t.Fatal("a pool is running before the client starts one")
	}
	session := openSession(t, env, marker) // its shim starts the pool
	var systray xwindow
	waitFor(t, "the tray icon of the pool the client started", func() bool {
		w, ok := x.find(`^Wine System Tray$`)
		systray = w
		return ok && x.viewable(w.id) && x.hasWindow(`^SystrayMonitor$`)
	})
	session.call(t, "to the pool a client started")
	// Its toolkit runs once a second launch can open its dashboard.
	if out, err := run(t, env, exe, "--dashboard"); err != nil || !strings.Contains(out, "already running") {
		t.Fatalf("a second launch: %v\n%s", err, out)
	}
	waitFor(t, "the dashboard", func() bool {
		w, ok := x.find(`^Switchboard$`)
		if !ok || !x.viewable(w.id) {
			return false
		}
		colours, background := x.shot(w.id, filepath.Join(shots, "dashboard-client-started.png"))
		return colours >= 16 && background < 0.9
	})
	if w, ok := x.find(`fakemcp\.exe$`); ok {
		t.Errorf("the child opened a console window: %+v", w)
	}
	if w, ok := x.find(`switchboard\.exe$`); ok {
		t.Errorf("the pool opened a console window: %+v", w)
	}
	menu := x.openTrayMenu(t, systray, filepath.Join(shots, "tray-menu-client-started.png"))
	x.clickItem(t, menu, 0) // Quit
	waitFor(t, "the pool to end", func() bool {
		_, err := run(t, env, exe, "status", "--json")
		return err != nil
	})
	waitFor(t, "the child to end with the pool", func() bool { return len(linuxPIDsOf(marker)) == 0 })
	poolLog, err := os.ReadFile(filepath.Join(home, "logs", "pool.log"))
	if err != nil || !bytes.Contains(poolLog, []byte("shutting down")) || bytes.Contains(poolLog, []byte("panic:")) {
		t.Errorf("the pool's log: %v\n%s", err, poolLog)
	}
}

// statusPID is the running instance's PID, as `status --json` says.
func statusPID(t *testing.T, env []string) int {
	t.Helper()
	out, err := run(t, env, filepath.Join(dist, "switchboard.exe"), "status", "--json")
	var st struct{ PID int }
	if err == nil {
		err = json.Unmarshal([]byte(out), &st)
	}
	if err != nil || st.PID == 0 {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st.PID
}

// openTrayMenu right-clicks the tray's icon and returns the menu's window,
// once drawn (its screenshot in file).
func (x *xserver) openTrayMenu(t *testing.T, systray xwindow, file string) xwindow {
	t.Helper()
	x.run(t, "xdotool", "windowraise", systray.id)
	before := x.windows()
	x.run(t, "xdotool", "mousemove", fmt.Sprint(systray.x+8), fmt.Sprint(systray.y+8), "click", "3")
	var menu xwindow
	waitFor(t, "the tray menu", func() bool {
		for _, w := range x.windows() {
			if _, old := before[w.id]; !old && w.h > 100 && x.viewable(w.id) {
				menu = w
				return true
			}
		}
		return false
	})
	// Drawn, and settled: the menu is rebuilt while open when the counts
	// it shows change, and a click on one being rebuilt is lost.
	last := ""
	waitFor(t, "the tray menu to be drawn and settled", func() bool {
		colours, _ := x.shot(menu.id, file)
		png, _ := os.ReadFile(file)
		settled := colours >= 2 && string(png) == last
		last = string(png)
		return settled
	})
	return menu
}

// clickItem clicks the menu's item n places above the last (Wine's menu
// items are 17 pixels high, its bottom border 3).
func (x *xserver) clickItem(t *testing.T, menu xwindow, n int) {
	t.Helper()
	x.run(t, "xdotool", "mousemove", fmt.Sprint(menu.x+20), fmt.Sprint(menu.y+menu.h-12-17*n), "click", "1")
}

// session is a client connected through switchboard-connect.exe.
type session struct {
	stdin  io.WriteCloser
	cmd    *exec.Cmd
	lines  chan string
	stderr *syncBuffer
	nextID int
}

// openSession connects a client to the server "fake" of the running
// instance through switchboard-connect.exe, makes one answered call, and
// checks that one child serves it.
func openSession(t *testing.T, env []string, marker string) *session {
	t.Helper()
	s := openSessionWith(t, env, []string{filepath.Join(dist, "switchboard-connect.exe"), "fake"})
	if len(linuxPIDsOf(marker)) != 1 {
		t.Fatalf("want one child with %s in its command line, found %v", marker, linuxPIDsOf(marker))
	}
	return s
}

// openSessionWith runs argv as a client's MCP server command (the shim,
// or what setup wrote) and initializes a session with one answered call.
func openSessionWith(t *testing.T, env, argv []string) *session {
	t.Helper()
	shim := command(context.Background(), wine, argv...)
	shim.Env = wineEnv(env...)
	stdin, _ := shim.StdinPipe()
	stdout, _ := shim.StdoutPipe()
	s := &session{stdin: stdin, cmd: shim, lines: make(chan string, 16), stderr: &syncBuffer{}, nextID: 1}
	shim.Stderr = s.stderr
	if err := shim.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.lines)
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			s.lines <- line
		}
	}()
	t.Cleanup(s.close)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"wine-test","version":"1"}}}`)
	s.await(t, `"id":0`)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.call(t, "through a named pipe")
	return s
}

// call makes an echo call and waits for its answer.
func (s *session) call(t *testing.T, text string) {
	t.Helper()
	fmt.Fprintf(s.stdin, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`+"\n", s.nextID, text)
	s.nextID++
	s.await(t, fmt.Sprintf("%q", text))
}

// await reads answers until one contains want.
func (s *session) await(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				t.Fatalf("connect: the shim's output ended before %s (stderr %s)", want, s.stderr.String())
			}
			if strings.Contains(line, want) {
				return
			}
		case <-deadline:
			t.Fatalf("connect: no %s in a minute (stderr %s)", want, s.stderr.String())
		}
	}
}

func (s *session) close() {
	s.stdin.Close()
	_ = s.cmd.Wait()
}

// stopWineserver ends the prefix's wineserver and the Wine services it
// started, and waits for them.
func stopWineserver(t *testing.T) {
	t.Helper()
	server := filepath.Join(filepath.Dir(wine), "wineserver")
	for _, arg := range []string{"-k", "-w"} {
		cmd := exec.Command(server, arg)
		cmd.Env = wineEnv()
		_ = cmd.Run() // -k fails when none runs
	}
}

// xserver is an Xvfb of the test's own.
type xserver struct{ display string }

// startXvfb starts an X server on a free display, which Xvfb picks and
// reports (-displayfd); the test's cleanup stops it.
func startXvfb(t *testing.T) *xserver {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command("Xvfb", "-displayfd", "3", "-screen", "0", "1024x768x24", "-nolisten", "tcp")
	cmd.ExtraFiles = []*os.File{w}
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		w.Close()
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	_ = r.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("Xvfb did not report its display: %v\n%s", err, out.String())
	}
	return &xserver{display: ":" + strings.TrimSpace(n)}
}

// run runs an X client on the server.
func (x *xserver) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "DISPLAY="+x.display)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return string(out)
}

// xwindow is a top-level window as xwininfo lists it.
type xwindow struct {
	id, name   string
	x, y, w, h int
}

// A line of `xwininfo -root -children`:
//
//	0xa00005 "Switchboard": ("switchboard.exe" "switchboard.exe")  1000x660+4+23  +4+23
var childLine = regexp.MustCompile(`^\s+(0x[0-9a-f]+) (?:"([^"]*)"|\(has no name\)).*?\s(\d+)x(\d+)[+-]-?\d+[+-]-?\d+\s+\+?(-?\d+)\+?(-?\d+)\s*$`)

// windows lists the root's children by id.
func (x *xserver) windows() map[string]xwindow {
	out := map[string]xwindow{}
	cmd := exec.Command("xwininfo", "-root", "-children")
	cmd.Env = append(os.Environ(), "DISPLAY="+x.display)
	list, _ := cmd.Output() // a window that goes while it is listed fails the listing: the next try lists it
	for line := range strings.Lines(string(list)) {
		m := childLine.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil {
			continue
		}
		w := xwindow{id: m[1], name: m[2]}
		fmt.Sscan(m[3], &w.w)
		fmt.Sscan(m[4], &w.h)
		fmt.Sscan(m[5], &w.x)
		fmt.Sscan(m[6], &w.y)
		out[w.id] = w
	}
	return out
}

// find returns the window whose name matches pattern.
func (x *xserver) find(pattern string) (xwindow, bool) {
	re := regexp.MustCompile(pattern)
	for _, w := range x.windows() {
		if re.MatchString(w.name) {
			return w, true
		}
	}
	return xwindow{}, false
}

func (x *xserver) hasWindow(pattern string) bool {
	_, ok := x.find(pattern)
	return ok
}

// viewable reports whether the window is mapped and all its ancestors too.
func (x *xserver) viewable(id string) bool {
	cmd := exec.Command("xwininfo", "-id", id)
	cmd.Env = append(os.Environ(), "DISPLAY="+x.display)
	out, err := cmd.Output()
	return err == nil && bytes.Contains(out, []byte("Map State: IsViewable"))
}

// shot takes a screenshot of the window into file and counts its
// distinct colours, up to 1,000 (a window not drawn yet has one), and the
// share of its pixels in the commonest colour, its background.
func (x *xserver) shot(id, file string) (colours int, background float64) {
	cmd := exec.Command("import", "-window", id, file)
	cmd.Env = append(os.Environ(), "DISPLAY="+x.display)
	if err := cmd.Run(); err != nil {
		return 0, 1 // the window may be going
	}
	f, err := os.Open(file)
	if err != nil {
		return 0, 1
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return 0, 1
	}
	return colourStats(img, 1000)
}

func sameFile(a, b string) bool {
	x, errA := os.ReadFile(a)
	y, errB := os.ReadFile(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

func colourStats(img image.Image, upTo int) (colours int, background float64) {
	count := map[[4]uint32]int{}
	b := img.Bounds()
	most := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			k := [4]uint32{r, g, bl, a}
			if _, ok := count[k]; !ok && len(count) >= upTo {
				continue
			}
			count[k]++
			most = max(most, count[k])
		}
	}
	if n := b.Dx() * b.Dy(); n > 0 {
		background = float64(most) / float64(n)
	}
	return len(count), background
}
