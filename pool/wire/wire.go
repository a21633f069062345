// Package wire holds the messages of the pool's local socket: what a
// `switchboard connect` process and the pool say to each other before
// (and, when the client's pipes are attached, instead of) relaying the
// client's bytes, and the layout of the memory they share (the ledger).
// It is its own package, importing next to nothing, so that the connect
// program stays small.
package wire

import "time"

// MaxMessageBytes is the largest JSON-RPC message a pool takes, unless
// told otherwise (pool.Options.MaxMessageBytes): a relaying shim counts
// the messages it relays up to this size.
const MaxMessageBytes = 64 << 20

// Hello is the first line a `switchboard connect` shim sends on the local
// socket, before relaying its client's bytes.
type Hello struct {
	Server string `json:"server"`
	// PID is the shim's PID, shown in status. It is the shim's claim: the
	// pool goes by the socket's word where the platform gives one (Linux,
	// macOS), and by this elsewhere.
	PID int `json:"pid,omitempty"`
	// Attach says the hello comes with two file descriptors (SCM_RIGHTS):
	// the shim's stdin and stdout, its client's pipes. The pool then reads
	// and writes them itself, and the shim only waits: no relay hop each
	// way, no copy, no CPU in the shim.
	Attach bool `json:"attach,omitempty"`
	// Ledger says a third descriptor follows the pipes: the session's
	// ledger (ledger.go), LedgerSize bytes of memory the shim owns, a
	// memfd sealed at that size.
	Ledger bool `json:"ledger,omitempty"`
	// Resumable, from a relaying shim, says it reads control lines in the
	// pool's stream (Control) and can resume the session with another
	// pool: the pool then hands the session back when it stops on purpose.
	Resumable bool `json:"resumable,omitempty"`
	// Resume, set when the pool this shim was attached to went away,
	// names the session the client still has, so that the new pool takes
	// it over instead of starting a new one (the client sees no
	// handshake).
	Resume *Resume `json:"resume,omitempty"`
}

// Resume is a session of an earlier pool, as its shim kept it.
type Resume struct {
	// Run and Session are the earlier pool's Welcome.Run and session id:
	// where its history recorded the requests the client still waits for.
	Run     string `json:"run,omitempty"`
	Session string `json:"session"`
	// Initialize is the params of the client's initialize request (a
	// 2025 client), from the earlier pool's State line; absent for a
	// stateless 2026-07-28 client.
	Initialize []byte `json:"initialize,omitempty"`
	// InitializeID is that initialize request's id, as JSON (State): a
	// Lost entry with it is the initialize, which the new pool answers
	// with its result (the client may not have had it).
	InitializeID string `json:"initializeId,omitempty"`
	// LogLevel and Subscriptions are what the client set up in the
	// session (its logging/setLevel, the resources it holds a
	// subscription to), from the State lines: the new pool takes them up
	// before it reads the client's next message.
	LogLevel      string   `json:"logLevel,omitempty"`
	Subscriptions []string `json:"subscriptions,omitempty"`
	// PendingBytes is the length of the raw bytes that follow the hello
	// line: the Farewell's Pending, the client's input the earlier pool
	// had read and not handled, to be read before the client's pipe.
	PendingBytes int `json:"pendingBytes,omitempty"`
	// Lost are the requests the session's ledger lists as in flight when
	// the earlier pool died: the new pool answers them.
	Lost []Lost `json:"lost,omitempty"`
	// Ledger says Lost comes from a ledger the earlier pool took
	// (Welcome.Ledger), so it is complete: the new pool answers what it
	// lists, and nothing else.
	Ledger bool `json:"ledger,omitempty"`
	// Counted says Lost is a relaying shim's own count: exact about what
	// was answered, not about what reached a child (Written is always
	// set; the history may know better).
	Counted bool `json:"counted,omitempty"`
	// MidLine says the client's output may end inside a line the earlier
	// pool did not finish (LedgerStreamSlot): the new pool ends it first.
	MidLine bool `json:"midLine,omitempty"`
	// Began is when the client's session began, with the first pool the
	// shim was welcomed by, however many it was on since; zero from a shim
	// before it (the pool then knows only when the session reattached).
	Began time.Time `json:"began,omitzero"`
}

