package pool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"
)

// child is one running process of a backend. Its pipes are os.Pipe files
// owned by the pool, not exec's, so Wait never closes a pipe under a
// reader and a grandchild holding stdout open cannot hang the pool.
type child struct {
	cmd     *exec.Cmd // nil for a child carried over from an earlier pool (carry.go)
	pid     int
	started time.Time
	stdin   *os.File      // write end; closed by the supervisor
	direct  *directWriter // stdin written without waiting, by a sender when nothing is queued (backend.send); nil: never
	stdout  *os.File      // read end; closed by the supervisor
	output  io.Reader     // stdout as readLoop reads it: raw reads when it is non-blocking (newRawReader)
	stderr  *os.File      // read end; closed by the supervisor
	unread  []byte        // output an earlier pool had read and not handled, read before stdout
	carried bool          // carried over from an earlier pool across an upgrade

	exited     chan struct{}    // closed by run after Wait returned
	state      *os.ProcessState // set before exited is closed; nil if it could not be waited for
	waitErr    error            // set before exited is closed
	readerDone chan struct{}    // closed by readLoop
	outEnded   chan struct{}    // closed by readLoop when stdout ends (EOF, a read error), not for a detach
	writerDone chan struct{}    // closed by writeLoop
	stderrDone chan struct{}    // closed by stderrLoop
	errTail    *ring            // the last lines it wrote to stderr, its own (stderrLoop fills it)
	detach     chan struct{}    // closed to stop the loops without touching the process (carry.go)
	leftover   chan []byte      // cap 1: readLoop's unhandled output when it stops for a detach

	ready  bool   // handshake done; guarded by backend.mu
	modern bool   // its handshake said 2026-07-28; set with ready
	ended  string // why the pool ended it while it ran (runUntilExit), for describeExit; supervisor only
	// Guarded by backend.mu (roots.go): clients' lines wait for the child
	// to have its roots (awaitRoots); it asked for them since it was last
	// told them (answerRootsList, tellRootsChanged); the timer that ends
	// the wait, and which wait it ends; when it was initialized with roots
	// (zero: its asks teach nothing); it was waited for and did not ask in
	// time (rootsWaited); its clients' lines wait for its asks at all;
	// how long they wait after an ask (rootsSettleFor).
	rootsWait   bool
	askedRoots  bool
	rootsTimer  *time.Timer
	rootsRound  uint32
	rootsSince  time.Time
	rootsMissed bool
	rootsHeld   bool
	rootsSettle time.Duration
}

// newChildState makes the channels of a child.
func newChildState(c *child) *child {
	c.exited, c.readerDone, c.outEnded = make(chan struct{}), make(chan struct{}), make(chan struct{})
	c.writerDone, c.stderrDone = make(chan struct{}), make(chan struct{})
	c.detach, c.leftover = make(chan struct{}), make(chan []byte, 1)
	c.errTail = newRing(stderrTailLines)
	c.direct = newDirectWriter(c.stdin)
	c.output = newRawReader(c.stdout)
	return c
}

// StartOn runs start, which forks a child, on the OS thread that all
// children must belong to. Linux's Pdeathsig kills a child when the thread
// that forked it exits, and an upgrade replaces the program in place
// (exec) from one thread: children forked on that thread outlive the
// exec, any other thread's do not. nil: each child's waiter locks a thread
// of its own for the child's life (children die with any exec).
type StartOn func(start func())

// environ builds the child's environment: the app's, plus the configured
// values. The values are never logged.
// ServerEnv names, in each child's environment, the server it runs.
const ServerEnv = "SWITCHBOARD_SERVER"

