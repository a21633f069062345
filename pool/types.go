package pool

import (
	"encoding/json"
	"slices"
	"time"
)

// Share says how sessions map onto children.
type Share string

// The sharing modes of a server.
const (
	// ShareShared shares children among sessions that declared the same
	// roots: one child per roots partition (sorted URI set; "no roots" is
	// a partition of its own), so that no session sees another's folders.
	ShareShared Share = "shared"
	// ShareSession runs one child per client session, for stateful servers
	// (browser automation, REPLs) that must not mix clients.
	ShareSession Share = "session"
	// ShareGlobal runs one child whatever the sessions' roots, for servers
	// the user knows ignore them; the child is told of no roots.
	ShareGlobal Share = "global"
)

// ServerConfig is one configured MCP server, already validated and with
// ${VAR} references expanded. The pool never logs or records Env values.
type ServerConfig struct {
	Name    string
	Command string
	Args    []string
	// Shown is the command line as configured, its ${VAR} references
	// unexpanded: what snapshots, events and so history show, since the
	// expanded Command and Args may hold secrets. Empty: Command and Args.
	Shown []string
	Env   map[string]string
	Cwd   string
	Share Share
	// IdleTimeout stops a shared child that has had no session for this
	// long. Zero means the default (10 min); negative disables reaping.
	IdleTimeout time.Duration
	// RequestTimeout bounds each request. Zero means the default (120 s).
	RequestTimeout time.Duration
	// TrustAnnotations lets the pool retry a written tools/call of a tool the
	// child declared readOnlyHint or idempotentHint after the child died.
	TrustAnnotations bool
	Disabled         bool
	// NotStarted, set with Disabled for a server the user did not
	// disable, says why it cannot run (a ${VAR} it needs is not set): what
	// its sessions and requests are refused with.
	NotStarted string
	// Restart overrides the pool's crash-loop policy for this server; zero
	// fields keep the pool's values.
	Restart RestartPolicy
	// Resolver, when set, turns Command into what the children are started
	// as (resolve.go); nil runs Command as written.
	Resolver Resolver
}

// shownLine is the command line snapshots and events show (Shown).
func (c ServerConfig) shownLine() []string {
	if len(c.Shown) > 0 {
		return slices.Clone(c.Shown)
	}
	return append([]string{c.Command}, c.Args...)
}

// shownResolved is a resolved command line (resolve.go) as shown: each
// word that is an expanded word of the configured line is shown as
// configured.
func (c ServerConfig) shownResolved(resolved []string) []string {
	if len(c.Shown) == 0 || resolved == nil {
		return resolved
	}
	as := make(map[string]string, len(c.Shown))
	for i, w := range append([]string{c.Command}, c.Args...) {
		if i < len(c.Shown) && c.Shown[i] != w {
			as[w] = c.Shown[i]
		}
	}
	out := slices.Clone(resolved)
	for i, w := range out {
		if s, ok := as[w]; ok {
			out[i] = s
		}
	}
	return out
}

// unchanged reports whether o is c again, as a reload of the whole file
// hands every server its entry: such a server is not touched (its child,
// its failure, its handshake stay as they are).
// Values compare as they run, defaults applied (def: the pool's restart
// policy): a default written out is no change.
func (c ServerConfig) unchanged(o ServerConfig, def RestartPolicy) bool {
	return c.sameProcess(o) && slices.Equal(c.Shown, o.Shown) && c.idleTimeout() == o.idleTimeout() &&
		c.requestTimeout() == o.requestTimeout() && c.TrustAnnotations == o.TrustAnnotations &&
		c.Disabled == o.Disabled && c.NotStarted == o.NotStarted && c.Restart.or(def) == o.Restart.or(def)
}

// idleTimeout is IdleTimeout as the pool applies it: zero is the default.
func (c ServerConfig) idleTimeout() time.Duration {
	if c.IdleTimeout == 0 {
		return DefaultIdleTimeout
	}
	return c.IdleTimeout
}

// requestTimeout is RequestTimeout as the pool applies it: zero (or
// less) is the default.
func (c ServerConfig) requestTimeout() time.Duration {
	if c.RequestTimeout > 0 {
		return c.RequestTimeout
	}
	return DefaultRequestTimeout
}

// sameProcess reports whether two configs start the same child, so that a
// reload can keep a running child when only pool-side settings changed.
func (c ServerConfig) sameProcess(o ServerConfig) bool {
	if c.Command != o.Command || c.Cwd != o.Cwd || c.Share != o.Share || len(c.Args) != len(o.Args) || len(c.Env) != len(o.Env) ||
		(c.Resolver == nil) != (o.Resolver == nil) {
		return false
	}
	for i := range c.Args {
		if c.Args[i] != o.Args[i] {
			return false
		}
	}
	for k, v := range c.Env {
		if ov, ok := o.Env[k]; !ok || ov != v {
			return false
		}
	}
	return true
}

