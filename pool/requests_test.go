package pool

import (
	"fmt"
	"go/ast"
	"go/token"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"
)

// The request table's maps are touched in requests.go only: every other
// file goes through its methods, so that each change happens under its
// lock, in one place (the way go-sdk's jsonrpc2 keeps its in-flight state
// behind updateInFlight). Every map of the table is checked, one added
// later too: they are read off the type.
func TestRequestTableMapsStayInside(t *testing.T) {
	fset, files := packageSources(t)
	tableMaps := map[string]bool{}
	for f := range reflect.TypeFor[inFlight]().Fields() {
		if f.Type.Kind() == reflect.Map {
			tableMaps[f.Name] = true
		}
	}
	for _, want := range []string{"pending", "tokens", "reverse", "elicited", "paused", "unposed"} {
		if !tableMaps[want] {
			t.Fatalf("the table's maps read off its type: %v, without %s", slices.Sorted(maps.Keys(tableMaps)), want)
		}
	}
	for _, f := range files {
		name := f.name
		ast.Inspect(f.ast, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || !tableMaps[sel.Sel.Name] {
				return true
			}
			// in.pending, t.in.pending, b.reqs.in.tokens, ...: a selector of
			// an inFlight's map, however it is reached.
			if name != "requests.go" && reachesInFlight(sel.X) {
				t.Errorf("%s: %s.%s touches the request table's map outside requests.go", fset.Position(sel.Pos()), exprString(sel.X), sel.Sel.Name)
			}
			return true
		})
	}
	if len(files) < 20 {
		t.Fatalf("checked only %d files", len(files))
	}
}

// reachesInFlight reports whether x names an inFlight: a variable called
// in (the closures' parameter) or a .in or .reqs selector.
func reachesInFlight(x ast.Expr) bool {
	switch v := x.(type) {
	case *ast.Ident:
		return v.Name == "in"
	case *ast.SelectorExpr:
		return v.Sel.Name == "in" || v.Sel.Name == "reqs" || reachesInFlight(v.X)
	}
	return false
}

