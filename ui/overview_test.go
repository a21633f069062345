package ui

import (
	"bufio"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
)

// overviewFixture is a pool with four servers: one child shared by three
// sessions, one server with two roots partitions, one with a child per
// session, and one that failed; a request hung on the first.
func overviewFixture() pool.Snapshot {
	s := pool.Snapshot{
		TakenAt: t0,
		Servers: []pool.ServerInfo{
			{Name: "notes", Share: pool.ShareShared, State: pool.StateReady},
			{Name: "files", Share: pool.ShareShared, State: pool.StateReady},
			{Name: "browser", Share: pool.ShareSession, State: pool.StateReady},
			{Name: "memory", Share: pool.ShareShared, State: pool.StateFailed, Error: "crashed 5 times in 60s: exit status 1"},
		},
		Backends: []pool.BackendInfo{
			{Server: "notes", PID: 4242, State: pool.StateReady, StartedAt: t0.Add(-time.Hour), Sessions: 3},
			{Server: "files", PID: 5101, State: pool.StateReady, Roots: []string{"file:///home/me/src/api"}, Sessions: 2},
			{Server: "files", PID: 5100, State: pool.StateReady, Roots: []string{"file:///home/me/src/web"}, Sessions: 1},
			{Server: "browser", PID: 6100, State: pool.StateReady, Session: "s7", Sessions: 1},
			{Server: "browser", PID: 6101, State: pool.StateStarting, Session: "s8", Sessions: 1},
			{Server: "memory", State: pool.StateFailed, Restarts: 5},
		},
		InFlight: []pool.RequestInfo{
			{PoolID: 90, Session: "s1", Server: "notes", Method: "tools/call", Name: "search", PID: 4242,
				ReceivedAt: t0.Add(-95 * time.Second), WrittenToChild: true},
			{PoolID: 91, Session: "s2", Server: "notes", Method: "tools/list", PID: 4242, ReceivedAt: t0.Add(-time.Second)},
		},
	}
	for i, srv := range []string{"notes", "notes", "notes", "files", "files", "files", "browser", "browser"} {
		id := "s" + string(rune('1'+i))
		s.Sessions = append(s.Sessions, pool.SessionInfo{ID: id, Server: srv, ClientName: "claude-code", ClientVersion: "2.1.3",
			Transport: "stdio", ConnectedAt: t0.Add(-time.Hour)})
	}
	return s
}

// overviewStats are the sampler's measurements for overviewFixture.
var overviewStats = map[int]procStat{
	4242: {RSS: 60 << 20, TreeRSS: 96 << 20, TreeProcs: 2, CPU: 2},
	5100: {RSS: 40 << 20, TreeRSS: 40 << 20, TreeProcs: 1},
	5101: {RSS: 44 << 20, TreeRSS: 44 << 20, TreeProcs: 1},
	6100: {RSS: 210 << 20, TreeRSS: 512 << 20, TreeProcs: 6},
}

// feedTraffic gives the tracker 15 minutes of deterministic traffic on
// notes and files: a call every 5 s, latency waving between 2 and 200
// ms, an error every 40th call, and a quiet stretch.
func feedTraffic(tr *tracker) {
	id := uint64(1000)
	for i := range 180 {
		at := -statWindow + time.Duration(i)*5*time.Second
		if i >= 100 && i < 120 {
			continue // quiet
		}
		for _, srv := range []string{"notes", "files"} {
			id++
			lat := time.Duration(2e6 * math.Pow(100, (1+math.Sin(float64(i)/9))/2))
			if srv == "files" {
				lat /= 3
			}
			status := pool.StatusOK
			if i%40 == 7 && srv == "notes" {
				status = pool.StatusError
			}
			tr.event(recvEv(at, id, srv, "s1", "tools/call", "search"))
			tr.event(doneEv(at+lat, id, status, ""))
		}
	}
}

