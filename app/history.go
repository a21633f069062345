package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/launch"
	"github.com/switchboard-mcp/switchboard/app/leaks"
	"github.com/switchboard-mcp/switchboard/app/version"
	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/store"
)

// historyState is a running instance's history database, or why there
// is none. The pool runs either way. With history off the database still
// records the children the pool starts (leak detection's one record of
// them), and nothing else. A nil *historyState records nothing.
//
// History can be switched off while the pool runs (a config that turns
// it off applies at once), and on again when the database was opened to
// record requests: with history on, or with no config loaded.
type historyState struct {
	// st is the database, nil while unavailable: it may open after the
	// start when another program held it locked then (retryOpen).
	st    atomic.Pointer[store.Store]
	errMu sync.Mutex
	err   error // why it could not be opened (errMu)
	// opened are the settings st was opened with: its capture of
	// payloads runs until a restart; its limits (retainDays, maxRows)
	// follow the config that loads (limits).
	opened config.History
	// switchable: st was opened to record requests, so that they can be
	// recorded or not as the config says. Opened with history off, it
	// records children only: switching history on takes a restart.
	switchable bool

	off atomic.Pointer[string] // why requests are not recorded now; nil while they are

	// limitsMu guards limits, the history settings of the config that
	// last loaded (nil: none has), whose retainDays and maxRows the
	// database keeps to, from a reload or, when it opens later
	// (retryOpen), from then. Held while the store takes them
	// (Store.SetLimits, which does no I/O), so that the last set wins.
	limitsMu sync.Mutex
	limits   *config.History

	recMu    sync.Mutex          // guards recorded; taken by the pool's recorder only, never across I/O
	recorded map[uint64]struct{} // requests recorded as received whose end is to be recorded

	// While another program holds the database locked at the start,
	// retryOpen (its goroutine, which close stops and waits for) opens it
	// again: opening says one was started, so that the pool is given a
	// recorder; the events that come before it opens are counted in
	// droppedOpening.
	opening        bool
	captureOpening int // the payload bytes the database will capture (captureBytes)
	droppedOpening atomic.Uint64
	stopOpening    chan struct{} // closed by close
	openingDone    chan struct{} // closed by retryOpen as it returns
	closeOnce      sync.Once

	// Once the database opens, sweepGoneChildren closes the records of
	// earlier runs' children that are gone, on a goroutine of its own:
	// close cancels sweepCtx, and waits for sweeps, before it closes the
	// database. Both are set by openHistory.
	sweepCtx    context.Context
	sweepCancel context.CancelFunc
	sweeps      sync.WaitGroup
}

// Why requests are not recorded (historyState.off).
var (
	historyOffInConfig    = "history is switched off in the config (history.disabled)"
	historyOffUntilLoaded = "history is off until the config file loads: it may switch history off"
)

// openHistory opens the history database for a running instance, as h
// says; h nil means its settings are not known: no config loaded (a
// broken file, nothing handed over), and the file's history section does
// not read either (config.Error.History). The database then keeps every
// row until a config loads (the file's retention and cap are not known;
// the first config that loads sets them, apply), captures no payload,
// and records no request until a config with history on loads: the user
// may have switched it off. When it cannot be opened (a newer or corrupt
// file, another instance holds it), it logs and returns a state that
// records nothing and reports the error.
func openHistory(path string, h *config.History, log *slog.Logger) *historyState {
	hs := &historyState{recorded: map[uint64]struct{}{}}
	hs.sweepCtx, hs.sweepCancel = context.WithCancel(context.Background())
	switch {
	case h == nil:
		hs.opened = config.History{RetainDays: -1, MaxRows: -1}
		hs.off.Store(&historyOffUntilLoaded)
	case h.Disabled:
		hs.opened = *h
		hs.off.Store(&historyOffInConfig)
	default:
		hs.opened = *h
	}
	o := hs.opened
	hs.switchable = !o.Disabled
	opts := &store.Options{RetainDays: o.RetainDays, MaxRows: o.MaxRows, ChildrenOnly: o.Disabled,
		CapturePayloads: o.CapturePayloads && !o.Disabled, CaptureBytes: o.CaptureBytes, Version: version.Version, Logger: log,
		HeartbeatInterval: historyHeartbeat(log)}
	st, err := openStore(path, opts, log)
	switch {
	case err == nil:
		hs.st.Store(st)
		hs.sweepGoneChildren(st, log)
	case store.IsBusy(err):
		log.Warn("another program holds the history database locked: recording from when it lets go (opening it again until then); events meanwhile are dropped, and children started meanwhile are found by their run marker only", "err", err)
		hs.err = openingError(err)
		hs.opening = true
		if opts.CapturePayloads {
			hs.captureOpening = cmp.Or(max(opts.CaptureBytes, 0), store.DefaultCaptureBytes)
		}
		hs.stopOpening, hs.openingDone = make(chan struct{}), make(chan struct{})
		go hs.retryOpen(path, opts, log)
	default:
		log.Warn("running without the history database: no request history, and children this run leaves behind are found by their run marker only", "err", err)
		hs.err = err
	}
	return hs
}

