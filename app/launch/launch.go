// Package launch starts the pool for a client that finds none running, so
// that an MCP client's first `switchboard connect` works whether or not
// the user started the app. It lives apart from package app because the
// small `switchboard-connect` shim links it: no GUI, no SQL, no pool.
//
// Many clients may start at once (an editor opening a workspace starts one
// shim per server). They serialise on a start lock next to the pool
// socket: the first starts the pool and holds the lock until the pool's
// socket answers; the others then find it running. The pool itself holds
// an instance lock for its whole life, so two pools never serve one home
// even when a user starts one by hand at the same moment. Both are OS
// locks, released when their holder dies: a pool killed with SIGKILL
// leaves a socket file behind but no lock, and the next client replaces
// it at once.
package launch

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/app/config/jsonedit"
	"github.com/switchboard-mcp/switchboard/app/flock"
	"github.com/switchboard-mcp/switchboard/app/home"
	"github.com/switchboard-mcp/switchboard/app/safefile"
)

// StartTimeout bounds how long a client waits for a pool it started (or
// that another client is starting) to answer: loading the config and
// opening the history database take well under a second.
const StartTimeout = 30 * time.Second

// ErrDisabled means the config says clients may not start the pool.
var ErrDisabled = errors.New("clients may not start the pool (autostart.fromClients is false)")

// maxConfigBytes bounds the config read here; the pool reports a larger
// file as an error of its own.
const maxConfigBytes = 4 << 20

// Allowed reports whether the config at path lets clients start the pool.
// Only an explicit `"autostart": {"fromClients": false}` forbids it; a
// missing or unreadable file allows it, and the pool then reports what is
// wrong with the file itself.
func Allowed(path string) bool {
	doc, err := safefile.Read(path, maxConfigBytes)
	if err != nil {
		return true
	}
	root, err := jsonedit.Parse(doc)
	if err != nil {
		return true
	}
	v := root.Get("autostart").Get("fromClients")
	return v == nil || string(v.Raw(doc)) != "false"
}

// maxRecordBytes bounds the config record read here: one path.
const maxRecordBytes = 64 << 10

// RecordedConfig is the config file the pool that started last ran, when
// it ran one other than the default and that file still exists
// (home.Paths.ConfigRecordFile); else "", the default file. A pool a
// client starts runs that file, and whether clients may start one is
// that file's to say.
func RecordedConfig(paths home.Paths) string {
	data, err := safefile.Read(paths.ConfigRecordFile(), maxRecordBytes)
	if err != nil {
		return ""
	}
	path := strings.TrimRight(string(data), "\r\n")
	if path == "" || !filepath.IsAbs(path) || path == paths.Config {
		return ""
	}
	if fi, err := os.Stat(path); err != nil || fi.IsDir() {
		return ""
	}
	return path
}

// ConfigOf is the config file a pool a client starts would run: the one
// the last pool ran (RecordedConfig), else the default.
func ConfigOf(paths home.Paths) string {
	if path := RecordedConfig(paths); path != "" {
		return path
	}
	return paths.Config
}

// runningWait bounds how long a client waits for a pool that holds the
// instance lock but does not answer yet: an upgrade in place takes well
// under a second, a start a second or two.
const runningWait = 10 * time.Second

// maxStarts bounds the pools one Ensure starts: each that exits having
// lost the instance lock to another pool is followed by another only once
// that one has let the lock go.
const maxStarts = 4

