package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"nothing secret", `{"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
			`{"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`},
		{"string values", `{"password":"hunter2","apiKey":"sk-1","x-api-key":"k","Authorization":"Bearer abc.def.ghi"}`,
			`{"password":"[REDACTED]","apiKey":"[REDACTED]","x-api-key":"[REDACTED]","Authorization":"[REDACTED]"}`},
		{"any value type", `{"token":12345,"secret":{"a":"b","c":[1,2]},"cookies":["x","y"],"credential":null,"pin":1}`,
			`{"token":"[REDACTED]","secret":"[REDACTED]","cookies":"[REDACTED]","credential":"[REDACTED]","pin":1}`},
		{"spaces around the colon", "{ \"client_secret\" :\n \"s3\" , \"ok\": 1}", "{ \"client_secret\" :\n \"[REDACTED]\" , \"ok\": 1}"},
		{"escaped key", `{"api\u005fkey":"sk-2"}`, `{"api\u005fkey":"[REDACTED]"}`},
		{"escaped quotes in the value", `{"token":"a\"b","n":1}`, `{"token":"[REDACTED]","n":1}`},
		{"nested in arrays", `[{"user":"bob","pass":"x"},{"session_token":"t"}]`,
			`[{"user":"bob","pass":"[REDACTED]"},{"session_token":"[REDACTED]"}]`},
		{"not secrets", `{"progressToken":"p1","maxTokens":100,"author":"me","monkey":"banana","keyboard":"qwerty","nextCursor":"c"}`,
			`{"progressToken":"p1","maxTokens":100,"author":"me","monkey":"banana","keyboard":"qwerty","nextCursor":"c"}`},
		{"words", `{"primaryKey":"k","AWS_SECRET_ACCESS_KEY":"a","basicAuth":"b","auth":"c"}`,
			`{"primaryKey":"[REDACTED]","AWS_SECRET_ACCESS_KEY":"[REDACTED]","basicAuth":"[REDACTED]","auth":"[REDACTED]"}`},
		{"a key that is a value", `{"name":"password","value":"x"}`, `{"name":"password","value":"x"}`},

		// Cut off anywhere: never a secret byte out.
		{"cut in the secret", `{"params":{"password":"hunt`, `{"params":{"password":"[REDACTED]"`},
		{"cut in a secret object", `{"secret":{"a":"b","c":"`, `{"secret":"[REDACTED]"`},
		{"cut after the colon", `{"password": `, `{"password": `},
		{"cut in the key", `{"passw`, `{"passw`},
		{"cut in an escape", `{"token":"ab\`, `{"token":"[REDACTED]"`},
		{"cut in a number", `{"token":12`, `{"token":"[REDACTED]"`},

		// Inside strings.
		{"bearer in text", `{"text":"curl -H 'Authorization: Bearer eyJhbGciOi.abc' x"}`,
			`{"text":"curl -H 'Authorization: Bearer [REDACTED]' x"}`},
		{"query string", `{"url":"https://x.test/a?q=1&api_key=sk-9&access_token=t0k"}`,
			`{"url":"https://x.test/a?q=1&api_key=[REDACTED]&access_token=[REDACTED]"}`},
		{"env assignment", `{"cmd":"GITHUB_TOKEN=ghp_abc make deploy"}`, `{"cmd":"GITHUB_TOKEN=[REDACTED] make deploy"}`},
		{"stringified JSON", `{"arguments":"{\"password\":\"hunter2\",\"user\":\"bob\"}"}`,
			`{"arguments":"{\"password\":\"[REDACTED]\",\"user\":\"bob\"}"}`},
		{"stringified JSON, number", `{"arguments":"{\"pin\":1,\"token\":42}"}`, `{"arguments":"{\"pin\":1,\"token\":\"[REDACTED]\"}"}`},
		{"stringified JSON cut off", `{"arguments":"{\"secret\":\"abc`, `{"arguments":"{\"secret\":\"[REDACTED]\"`},
		{"not JSON at all", `hello password=x`, `hello password=x`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(Redact([]byte(tc.in))); got != tc.want {
				t.Errorf("Redact(%s)\n got %s\nwant %s", tc.in, got, tc.want)
			}
		})
	}
}

// TestRedactEveryPrefix cuts a payload with secrets at every byte: no
// prefix may show any byte of a secret.
func TestRedactEveryPrefix(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"deploy","arguments":` +
		`{"env":{"API_KEY":"SECRET-ONE"},"headers":{"Authorization":"Bearer SECRET-TWO"},"password":"SECRET-THREE",` +
		`"note":"use Bearer SECRET-FOUR-LONG","url":"https://h/?token=SECRET-FIVE","json":"{\"secret\":\"SECRET-SIX\"}"}}}`
	for n := range len(in) + 1 {
		got := string(Redact([]byte(in[:n])))
		if i := strings.Index(got, "SECRET-"); i >= 0 {
			t.Fatalf("prefix of %d bytes leaks: %s", n, got)
		}
	}
}

func TestRedactArgs(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"npx", "-y", "@modelcontextprotocol/server-memory"}, []string{"npx", "-y", "@modelcontextprotocol/server-memory"}},
		{[]string{"srv", "--api-key", "sk-1", "--port", "80"}, []string{"srv", "--api-key", Redacted, "--port", "80"}},
		{[]string{"srv", "--token=abc", "-v"}, []string{"srv", "--token=" + Redacted, "-v"}},
		{[]string{"env", "GITHUB_TOKEN=ghp_x", "srv"}, []string{"env", "GITHUB_TOKEN=" + Redacted, "srv"}},
		{[]string{"srv", "--header", "Authorization: Bearer abcdefghijk"}, []string{"srv", "--header", "Authorization: Bearer " + Redacted}},
		{[]string{"srv", "--password"}, []string{"srv", "--password"}},
	} {
		if got := RedactArgs(tc.in); !cmp.Equal(got, tc.want) {
			t.Errorf("RedactArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Free text (an error, a root's URI) also loses a URL's user information,
// which may be a password or a token; an address or a URL without any
// keeps its every byte. A child's stderr line, or an error quoting it,
// loses its bearer credentials, secret flags and assignments and the
// secret values of JSON it logs; the rest of it is kept.
func TestRedactText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Authorization: Bearer sk-live-123456", "Authorization: Bearer " + Redacted},
		{"proxy: basic dXNlcjpwYXNz rejected", "proxy: basic " + Redacted + " rejected"},
		{"usage: srv --token=abc123 --api-key=k-9 --port=8080", "usage: srv --token=" + Redacted + " --api-key=" + Redacted + " --port=8080"},
		{"GITHUB_TOKEN=ghp_x AWS_SECRET_ACCESS_KEY=aws1 HOME=/home/u", "GITHUB_TOKEN=" + Redacted + " AWS_SECRET_ACCESS_KEY=" + Redacted + " HOME=/home/u"},
		{`config: {"apiKey": "sk-1", "model": "m"}`, `config: {"apiKey": "` + Redacted + `", "model": "m"}`},
		{`server "x": the child exited (stderr: "Authorization: Bearer sk-2 --api-key=k-3")`,
			`server "x": the child exited (stderr: "Authorization: Bearer ` + Redacted + ` --api-key=` + Redacted + `")`},
		{`last stderr: ["token=t1" "ok"]`, `last stderr: ["token=` + Redacted + `" "ok"]`},
		{"fetch https://api.test/v1?access_token=t2&q=1: 401", "fetch https://api.test/v1?access_token=" + Redacted + "&q=1: 401"},
		{"Error: ENOENT: no such file, open '/home/u/.config/x.json'", "Error: ENOENT: no such file, open '/home/u/.config/x.json'"},
		{"", ""},
		{"dial postgres://app:s3cret@db:5432/x: refused", "dial postgres://" + Redacted + "@db:5432/x: refused"},
		{"https://ghp_abc123@github.com/o/r.git", "https://" + Redacted + "@github.com/o/r.git"},
		{`{"uri":"https://u:p@h/a?token=t"}`, `{"uri":"https://` + Redacted + `@h/a?token=` + Redacted + `"}`},
		{"file:///home/u/a@b/c", "file:///home/u/a@b/c"},
		{"mail bob@example.com about https://example.com/a@b", "mail bob@example.com about https://example.com/a@b"},
	} {
		if got := RedactText(tc.in); got != tc.want {
			t.Errorf("RedactText(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// A request's name is a resource's URI for a resources/read, and a URI
// may carry a password or a token: the history keeps it redacted as a
// root, with payload capture off, in the row of a request that ended, of
// one in flight, and of one a crash left in the journal (and hangs, which
// reads the journal of a live run). A tool's name keeps every byte, even
// one that speaks of keys or tokens.
func TestRequestNamesAreRedacted(t *testing.T) {
	const secretURI = "https://bob:s3cret@host/doc?access_token=abc123"
	const want = "https://" + Redacted + "@host/doc?access_token=" + Redacted
	plain := []string{"get_api_key", "create_token", "password-reset", "file:///home/u/a@b/notes.md", "x=1"}
	path := dbPath(t)
	s := openT(t, path, &Options{FlushInterval: time.Hour})
	ctx := context.Background()
	now := time.Now()
	s.Record(received(1, "s1", "resources/read", secretURI, now))
	s.Record(done(1, "s1", "resources/read", secretURI, pool.StatusOK, 7, now))
	for i, n := range plain {
		id := uint64(10 + i)
		s.Record(received(id, "s1", "tools/call", n, now))
		s.Record(done(id, "s1", "tools/call", n, pool.StatusOK, 7, now))
	}
	s.Record(received(2, "s1", "resources/read", secretURI, now)) // in flight: journaled
	s.Record(received(3, "s1", "resources/subscribe", secretURI, now))
	crash(t, s)
	ro, err := OpenReadOnly(path) // hangs after the crash, before a start records the journal
	if err != nil {
		t.Fatal(err)
	}
	hs, err := ro.Hangs(ctx, 0, now.Add(time.Minute))
	ro.Close()
	if err != nil || len(hs) != 2 {
		t.Fatalf("hangs: %+v, %v; want the two in flight", hs, err)
	}
	for _, h := range hs {
		if h.Name != want {
			t.Errorf("hangs: request %d is named %q, want %q", h.PoolID, h.Name, want)
		}
	}

	s2 := openT(t, path, &Options{InFlightAfter: time.Nanosecond})
	s2.Record(received(4, "s2", "resources/read", secretURI, now)) // in flight past InFlightAfter: a row of its own
	if err := s2.flush(); err != nil {
		t.Fatal(err)
	}
	rs, err := s2.Requests(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
		if r.Method != "tools/call" && r.Name != want {
			t.Errorf("%s request %d (%s) is named %q, want %q", r.Status, r.PoolID, r.Method, r.Name, want)
		}
	}
	for _, n := range plain {
		if !slices.Contains(names, n) {
			t.Errorf("the tool %q is not kept whole: names %q", n, names)
		}
	}
	var raw int
	if err := s2.rdb().QueryRow(`SELECT count(*) FROM names WHERE instr(text, 's3cret') > 0 OR instr(text, 'abc123') > 0`).Scan(&raw); err != nil || raw != 0 {
		t.Errorf("the names dictionary holds the secret %d times (%v)", raw, err)
	}
	if len(rs) != len(plain)+4 {
		t.Errorf("%d requests, want %d", len(rs), len(plain)+4)
	}
}

// redactName skips RedactText for a name with nothing it could redact:
// never for one it would change.
func TestRedactNameSkipsOnlyWhatNeedsNothing(t *testing.T) {
	parts := []string{"a", "token", "=", "@", "https://", `"`, ` `, "\t", "Bearer ", "x:y", `\"`, "key", ":", "é"}
	var walk func(s string, depth int)
	walk = func(s string, depth int) {
		if got, want := redactName(s), RedactText(s); got != want {
			t.Errorf("redactName(%q) = %q, want %q", s, got, want)
		}
		if depth == 0 {
			return
		}
		for _, p := range parts {
			walk(s+p, depth-1)
		}
	}
	walk("", 4)
}