// The state machine of a request, step by step: each row is a sequence of
// moves and what the table says after each. A move that does not apply
// (writing a request that ended, ending one twice) is refused, so that
// exactly one ender owns the answer and "may have run" never goes back
// to false once a child may have seen the request.
func TestRequestStateMachine(t *testing.T) {
	type step struct {
		move  string // register, start, wrote, unwrite, requeue (its child died, safe to repeat), fail (its child died), end
		ok    bool   // the move applied
		state reqState
		ran   bool // mayHaveRun after the move
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"answered", []step{{"register", true, stQueued, false}, {"start", true, stWriting, true},
			{"wrote", true, stWritten, true}, {"end", true, stDone, true}, {"end", false, stDone, true}}},
		{"ended while queued is never written", []step{{"register", true, stQueued, false}, {"end", true, stDone, false},
			{"start", false, stDone, false}}},
		{"ended before it was registered", []step{{"end", true, stDone, false}, {"register", false, stDone, false}}},
		{"nothing taken goes back to the queue", []step{{"register", true, stQueued, false}, {"start", true, stWriting, true},
			{"unwrite", true, stQueued, false}, {"start", true, stWriting, true}, {"wrote", true, stWritten, true}}},
		{"re-queued after its child died keeps may-have-run", []step{{"register", true, stQueued, false},
			{"start", true, stWriting, true}, {"wrote", true, stWritten, true}, {"requeue", true, stQueued, true},
			{"start", true, stWriting, true}, {"unwrite", true, stQueued, true}, {"end", true, stDone, true}}},
		{"re-sent once only", []step{{"register", true, stQueued, false}, {"start", true, stWriting, true},
			{"requeue", true, stQueued, true}, {"start", true, stWriting, true}, {"requeue", false, stWriting, true},
			{"fail", true, stDone, true}}},
		{"written and not safe to repeat fails", []step{{"register", true, stQueued, false}, {"start", true, stWriting, true},
			{"wrote", true, stWritten, true}, {"fail", true, stDone, true}}},
		{"a write that ended meanwhile is not marked written", []step{{"register", true, stQueued, false},
			{"start", true, stWriting, true}, {"end", true, stDone, true}, {"wrote", false, stDone, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := newRequestTable(nil)
			p := &pending{id: 7, method: "tools/list", token: 70}
			lastEnd := ended{}
			for i, st := range tt.steps {
				var ok bool
				switch st.move {
				case "register":
					r, _, _ := tab.register(p, 10, 0)
					ok = r == registered
				case "start":
					tab.update(func(in *inFlight) { ok, _ = in.startWriteLocked(p, 42) })
				case "wrote":
					tab.update(func(in *inFlight) { ok, _ = in.wroteLocked(p, time.Now(), 42) })
				case "unwrite":
					tab.update(func(in *inFlight) { ok, _ = in.unwriteLocked(p) })
				case "requeue", "fail":
					retry, failed, _ := tab.afterExit(func(*pending) bool { return st.move == "requeue" }, "exited")
					ok = len(retry) == 1
					if st.move == "fail" && len(failed) == 1 {
						lastEnd, ok = tab.end(failed[0])
					}
				case "end":
					lastEnd, ok = tab.end(p)
				}
				var state reqState
				var ran bool
				tab.update(func(*inFlight) { state, ran = p.state, p.mayHaveRunLocked() })
				if ok != st.ok || state != st.state || ran != st.ran {
					t.Fatalf("step %d %s: applied %v, state %s, may have run %v; want %v, %s, %v",
						i, st.move, ok, state, ran, st.ok, st.state, st.ran)
				}
				if (st.move == "end" || st.move == "fail") && ok && lastEnd.mayHaveRun != st.ran {
					t.Fatalf("step %d %s: the ender was told may have run %v, want %v", i, st.move, lastEnd.mayHaveRun, st.ran)
				}
				// The record of an end names the child that may have run
				// it, even one still being written to (a fast child answers
				// before its writer notes the write); none if none may.
				if wantPID := map[bool]int{true: 42}[st.ran]; (st.move == "end" || st.move == "fail") && ok && lastEnd.pid != wantPID {
					t.Fatalf("step %d %s: the ender was told child %d, want %d", i, st.move, lastEnd.pid, wantPID)
				}
			}
			if state := p.state; state == stDone && tab.lookup(p.id) != nil {
				t.Fatal("an ended request is still in the table")
			}
			if to, _, _ := tab.progress(70, 1, true); p.state == stDone && to != nil {
				t.Fatal("an ended request's progress token still routes")
			}
		})
	}
}

