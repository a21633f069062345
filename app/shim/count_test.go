package shim

import (
	"sort"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// The count follows requests out and answers back across arbitrary chunk
// boundaries; a cancelled request is owed nothing; a notification is not
// a request; answers to the pool's own requests (the client answering a
// child's sampling request) change nothing.
func TestUnansweredCount(t *testing.T) {
	u := newUnanswered()
	in := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":"two","method":"tools/call","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}` + "\n" +
		`{"jsonrpc":"2.0","id":"sb-9","result":{}}` + "\n"
	for i := 0; i < len(in); i += 7 { // 7-byte chunks split every line
		u.sent([]byte(in[i:min(i+7, len(in))]))
	}
	out := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":"sb-9","method":"sampling/createMessage"}` + "\n" + `{"jsonrpc":"2.0","id":3,"err`
	u.received([]byte(out))
	u.received([]byte(`or":{"code":-1,"message":"x"}}` + "\n"))
	var got []string
	for _, l := range u.lost() {
		if !l.Written {
			t.Errorf("%s: a counted request is reported as not written; the count cannot know", l.ID)
		}
		got = append(got, l.ID)
	}
	sort.Strings(got)
	if len(got) != 1 || got[0] != `"two"` {
		t.Errorf("unanswered: %v, want [\"two\"]", got)
	}
	// Owed until answered, whichever pool answers it; a planned stop's
	// pool answered all it took.
	if again := u.lost(); len(again) != 1 {
		t.Errorf("lost() forgot what no pool answered yet: %v", again)
	}
	u.handedBack()
	if again := u.lost(); len(again) != 0 {
		t.Errorf("owed after a hand-back: %v", again)
	}
}