func TestOverviewFor(t *testing.T) {
	tr := newTracker(t0.Add(-time.Hour))
	feedTraffic(tr)
	ov := overviewFor(overviewFixture(), t0, 30*time.Second, func(s string) serverFigures { return tr.figures(s, t0) }, overviewStats)
	type card struct {
		Name, State  string
		Level        level
		Sessions     int
		Children     int
		Lines        []string
		Memory       uint64
		Saved        uint64
		Measured     bool
		Stats        []stat
		Line, Active string
	}
	var got []card
	for _, c := range ov.Cards {
		got = append(got, card{c.Name, c.State, c.Level, c.Sessions, c.Children, c.ChildLines, c.Memory, c.Saved, c.Measured,
			c.stats(), c.sessionsLine(), c.activityLine()})
	}
	want := []card{
		{"notes", "ready", levelHung, 3, 1, []string{"PID 4242 · 96.0 MiB (2 procs)"}, 96 << 20, 192 << 20, true,
			[]stat{{"96.0 MiB", "memory"}, {"192.0 MiB", "saved"}, {"11", "calls/min"},
				{"28 ms", "p50"}, {"193 ms", "p99"}, {"5 (3.2%)", "errors"}},
			"3 sessions share 1 child", "2 in flight, 1 hung"},
		{"files", "ready", levelNormal, 3, 2, []string{"PID 5100 (web) · 40.0 MiB", "PID 5101 (api) · 44.0 MiB"}, 84 << 20, 42 << 20, true,
			[]stat{{"84.0 MiB", "memory"}, {"42.0 MiB", "saved"}, {"11", "calls/min"},
				{"9 ms", "p50"}, {"68 ms", "p99"}, {"0", "errors"}},
			"3 sessions on 2 children (one per roots partition)", "idle"},
		{"browser", "ready", levelNormal, 2, 2, []string{"PID 6100 (session s7) · 512.0 MiB (6 procs)", "PID 6101 (session s8) · measuring… · starting"},
			512 << 20, 0, false,
			[]stat{{"…", "memory"}, {"…", "saved"}, {"0", "calls/min"},
				{"—", "p50"}, {"—", "p99"}, {"0", "errors"}},
			"2 sessions, one child each", "idle"},
		{"memory", "failed", levelHung, 0, 0, nil, 0, 0, false,
			[]stat{{"—", "memory"}, {"—", "saved"}, {"0", "calls/min"},
				{"—", "p50"}, {"—", "p99"}, {"0", "errors"}},
			"0 sessions; requests fail fast until you restart it", "idle"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("cards (-want +got):\n%s", d)
	}
	if want := "1 request hung · 8 sessions · 5 children · 234.0 MiB saved by sharing"; ov.Header != want {
		t.Errorf("header = %q, want %q", ov.Header, want)
	}
}

// TestOverviewSaysWhyAServerIsDisabled: a server not started because a
// ${VAR} it needs is not set says so on its card, as in the tray menu and
// status; one the user disabled says it is disabled in the config. On the
// first edition both said "disabled in the config".
func TestOverviewSaysWhyAServerIsDisabled(t *testing.T) {
	why := "mcpServers.gh.args[1]: environment variable GH_TOKEN is not set; the server is not started"
	s := pool.Snapshot{TakenAt: t0, Servers: []pool.ServerInfo{
		{Name: "gh", Share: pool.ShareShared, Disabled: true, State: "disabled", Error: why},
		{Name: "off", Share: pool.ShareShared, Disabled: true, State: "disabled"},
	}}
	ov := overviewFor(s, t0, 30*time.Second, func(string) serverFigures { return serverFigures{} }, nil)
	var got []string
	for _, c := range ov.Cards {
		got = append(got, c.Name+" "+c.State+": "+c.Note)
	}
	want := []string{"gh disabled: " + why, "off disabled: disabled in the config"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("cards (-want +got):\n%s", d)
	}
}

// TestOverviewRenders is the overview's golden screenshot: the fixture's
// four servers with 15 minutes of traffic, drawn by fyne's test renderer.
func TestOverviewRenders(t *testing.T) {
	fake := newFake(overviewFixture())
	u := newTestUIWith(t, fake, tabOverview, func(u *UI) {
		u.stats = overviewStats
		u.track = newTracker(t0.Add(-time.Hour))
		feedTraffic(u.track)
	})
	u.dash.win.Resize(fyne.NewSize(1000, 660))
	golden(t, "overview.xml", test.RenderToMarkup(u.dash.win.Canvas()))
	goldenPNG(t, "overview.png", u.dash.win.Canvas())
}

// agedCacheClockEnv, a duration, makes the test binary wait that long
// before it runs its tests, so that fyne's renderer cache last read the
// clock that long ago (TestOverviewRendersAfterTheCacheClockAged).
const agedCacheClockEnv = "SB_UI_AGED_CACHE_CLOCK"

// TestOverviewRendersAfterTheCacheClockAged: the overview's golden
// picture matches in a process whose renderer cache last read the clock
// longer ago than it keeps a renderer alive, as in a long suite on a
// loaded machine (newTestApp). The capture used to replace every
// renderer with one nothing laid out, and the tab bar showed its first
// tab only. The test runs in a child whose cache keeps a renderer alive
// for cacheLife instead of a minute (FYNE_CACHE) and which waits longer
// than that before it starts. The child must capture within cacheLife of
// making its app: building the dashboard under -race took up to 10 s on
// a 2-vCPU machine loaded eight times over.
func TestOverviewRendersAfterTheCacheClockAged(t *testing.T) {
	if *update {
		t.Skip("-update rewrites the goldens")
	}
	const cacheLife = 30 * time.Second
	const name = "TestOverviewRenders"
	cmd := exec.Command(os.Args[0], "-test.run", "^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "FYNE_CACHE="+cacheLife.String(),
		agedCacheClockEnv+"="+(cacheLife+time.Second).String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in a process with an aged cache clock: %v\n%s", name, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("%s did not run in the child:\n%s", name, out)
	}
}

// goldenPNG compares what c draws with testdata/name, pixel for pixel,
// or rewrites it with -update. A mismatch is written to
// testdata/failed/name for review. The test draws on its own goroutine,
// so one capture is the picture; c's app must come from newTestApp.
func goldenPNG(t *testing.T, name string, c fyne.Canvas) {
	t.Helper()
	img := c.Capture()
	path := filepath.Join("testdata", name)
	if *update {
		writePNGFile(t, path, img)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	defer f.Close()
	want, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	switch diff := pixelsDiffering(img, want); {
	case diff < 0:
		writePNGFile(t, filepath.Join("testdata", "failed", name), img)
		t.Fatalf("%s: size %v, want %v (written to testdata/failed)", name, img.Bounds().Size(), want.Bounds().Size())
	case diff > 0:
		writePNGFile(t, filepath.Join("testdata", "failed", name), img)
		t.Errorf("%s: %d pixels differ from the golden; the new picture is in testdata/failed/%s (go test -update accepts it)", name, diff, name)
	}
}

// pixelsDiffering counts the pixels in which img and want differ, or
// returns -1 when their sizes do.
func pixelsDiffering(img, want image.Image) int {
	if want.Bounds() != img.Bounds() {
		return -1
	}
	diff := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r1, g1, b1, a1 := img.At(x, y).RGBA()
			r2, g2, b2, a2 := want.At(x, y).RGBA()
			if r1 != r2 || g1 != g2 || b1 != b2 || a1 != a2 {
				diff++
			}
		}
	}
	return diff
}