// Backend states, as shown in status and the UI.
const (
	StateStarting = "starting" // process started, handshake not finished
	StateReady    = "ready"
	StateRestart  = "restarting" // exited, waiting out the backoff
	StateFailed   = "failed"     // crash loop or handshake failure; fails fast
	StateStopping = "stopping"
	StateStopped  = "stopped"
)

// Snapshot is a consistent-enough copy of the pool's live state, taken
// without holding any lock across I/O. The UI and the CLI render only this.
type Snapshot struct {
	TakenAt  time.Time     `json:"takenAt"`
	Servers  []ServerInfo  `json:"servers"`
	Sessions []SessionInfo `json:"sessions"`
	Backends []BackendInfo `json:"backends"`
	InFlight []RequestInfo `json:"inFlight"`
	Counters Counters      `json:"counters"`
}

// ServerInfo is one configured server, running or not.
type ServerInfo struct {
	Name     string `json:"name"`
	Share    Share  `json:"share"`
	Disabled bool   `json:"disabled"`
	// State sums up the server's children, shared (one per roots
	// partition) or its sessions' own (share "session") alike: ready
	// when one of them is; else the state of the newest (starting,
	// restarting, failed, stopping); stopped when it has none; disabled
	// when it is disabled. A failed child is kept, runs no process and
	// fails its requests fast until restarted or its config changes.
	State string `json:"state"`
	// Error is why its newest failed child failed, when one did (beside
	// ready too, when another child is ready).
	Error string `json:"error,omitempty"`
	// StateReason says why the state is what it is, while that is not
	// obvious: the reason of the child whose state it shows, or, before
	// any child, that its package is being resolved (starting).
	StateReason string `json:"stateReason,omitempty"`
	// Draining marks a server removed from the config that still has
	// children finishing the requests in flight (bounded by their
	// timeout): it takes no new sessions or requests, its State is its
	// children's, and it leaves the snapshot once they have stopped.
	Draining bool `json:"draining,omitempty"`
}

// SessionInfo is one connected client session.
type SessionInfo struct {
	ID              string    `json:"id"`
	Server          string    `json:"server"`
	ClientName      string    `json:"clientName"`
	ClientVersion   string    `json:"clientVersion"`
	ProtocolVersion string    `json:"protocolVersion"`
	Transport       string    `json:"transport"`
	ConnectedAt     time.Time `json:"connectedAt"`
	LastActiveAt    time.Time `json:"lastActiveAt"`
	InFlight        int       `json:"inFlight"`
	PID             int       `json:"pid"`
	// Attached means the pool reads and writes the client's own pipes,
	// handed over by its `switchboard connect` shim, which only waits.
	Attached bool `json:"attached,omitempty"`
	// ReattachedFrom is set for a session a client kept across a pool
	// restart: "run R session S" of the earlier pool.
	ReattachedFrom string `json:"reattachedFrom,omitempty"`
	// BeganAt is, for a reattached session, when its client's session
	// began, with the first pool (ConnectedAt is when it reattached to
	// this one); zero when its shim did not say (an older connect).
	BeganAt time.Time `json:"beganAt,omitzero"`
	// Stateless marks a server's stateless HTTP session: the one session
	// that carries the 2026-07-28 requests POSTed to that server, each an
	// exchange of its own (its requests name their clients). It lasts
	// from its first request to a minute after its last.
	Stateless bool `json:"stateless,omitempty"`
}

// Unanswered is a request an earlier pool took from a client and never
// answered.
type Unanswered struct {
	OriginalID string // the client's id, as JSON
	Method     string
	Name       string
	Written    bool // it reached a child, so it may have run
}

// Owed is what the history knows of a session of an earlier run that a
// shim comes back to resume: which process was the session's shim, and
// the requests the session left unanswered. The requests go to that
// process alone: a resume names its session by a run and a session id
// that any local process can learn.
type Owed struct {
	// PeerPID is the session's shim's PID as the pool that ran the
	// session saw it (SessionInfo.PID, the history's sessions.peer_pid);
	// 0 when the history does not know it.
	PeerPID  int
	Requests []Unanswered
}

// MarshalJSON writes startedAt as null while no child has started: the
// key is in every backend, as status --json promises, without the zero
// time.
func (b BackendInfo) MarshalJSON() ([]byte, error) {
	type plain BackendInfo
	var started *time.Time
	if !b.StartedAt.IsZero() {
		started = &b.StartedAt
	}
	return json.Marshal(struct {
		plain
		StartedAt *time.Time `json:"startedAt"`
	}{plain(b), started})
}

