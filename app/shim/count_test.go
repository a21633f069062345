package shim

import (
	"sort"
	"strings"
	"testing"
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
	if again := u.lost(); len(again) != 0 {
		t.Errorf("lost() did not forget: %v", again)
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