// State is a line the pool sends an attached shim while the session
// runs: what the shim must keep to resume the session with another pool.
// Each line says what changed: the client's initialize params, the level
// its logging/setLevel set, or one resource it came to hold a
// subscription to (resources/subscribe) or let go of. A shim keeps the
// subscriptions of URIs up to MaxKeptURI bytes, at most
// MaxKeptSubscriptions of them: the rest are not carried. The initialize
// line comes before the initialize's answer, with the request's id (up
// to LedgerMaxID bytes): a client that has its answer has a shim that
// can resume its session.
type State struct {
	Initialize   []byte  `json:"initialize,omitempty"`
	InitializeID string  `json:"initializeId,omitempty"`
	LogLevel     string  `json:"logLevel,omitempty"`
	Subscribed   *string `json:"subscribed,omitempty"`
	Unsubscribed *string `json:"unsubscribed,omitempty"`
}

// The bounds of the subscriptions a resume carries (State).
const (
	MaxKeptURI           = 1 << 10
	MaxKeptSubscriptions = 1024
)

// Welcome is the pool's one-line answer to a Hello. Error set means the
// connection closes; the shim prints it and exits non-zero, unless
// Stopping is set too. Attached means the pool took the client's pipes;
// otherwise the shim relays.
type Welcome struct {
	Session  string `json:"session,omitempty"`
	Error    string `json:"error,omitempty"`
	Attached bool   `json:"attached,omitempty"`
	// Stopping, with Error, is a pool that took the connection as it
	// began to stop (a quit, a restart, an upgrade in place): the shim
	// finds the next pool, as after EndPoolStopping, rather than fail.
	Stopping bool `json:"stopping,omitempty"`
	// Run identifies the pool's run (its history run id), for a Resume.
	// With Error, it tells a resuming shim whether the pool that refused
	// the session is the one the session was on, or another (restarted).
	Run string `json:"run,omitempty"`
	// Ledger, with Attached, says the pool maps the ledger sent with the
	// hello and records the session's requests there: only then does the
	// shim's Resume say its ledger lists what a dead pool owed.
	Ledger bool `json:"ledger,omitempty"`
	// Ended, with Error, answers a Resume of a session that this pool
	// ended without telling its shim: it evicted a client that stopped
	// reading, or the session's server was removed from the config, and
	// the stream a Farewell would have gone on was full. Error is the
	// Farewell's reason: the shim exits with it, as after that Farewell,
	// and tells its client nothing.
	Ended bool `json:"ended,omitempty"`
	// Busy, with Error, is a pool at its limit of local connections
	// (Options.MaxLocalSessions) that refused the connection before it
	// read the hello: it did not look at the session, and may take it a
	// moment later, once a connection closed. A resuming shim tries again
	// (for a while) rather than end the session; a shim before Busy sees
	// the Error, a refusal, as before.
	Busy bool `json:"busy,omitempty"`
}

// Farewell is the last line on an attached shim's connection (a control
// line of a relaying shim's stream): why the session ended. EndEOF means
// the client closed its stdin (exit 0); EndPoolStopping, a hand-back;
// anything else (the session's server was removed from the config, say)
// the shim prints and exits non-zero. No farewell before the connection
// closes means the pool went away.
type Farewell struct {
	End string `json:"end"`
	// Pending, with EndPoolStopping, is the client's input the pool had
	// read and not handled when it stopped.
	Pending []byte `json:"pending,omitempty"`
}

// EndEOF is a Farewell for a session whose client closed its input.
const EndEOF = "eof"

// EndPoolStopping is a Farewell of a pool that stops on purpose (quit,
// restart, upgrade) and hands the session back: the shim keeps the
// client and resumes the session with the next pool. Everything the
// client was owed has been answered.
const EndPoolStopping = "pool-stopping"

// Control starts a control line in a relayed session's byte stream: a
// line that JSON-RPC never sends (a NUL byte is not JSON), so the shim
// tells it from the client's messages at a glance. From the pool: a State,
// a Drain, or the Farewell of a hand-back. From the shim: ControlDone.
const Control = 0x00

// Drain, from a stopping pool, asks a relaying shim to stop sending on
// this connection and say so (ControlDone): what it sent until then comes
// back in the Farewell's Pending.
type Drain struct {
	Drain bool `json:"drain"`
}

// ControlDone is a relaying shim's last bytes on a connection it was asked
// to drain.
const ControlDone = "\x00\n"