func environ(extra map[string]string) []string {
	env := os.Environ()
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// startChild starts cfg's command. The goroutine that starts it stays
// locked to its OS thread until the child has been waited for, which is
// what makes Linux's Pdeathsig mean "when the pool dies".
func startChild(cfg ServerConfig, env []string, on StartOn) (*child, error) {
	if cfg.Command == "" {
		return nil, errors.New("no command configured")
	}
	// Checked here: a failed chdir reads as the command's failure
	// ("fork/exec CMD: no such file or directory").
	if err := checkDir(cfg.Cwd); err != nil {
		return nil, err
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = append(append(environ(cfg.Env), env...), ServerEnv+"="+cfg.Name)
	cmd.Dir = cfg.Cwd
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = sysProcAttr()

	c := newChildState(&child{cmd: cmd, stdin: inW, stdout: outR, stderr: errR})
	started := make(chan error, 1)
	if on != nil {
		go c.runOn(on, started)
	} else {
		go c.run(started)
	}
	if err := <-started; err != nil {
		closeAll()
		switch {
		case errors.Is(err, exec.ErrNotFound):
			return nil, notOnPath(cfg.Command)
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
			// No process ran: starting it again cannot help.
			return nil, &cannotStartError{msg: err.Error()}
		}
		return nil, err
	}
	// The child has its own copies of its ends.
	inR.Close()
	outW.Close()
	errW.Close()
	return c, nil
}

// cannotStartError is why no child of a server can start as configured
// (its working directory or its command is missing, or may not be run):
// no process ran, starting it again cannot help
// until the user acts, so the server fails at once (backend.noteCrash)
// and is tried again when restarted or reconfigured.
type cannotStartError struct{ msg string }

func (e *cannotStartError) Error() string { return e.msg }

// checkDir says why dir cannot be a child's working directory, if it
// cannot.
func checkDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &cannotStartError{msg: "working directory " + dir + " does not exist"}
	case err != nil:
		return &cannotStartError{msg: fmt.Sprintf("working directory %s cannot be used: %v", dir, err)}
	case !fi.IsDir():
		return &cannotStartError{msg: "working directory " + dir + " is not a directory"}
	}
	return nil
}

// notOnPath is a command exec did not find on the pool's PATH. A pool
// that a client started has the client's PATH, often a short one (GUI
// clients), and keeps it for its life.
// No process ran: it is a cannotStartError, not a crash.
func notOnPath(command string) error {
	path := os.Getenv("PATH")
	if path == "" {
		path = "empty"
	}
	return &cannotStartError{msg: fmt.Sprintf("command %q is not on Switchboard's PATH (%s): write its absolute path in the config, "+
		"or start Switchboard with your shell's PATH (for a pool that a client starts, `switchboard setup CLIENT` "+
		"puts it in the client's entry) and restart Switchboard", command, path)}
}

// run starts the process and waits for it, on one locked OS thread (the
// thread whose exit would kill the child, see StartOn). It exits when the
// process has exited.
func (c *child) run(started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c.runOn(func(start func()) { start() }, started)
}

// runOn starts the process on the thread of on and waits for it here.
func (c *child) runOn(on StartOn, started chan<- error) {
	var err error
	on(func() { err = c.cmd.Start() })
	if err != nil {
		started <- err
		return
	}
	c.pid = c.cmd.Process.Pid
	if err := adopt(c.pid); err != nil {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
		started <- err
		return
	}
	c.started = time.Now()
	started <- nil
	c.waitErr = c.cmd.Wait()
	c.state = c.cmd.ProcessState
	release(c.pid)
	close(c.exited)
}

// RunHelper runs cmd, a short-lived helper of the pool's (npm fetching a
// package for a Resolver), to its end as the pool runs a child: in a
// process group of its own (a Job Object on Windows) with no console
// window, killed with the pool (Linux's Pdeathsig, from a thread locked
// until it has been waited for). If ctx ends first its whole group is
// asked to end (SIGTERM, twice), and killed if it has not within
// sigtermGrace: npm removes the lock it holds on a cache folder when it
// is terminated, never when it is killed, and the next npm would wait
// that lock out. Once it has exited, what it left in its group is killed.
// It replaces cmd's SysProcAttr.
func RunHelper(ctx context.Context, cmd *exec.Cmd) error {
	cmd.SysProcAttr = sysProcAttr()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		done <- runHelper(ctx, cmd)
	}()
	return <-done
}