// Ensure returns a connection from dial, starting the pool first when
// dial fails and the config allows it. dial is tried again under the
// start lock, so of many clients arriving together only the first starts
// a pool. A pool that holds the instance lock but has no socket for a
// moment (it is starting, or upgrading itself in place) is waited for
// instead, whatever the config says about starting one.
func Ensure(paths home.Paths, dial func() (net.Conn, error)) (net.Conn, error) {
	deadline := time.Now().Add(StartTimeout)
	if c, ok := awaitRunning(paths, dial, deadline); ok {
		return c, nil
	}
	if !Allowed(ConfigOf(paths)) {
		return nil, ErrDisabled
	}
	if err := paths.EnsureRunDir(); err != nil {
		return nil, err
	}
	lock, err := flock.Wait(paths.StartLockFile(), deadline)
	if err != nil {
		return nil, fmt.Errorf("wait for another client starting the pool: %w", err)
	}
	defer lock.Unlock()
	for starts := 1; ; starts++ {
		if c, err := dial(); err == nil {
			return c, nil
		}
		p, err := start(paths)
		if err != nil {
			return nil, err
		}
		c, err := p.await(paths, dial, deadline)
		if !errors.Is(err, errLostLock) {
			return c, err
		}
		// It lost the instance lock to another pool (a user's, started
		// at the same moment, or one still stopping): wait for that one
		// while it holds the lock; once it has let the lock go with no
		// pool answering, start one again.
		if c, ok := whileHeld(paths, dial, deadline); ok {
			return c, nil
		}
		if time.Now().After(deadline) || starts == maxStarts {
			return nil, fmt.Errorf("the pool it started (%s) exited: another pool held the instance lock, and none answered within %s; see %s",
				p.describe(), StartTimeout, paths.PoolLog())
		}
	}
}

// errLostLock is a started pool that exited while another held the
// instance lock.
var errLostLock = errors.New("another pool holds the instance lock")