// openStore opens the history database at path. A damaged one must not
// cost the user their history from now on: it is kept aside for
// inspection and a fresh one starts.
func openStore(path string, opts *store.Options, log *slog.Logger) (*store.Store, error) {
	st, err := store.Open(path, opts)
	if errors.Is(err, store.ErrCorrupt) {
		aside, merr := store.MoveAside(path, time.Now())
		if merr == nil {
			log.Error("the request history was damaged: moved it aside and started a fresh one",
				"damaged", aside, "err", err)
			st, err = store.Open(path, opts)
		}
	}
	return st, err
}

// openingError is what status says while the database, locked by another
// program (err), is opened again.
func openingError(err error) error {
	return fmt.Errorf("%w (opening it again until that program lets go; events until then are dropped)", err)
}

// How long retryOpen waits before it opens the database again: first,
// then doubling up to the last. Each try itself waits for the lock a few
// seconds (the store's busy timeout).
var (
	historyRetryFirst = time.Second
	historyRetryMax   = time.Minute
)

// retryOpen opens the history database again, with backoff, while another
// program holds it locked, until it opens, fails otherwise, or close stops
// it; once it opens, events are recorded as usual. It is the goroutine of
// a historyState opening: close waits for it, and closes a database it
// opened.
func (h *historyState) retryOpen(path string, opts *store.Options, log *slog.Logger) {
	defer close(h.openingDone)
	wait := time.NewTimer(historyRetryFirst)
	defer wait.Stop()
	next := historyRetryFirst
	for {
		select {
		case <-h.stopOpening:
			return
		case <-wait.C:
		}
		st, err := openStore(path, opts, log)
		if err == nil {
			h.setErr(nil)
			h.st.Store(st)
			h.sweepGoneChildren(st, log)
			h.setLimits(nil) // a config that loaded meanwhile
			log.Info("the history database opened: recording requests from now on", "path", path,
				"droppedMeanwhile", h.droppedOpening.Load())
			return
		}
		if !store.IsBusy(err) {
			log.Warn("running without the history database: no request history, and children this run leaves behind are found by their run marker only", "err", err)
			h.setErr(err)
			return
		}
		h.setErr(openingError(err))
		next = min(2*next, historyRetryMax)
		wait.Reset(next)
	}
}

// setErr records why the database is not open; nil once it is.
func (h *historyState) setErr(err error) {
	h.errMu.Lock()
	h.err = err
	h.errMu.Unlock()
}

// openErr is why the database is not open.
func (h *historyState) openErr() error {
	h.errMu.Lock()
	defer h.errMu.Unlock()
	return h.err
}

// db is the database; nil while it is not open.
func (h *historyState) db() *store.Store {
	if h == nil {
		return nil
	}
	return h.st.Load()
}

// HistoryHeartbeatEnv, a Go duration, is how often the running pool
// records in the history that it is alive while requests are in flight
// (store.Options.HeartbeatInterval): a crash's abandoned requests are
// aged up to about when it died. Unset, store.DefaultHeartbeatInterval.
const HistoryHeartbeatEnv = "SWITCHBOARD_HISTORY_HEARTBEAT"

// historyHeartbeat is HistoryHeartbeatEnv's interval; 0 (the default)
// when unset, or when it is no positive duration, which it logs.
func historyHeartbeat(log *slog.Logger) time.Duration {
	v, ok := os.LookupEnv(HistoryHeartbeatEnv)
	if !ok || v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		log.Warn("ignoring "+HistoryHeartbeatEnv+": want a positive duration such as 10s",
			"value", v, "default", store.DefaultHeartbeatInterval)
		return 0
	}
	return d
}

// offReason says why requests are not recorded now; "" while they are.
func (h *historyState) offReason() string {
	if h == nil {
		return ""
	}
	if why := h.off.Load(); why != nil {
		return *why
	}
	return ""
}