// TestDrawSpark: the charts' shapes, pixel by pixel where it matters.
func TestDrawSpark(t *testing.T) {
	c := rgba(color.NRGBA{R: 0xff, A: 0xff})
	alpha := func(img *image.RGBA, x, y int) uint8 { return img.RGBAAt(x, y).A }
	// In flight: 0, 2, 4 in three slots of 20 px; the last is full height.
	img := drawSpark([]sparkPoint{{InFlight: 0}, {InFlight: 2}, {InFlight: 4}}, sparkInFlight, 60, 42, c, 1)
	if a := alpha(img, 10, 10); a != 0 {
		t.Errorf("an empty slot is drawn (alpha %d)", a)
	}
	if a := alpha(img, 30, 30); a == 0 {
		t.Error("the half-height slot is empty at its lower half")
	}
	if a := alpha(img, 30, 12); a != 0 {
		t.Errorf("the half-height slot reaches the top (alpha %d)", a)
	}
	if a := alpha(img, 50, 4); a == 0 {
		t.Error("the highest slot does not reach the top")
	}
	// Latency: a gap where no call ended; a higher p50 draws higher.
	img = drawSpark([]sparkPoint{{P50: time.Millisecond}, {}, {P50: 100 * time.Millisecond}}, sparkLatency, 60, 42, c, 1)
	if a := alpha(img, 30, 20); a != 0 {
		t.Errorf("the slot without calls is drawn (alpha %d)", a)
	}
	top := func(x int) int {
		for y := range 42 {
			if alpha(img, x, y) > 0x80 {
				return y
			}
		}
		return 42
	}
	if lo, hi := top(10), top(50); hi >= lo {
		t.Errorf("100 ms is drawn at y=%d, not above 1 ms at y=%d", hi, lo)
	}
	// Nothing at all: a baseline only.
	img = drawSpark(make([]sparkPoint, 60), sparkLatency, 60, 42, c, 1)
	if alpha(img, 30, 10) != 0 || alpha(img, 30, 40) == 0 {
		t.Error("an empty chart is not a bare baseline")
	}
}

