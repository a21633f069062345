package pool

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Idle reaping and the warm-up grace, on the server's own code (join,
// leave, Apply, armIdleLocked, reapIdle) in a synctest bubble: each row is
// a timeline of sessions joining and leaving a shared child started at 0,
// and of config changes, and when the child is stopped (or that it never
// is, within a day).
func TestIdleReaping(t *testing.T) {
	type step struct {
		at time.Duration
		// join NAME, leave NAME; quiet "NAME SINCE": NAME leaves, having
		// had nothing to do since SINCE, as a server's stateless HTTP
		// session does; call NAME, answer NAME: a call of NAME's
		// in flight on the child, then answered; initialize NAME: a new
		// session NAME's initialize in flight on the child (answer NAME
		// answers it), the session in no partition; idleTimeout DURATION (or
		// never): the config applied with that idleTimeout; fire: the idle
		// timer armed before fires late, as one that fired just as it was
		// stopped or re-armed does; fail: the child's crash loop failed
		// the server; restart: the user restarts it, the supervisor
		// telling the server (revived); spawn: the child's process
		// starts, as supervise starts it once the command is resolved,
		// and again after a crash (without a spawn step, at 0).
		op  string
		who string
	}
	const never = -1
	tests := []struct {
		name         string
		idle, warmup time.Duration
		steps        []step
		want         time.Duration
	}{
		{"stopped idleTimeout after the last session leaves", 10 * time.Minute, time.Minute,
			[]step{{0, "join", "a"}, {5 * time.Minute, "leave", "a"}}, 15 * time.Minute},
		{"the default idleTimeout is ten minutes", 0, -1,
			[]step{{0, "join", "a"}, {time.Second, "leave", "a"}}, 10*time.Minute + time.Second},
		{"a stateless session that ends for being quiet left when it last did something", 10 * time.Minute, -1,
			[]step{{0, "join", "a"}, {11 * time.Minute, "quiet", "a 1m"}}, 11 * time.Minute},
		{"a quiet session's idle time is counted from its last exchange", 10 * time.Minute, -1,
			[]step{{0, "join", "a"}, {2 * time.Minute, "quiet", "a 1m"}}, 11 * time.Minute},
		{"a session that left after the quiet one's last exchange counts", 10 * time.Minute, -1,
			[]step{{0, "join", "a"}, {0, "join", "b"}, {3 * time.Minute, "leave", "b"}, {12 * time.Minute, "quiet", "a 1m"}},
			13 * time.Minute},
		{"a quiet session that another outlasts does not bring its stop forward", 10 * time.Minute, -1,
			[]step{{0, "join", "a"}, {0, "join", "b"}, {11 * time.Minute, "quiet", "a 1m"}, {15 * time.Minute, "leave", "b"}},
			25 * time.Minute},
		{"a fresh child is kept for its warm-up grace", 10 * time.Second, time.Minute,
			[]step{{0, "join", "a"}, {time.Second, "leave", "a"}}, time.Minute},
		{"once the grace is over the idle timeout alone counts", 10 * time.Second, time.Minute,
			[]step{{0, "join", "a"}, {2 * time.Minute, "leave", "a"}}, 2*time.Minute + 10*time.Second},
		{"a session that comes back keeps it, and the clock starts again when it leaves", 10 * time.Second, -1,
			[]step{{0, "join", "a"}, {time.Second, "leave", "a"}, {5 * time.Second, "join", "b"}, {30 * time.Second, "leave", "b"}},
			40 * time.Second},
		{"it is the last session's leaving that counts", time.Minute, -1,
			[]step{{0, "join", "a"}, {0, "join", "b"}, {time.Minute, "leave", "a"}, {3 * time.Minute, "leave", "b"}},
			4 * time.Minute},
		{"a child no session joined is reaped after its grace", 10 * time.Second, time.Minute, nil, time.Minute},
		{"a child no session joined (started for a client's initialize, before its roots were known) is reaped after its grace, not its idleTimeout",
			10 * time.Minute, time.Minute, nil, time.Minute},
		{"a child no session joined is reaped after its grace under the default idleTimeout", 0, time.Minute, nil, time.Minute},
		{"a session that joins it makes it a child like any other", 10 * time.Minute, time.Minute,
			[]step{{10 * time.Second, "join", "a"}, {20 * time.Second, "leave", "a"}}, 10*time.Minute + 20*time.Second},
		{"an initialize a child no session joined still answers is not cut short: it is looked at again a grace later", 10 * time.Minute, time.Minute,
			[]step{{0, "initialize", "a"}, {90 * time.Second, "answer", "a"}}, 2 * time.Minute},
		{"a failed child no session joined, restarted, is stopped a grace after the restart", 10 * time.Minute, time.Minute,
			[]step{{time.Second, "fail", ""}, {time.Hour, "restart", ""}}, time.Hour + time.Minute},
		{"a child no session joined is kept under an idleTimeout of never", -1, time.Minute, nil, never},
		{"a negative idleTimeout never reaps", -1, time.Minute,
			[]step{{0, "join", "a"}, {time.Second, "leave", "a"}}, never},
		{"a call the child still answers is not cut short: it is looked at again an idle period later", 10 * time.Second, -1,
			[]step{{0, "join", "a"}, {0, "call", "a"}, {time.Second, "leave", "a"}, {25 * time.Second, "answer", "a"}},
			31 * time.Second},
		{"a call answered before the idle timeout changes nothing", 10 * time.Second, -1,
			[]step{{0, "join", "a"}, {0, "call", "a"}, {time.Second, "leave", "a"}, {5 * time.Second, "answer", "a"}},
			11 * time.Second},
		{"an idleTimeout changed to never keeps a child already idle", 65 * time.Second, -1,
			[]step{{0, "join", "a"}, {time.Second, "leave", "a"}, {3 * time.Second, "idleTimeout", "never"}}, never},
		{"a shorter idleTimeout stops a child idle longer than it at once", 0, -1,
			[]step{{0, "join", "a"}, {time.Second, "leave", "a"}, {80 * time.Second, "idleTimeout", "5s"}}, 80 * time.Second},
		{"a shorter idleTimeout counts from when the last session left", 10 * time.Minute, -1,
			[]step{{0, "join", "a"}, {10 * time.Second, "leave", "a"}, {12 * time.Second, "idleTimeout", "5s"}}, 15 * time.Second},
		{"a longer idleTimeout keeps a child already idle longer", 10 * time.Second, -1,
			[]step{{0, "join", "a"}, {time.Second, "leave", "a"}, {5 * time.Second, "idleTimeout", "1m"}}, 61 * time.Second},
		{"an idleTimeout set where it was never counts from when the last session left", -1, -1,
			[]step{{0, "join", "a"}, {time.Second, "leave", "a"}, {30 * time.Second, "idleTimeout", "1m"}}, 61 * time.Second},
		{"a changed idleTimeout keeps the warm-up grace", 10 * time.Minute, time.Minute,
			[]step{{0, "join", "a"}, {time.Second, "leave", "a"}, {2 * time.Second, "idleTimeout", "5s"}}, time.Minute},
		{"a changed idleTimeout reaches a child no session joined", 10 * time.Minute, -1,
			[]step{{20 * time.Second, "idleTimeout", "5s"}}, 20 * time.Second},
		{"a changed idleTimeout does not cut a call short", 10 * time.Minute, -1,
			[]step{{0, "join", "a"}, {0, "call", "a"}, {time.Second, "leave", "a"}, {20 * time.Second, "idleTimeout", "5s"},
				{22 * time.Second, "answer", "a"}}, 25 * time.Second},
		{"a timer armed under the old idleTimeout does not stop a child the new one keeps", 10 * time.Second, -1,
			[]step{{0, "join", "a"}, {time.Second, "leave", "a"}, {5 * time.Second, "idleTimeout", "never"}, {11 * time.Second, "fire", ""}},
			never},
		{"a timer of an earlier idle period does not stop the child early", 10 * time.Second, -1,
			[]step{{0, "join", "a"}, {time.Second, "leave", "a"}, {5 * time.Second, "join", "b"}, {8 * time.Second, "leave", "b"},
				{11 * time.Second, "fire", ""}},
			18 * time.Second},
		{"a failed child is kept: its server stays failed until restarted", 10 * time.Second, -1,
			[]step{{0, "join", "a"}, {time.Second, "leave", "a"}, {2 * time.Second, "fail", ""}}, never},
		{"a failed child no session joined is kept past its grace", 10 * time.Second, time.Minute,
			[]step{{time.Second, "fail", ""}}, never},
		{"a failed child restarted with no session is stopped an idle period after the restart", 10 * time.Second, -1,
			[]step{{0, "join", "a"}, {time.Second, "fail", ""}, {2 * time.Second, "leave", "a"}, {time.Hour, "restart", ""}},
			time.Hour + 10*time.Second},
		{"a failed child restarted with a session in it is stopped an idle period after it leaves", 10 * time.Second, -1,
			[]step{{0, "join", "a"}, {time.Second, "fail", ""}, {time.Minute, "restart", ""}, {2 * time.Minute, "leave", "a"}},
			2*time.Minute + 10*time.Second},
		// The warm-up counts from the process's start, not the slot's:
		// a package resolved for 70 s, a crash restart, must not eat
		// into it. A child started after a 66 s resolution used to be
		// stopped as idle 21 s after its process started.
		{"a child no session joined, whose process started long after its slot was made, runs its whole warm-up", 10 * time.Minute, time.Minute,
			[]step{{70 * time.Second, "spawn", ""}}, 130 * time.Second},
		{"a child no session joined is not stopped before its process starts", 10 * time.Second, time.Minute,
			[]step{{3 * time.Minute, "spawn", ""}}, 4 * time.Minute},
		{"a child whose sessions left while its command was resolved runs its whole warm-up", 10 * time.Second, time.Minute,
			[]step{{0, "join", "a"}, {time.Second, "leave", "a"}, {70 * time.Second, "spawn", ""}}, 130 * time.Second},
		{"a child restarted after a crash gets a fresh warm-up", 10 * time.Second, time.Minute,
			[]step{{0, "spawn", ""}, {0, "join", "a"}, {time.Second, "leave", "a"}, {50 * time.Second, "spawn", ""}}, 110 * time.Second},
		{"a restarted child's fresh warm-up does not restart its idle time", 5 * time.Minute, time.Minute,
			[]step{{0, "spawn", ""}, {0, "join", "a"}, {time.Minute, "leave", "a"}, {5 * time.Minute, "spawn", ""}}, 6 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := New(&Options{WarmupGrace: tt.warmup})
				if err := p.Apply([]ServerConfig{{Name: "x", Command: "/bin/true", IdleTimeout: tt.idle}}); err != nil {
					t.Fatal(err)
				}
				srv := p.servers["x"]
				start := time.Now()
				b := buildBackend(srv, srv.config(), nil, nil, clientCaps{}, nil)
				stopped := make(chan time.Duration, 1)
				go func() { // what supervise does when stopped: return
					<-b.stopReq
					stopped <- time.Since(start)
					close(b.done)
				}()
				srv.mu.Lock()
				pt := srv.partLocked("", nil, nil)
				srv.startedLocked(pt, b) // as currentLocked does for the child it starts, here with no member
				srv.mu.Unlock()
				if !slices.ContainsFunc(tt.steps, func(st step) bool { return st.op == "spawn" }) {
					b.childStarted(&child{started: time.Now()})
				}

				sessions := map[string]*session{}
				calls := map[string]*pending{}
				for _, st := range tt.steps {
					time.Sleep(st.at - time.Since(start))
					switch st.op {
					case "join":
						s, err := p.newSession("x", sessionSetup{transport: "test"})
						if err != nil {
							t.Fatal(err)
						}
						sessions[st.who] = s
						srv.move(s)
					case "leave":
						srv.leave(sessions[st.who], time.Time{})
					case "quiet": // "NAME SINCE": NAME leaves, having done nothing since SINCE (a stateless HTTP session)
						name, since, _ := strings.Cut(st.who, " ")
						d, err := time.ParseDuration(since)
						if err != nil {
							t.Fatal(err)
						}
						srv.leave(sessions[name], start.Add(d))
					case "call", "initialize":
						if st.op == "initialize" { // a session's initialize waits for the child's handshake: the session is in no partition
							s, err := p.newSession("x", sessionSetup{transport: "test"})
							if err != nil {
								t.Fatal(err)
							}
							sessions[st.who] = s
						}
						c := &pending{id: uint64(len(calls) + 1), b: b, sess: sessions[st.who]}
						if r, _, _ := b.reqs.register(c, 1, 0); r != registered {
							t.Fatalf("registering the call: %v", r)
						}
						calls[st.who] = c
					case "answer":
						b.reqs.end(calls[st.who])
					case "idleTimeout":
						idle := time.Duration(-1)
						if st.who != "never" {
							var err error
							if idle, err = time.ParseDuration(st.who); err != nil {
								t.Fatal(err)
							}
						}
						if err := p.Apply([]ServerConfig{{Name: "x", Command: "/bin/true", IdleTimeout: idle}}); err != nil {
							t.Fatal(err)
						}
					case "spawn":
						b.childStarted(&child{started: time.Now()})
					case "fire":
						srv.reapIdle(pt, b)
					case "fail", "restart":
						b.mu.Lock()
						b.state = map[string]string{"fail": StateFailed, "restart": StateStarting}[st.op]
						b.mu.Unlock()
						if st.op == "restart" {
							srv.revived(b)
						}
					}
					synctest.Wait()
				}
				time.Sleep(24*time.Hour - time.Since(start))
				synctest.Wait()
				got := time.Duration(never)
				select {
				case got = <-stopped:
				default:
				}
				if got != tt.want {
					t.Errorf("stopped at %v, want %v (-1: never)", got, tt.want)
				}
				b.stop(errIdle) // (does nothing if the reaper stopped it)
				p.Close()
			})
		})
	}
}