// requests is the store when it records requests: history on and open.
func (h *historyState) requests() *store.Store {
	if h == nil || h.off.Load() != nil {
		return nil
	}
	return h.st.Load()
}

// record is pool.Options.Record: nil when nothing records (nor will:
// the database is neither open nor being opened).
func (h *historyState) record() func(pool.Event) {
	switch {
	case h == nil || h.db() == nil && !h.opening:
		return nil
	case !h.switchable:
		return h.put // children only, for good
	}
	return h.recordSwitched
}

// put hands e to the database; while it is not open yet, e is dropped
// and counted.
func (h *historyState) put(e pool.Event) {
	if st := h.st.Load(); st != nil {
		st.Record(e)
		return
	}
	h.droppedOpening.Add(1)
}

// recordSwitched is the store's Record, with requests and sessions held
// back while history is off. A request recorded as received has its end
// recorded too, whatever history is by then, so that no row is left in
// flight, but nothing it carries once history is off (its answer may be
// what the user typed after switching it off); one received while
// history was off has no row at all.
func (h *historyState) recordSwitched(e pool.Event) {
	if h.off.Load() != nil {
		e.Payload = nil
	}
	switch e.Kind {
	case pool.EventRequestReceived:
		if h.off.Load() != nil {
			return
		}
		h.recMu.Lock()
		h.recorded[e.PoolID] = struct{}{}
		h.recMu.Unlock()
	case pool.EventRequestDone:
		h.recMu.Lock()
		_, ok := h.recorded[e.PoolID]
		delete(h.recorded, e.PoolID)
		h.recMu.Unlock()
		if !ok {
			return
		}
	case pool.EventSessionOpened, pool.EventOrphan:
		if h.off.Load() != nil {
			return
		}
	}
	h.put(e) // written requests and closed sessions it does not know, it leaves alone
}

// switchOff stops recording requests, as a config that switches history
// off does, for a file that does not load but says so (config.Error's
// HistoryOff): the next file that loads decides again.
func (h *historyState) switchOff() {
	if h != nil {
		h.off.Store(&historyOffInConfig)
	}
}

// setLimits makes the database keep to the retention and the row cap
// of c, the history settings of a config that loaded; c nil, to those
// of the last config that loaded, if any (the database has just opened).
func (h *historyState) setLimits(c *config.History) {
	h.limitsMu.Lock()
	defer h.limitsMu.Unlock()
	if c != nil {
		h.limits = c
	}
	if st := h.db(); st != nil && h.limits != nil {
		st.SetLimits(h.limits.RetainDays, h.limits.MaxRows)
	}
}

// apply makes the history follow h, the history settings of a config
// that loaded, as far as that can be done while the pool runs: switching
// it off always; switching it on when the database was opened to record
// requests; its retention and row cap always (setLimits). It returns the
// settings that differ from what runs and take a restart (config.Diff's
// names).
func (h *historyState) apply(c config.History) (restart []string) {
	if h == nil {
		return nil
	}
	h.setLimits(&c)
	switch {
	case c.Disabled:
		h.switchOff()
	case h.switchable:
		h.off.Store(nil)
	case h.db() != nil:
		restart = append(restart, "history.disabled")
	}
	if h.db() == nil {
		return restart // nothing runs that the settings could change
	}
	// As they run: a setting written out at its default is no change.
	o, c := h.opened.Effective(), c.Effective()
	if c.CapturePayloads != o.CapturePayloads {
		restart = append(restart, "history.capturePayloads")
	} else if c.CapturePayloads && c.CaptureBytes != o.CaptureBytes {
		restart = append(restart, "history.captureBytes")
	}
	return restart
}

// configReloaded records a reload of the config file (err: why it was
// not applied), for the waterfall over a past window.
func (h *historyState) configReloaded(at time.Time, changes string, err error) {
	st := h.requests()
	if st == nil {
		return
	}
	c := store.ConfigReload{At: at, Changes: changes}
	if err != nil {
		c.Err = err.Error()
	}
	st.RecordConfigReload(c)
}

// captureBytes is pool.Options.CapturePayloads.
// While the database is being opened, it is what the database will
// capture once open: the pool's setting is read at its start only.
func (h *historyState) captureBytes() int {
	if st := h.requests(); st != nil {
		return st.CaptureBytes()
	}
	if h != nil && h.opening && h.off.Load() == nil {
		return h.captureOpening
	}
	return 0
}