// One function ends requests: nothing but finish takes a request out of
// the table (requestTable.end), and nothing but settle, finish's end of
// a client's request, records a request's end (EventRequestDone), so
// that every way of ending agrees. settle is called by finish, and by
// the two ends no table has, which follow finish's rule for their kind: a
// bridged call whose round ends without its client's answers, or whose
// retry with them cannot be built (inputRound.endCall), and a request
// held for its session's roots (session.endHeldLocked). The one end
// recorded with an event kept (emitted from a field) is a bridged call's
// round its client answered: settle made the event as the child asked,
// and inputRound.retry emits it once, as the call goes on: after it
// built the retry (retryParams), never before an end of the call there
// (endCall), which settle records.
func TestOnlyFinishEndsRequests(t *testing.T) {
	fset, files := packageSources(t)
	settlers := map[string]bool{"finish": true, "endCall": true, "endHeldLocked": true}
	ends, dones, settles, kept := 0, 0, 0, 0
	for _, f := range files {
		name := f.name
		for _, d := range f.ast.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			inFinish := name == "finish.go" && fn.Name.Name == "finish"
			inSettle := name == "finish.go" && fn.Name.Name == "settle"
			inRetry := name == "inputbridge.go" && fn.Name.Name == "retry"
			var built token.Pos // in retry: past the retry's build and the end of a call it could not build
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "end" && strings.HasSuffix(exprString(sel.X), "reqs") {
						ends++
						if !inFinish {
							t.Errorf("%s: %s ends a request itself; only finish does", fset.Position(n.Pos()), fn.Name.Name)
						}
					}
					if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "settle" {
						settles++
						if !settlers[fn.Name.Name] {
							t.Errorf("%s: %s settles a request; only finish, inputRound.endCall and session.endHeldLocked do", fset.Position(n.Pos()), fn.Name.Name)
						}
					}
					if inRetry && (isCallTo(n, "retryParams") || isCallTo(n, "endCall")) {
						built = max(built, n.End())
					}
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "emit" && len(n.Args) == 1 {
						if u, ok := n.Args[0].(*ast.UnaryExpr); ok {
							if _, isKept := u.X.(*ast.SelectorExpr); isKept {
								kept++
								switch {
								case !inRetry:
									t.Errorf("%s: %s emits an event kept in %s; only inputRound.retry does", fset.Position(n.Pos()), fn.Name.Name, exprString(u.X))
								case built == token.NoPos || n.Pos() < built:
									t.Errorf("%s: inputRound.retry emits %s before it built the retry and ended the call it could not build: the call's end is settle's then", fset.Position(n.Pos()), exprString(u.X))
								}
							}
						}
					}
				case *ast.Ident:
					if n.Name == "EventRequestDone" {
						dones++
						if !inSettle {
							t.Errorf("%s: %s records a request's end itself; only settle does", fset.Position(n.Pos()), fn.Name.Name)
						}
					}
				}
				return true
			})
		}
	}
	if ends != 1 || dones != 1 || settles != len(settlers) || kept != 1 {
		t.Errorf("finish ends requests %d times, settle records %d ends, %d calls settle, and %d emit a kept event; want one, one, %d and one",
			ends, dones, settles, kept, len(settlers))
	}
}

// isCallTo reports whether call calls a function or method named name.
func isCallTo(call *ast.CallExpr, name string) bool {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name == name
	case *ast.SelectorExpr:
		return f.Sel.Name == name
	}
	return false
}

// One timer serves every deadline of a table: each request expires at its
// own deadline, in order, however they were registered; one that ended
// first never does; a deadline earlier than the armed one re-arms it.
func TestRequestTableExpiresEachRequestAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		expired := map[uint64]time.Duration{}
		var tab *requestTable
		tab = newRequestTable(func(p *pending) {
			if _, won := tab.end(p); won {
				mu.Lock()
				expired[p.id] = time.Since(start)
				mu.Unlock()
			}
		})
		reqs := map[uint64]*pending{}
		register := func(id uint64, timeout time.Duration) {
			reqs[id] = &pending{id: id, received: time.Now()}
			if r, _, _ := tab.register(reqs[id], 100, timeout); r != registered {
				t.Fatalf("register %d: %v", id, r)
			}
		}
		register(1, 3*time.Second)
		register(2, time.Second)
		register(3, 2*time.Second)
		register(4, 2*time.Second) // ends at 1.5 s, before its deadline
		register(6, 0)             // no timeout

		time.Sleep(1500 * time.Millisecond)
		if _, won := tab.end(reqs[4]); !won {
			t.Fatal("request 4 ended before its deadline")
		}
		time.Sleep(time.Second) // 2.5 s
		register(5, 200*time.Millisecond)
		time.Sleep(time.Hour)
		synctest.Wait()

		want := map[uint64]time.Duration{2: time.Second, 3: 2 * time.Second, 5: 2700 * time.Millisecond, 1: 3 * time.Second}
		mu.Lock()
		defer mu.Unlock()
		if !maps.Equal(expired, want) {
			t.Errorf("expired at %v, want %v", expired, want)
		}
		if n := tab.count(); n != 1 {
			t.Errorf("%d requests left, want 1 (the one without a timeout)", n)
		}
		tab.stopTimer()
	})
}