// BackendInfo is one child process slot (a child and its restarts).
type BackendInfo struct {
	// ID names this child slot (a partition's, a session's) for the run
	// of the pool: it stays the same across the slot's restarts, and
	// Pool.RestartBackend takes it.
	ID     uint64 `json:"id"`
	Server string `json:"server"`
	// PID is the child's, 0 while there is none (starting, failed).
	PID int `json:"pid"`
	// CarriedOver says the child was started by an earlier pool and
	// handed to this one by an in-place upgrade (Pool.Handover).
	CarriedOver     bool      `json:"carriedOver,omitempty"`
	State           string    `json:"state"`
	Era             string    `json:"era"`
	ProtocolVersion string    `json:"protocolVersion"`
	StartedAt       time.Time `json:"startedAt,omitzero"` // null while no child has started (MarshalJSON)
	Sessions        int       `json:"sessions"`
	Restarts        int       `json:"restarts"`
	InFlight        int       `json:"inFlight"`
	// Command is the configured command line; ResolvedCommand what the
	// child was started as when a resolver changed it (npx -> node), and
	// ResolveNote what the resolution found or why it kept the command.
	Command         []string `json:"command"`
	ResolvedCommand []string `json:"resolvedCommand,omitempty"`
	ResolveNote     string   `json:"resolveNote,omitempty"`
	// StateReason says why the state is what it is, while that is not
	// obvious (starting: resolving the package).
	StateReason string `json:"stateReason,omitempty"`
	LastError   string `json:"lastError,omitempty"`
	// StderrTail is the last lines its current child (while none runs,
	// its last one) wrote to stderr: that child's own, never the lines
	// of one it took the place of.
	StderrTail []string `json:"stderrTail"`
	// Session is set for a child owned by one session (share: session).
	Session string `json:"session,omitempty"`
	// Roots are the roots this child serves: the partition of the
	// sessions that share it. Empty for the "no roots" partition.
	Roots []string `json:"roots,omitempty"`
	// BadLines counts non-JSON lines on the child's stdout.
	BadLines uint64 `json:"badLines"`
	// Orphaned counts responses whose id matched no pending request
	// (usually late answers to cancelled or timed-out requests).
	Orphaned uint64 `json:"orphaned"`
	// DroppedNotifications counts client notifications dropped because
	// the child was not reading what it had been sent (its queue past a
	// session's 1 MiB or all sessions' 16 MiB of notifications).
	DroppedNotifications uint64 `json:"droppedNotifications"`
	// HandshakeWaitMs is how long the child has been waiting to answer
	// the pool's handshake (server/discover, initialize), while it
	// does; nil otherwise. Options.HandshakeTimeout ends the wait.
	HandshakeWaitMs *int64 `json:"handshakeWaitMs,omitempty"`
}

// RequestInfo is one request in flight.
type RequestInfo struct {
	PoolID         uint64    `json:"poolId"`
	Session        string    `json:"session"`
	Server         string    `json:"server"`
	Method         string    `json:"method"`
	Name           string    `json:"name"`
	OriginalID     string    `json:"originalId"`
	PID            int       `json:"pid"`
	ReceivedAt     time.Time `json:"receivedAt"`
	AgeMs          int64     `json:"ageMs"`
	WrittenToChild bool      `json:"writtenToChild"`
	WrittenAt      time.Time `json:"writtenAt,omitzero"`
	// Client is, for a request of a stateless HTTP session (which carries
	// the requests of every 2026-07-28 client of its server), the
	// clientInfo name its own _meta gave.
	Client string `json:"client,omitempty"`
	// StateReason says why a request that is at no child yet waits, when
	// no child is what it waits for: held until its client answers the
	// pool's roots/list (its roots decide its child; PID is then 0). Or
	// its 2026-07-28 child answered it with questions the pool put to its
	// legacy client, whose answers it waits for (PID is the child that
	// asked; the pool id its last round's). Or
	// its child is not reading its input (it has taken none for a second
	// or more): the request is queued behind the one the child has part
	// of ("waiting: …"), or is that one ("being written: …").
	StateReason string `json:"stateReason,omitempty"`
}

// Counters are pool-wide totals since start.
type Counters struct {
	Requests      uint64 `json:"requests"`
	Errors        uint64 `json:"errors"`
	Timeouts      uint64 `json:"timeouts"`
	Cancelled     uint64 `json:"cancelled"`
	Orphaned      uint64 `json:"orphaned"`
	Evicted       uint64 `json:"evicted"`
	ParseErrors   uint64 `json:"parseErrors"`
	DroppedEvents uint64 `json:"droppedEvents"`
}