func (h *historyState) status() control.HistoryStatus {
	var hs control.HistoryStatus
	if h == nil {
		return hs
	}
	err := h.openErr()
	hs.Dropped = h.droppedOpening.Load()
	if st := h.requests(); st != nil {
		hs.Enabled, hs.Path = true, st.Path()
		hs.Dropped += st.Dropped()
		hs.Journaled, hs.JournaledWritten = st.Journaled()
		if jerr := st.JournalErr(); jerr != nil {
			msg := jerr.Error()
			hs.JournalError = &msg
		}
		if rerr := st.Repaired(); rerr != nil {
			msg := rerr.Error()
			hs.Repaired = &msg
		}
		err = st.Err()
	} else if why := h.off.Load(); why == &historyOffUntilLoaded {
		if err == nil {
			err = errors.New(*why) // not by choice: say why
		}
	} else if why != nil {
		err = nil // off by choice; the children's record is not the history
	}
	if err != nil {
		msg := err.Error()
		hs.Error = &msg
	}
	return hs
}

// close stops opening the database, if it was, and closing the records
// of gone children, then flushes and ends the run; call it after the pool
// has closed, so that the pool's last events are recorded.
func (h *historyState) close() error {
	if h == nil {
		return nil
	}
	h.closeOnce.Do(func() {
		if h.opening {
			close(h.stopOpening)
			<-h.openingDone
		}
		if h.sweepCancel != nil {
			h.sweepCancel()
		}
		h.sweeps.Wait()
	})
	if st := h.db(); st != nil {
		return st.Close()
	}
	return nil
}

// leakSource gives leak detection the children that earlier runs recorded
// and never saw exit; nil without a database.
func (h *historyState) leakSource() leaks.Source {
	if st := h.db(); st != nil {
		return st
	}
	return nil
}

// HistoryEntry is one request as `switchboard history --json` and
// `switchboard hangs --json` print it. The keys are a stable interface
// (README, "JSON output"): timestamps are RFC 3339, absent ones null.
type HistoryEntry struct {
	Run        int64  `json:"run"`    // the app run that received it (0: unknown)
	PoolID     uint64 `json:"poolId"` // the pool's id for it within the run
	Server     string `json:"server"`
	Session    string `json:"session"`
	Method     string `json:"method"`
	Name       string `json:"name"` // tool, prompt or resource
	OriginalID string `json:"originalId"`
	// Status is ok, error, timeout, cancelled, failed, orphaned,
	// in-flight or abandoned.
	Status     string     `json:"status"`
	ReceivedAt time.Time  `json:"receivedAt"`
	WrittenAt  *time.Time `json:"writtenAt"`
	AnsweredAt *time.Time `json:"answeredAt"`
	// DurationMs is received to answered; null while unanswered.
	DurationMs *float64 `json:"durationMs"`
	// AgeMs is how long an unanswered request has waited (an abandoned
	// one until its run ended); absent once answered.
	AgeMs *int64 `json:"ageMs,omitempty"`
	// WrittenToChild says the request's bytes reached the child: a
	// side-effecting call may have executed.
	WrittenToChild bool `json:"writtenToChild"`
	PID            int  `json:"pid"` // the child that had it; 0 if none
	// Abandoned: its run ended (or crashed) before an answer.
	Abandoned bool    `json:"abandoned"`
	Error     *string `json:"error"`
	ErrorCode int     `json:"errorCode,omitempty"`
	// Live: read from the running pool rather than from the history.
	Live            bool   `json:"live"`
	RequestBytes    int    `json:"requestBytes,omitempty"`
	ResponseBytes   int    `json:"responseBytes,omitempty"`
	RequestPayload  string `json:"requestPayload,omitempty"`
	ResponsePayload string `json:"responsePayload,omitempty"`
}

// HistoryQuery filters `switchboard history`. Zero fields do not filter.
type HistoryQuery struct {
	// Session ids are numbered from s1 again each run: Run tells them
	// apart. Status is one of HistoryStatuses.
	Server, Session, Status, Method string
	// Run keeps the requests of one run (HistoryEntry.Run).
	Run int64
	// Since keeps requests received within this long before now.
	Since time.Duration
	// Limit is the number of requests, newest first. Default 100.
	Limit int
}

// HistoryStatuses are the statuses a recorded request can have, which
// HistoryQuery.Status filters by.
func HistoryStatuses() []string { return store.Statuses() }