// The count follows messages of any size the pool takes, in the chunks
// the relay moves (64 KiB): a request of 1.5 MB is owed until answered,
// and an answer of 2 MB settles its request. On the first edition lines
// over 1 MiB went uncounted: after a crash the pool answered such a
// request never, and the request of such an answer a second time.
func TestUnansweredCountsLargeMessages(t *testing.T) {
	u := newUnanswered()
	feed := func(f func([]byte), s string) {
		for i := 0; i < len(s); i += bufSize {
			f([]byte(s[i:min(i+bufSize, len(s))]))
		}
	}
	big := strings.Repeat("x", 1_500_000)
	feed(u.sent, `{"jsonrpc":"2.0","id":"answered","method":"tools/call","params":{"name":"big"}}`+"\n"+
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"text":"`+big+`"}},"id":"large"}`+"\n")
	feed(u.received, `{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"`+strings.Repeat("y", 2_000_000)+`"}]},"id":"answered"}`+"\n")
	lost := u.lost()
	if len(lost) != 1 || lost[0].ID != `"large"` {
		t.Errorf("unanswered: %+v, want the large request alone", lost)
	}
}

// A request line split across a planned stop: the pool hands its head
// back with what it had not handled, and the shim sends it again. Counted
// once, the line is whole and its id owed.
func TestCountHandedBackHalfLine(t *testing.T) {
	u := newUnanswered()
	head := []byte(`{"jsonrpc":"2.0","id":"split","method":"tools/call",`)
	u.sent(head) // relayed to the pool that stops
	u.handedBack()
	held := append(append([]byte(nil), head...), `"params":{}}`+"\n"...) // the Farewell's pending, then the tail
	u.sent(held)
	if lost := u.lost(); len(lost) != 1 || lost[0].ID != `"split"` {
		t.Fatalf("owed after the hand-back: %v; want the split call", lost)
	}
}

// A pool killed with the head of a line read: the head goes to the next
// pool first, then the tail, and the whole line is counted once. What was
// owed stays owed until its answer passes back, however many pools die
// before one answers it.
func TestCountKeepsWhatNoPoolAnswered(t *testing.T) {
	u := newUnanswered()
	u.sent([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}` + "\n" + `{"jsonrpc":"2.0","id":"half",`))
	if lost := u.lost(); len(lost) != 1 || lost[0].ID != "1" {
		t.Fatalf("owed at the first kill: %v", lost)
	}
	if head := string(u.head()); head != `{"jsonrpc":"2.0","id":"half",` {
		t.Fatalf("the head to send the next pool: %q", head)
	}
	u.sent([]byte(`"method":"ping"}` + "\n")) // the tail, to the next pool
	if lost := u.lost(); len(lost) != 2 {
		t.Fatalf("owed at the second kill: %v; want 1 and the half line's", lost)
	}
	u.received([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32003,"message":"restarted"}}` + "\n"))
	if lost := u.lost(); len(lost) != 1 || lost[0].ID != `"half"` {
		t.Fatalf("owed once 1 was answered: %v", lost)
	}
}

// A pool that died before its Welcome may have listed in the ledger the
// requests of the input the shim carried to it: that input goes to the
// next pool, which answers them, so they are not owed twice.
func TestLostLeavesOutWhatTheShimCarries(t *testing.T) {
	lost := []wire.Lost{{ID: `"carried"`}, {ID: `"owed"`}, {ID: `"ran"`, Written: true}}
	carried := []byte(`{"jsonrpc":"2.0","id":"carried","method":"tools/call","params":{}}` + "\n" + `{"jsonrpc":"2.0","id":"ran","method":"tools/call","params":{}}` + "\n" + `{"jsonrpc":"2.0","id":"owed",`)
	got := notCarried(lost, carried)
	if len(got) != 2 || got[0].ID != `"owed"` || got[1].ID != `"ran"` {
		t.Fatalf("owed besides the carried input: %v; want \"owed\" (its line is not whole) and \"ran\" (it reached a child)", got)
	}
}

// What sent noted and the pool did not take (the write to it failed
// part-way) is taken back: a request whose line ended in that part is not
// owed, the line under way is the one as far as the failed write, and a
// request the pool took whole stays owed. Every split point is tried,
// with the chunk starting inside a line, so that the head spans chunks.
func TestCountTakesBackWhatThePoolDidNotTake(t *testing.T) {
	const (
		before = `{"jsonrpc":"2.0","id":"taken","method":"tools/call","params":{}}` + "\n" + `{"jsonrpc":"2.0","id":"spl`
		chunk  = `it","method":"tools/call","params":{}}` + "\n" + `{"jsonrpc":"2.0","id":"next","method":"ping"}` + "\n" + `{"jsonrpc"`
	)
	for n := 0; n <= len(chunk); n++ {
		u := newUnanswered()
		u.sent([]byte(before))
		u.sent([]byte(chunk))
		u.unsent([]byte(chunk), n)
		var owed []string
		for _, l := range u.lost() {
			owed = append(owed, l.ID)
		}
		sort.Strings(owed)
		sofar := before + chunk[:n]
		want := []string{`"taken"`}
		if i := strings.Index(chunk, "\n"); n > i {
			want = append(want, `"split"`)
			if j := strings.Index(chunk[i+1:], "\n") + i + 1; n > j {
				want = append(want, `"next"`)
			}
		}
		sort.Strings(want)
		if strings.Join(owed, ",") != strings.Join(want, ",") {
			t.Errorf("write failed at %d: owed %v; want %v", n, owed, want)
		}
		if head, wantHead := string(u.head()), sofar[strings.LastIndex(sofar, "\n")+1:]; head != wantHead {
			t.Errorf("write failed at %d: the head is %q; want %q", n, head, wantHead)
		}
		// The relay sends the next pool the head, then what no pool took,
		// and counts the latter (the head is counted): the count then is
		// as if nothing had failed.
		u.sent([]byte(chunk[n:]))
		if got := len(u.lost()); got != 3 {
			t.Errorf("write failed at %d, the rest sent to the next pool: %d owed; want 3", n, got)
		}
	}
}
