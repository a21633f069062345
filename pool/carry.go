package pool

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Carrying children over: an upgrade replaces the pool's program in place
// (exec, same PID), and the running children go on serving under the new
// program without a restart. The old pool hands its sessions back to their
// shims (handback.go), waits for what is in flight, detaches each shared
// child (its pipes' loops stop, the process and the pipes stay) and
// describes it in a Carried; the descriptors survive the exec; the new
// pool's Apply adopts every carried child whose server is configured to
// start the same process, and ends the others.
//
// The PID must stay: Linux's Pdeathsig, which makes every child die with
// the pool however the pool dies, is tied to the thread that forked the
// child. A new process could not inherit that tie; the same process, exec
// from the thread that forked every child (Options.StartOn), keeps it.

// errDetached ends a backend whose child was carried over.
var errDetached = errors.New("handed over to the upgraded switchboard")

// Carried is what an upgrading pool hands to its successor.
type Carried struct {
	// NextID is the next pool request id: a carried child may still
	// answer a request the old pool abandoned, and that id must not be
	// reused for another request.
	NextID   uint64         `json:"nextID"`
	Children []CarriedChild `json:"children"`
}

// CarriedChild is one running child, as the next pool adopts it.
type CarriedChild struct {
	Server string `json:"server"`
	// Process identifies the configured process that started it: a new
	// pool adopts it only for a server configured to start the same one.
	Process string   `json:"process"`
	Roots   []string `json:"roots,omitempty"`
	// Caps are what the pool declared to it: "sampling", "elicitation"
	// (in form mode: older pools wrote it for elicitation in any mode,
	// and always told the child form mode with it), "elicitation.url"
	// (in URL mode).
	Caps    []string  `json:"caps,omitempty"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// Stdin, Stdout and Stderr are descriptors that survive the exec.
	Stdin  int `json:"stdin"`
	Stdout int `json:"stdout"`
	Stderr int `json:"stderr"`
	// Unread is output the old pool had read and not handled.
	Unread    []byte           `json:"unread,omitempty"`
	Handshake CarriedHandshake `json:"handshake"`
	Resolved  []string         `json:"resolved,omitempty"`
	LogLevel  string           `json:"logLevel,omitempty"`
}

// CarriedHandshake is the child's cached answer to the pool's handshake.
type CarriedHandshake struct {
	Era             string          `json:"era"`
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities,omitempty"`
	ServerInfo      json.RawMessage `json:"serverInfo,omitempty"`
	Instructions    string          `json:"instructions,omitempty"`
	Supported       []string        `json:"supported,omitempty"`
	TTLMs           int64           `json:"ttlMs,omitempty"`
	CacheScope      string          `json:"cacheScope,omitempty"`
}