// History reads the request history, newest first, from the database
// (read-only: it works while the pool runs and when it does not). No
// database yet means no requests. notes, for stderr, say when a running
// pool is not recording what the database shows (recordingNote); it is
// asked for no longer than recordingAsk, so that a stuck pool does not
// hold up the history a hang is looked into with.
func History(ctx context.Context, q HistoryQuery) (entries []HistoryEntry, notes []string, err error) {
	paths, err := ResolvePaths()
	if err != nil {
		return nil, nil, err
	}
	askCtx, cancel := context.WithTimeout(ctx, recordingAsk)
	if live, err := FetchStatus(askCtx); err == nil {
		if n := recordingNote(live.History, paths.History); n != "" {
			notes = append(notes, n)
		}
	}
	cancel()
	st, err := store.OpenReadOnly(paths.History)
	if errors.Is(err, fs.ErrNotExist) {
		return []HistoryEntry{}, notes, nil
	}
	if err != nil {
		return nil, notes, err
	}
	defer st.Close()
	now := time.Now()
	f := store.Filter{Server: q.Server, Session: q.Session, Status: q.Status, Method: q.Method, Run: q.Run, Limit: q.Limit}
	if q.Since > 0 {
		f.Since = now.Add(-q.Since)
	}
	reqs, err := st.Requests(ctx, f)
	if err != nil {
		return nil, notes, err
	}
	out := make([]HistoryEntry, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, entryOf(r, now))
	}
	return out, notes, nil
}

// recordingAsk bounds how long `history` asks the running pool whether
// it records.
const recordingAsk = 2 * time.Second

// recordingNote says, for stderr, that the running pool's history status
// h does not match the database at read: it records nothing (switched
// off, or its file could not be opened), its writes fail, or it records
// into another file. "" when it records into read.
func recordingNote(h control.HistoryStatus, read string) string {
	switch {
	case !h.Enabled && h.Error != nil:
		return "the running Switchboard is not recording history (" + *h.Error + "): what is shown was recorded before"
	case !h.Enabled:
		return "the running Switchboard records no history (history.disabled in its config): what is shown was recorded before"
	case h.Error != nil:
		return "the running Switchboard's history writes fail (" + *h.Error + "): its latest requests may be missing"
	case h.Path != "" && h.Path != read:
		return "the running Switchboard records into " + h.Path + ", not " + read
	}
	return ""
}

// hangThreshold is the hangThreshold of the config at path; set says
// the file sets one, else it is 30s.
func hangThreshold(path string) (d time.Duration, set bool) {
	data, err := config.ReadFile(path)
	if err != nil {
		return config.DefaultHangThreshold, false
	}
	f, err := config.Decode(data)
	if err != nil || f.HangThreshold == "" {
		return config.DefaultHangThreshold, false
	}
	return f.Hang(), true
}

// Hangs lists requests in flight for at least over, oldest first: those
// of the running pool (live, from its control API) and those that earlier
// runs abandoned (from the history). Without a running pool it reads the
// history only; without a history, the pool only. notes say what could
// not be read, for stderr.
func Hangs(ctx context.Context, over time.Duration) (entries []HistoryEntry, notes []string, err error) {
	entries, _, notes, err = hangs(ctx, &over)
	return entries, notes, err
}

// HangsOverThreshold is Hangs over the hangThreshold of the running
// pool's config (of the config at the default location when none
// answers), which it returns.
func HangsOverThreshold(ctx context.Context) (entries []HistoryEntry, threshold time.Duration, notes []string, err error) {
	return hangs(ctx, nil)
}