// Restart backoff and crash-loop detection, on the backend's own budget
// and its wait between children (waitToRestart) in a synctest bubble.
// Each row is what happens to a server's children, one event after the
// other, and what the supervisor does after each exit: wait so long
// before the next child, or fail the server.
func TestRestartPolicy(t *testing.T) {
	pol := RestartPolicy{MaxRestarts: 5, Window: time.Minute, MinBackoff: 100 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
	type event struct {
		after time.Duration // since the last event
		what  string        // exit, start (a child started), restart (the user, after a failure)
		// During the wait that follows an exit: the user restarts, or the
		// backend is stopped, this long into it.
		userAfter, stopAfter time.Duration
	}
	exit := func(after time.Duration) event { return event{after: after, what: "exit"} }
	tests := []struct {
		name   string
		pol    RestartPolicy
		events []event
		want   string
	}{
		{"the backoff doubles up to its cap", pol,
			[]event{exit(0), exit(0), exit(0), exit(0)},
			"wait 100ms, wait 200ms, wait 400ms, wait 500ms"},
		{"a child that starts resets the backoff", pol,
			[]event{exit(0), exit(0), {what: "start"}, exit(time.Second)},
			"wait 100ms, wait 200ms, wait 100ms"},
		{"five exits within a minute fail the server", pol,
			[]event{exit(0), exit(time.Second), exit(time.Second), exit(time.Second), exit(time.Second)},
			"wait 100ms, wait 200ms, wait 400ms, wait 500ms, failed after 5 exits"},
		{"exits further apart than the window never fail it",
			RestartPolicy{MaxRestarts: 3, Window: 10 * time.Second, MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second},
			[]event{exit(0), {what: "start"}, exit(6 * time.Second), {what: "start"}, exit(6 * time.Second), {what: "start"}, exit(6 * time.Second)},
			"wait 100ms, wait 100ms, wait 100ms, wait 100ms"},
		{"a restart after a crash loop starts a fresh budget",
			RestartPolicy{MaxRestarts: 2, Window: time.Minute, MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second},
			[]event{exit(0), exit(0), {what: "restart"}, exit(0)},
			"wait 100ms, failed after 2 exits, wait 100ms"},
		{"the user cuts a backoff short", RestartPolicy{MaxRestarts: 5, Window: time.Minute, MinBackoff: 10 * time.Second, MaxBackoff: time.Minute},
			[]event{{what: "exit", userAfter: 3 * time.Second}},
			"wait 3s"},
		{"a stop during a backoff ends the supervisor", RestartPolicy{MaxRestarts: 5, Window: time.Minute, MinBackoff: 10 * time.Second, MaxBackoff: time.Minute},
			[]event{{what: "exit", stopAfter: time.Second}},
			"stopped after 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := New(nil)
				if err := p.Apply([]ServerConfig{{Name: "x", Command: "/bin/true"}}); err != nil {
					t.Fatal(err)
				}
				b := buildBackend(p.servers["x"], p.servers["x"].config(), nil, nil, clientCaps{}, nil)
				budget := newRestartBudget(tt.pol)
				var got []string
				for _, e := range tt.events {
					time.Sleep(e.after)
					switch e.what {
					case "start":
						budget.started()
						continue
					case "restart":
						budget.restarted()
						continue
					}
					failed, n, wait := budget.exited(p.clock.Now())
					if failed {
						got = append(got, fmt.Sprintf("failed after %d exits", n))
						continue
					}
					if e.userAfter > 0 {
						time.AfterFunc(e.userAfter, b.restartNow)
					}
					if e.stopAfter > 0 {
						time.AfterFunc(e.stopAfter, func() { close(b.stopReq) })
					}
					began := time.Now()
					if !b.waitToRestart(wait) {
						got = append(got, fmt.Sprintf("stopped after %v", time.Since(began)))
						break
					}
					got = append(got, fmt.Sprintf("wait %v", time.Since(began)))
				}
				if s := strings.Join(got, ", "); s != tt.want {
					t.Errorf("got  %s\nwant %s", s, tt.want)
				}
				p.Close()
			})
		})
	}
}