// The attack on a shared timer: requests ending and arriving while it
// fires. Every request still in the table past its deadline is expired,
// none twice, none that ended first.
func TestRequestTableTimeoutsUnderChurn(t *testing.T) {
	var mu sync.Mutex
	seen := map[uint64]int{}
	var tab *requestTable
	tab = newRequestTable(func(p *pending) {
		if _, won := tab.end(p); won {
			mu.Lock()
			seen[p.id]++
			mu.Unlock()
		}
	})
	defer tab.stopTimer()
	const n = 2000
	var wg sync.WaitGroup
	ended := make([]bool, n+1)
	for w := range 4 {
		wg.Go(func() {
			for id := uint64(w + 1); id <= n; id += 4 {
				p := &pending{id: id, received: time.Now()}
				if r, _, _ := tab.register(p, n, time.Duration(id%7+1)*time.Millisecond); r == pastDeadline {
					ended[id] = true // refused, its deadline past already: never in the table
					continue
				}
				if id%3 == 0 {
					_, ended[id] = tab.end(p)
				}
			}
		})
	}
	wg.Wait()
	left := 0
	for id := uint64(1); id <= n; id++ {
		if !ended[id] {
			left++
		}
	}
	// A request leaves the table inside end, before the callback counts
	// it: wait for the counts, not only for an empty table.
	waitUntil(t, "every request left to expire", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= left && tab.count() == 0
	})
	mu.Lock()
	defer mu.Unlock()
	for id := uint64(1); id <= n; id++ {
		switch {
		case ended[id] && seen[id] != 0:
			t.Errorf("request %d ended, then expired", id)
		case !ended[id] && seen[id] != 1:
			t.Errorf("request %d expired %d times, want once", id, seen[id])
		}
	}
}

// A request is allocated for every call: it stays in the 256-byte size
// class (a deadline is a Duration since its table's base, not a
// time.Time, for that reason).
func TestPendingFitsIn256Bytes(t *testing.T) {
	if n := unsafe.Sizeof(pending{}); n > 256 {
		t.Errorf("pending is %d bytes, more than 256: reorder or shrink its fields", n)
	}
}

// The URL-mode elicitations a child had the pool ask are remembered for
// their completion at most maxElicitations at a time (the oldest forgotten
// first), each for elicitationTTL, and once: a child that asks without
// end grows nothing. A session's are forgotten when it leaves; a session
// that closed before its question was recorded is not remembered.
func TestElicitationsRememberedAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newRequestTable(nil)
		a, b := &session{closed: make(chan struct{})}, &session{closed: make(chan struct{})}
		size := func() (n int) {
			tab.update(func(in *inFlight) { n = len(in.elicited) })
			return n
		}
		id := uint64(0)
		ask := func(s *session, elicitationID string) bool {
			id++
			return tab.addQuestion(id, []byte(`"q"`), s, elicitationID, true, "") != nil
		}

		ask(a, "first")
		time.Sleep(time.Second)
		for i := range 2 * maxElicitations {
			ask(b, fmt.Sprint("flood-", i))
		}
		if n := size(); n != maxElicitations {
			t.Fatalf("%d elicitations remembered, want at most %d", n, maxElicitations)
		}
		if s := tab.elicitationAsker("first"); s != nil {
			t.Error("the oldest was not the one forgotten")
		}
		last := fmt.Sprint("flood-", 2*maxElicitations-1)
		if s := tab.elicitationAsker(last); s != b {
			t.Errorf("the newest: asked %p, want %p", s, b)
		}
		if s := tab.elicitationAsker(last); s != nil {
			t.Error("a completion was routed twice")
		}
		tab.dropQuestionsOf(b)
		if n := size(); n != 0 {
			t.Errorf("%d elicitations remembered after their session left, want 0", n)
		}

		ask(a, "slow")
		time.Sleep(elicitationTTL + time.Second)
		if s := tab.elicitationAsker("slow"); s != nil {
			t.Error("an elicitation was remembered past elicitationTTL")
		}
		close(a.closed)
		if ask(a, "closed") || size() != 0 {
			t.Error("a closed session's elicitation was remembered")
		}
	})
}