// hangs is Hangs over over, or with over nil HangsOverThreshold. The pool
// is asked once, within the question's bound, for both the config whose
// threshold applies and the requests: one that does not answer is not
// waited on twice.
func hangs(ctx context.Context, over *time.Duration) (entries []HistoryEntry, threshold time.Duration, notes []string, err error) {
	paths, err := ResolvePaths()
	if err != nil {
		return nil, 0, nil, err
	}
	var live *control.Status
	st, serr := FetchStatus(ctx)
	switch {
	case serr == nil:
		live = &st
		if n := recordingNote(st.History, paths.History); n != "" {
			notes = append(notes, n)
		}
	case errors.Is(serr, ErrNoPool):
		notes = append(notes, "no Switchboard is running: showing what the history recorded")
	default:
		notes = append(notes, fmt.Sprintf("could not ask the running Switchboard (%v): showing what the history recorded", serr))
	}
	if over != nil {
		threshold = *over
	} else {
		from := launch.ConfigOf(paths)
		if live != nil && live.Config != "" {
			from = live.Config
		}
		var set bool
		threshold, set = hangThreshold(from)
		if live == nil && !errors.Is(serr, ErrNoPool) {
			// The pool that did not answer may run another config
			// (--config): say where the threshold comes from.
			whose := "the hangThreshold of " + from
			if !set {
				whose = "the default (" + from + " sets no hangThreshold)"
			}
			notes = append(notes, fmt.Sprintf("the threshold, %s, is %s; the running Switchboard may run another config, with another; --over sets one", threshold, whose))
		}
	}
	now := time.Now()
	var rows []store.Request
	var liveRun int64
	db, err := store.OpenReadOnly(paths.History)
	if err == nil {
		defer db.Close()
		if rows, err = db.Hangs(ctx, threshold, now); err == nil {
			liveRun, err = db.LiveRun(ctx)
		}
	}
	switch {
	case err == nil, errors.Is(err, fs.ErrNotExist):
	case live == nil:
		return nil, threshold, notes, fmt.Errorf("read the history: %w", err)
	default:
		notes = append(notes, fmt.Sprintf("history unavailable (%v): showing the running pool's requests only", err))
	}
	return mergeHangs(live, liveRun, rows, threshold, now), threshold, notes, nil
}

// mergeHangs combines the running pool's in-flight requests (authoritative
// for its own run) with the history's hangs. Without a live pool the
// history's rows stand as they are.
func mergeHangs(live *control.Status, liveRun int64, rows []store.Request, over time.Duration, now time.Time) []HistoryEntry {
	out := []HistoryEntry{}
	if live != nil {
		for _, r := range live.InFlight {
			if time.Duration(r.AgeMs)*time.Millisecond >= over {
				out = append(out, entryOfLive(r, liveRun))
			}
		}
	}
	for _, r := range rows {
		if live != nil && !r.Abandoned {
			continue // the live pool's own requests: its snapshot is newer
		}
		out = append(out, entryOf(r, now))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ReceivedAt.Before(out[j].ReceivedAt) })
	return out
}

func entryOf(r store.Request, now time.Time) HistoryEntry {
	e := HistoryEntry{Run: r.Run, PoolID: r.PoolID, Server: r.Server, Session: r.Session, Method: r.Method,
		Name: r.Name, OriginalID: r.OriginalID, Status: r.Status, ReceivedAt: r.Received,
		WrittenToChild: r.WrittenToChild(), PID: r.PID, Abandoned: r.Abandoned, ErrorCode: r.ErrCode,
		RequestBytes: r.RequestSize, ResponseBytes: r.ResponseSize,
		RequestPayload: r.RequestPayload, ResponsePayload: r.ResponsePayload}
	e.WrittenAt, e.AnsweredAt = timePtr(r.Written), timePtr(r.Answered)
	if d, ok := r.Duration(); ok {
		ms := math.Round(float64(d.Microseconds())) / 1000
		e.DurationMs = &ms
	} else {
		age := r.Age(now).Milliseconds()
		e.AgeMs = &age
	}
	if r.Err != "" {
		e.Error = &r.Err
	}
	return e
}

func entryOfLive(r pool.RequestInfo, run int64) HistoryEntry {
	age := r.AgeMs
	return HistoryEntry{Run: run, PoolID: r.PoolID, Server: r.Server, Session: r.Session, Method: r.Method,
		Name: r.Name, OriginalID: r.OriginalID, Status: store.StatusInFlight, ReceivedAt: r.ReceivedAt,
		WrittenAt: timePtr(r.WrittenAt), AgeMs: &age, WrittenToChild: r.WrittenToChild, PID: r.PID, Live: true}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// runID names this run to attached shims: the history's run id, or ""
// with no history (a resumed session then relies on its shim's count).
func (h *historyState) runID() string {
	if st := h.requests(); st != nil {
		return strconv.FormatInt(st.Run(), 10)
	}
	return ""
}

// unanswered is pool.Options.Unanswered: nil with no history.
func (h *historyState) unanswered() func(ctx context.Context, run, session string) (pool.Owed, error) {
	st := h.requests()
	if st == nil {
		return nil
	}
	return func(ctx context.Context, run, session string) (pool.Owed, error) {
		id, err := strconv.ParseInt(run, 10, 64)
		if err != nil {
			return pool.Owed{}, fmt.Errorf("run %q: %w", run, err)
		}
		return st.Unanswered(ctx, id, session)
	}
}
