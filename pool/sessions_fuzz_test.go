//go:build unix

package pool_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// FuzzSessions drives several sessions of one shared child with random
// traffic (calls under colliding ids and progress tokens, cancels,
// hostile lines, pings) and checks the isolation invariants: a session
// gets answers only to its own requests, progress only for its own
// tokens, at most one answer per request and exactly one for every
// request it did not cancel; the pool never crashes. `make test` runs it
// for a bounded time.
func FuzzSessions(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{1, 5, 9, 13, 2, 6, 10, 14, 3, 7})
	f.Add([]byte{16, 17, 18, 19, 20, 21, 22, 23, 8, 12})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 40 {
			ops = ops[:40]
		}
		tp := newTestPool(t, nil, fake("srv"))
		const n = 4
		type want struct {
			text      string // the answer's text
			cancelled bool
			progress  bool
		}
		sessions := make([]*client, n)
		expect := make([]map[string]*want, n) // by the id's JSON
		tokens := make([]string, n)
		last := make([]string, n)
		for i := range sessions {
			sessions[i] = tp.dial(t, "srv")
			sessions[i].initialize(fmt.Sprint("fuzz-", i), "")
			expect[i] = map[string]*want{}
			tokens[i] = fmt.Sprintf(`"tok-%d"`, i%2) // two sessions share each token
		}
		for k, b := range ops {
			i := int(b) % n
			c := sessions[i]
			id := fmt.Sprint(k) // every session numbers the same way: ids collide
			if b&0x20 != 0 {
				id = fmt.Sprintf("%q", id)
			}
			text := fmt.Sprintf("s%d-op%d", i, k)
			switch (b >> 2) % 6 {
			case 0:
				c.call(id, "echo", fmt.Sprintf(`{"text":%q}`, text))
				expect[i][id] = &want{text: text}
			case 1:
				c.sendf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"progress","arguments":{"steps":2,"ms":5},"_meta":{"progressToken":%s}}}`, id, tokens[i])
				expect[i][id] = &want{text: "done", progress: true}
			case 2:
				if last[i] != "" {
					c.sendf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s}}`, last[i])
					expect[i][last[i]].cancelled = true
				}
			case 3:
				c.call(id, "sleep_echo", fmt.Sprintf(`{"ms":20,"text":%q}`, text))
				expect[i][id] = &want{text: text}
			case 4:
				// Hostile: a case-folded id smuggled into a notification.
				c.sendf(`{"jsonrpc":"2.0","method":"tools/call","ID":%d,"params":{"name":"echo","arguments":{"text":"pwned"}}}`, k+1)
				expect[i]["null"] = &want{}
			case 5:
				c.sendf(`{"jsonrpc":"2.0","id":%s,"method":"ping"}`, id)
				expect[i][id] = &want{text: ""}
			}
			if w := expect[i][id]; w != nil && !w.cancelled && (b>>2)%6 != 4 {
				last[i] = id
			}
		}
		for i, c := range sessions {
			got := map[string]int{}
			pending := 0
			for id, w := range expect[i] {
				if !w.cancelled {
					pending++
				}
				_ = id
			}
			deadline := time.After(20 * time.Second)
			for pending > 0 {
				var m msg
				select {
				case m = <-c.in:
				case <-deadline:
					t.Fatalf("session %d: %d answers missing; got %v; expected %d", i, pending, got, len(expect[i]))
				}
				if m.Method == "notifications/progress" {
					var p struct {
						ProgressToken json.RawMessage `json:"progressToken"`
					}
					_ = json.Unmarshal(m.Params, &p)
					if string(p.ProgressToken) != tokens[i] {
						t.Fatalf("session %d got progress for token %s (its own: %s)", i, p.ProgressToken, tokens[i])
					}
					continue
				}
				if m.Method != "" {
					continue // list_changed and the like
				}
				key := string(m.ID)
				w := expect[i][key]
				if w == nil {
					t.Fatalf("session %d got an answer to a request it never sent: %s", i, m.raw)
				}
				got[key]++
				if got[key] > 1 && key != "null" {
					t.Fatalf("session %d got two answers for %s", i, key)
				}
				if key == "null" {
					if m.Error == nil || m.Error.Code != -32600 {
						t.Fatalf("session %d: the smuggled line got %s", i, m.raw)
					}
					if got[key] == 1 {
						pending--
					}
					continue
				}
				if m.Error == nil && w.text != "" && m.text() != w.text && !strings.Contains(m.raw, w.text) {
					t.Fatalf("session %d: answer %s, want text %q", i, m.raw, w.text)
				}
				if !w.cancelled {
					pending--
				}
			}
		}
	})
}