// memHelperEnv makes the test binary a child process tree for
// TestOverviewMemoryAgreesWithProc: "parent" touches 24 MiB and starts a
// "child" that touches 16 MiB; both wait for their stdin to close.
const memHelperEnv = "SB_UI_MEM_HELPER"

// memHelper is the helper's main.
func memHelper(role string) int {
	touch := func(mib int) []byte {
		b := make([]byte, mib<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		return b
	}
	var keep []byte
	switch role {
	case "parent":
		keep = touch(24)
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), memHelperEnv+"=child")
		cmd.Stdin = os.Stdin
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return 1
		}
		if err := cmd.Start(); err != nil {
			return 1
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		fmt.Printf("ready %d %s", cmd.Process.Pid, line)
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = cmd.Wait()
	case "child":
		keep = touch(16)
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
	}
	runtime.KeepAlive(keep)
	return 0
}

// vmRSS reads a process's resident memory from /proc/PID/status.
func vmRSS(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// TestOverviewMemoryAgreesWithProc: a real child with a grandchild; the
// overview's memory for its server is the two processes' resident memory
// as /proc has it, and what three sessions sharing it save is two more.
func TestOverviewMemoryAgreesWithProc(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), memHelperEnv+"=parent")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close() // both helpers end
		_ = cmd.Wait()
	}()
	var child int
	if _, err := fmt.Fscanf(bufio.NewReader(stdout), "ready %d ready\n", &child); err != nil {
		t.Fatalf("the helpers did not start: %v", err)
	}
	parent := cmd.Process.Pid

	s := pool.Snapshot{TakenAt: time.Now(),
		Servers:  []pool.ServerInfo{{Name: "notes", Share: pool.ShareShared, State: pool.StateReady}},
		Backends: []pool.BackendInfo{{Server: "notes", PID: parent, State: pool.StateReady, Sessions: 3}}}
	for i := range 3 {
		s.Sessions = append(s.Sessions, pool.SessionInfo{ID: fmt.Sprint("s", i), Server: "notes"})
	}
	stats := newProcSampler().sample([]int{parent}, time.Now())
	proc := vmRSS(t, parent) + vmRSS(t, child)
	card := overviewFor(s, time.Now(), time.Minute, func(string) serverFigures { return serverFigures{} }, stats).Cards[0]
	t.Logf("overview: %s in %d processes; /proc: %s", formatBytes(card.Memory), stats[parent].TreeProcs, formatBytes(proc))
	if stats[parent].TreeProcs != 2 {
		t.Errorf("measured %d processes in the tree, want the child and its grandchild", stats[parent].TreeProcs)
	}
	// The helpers are idle once ready: their memory stays within a little
	// of what /proc said a moment apart.
	if diff := int64(card.Memory) - int64(proc); diff > 1<<20 || diff < -1<<20 || proc < 40<<20 {
		t.Errorf("overview memory %d bytes, /proc %d bytes (off by %d)", card.Memory, proc, diff)
	}
	if card.Saved != 2*card.Memory || !card.Measured {
		t.Errorf("saved %d, want twice the child's %d (three sessions on one child)", card.Saved, card.Memory)
	}
	if got := card.stats()[0].Value; got != formatBytes(card.Memory) {
		t.Errorf("the card shows %q", got)
	}
}