// runHelper is RunHelper on its locked thread.
func runHelper(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	if err := adopt(pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	exited, stopped := make(chan struct{}), make(chan struct{})
	stop := context.AfterFunc(ctx, func() { // ends once the helper exited, or killed
		defer close(stopped)
		// The group: the helper and what it started. In the middle of an
		// install npm takes the first SIGTERM to roll it back, and exits
		// only once its downloads end; it exits at the second.
		terminateGroup(pid)
		if closedWithin(exited, helperTermAgain) {
			return
		}
		terminateGroup(pid)
		if !closedWithin(exited, sigtermGrace) {
			killOrphans(pid)
		}
	})
	err := cmd.Wait()
	close(exited)
	if !stop() {
		<-stopped // it ran: its end is this function's
	}
	release(pid)
	killOrphans(pid)
	return err
}

// helperTermAgain is how long a helper has to end at the first SIGTERM
// before the second (RunHelper).
const helperTermAgain = 500 * time.Millisecond

// closedWithin reports whether ch is closed within d.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// exitCode is the child's exit code, or -1 if it was killed by a signal.
func (c *child) exitCode() int {
	if c.state == nil {
		return -1
	}
	return c.state.ExitCode()
}

// describeExit says how the child ended, for logs and errors.
func (c *child) describeExit() string {
	if c.ended != "" {
		return c.ended + "; " + c.exitStatus()
	}
	return c.exitStatus()
}

// exitStatus is the process's own end: its exit status or signal.
func (c *child) exitStatus() string {
	if c.state == nil {
		if c.waitErr != nil {
			return c.waitErr.Error()
		}
		return "not started"
	}
	return c.state.String()
}

// shutdown follows the MCP stdio rule: close stdin and wait; SIGTERM the
// process group and wait; SIGKILL the process group. It returns when the
// child has exited.
func (c *child) shutdown() {
	c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(stdinGrace):
		_ = terminate(c.pid)
		select {
		case <-c.exited:
		case <-time.After(sigtermGrace):
			_ = kill(c.pid)
			<-c.exited
		}
	}
	// Grandchildren that outlived the leader still share its group.
	killOrphans(c.pid)
}

// readersGrace is how long the pool waits for a child's readers to read
// what the child left in its pipes, once it is gone or, for the message
// of a failed handshake, once it exited. A grandchild that holds a pipe
// open keeps the reader from the pipe's end: it delays the pool no longer
// than this.
const readersGrace = 500 * time.Millisecond

// closeReaders makes the reader goroutines return once the process is
// gone: output already in the pipes gets a moment to be read first.
func (c *child) closeReaders() {
	t := time.NewTimer(readersGrace)
	defer t.Stop()
	for _, done := range []chan struct{}{c.readerDone, c.stderrDone} {
		select {
		case <-done:
		case <-t.C:
		}
	}
	c.stdout.Close()
	c.stderr.Close()
	<-c.readerDone
	<-c.stderrDone
}

// awaitStderr waits, for readersGrace at most, until the child's stderr
// has been read to its end, so that its tail holds what it wrote last: a
// child that writes and exits at once is seen to exit before its reader
// has read it. The caller holds no lock.
func (c *child) awaitStderr() { closedWithin(c.stderrDone, readersGrace) }

// stderrTailLines is how many of a child's last stderr lines it keeps.
const stderrTailLines = 64

// maxStderrLine bounds a stderr line as the pool reads it: the start of a
// longer one is kept, marked cut, and the rest of it skipped.
const maxStderrLine = 64 << 10

// stderrLoop copies the child's stderr into its tail. It exits at EOF or
// when closeReaders closes the pipe.
func stderrLoop(c *child, logLine func(string)) {
	defer close(c.stderrDone)
	if testHookStderrReader != nil {
		testHookStderrReader(c)
	}
	br := bufio.NewReaderSize(c.stderr, maxStderrLine)
	for {
		b, err := br.ReadSlice('\n')
		if len(b) > 0 {
			line := strings.TrimRight(strings.TrimSuffix(string(b), "\n"), "\r")
			if errors.Is(err, bufio.ErrBufferFull) {
				// An overlong line (a logged payload): the cause of a
				// crash is often in the lines after it.
				line += " … (cut: over 64 KiB)"
				err = skipLine(br)
			}
			c.errTail.add(line)
			logLine(line)
		}
		if err != nil {
			return // EOF, closed, or a detach's deadline (the next pool reads on)
		}
	}
}

// testHookStderrReader, when set, runs as a child's stderr reader starts,
// before its first read.
var testHookStderrReader func(*child)

// skipLine reads up to and including the next newline. It returns nil
// when it found one.
func skipLine(br *bufio.Reader) error {
	for {
		_, err := br.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}