// The idle policy alone: when a child whose last session left is stopped,
// asked when the session leaves or later (its idleTimeout changed since).
func TestIdlePolicyStopAfter(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		pol      idlePolicy
		age      time.Duration // of the child when its last session left
		asked    time.Duration // after it left
		want     time.Duration
		wantNone bool
	}{
		{idlePolicy{idle: time.Minute, warmup: -1}, 0, 0, time.Minute, false},
		{idlePolicy{idle: time.Minute, warmup: 5 * time.Minute}, time.Minute, 0, 4 * time.Minute, false},
		{idlePolicy{idle: time.Minute, warmup: 5 * time.Minute}, 10 * time.Minute, 0, time.Minute, false},
		{idlePolicy{idle: 0, warmup: -1}, 0, 0, DefaultIdleTimeout, false},
		{idlePolicy{idle: -1, warmup: time.Minute}, 0, 0, 0, true},
		{idlePolicy{idle: time.Minute, warmup: -1}, 0, 20 * time.Second, 40 * time.Second, false},
		{idlePolicy{idle: time.Minute, warmup: -1}, 0, 5 * time.Minute, 0, false},
		{idlePolicy{idle: 5 * time.Second, warmup: time.Minute}, 2 * time.Second, 10 * time.Second, 48 * time.Second, false},
		{idlePolicy{idle: -1, warmup: -1}, 0, time.Hour, 0, true},
		{idlePolicy{idle: 10 * time.Minute, warmup: time.Minute, unjoined: true}, 0, 0, time.Minute, false},
		{idlePolicy{idle: 10 * time.Second, warmup: time.Minute, unjoined: true}, 0, 0, time.Minute, false},
		{idlePolicy{idle: 10 * time.Minute, warmup: time.Minute, unjoined: true}, time.Hour, 0, time.Minute, false},
		{idlePolicy{idle: 10 * time.Minute, warmup: -1, unjoined: true}, 0, 0, 10 * time.Minute, false},
		{idlePolicy{idle: -1, warmup: time.Minute, unjoined: true}, 0, 0, 0, true},
	}
	for _, tt := range tests {
		left := t0.Add(tt.age)
		got, ok := tt.pol.stopAfter(t0, left, left.Add(tt.asked))
		if ok == tt.wantNone || got != tt.want {
			t.Errorf("%+v, child %v old, asked %v after its last session left: stop after %v (%v), want %v (never: %v)",
				tt.pol, tt.age, tt.asked, got, ok, tt.want, tt.wantNone)
		}
	}
	// A child whose process has not started (its package resolved) is
	// not stopped until it has: its warm-up has not begun. Without a
	// warm-up, the idle time alone counts.
	if got, ok := (idlePolicy{idle: time.Second, warmup: time.Minute}).stopAfter(time.Time{}, t0, t0.Add(time.Hour)); ok {
		t.Errorf("a child whose process has not started: stop after %v, want not until it starts", got)
	}
	if got, ok := (idlePolicy{idle: time.Second, warmup: -1}).stopAfter(time.Time{}, t0, t0.Add(time.Hour)); !ok || got != 0 {
		t.Errorf("a child whose process has not started, no warm-up: stop after %v (%v), want at once", got, ok)
	}
}
