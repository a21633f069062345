//go:build unix

package pool_test

import (
	"fmt"
	"github.com/switchboard-mcp/switchboard/pool"
	"strings"
	"testing"
)

// A key that Go's encoding/json takes for "id" without being it: on the
// first edition the pool saw a notification and passed its bytes on, the
// Go child saw a request with the victim's pool id, and the victim got the
// attacker's answer while its own was orphaned.
func TestCaseFoldedIDCannotAnswerAnotherSession(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	victim, attacker := tp.dial(t, "srv"), tp.dial(t, "srv")
	victim.initialize("victim", "")
	attacker.initialize("attacker", "")
	victim.call("1", "sleep_echo", `{"ms":1500,"text":"real answer"}`)
	var poolID uint64
	eventually(t, "the victim's call in flight", func() bool {
		s := tp.Snapshot()
		if len(s.InFlight) == 1 && s.InFlight[0].WrittenToChild {
			poolID = s.InFlight[0].PoolID
			return true
		}
		return false
	})
	for i, smuggled := range []string{
		fmt.Sprintf(`{"jsonrpc":"2.0","method":"tools/call","ID":%d,"params":{"name":"echo","arguments":{"text":"pwned"}}}`, poolID),
		fmt.Sprintf(`{"jsonrpc":"2.0","method":"tools/call","I\u0044":%d,"params":{"name":"echo","arguments":{"text":"pwned"}}}`, poolID),
		fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","Method":"notifications/cancelled","params":{"requestId":%d}}`, poolID),
		fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/x","Params":{"requestId":%d},"meth\u017fod":"notifications/cancelled"}`, poolID),
	} {
		attacker.send(smuggled)
		if m := attacker.recv(); m.Error == nil || m.Error.Code != -32600 {
			t.Errorf("smuggle %d: want -32600 for the attacker, got %s", i, m.raw)
		}
	}
	m, other := victim.recvID("1")
	if m.text() != "real answer" || len(other) > 0 {
		t.Fatalf("the victim got %s (and %d other messages)", m.raw, len(other))
	}
	if o := tp.Snapshot().Counters.Orphaned; o != 0 {
		t.Errorf("%d orphaned answers: something answered the victim's id", o)
	}
}

// Duplicate keys: the pool's codec read the first, children the last. Two
// _meta objects, the last with another session's pool token, injected
// progress into that session; two "name"s recorded and retried the wrong
// tool. Now the attacker alone gets -32600, and nothing reaches the child.
func TestDuplicateKeysAreRefused(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	victim, attacker := tp.dial(t, "srv"), tp.dial(t, "srv")
	victim.initialize("victim", "")
	attacker.initialize("attacker", "")
	victim.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress","arguments":{"steps":3,"ms":200},"_meta":{"progressToken":"mine"}}}`)
	first := victim.recv()
	if first.Method != "notifications/progress" {
		t.Fatalf("victim: %s", first.raw)
	}
	for i, dup := range []string{
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"progress","arguments":{"steps":1,"ms":0},"_meta":{"progressToken":"a"},"_meta":{"progressToken":1}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"progress","arguments":{"steps":1,"ms":0},"_meta":{"progressToken":"a","progressToken":1}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ro_count","name":"count","arguments":{}}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"\xc3\x28\"}}}",
	} {
		attacker.send(dup)
		if m := attacker.recv(); m.Error == nil || m.Error.Code != -32600 {
			t.Errorf("case %d: want -32600, got %s", i, m.raw)
		}
	}
	m, other := victim.recvID("1")
	if m.text() != "done" {
		t.Fatalf("victim's call: %s", m.raw)
	}
	for _, o := range append([]msg{first}, other...) {
		if o.Method == "notifications/progress" && !strings.Contains(o.raw, `"progressToken":"mine"`) {
			t.Errorf("foreign progress reached the victim: %s", o.raw)
		}
	}
	if n := len(other) + 1; n != 3 {
		t.Errorf("victim got %d progress notifications, want its 3", n)
	}
}

// One session flooding a server with calls gets -32004 past its own
// limit; the server's other sessions are all answered. On the first
// edition the queue was per server: one client with 70,000 pending calls
// left every other session of that server with -32004.
func TestFloodingSessionDoesNotStarveOthers(t *testing.T) {
	tp := newTestPool(t, &pool.Options{MaxPending: 800}, fake("srv"))
	flood := tp.dial(t, "srv")
	flood.initialize("flood", "")
	others := make([]*client, 4)
	for i := range others {
		others[i] = tp.dial(t, "srv")
		others[i].initialize(fmt.Sprint("other-", i), "")
	}
	const n = 1000 // well past the session limit (800/8) and the server's queue
	for i := range n {
		flood.call(fmt.Sprint(i), "sleep", `{"ms":60000}`)
	}
	refused := 0
	eventually(t, "the flood's refusals", func() bool {
		for refused < n-100 {
			select {
			case m := <-flood.in:
				if m.Error != nil && m.Error.Code == -32004 {
					refused++
				}
			default:
				return false
			}
		}
		return true
	})
	for i, c := range others {
		for j := range 50 {
			c.call(fmt.Sprint(j), "echo", fmt.Sprintf(`{"text":"o%d-%d"}`, i, j))
		}
	}
	for i, c := range others {
		got := map[string]string{} // answers come in any order
		for len(got) < 50 {
			m := c.recv()
			if m.Error != nil {
				t.Fatalf("other session %d: %s", i, m.raw)
			}
			got[string(m.ID)] = m.text()
		}
		for j := range 50 {
			if got[fmt.Sprint(j)] != fmt.Sprintf("o%d-%d", i, j) {
				t.Fatalf("other session %d call %d: %q", i, j, got[fmt.Sprint(j)])
			}
		}
	}
	if refused != n-100 {
		t.Errorf("the flood got %d refusals, want %d", refused, n-100)
	}
}