// await dials until the pool p answers, exits or the deadline passes. A
// pool that exited while the instance lock is held lost it to another
// pool: errLostLock.
func (p *started) await(paths home.Paths, dial func() (net.Conn, error), deadline time.Time) (net.Conn, error) {
	for {
		if c, err := dial(); err == nil {
			return c, nil
		}
		select {
		case <-p.exited:
			if c, err := dial(); err == nil { // the other pool may answer already
				return c, nil
			}
			if held(paths.LockFile()) {
				return nil, errLostLock
			}
			return nil, fmt.Errorf("the pool it started (%s) exited: %s", p.describe(), lastLines(paths.PoolLog(), 3))
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the pool it started (%s) did not answer within %s; see %s", p.describe(), StartTimeout, paths.PoolLog())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitRunning dials until the pool that holds the instance lock answers,
// while it holds it, for up to runningWait. An upgrade in place (exec,
// same PID, the lock passed on) closes the pool's socket and opens it
// again under the new program a moment later; a client that starts in
// between must neither give up nor start a second pool (which would find
// the lock held and exit). It reports false at once when no one holds
// the lock: no pool runs, or one exited or was killed and left its files
// (the PID the lock file names is only for messages: it may be any
// process's now).
func awaitRunning(paths home.Paths, dial func() (net.Conn, error), deadline time.Time) (net.Conn, bool) {
	return whileHeld(paths, dial, minTime(deadline, time.Now().Add(runningWait)))
}

// whileHeld dials while the instance lock is held, until a pool answers
// (true) or the lock is free with none answering, or until (false).
func whileHeld(paths home.Paths, dial func() (net.Conn, error), until time.Time) (net.Conn, bool) {
	for held(paths.LockFile()) && time.Now().Before(until) {
		if c, err := dial(); err == nil {
			return c, true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil, false
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// started is a pool process this client started.
type started struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when it exits
}

func (p *started) describe() string {
	return fmt.Sprintf("pid %d: %s", p.cmd.Process.Pid, p.cmd.String())
}

// start runs the pool detached from this client: its own session (so the
// client's process-group kill does not reach it), stdin from /dev/null,
// output appended to the pool log.
func start(paths home.Paths) (*started, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(paths.Logs, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", paths.Logs, err)
	}
	rotate(paths.PoolLog())
	logf, err := os.OpenFile(paths.PoolLog(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the pool log: %w", err)
	}
	defer logf.Close() // the child has its own copy
	fmt.Fprintf(logf, "--- %s: started by a client (pid %d)\n", time.Now().Format(time.RFC3339), os.Getpid())
	// It runs elsewhere (poolDir): a home named relative to the client's
	// directory is given to it absolute, so that it serves this one.
	homeEnv, err := home.Env()
	if err != nil {
		return nil, fmt.Errorf("start the pool: %w", err)
	}
	cmd := exec.Command(bin, Args(RecordedConfig(paths))...)
	cmd.Env = os.Environ()
	for k, v := range homeEnv {
		cmd.Env = append(cmd.Env, k+"="+v) // the last of a name wins
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = poolDir()
	cmd.SysProcAttr = detached()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the pool: %w", err)
	}
	p := &started{cmd: cmd, exited: make(chan struct{})}
	// Reap it if it exits while this client lives; once the client exits
	// the pool is the init process's (or a subreaper's) to reap.
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// poolDir is where a pool a client starts runs: the user's home
// directory, as from the login item or a menu, never the client's
// working directory. That is some project's, which may be deleted while
// the pool lives on (a removed git worktree): what the pool runs there
// would fail (npx: ENOENT uv_cwd), and the pool would keep the directory
// busy. Without a home directory, the root.
func poolDir() string {
	if h, err := os.UserHomeDir(); err == nil {
		if fi, err := os.Stat(h); err == nil && fi.IsDir() {
			return h
		}
	}
	return string(filepath.Separator)
}

// Args is how a client starts the pool: the tray app where a desktop
// session can show it, else the headless pool, which stops by itself
// after autostart.idleExit without a session, as the tray does if it
// finds it cannot open the display after all. It runs config, the file
// the last pool ran (RecordedConfig), or with "" the default file.
func Args(config string) []string {
	args := []string{"serve", "--exit-when-idle"}
	if desktopSession() {
		args = []string{"tray", "--started-by-client"}
	}
	if config != "" {
		args = append(args, "--config", config)
	}
	return args
}

// desktopSession reports whether a tray icon could be shown. On Linux
// that needs an X11 or Wayland display in the environment the client
// passed on; macOS and Windows logins always have one.
func desktopSession() bool {
	switch runtime.GOOS {
	case "darwin", "windows":
		return true
	}
	return os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != ""
}

// Binary finds the full switchboard binary: this program when it is that
// binary, else its sibling (the shim is installed next to it), else PATH.
// Clients start shims with a short PATH, so the sibling comes first.
func Binary() (string, error) {
	name := "switchboard"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	if self, err := os.Executable(); err == nil {
		if r, err := filepath.EvalSymlinks(self); err == nil {
			self = r
		}
		if filepath.Base(self) == name {
			return self, nil
		}
		sib := filepath.Join(filepath.Dir(self), name)
		if fi, err := os.Stat(sib); err == nil && !fi.IsDir() {
			return sib, nil
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("find the switchboard binary to start the pool (not next to this program, not on PATH): %w", err)
	}
	return p, nil
}

// held reports whether a live process holds the lock at path. It takes
// the lock for an instant when it is free: a pool taking it at that
// instant waits a moment for it (app's lockInstance) rather than give up.
func held(path string) bool {
	l, err := flock.TryLock(path)
	if err != nil {
		return errors.Is(err, flock.ErrHeld)
	}
	l.Unlock()
	return false
}

// maxLogBytes is the pool log's size past which a start moves it aside.
const maxLogBytes = 8 << 20

func rotate(path string) {
	if fi, err := os.Stat(path); err == nil && fi.Size() > maxLogBytes {
		_ = os.Rename(path, path+".1")
	}
}

// lastLines returns the end of the pool log, for an error message.
func lastLines(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "no log at " + path
	}
	lines := splitLines(data)
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := ""
	for i, l := range lines {
		if i > 0 {
			out += " | "
		}
		out += l
	}
	return out + " (" + path + ")"
}

func splitLines(data []byte) []string {
	var out []string
	start := 0
	for i, c := range data {
		if c == '\n' {
			if i > start {
				out = append(out, string(data[start:i]))
			}
			start = i + 1
		}
	}
	if start < len(data) {
		out = append(out, string(data[start:]))
	}
	return out
}

// DetachedAttr is how a pool process is started apart from its starter:
// its own session (Unix) or process group without a console (Windows).
func DetachedAttr() *syscall.SysProcAttr { return detached() }

// HiddenAttr runs a console program (npm, a binary's version check)
// without opening a console window, which Windows does for each one a
// process with no console of its own starts: the tray app, or a pool a
// client started. Nil on Unix.
func HiddenAttr() *syscall.SysProcAttr { return hidden() }