// processKey identifies how a config starts its child.
func processKey(c ServerConfig) string {
	b, _ := json.Marshal(struct {
		Command, Cwd, Share string
		Args                []string
		Env                 map[string]string
		Resolver            bool
	}{c.Command, c.Cwd, string(c.Share), c.Args, c.Env, c.Resolver != nil})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// Handover stops the pool for an in-place upgrade. Like Close, it ends
// every session (attached ones are handed back to their shims) and stops
// every child, except the shared children that are ready: those keep
// running, detached, and are returned for the next pool
// (Options.Carried). The caller keeps the result until it execs, and
// execs from the StartOn thread; Close after Handover does nothing. The
// descriptors in the result are the caller's: an exec passes them on.
func (p *Pool) Handover() (*Carried, error) {
	if p.opts.StartOn == nil {
		return nil, errors.New("children were not started on one thread (Options.StartOn): they cannot outlive an exec")
	}
	sessions, ok := p.beginClose()
	if !ok {
		return nil, ErrPoolClosed
	}
	closeAll(p.handBackSessions(sessions, p.opts.StopGrace), poolClosing)
	out := &Carried{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range p.allServers() {
		for _, b := range s.backends() {
			wg.Go(func() {
				cc, err := b.carry()
				if err != nil {
					p.log.Info("child not carried over", "server", s.name, "pid", b.pid(), "why", err)
					b.stop(errPoolClosing)
					return
				}
				mu.Lock()
				out.Children = append(out.Children, cc)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	p.waitGoroutines()
	p.events.closeRecord()
	out.NextID = p.nextID.Load() + 1
	return out, nil
}

// awaitOwnRequests waits, up to d, while only the pool's own requests are
// in flight: the log level and unsubscribes that closing the sessions
// queued are answered in moments, and a child that owes an answer cannot
// be carried. A client's request in flight ends the wait at once: that
// child is not carried anyway.
func (b *backend) awaitOwnRequests(d time.Duration) {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for b.reqs.count() > 0 && !b.reqs.serving() && time.Now().Before(deadline) {
		select {
		case <-tick.C:
		case <-b.done:
			return
		}
	}
}

// carry detaches the backend's child for the next pool: its loops stop,
// the process and its pipes stay, and the descriptors are made to survive
// an exec.
func (b *backend) carry() (CarriedChild, error) {
	b.awaitOwnRequests(b.p.opts.StopGrace)
	b.mu.Lock()
	c, hs := b.child, b.hs
	ok := c != nil && c.ready && b.state == StateReady && b.owner == nil && !b.draining && b.reqs.count() == 0
	if ok {
		b.carrying = c // the supervisor lets this one run on, and no other (supervise)
	}
	cc := CarriedChild{Server: b.srv.name, Process: processKey(b.cfg), Roots: b.roots, Resolved: b.resolved, LogLevel: b.childLevel}
	b.mu.Unlock()
	if !ok {
		return cc, errors.New("not a ready shared child with nothing in flight")
	}
	close(c.detach)
	now := time.Now()
	_ = c.stdout.SetReadDeadline(now)
	_ = c.stderr.SetReadDeadline(now)
	select {
	case <-c.writerDone:
	case <-time.After(b.p.opts.StopGrace):
		// The writer is blocked in a write the child does not take: it
		// stopped reading, with part of a line on its stdin, and the next
		// pool could not write it a whole one. It is stopped instead
		// (stop closes its stdin, which ends the write).
		return cc, errors.New("it does not read its stdin")
	}
	<-c.stderrDone
	<-c.readerDone
	select {
	case cc.Unread = <-c.leftover:
	default: // the reader had ended (EOF): the child is exiting
	}
	close(b.detachQ)
	<-b.done
	select {
	case <-c.exited:
		return cc, errors.New("it exited")
	default:
	}
	files := []*os.File{c.stdin, c.stdout, c.stderr}
	fds := make([]int, 0, 3)
	for _, f := range files {
		fd, err := inheritable(f)
		if err != nil {
			return cc, err
		}
		fds = append(fds, fd)
	}
	cc.Stdin, cc.Stdout, cc.Stderr = fds[0], fds[1], fds[2]
	cc.PID, cc.Started = c.pid, c.started
	cc.Caps = carriedCaps(b.caps)
	cc.Handshake = CarriedHandshake{Era: hs.era, ProtocolVersion: hs.protocolVersion, Capabilities: hs.capabilities,
		ServerInfo: hs.serverInfo, Instructions: hs.instructions, Supported: hs.supported, TTLMs: hs.ttlMs, CacheScope: hs.cacheScope}
	return cc, nil
}

// inheritable returns a duplicate of f's descriptor that survives an
// exec (a dup has no close-on-exec flag) and closes f: the descriptor now
// belongs to the Carried, not to a File whose finalizer could close it.
func inheritable(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(u uintptr) { fd, derr = dupInheritable(int(u)) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, derr
	}
	f.Close()
	return fd, nil
}

// adoptCarried turns a carried child back into a child of this pool: its
// descriptors get their close-on-exec flag again (the next children must
// not inherit them) and a waiter goroutine.
func adoptCarried(cc CarriedChild) (*child, error) {
	if cc.PID <= 0 {
		return nil, fmt.Errorf("carried child has no pid")
	}
	var files []*os.File
	for _, fd := range []int{cc.Stdin, cc.Stdout, cc.Stderr} {
		if fd < 3 {
			closeFiles(files)
			return nil, fmt.Errorf("carried child %d: bad descriptor %d", cc.PID, fd)
		}
		files = append(files, reopenInherited(fd, fmt.Sprintf("child %d pipe", cc.PID)))
	}
	proc, err := os.FindProcess(cc.PID)
	if err != nil {
		closeFiles(files)
		return nil, fmt.Errorf("carried child %d: %w", cc.PID, err)
	}
	c := newChildState(&child{pid: cc.PID, started: cc.Started, stdin: files[0], stdout: files[1], stderr: files[2],
		unread: cc.Unread, carried: true})
	go func() {
		c.state, c.waitErr = proc.Wait()
		close(c.exited)
	}()
	return c, nil
}

func (cc CarriedChild) handshake() *handshake {
	h := cc.Handshake
	return &handshake{era: h.Era, protocolVersion: h.ProtocolVersion, capabilities: h.Capabilities, serverInfo: h.ServerInfo,
		instructions: h.Instructions, supported: h.Supported, ttlMs: h.TTLMs, cacheScope: h.CacheScope,
		infoMeta: serverInfoMember(h.ServerInfo)}
}

// carriedCaps are c as a CarriedChild's Caps.
func carriedCaps(c clientCaps) []string {
	var caps []string
	if c.sampling {
		caps = append(caps, "sampling")
	}
	if c.elicitationForm {
		caps = append(caps, "elicitation")
	}
	if c.elicitationURL {
		caps = append(caps, "elicitation.url")
	}
	return caps
}

func (cc CarriedChild) caps() clientCaps {
	var c clientCaps
	for _, k := range cc.Caps {
		c.sampling = c.sampling || k == "sampling"
		c.elicitationForm = c.elicitationForm || k == "elicitation"
		c.elicitationURL = c.elicitationURL || k == "elicitation.url"
	}
	return c
}

// adoptCarriedLocked gives a new server the children carried for it: each
// becomes the current backend of its roots partition. It returns the ones
// it could not take, among them a child of roots this pool takes from no
// session (validRootURI), which an earlier pool may have let through: no
// session could join it.
func (s *server) adoptCarriedLocked(ccs []CarriedChild) (rest []CarriedChild) {
	key := processKey(s.cfg)
	for _, cc := range ccs {
		if cc.Server != s.name || cc.Process != key || s.cfg.Share == ShareSession || s.cfg.Disabled ||
			(s.cfg.Share != ShareGlobal && !validRoots(cc.Roots)) {
			rest = append(rest, cc)
			continue
		}
		roots := cc.Roots
		if s.cfg.Share == ShareGlobal {
			roots = nil
		}
		pt := s.partLocked(rootsKey(roots), roots, nil) // the names were the earlier pool's
		if pt.current.Load() != nil {
			rest = append(rest, cc)
			continue
		}
		c, err := adoptCarried(cc)
		if err != nil {
			s.p.log.Warn("a carried child could not be adopted", "server", s.name, "pid", cc.PID, "err", err)
			continue
		}
		b := buildBackend(s, s.cfg, nil, pt.roots, cc.caps(),
			&adoption{child: c, hs: cc.handshake(), logLevel: cc.LogLevel, resolved: cc.Resolved})
		pt.current.Store(b)
		s.armIdleLocked(pt, s.p.clock.Now())
		s.p.wg.Go(b.supervise)
	}
	return rest
}

// endCarried stops carried children no configured server takes: their
// stdin closes, as for any child the pool stops.
func (p *Pool) endCarried(ccs []CarriedChild) {
	for _, cc := range ccs {
		c, err := adoptCarried(cc)
		if err != nil {
			continue
		}
		p.log.Info("stopping a carried child its server no longer starts", "server", cc.Server, "pid", cc.PID)
		p.wg.Go(func() {
			c.shutdown()
			c.stdout.Close()
			c.stderr.Close()
		})
	}
}

// adoptChild makes a carried child the backend's running one, without a
// handshake: it was done with the earlier pool.
func (b *backend) adoptChild(c *child, hs *handshake) (*child, error) {
	b.mu.Lock()
	b.child = c
	b.startedAt = c.started
	b.mu.Unlock()
	cfg := b.config()
	b.log.Info("child carried over", "pid", c.pid)
	b.p.emit(&Event{Kind: EventBackendStarted, Server: cfg.Name, PID: c.pid, ProcessStart: c.started,
		Command: cfg.shownLine(), ResolvedCommand: cfg.shownResolved(b.resolved), Roots: b.roots, Carried: true})
	b.startLoops(c)
	b.becomeReady(c, hs)
	return c, nil
}

// nextChild is the backend's next running child: the carried one first.
func (b *backend) nextChild() (*child, error) {
	if c := b.carried; c != nil {
		b.carried = nil
		return b.adoptChild(c, b.carriedHS)
	}
	return b.startAndHandshake()
}
