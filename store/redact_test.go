package store

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/pool"
)

// ghToken is shaped as a GitHub personal access token is.
const ghToken = "ghp_0123456789abcdefghijABCDEFGHIJklmnop"

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
		{"a key that is a value", `{"name":"password","type":"string"}`, `{"name":"password","type":"string"}`},
		{"pwd", `{"user":"sa","pwd":"Hunter2","db_pwd":"x","cwd":"/home/u"}`, `{"user":"sa","pwd":"[REDACTED]","db_pwd":"[REDACTED]","cwd":"/home/u"}`},

		// A value that a sibling names: an environment list, a form's fields.
		{"name and value", `{"env":[{"name":"GITHUB_TOKEN","value":"` + ghToken + `"},{"name":"HOME","value":"/home/u"}]}`,
			`{"env":[{"name":"GITHUB_TOKEN","value":"[REDACTED]"},{"name":"HOME","value":"/home/u"}]}`},
		{"value before name", `[{"value":"hunter2","type":"password","name":"DB_PASSWORD"},{"value":"8080","name":"PORT"}]`,
			`[{"value":"[REDACTED]","type":"password","name":"DB_PASSWORD"},{"value":"8080","name":"PORT"}]`},
		// (A "key" member is itself a secret key: its value goes too.)
		{"Key and Value", `{"Environment":[{"Key":"api_key","Value":{"v":1}},{"Key":"primary_key","Value":"id"}]}`,
			`{"Environment":[{"Key":"[REDACTED]","Value":"[REDACTED]"},{"Key":"[REDACTED]","Value":"id"}]}`},
		{"nested names are not siblings", `{"value":"v","meta":{"name":"token"},"items":[{"name":"password"}]}`,
			`{"value":"v","meta":{"name":"token"},"items":[{"name":"password"}]}`},
		{"a pair cut in its value", `{"env":[{"name":"GITHUB_TOKEN","value":"ghp_ab`, `{"env":[{"name":"GITHUB_TOKEN","value":"[REDACTED]"`},
		{"a value cut before its name", `{"env":[{"value":"hunter2","na`, `{"env":[{"value":"[REDACTED]","na`},

		// Presigned URLs: the signature is the credential.
		{"S3 presigned", `{"uri":"https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-SignedHeaders=host&X-Amz-Signature=fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024"}`,
			`{"uri":"https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=[REDACTED]&X-Amz-SignedHeaders=host&X-Amz-Signature=[REDACTED]"}`},
		{"Azure SAS", `{"uri":"https://a.blob.core.windows.net/c/b?sv=2022-11-02&se=2026-01-01&sr=b&sp=r&sig=AbC%2Bdef123%3D"}`,
			`{"uri":"https://a.blob.core.windows.net/c/b?sv=2022-11-02&se=2026-01-01&sr=b&sp=r&sig=[REDACTED]"}`},
		{"GCS and CloudFront", `["https://storage.googleapis.com/b/o?X-Goog-Signature=0a1b2c3d4e5f","https://d1.cloudfront.net/v.mp4?Expires=1&Signature=Nq8Zy~Ab1-&Key-Pair-Id=K2"]`,
			`["https://storage.googleapis.com/b/o?X-Goog-Signature=[REDACTED]","https://d1.cloudfront.net/v.mp4?Expires=1&Signature=[REDACTED]&Key-Pair-Id=[REDACTED]"]`},
		{"signature keys", `{"signature":"MEUCIQ","sig":"x","X-Amz-Signature":"y","webhookSignature":"z"}`,
			`{"signature":"[REDACTED]","sig":"[REDACTED]","X-Amz-Signature":"[REDACTED]","webhookSignature":"[REDACTED]"}`},
		{"not signatures", `{"signatureHelp":{"label":"f(x)"},"signed":true,"design":"d","sigma":1,"signal":"SIGTERM","signatureVersion":"4","signedHeaders":"host"}`,
			`{"signatureHelp":{"label":"f(x)"},"signed":true,"design":"d","sigma":1,"signal":"SIGTERM","signatureVersion":"4","signedHeaders":"host"}`},

		// A provider's token needs no key to be known.
		{"a token after an escaped newline", `{"log":"start\n` + ghToken + `\tok"}`, `{"log":"start\nghp_[REDACTED]\tok"}`},
		{"bare tokens", `{"text":"use ` + ghToken + ` or AKIAIOSFODNN7EXAMPLE","error":"bad key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t"}`,
			`{"text":"use ghp_[REDACTED] or AKIA[REDACTED]","error":"bad key sk-[REDACTED]"}`},

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

		// A URL's user information, in any string value.
		{"resource URI", `{"method":"resources/read","params":{"uri":"https://bob:pw@host/doc?access_token=abc"}}`,
			`{"method":"resources/read","params":{"uri":"https://[REDACTED]@host/doc?access_token=[REDACTED]"}}`},
		{"DSN argument", `{"arguments":{"dsn":"postgres://app:Hunter2@db/prod"}}`, `{"arguments":{"dsn":"postgres://[REDACTED]@db/prod"}}`},
		{"password only", `{"arguments":{"url":"redis://:hunter2@cache:6379/0"}}`, `{"arguments":{"url":"redis://[REDACTED]@cache:6379/0"}}`},
		{"token as user", `["git clone https://ghp_abc123@github.com/o/r.git"]`, `["git clone https://[REDACTED]@github.com/o/r.git"]`},
		{"escaped slashes", `{"uri":"https:\/\/bob:pw@host\/doc"}`, `{"uri":"https:\/\/[REDACTED]@host\/doc"}`},
		{"URL in stringified JSON", `{"arguments":"{\"dsn\":\"postgres://app:Hunter2@db/prod\"}"}`,
			`{"arguments":"{\"dsn\":\"postgres://[REDACTED]@db/prod\"}"}`},
		{"cut in the user information", `{"arguments":{"dsn":"postgres://app:Hunt`, `{"arguments":{"dsn":"postgres://[REDACTED]`},
		{"cut after it", `{"arguments":{"dsn":"postgres://app:Hunter2@d`, `{"arguments":{"dsn":"postgres://[REDACTED]@d`},
		{"addresses and URLs without any", `{"a":"https://host/path","b":"git@github.com:org/repo.git","c":"user@example.com","d":"https://example.com/a@b","e":"file:///home/u/a@b"}`,
			`{"a":"https://host/path","b":"git@github.com:org/repo.git","c":"user@example.com","d":"https://example.com/a@b","e":"file:///home/u/a@b"}`},
		{"cut in a path", `{"a":"https://host/pa`, `{"a":"https://host/pa`},
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
		`"note":"use Bearer SECRET-FOUR-LONG","url":"https://h/?token=SECRET-FIVE","json":"{\"secret\":\"SECRET-SIX\"}",` +
		`"dsn":"postgres://app:SECRET-SEVEN@db/prod","json2":"{\"url\":\"redis://:SECRET-EIGHT@cache\"}",` +
		`"vars":[{"name":"GITHUB_TOKEN","value":"SECRET-NINE"}],"get":"https://b/k?X-Amz-Signature=SECRET-TEN&sig=SECRET-ELEVEN"}}}`
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

		// A URL's user information, in any argument.
		{[]string{"srv", "postgresql://user:s3cret@localhost/db"}, []string{"srv", "postgresql://" + Redacted + "@localhost/db"}},
		{[]string{"srv", "--url", "redis://:hunter2@cache:6379/0"}, []string{"srv", "--url", "redis://" + Redacted + "@cache:6379/0"}},
		{[]string{"srv", "--dsn=postgres://app:Hunter2@db/prod"}, []string{"srv", "--dsn=postgres://" + Redacted + "@db/prod"}},
		{[]string{"srv", "-e", "DATABASE_URL=mysql://root:pw@127.0.0.1/app"}, []string{"srv", "-e", "DATABASE_URL=mysql://" + Redacted + "@127.0.0.1/app"}},
		// A secret header's value: an Authorization header keeps its scheme.
		{[]string{"srv", "--header", "Authorization: token ghp_abc123"}, []string{"srv", "--header", "Authorization: token " + Redacted}},
		{[]string{"srv", "-H", "Authorization: Basic dXNlcjpwYXNz"}, []string{"srv", "-H", "Authorization: Basic " + Redacted}},
		{[]string{"mcp-remote", "https://x.test/mcp", "--header", "Authorization:Bearer abc"},
			[]string{"mcp-remote", "https://x.test/mcp", "--header", "Authorization:Bearer " + Redacted}},
		{[]string{"srv", "--header=Authorization: Bearer abc", "-v"}, []string{"srv", "--header=Authorization: Bearer " + Redacted, "-v"}},
		{[]string{"srv", "--header", "Authorization: ghp_abc123"}, []string{"srv", "--header", "Authorization: " + Redacted}},
		{[]string{"srv", "-H", "X-API-Key: abcdef", "-H", "Cookie: sid=1; theme=dark"},
			[]string{"srv", "-H", "X-API-Key: " + Redacted, "-H", "Cookie: " + Redacted}},
		// JSON in an argument (Smithery's --config, an --env object): its
		// secret keys' values, as RedactText has them.
		{[]string{"npx", "-y", "@smithery/cli", "run", "x", "--config", `{"apiKey":"smitherySECRET123","profile":"x"}`},
			[]string{"npx", "-y", "@smithery/cli", "run", "x", "--config", `{"apiKey":"` + Redacted + `","profile":"x"}`}},
		{[]string{"srv", "--env", `{"API_KEY":"envSECRET456","REGION":"eu"}`},
			[]string{"srv", "--env", `{"API_KEY":"` + Redacted + `","REGION":"eu"}`}},
		{[]string{"srv", `--config={"token": "cfgSECRET789", "debug": true}`},
			[]string{"srv", `--config={"token": "` + Redacted + `", "debug": true}`}},
		{[]string{"srv", `{"auth":{"password":"pw SECRET"},"user":"bob"}`},
			[]string{"srv", `{"auth":"` + Redacted + `","user":"bob"}`}},
		// A provider's token standing alone keeps its prefix, as in RedactText.
		{[]string{"srv", "ghp_ALICEsecret0123456789abcdefABCDEF12"}, []string{"srv", "ghp_" + Redacted}},
		// Nearby, nothing secret.
		{[]string{"srv", "--config", `{"profile":"x","port":80}`}, []string{"srv", "--config", `{"profile":"x","port":80}`}},
		{[]string{"srv", "--header", "Accept: application/json", "-H", "localhost", "https://host/path"},
			[]string{"srv", "--header", "Accept: application/json", "-H", "localhost", "https://host/path"}},
		{[]string{"git", "clone", "git@github.com:org/repo.git", "--author", "user@example.com", "--base=https://host/path"},
			[]string{"git", "clone", "git@github.com:org/repo.git", "--author", "user@example.com", "--base=https://host/path"}},
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

		// Presigned URLs, and an ODBC connection string's Pwd.
		{"GET https://b.s3.amazonaws.com/k?X-Amz-Signature=fe5f80f77d5f&X-Amz-Expires=60 failed: 403 Forbidden",
			"GET https://b.s3.amazonaws.com/k?X-Amz-Signature=" + Redacted + "&X-Amz-Expires=60 failed: 403 Forbidden"},
		{"blob https://a.blob.core.windows.net/c/b?sp=r&sig=AbC%2Bdef123%3D expired", "blob https://a.blob.core.windows.net/c/b?sp=r&sig=" + Redacted + " expired"},
		{"login failed: Server=db;Uid=sa;Pwd=Hunter2;Database=x", "login failed: Server=db;Uid=sa;Pwd=" + Redacted + ";Database=x"},
		{`{"user":"sa","pwd":"Hunter2"}`, `{"user":"sa","pwd":"` + Redacted + `"}`},

		// A provider's token, bare in a child's error: its prefix says
		// which it was.
		{"401 Bad credentials for " + ghToken, "401 Bad credentials for ghp_" + Redacted},
		{"token github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUV expired",
			"token github_pat_" + Redacted + " expired"},
		{"slack: invalid_auth (xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx)", "slack: invalid_auth (xoxb-" + Redacted + ")"},
		{"user xoxp-1234567890-1234567890-1234567890-0123456789abcdef0123456789abcdef", "user xoxp-" + Redacted},
		{"InvalidAccessKeyId: AKIAIOSFODNN7EXAMPLE, ASIAY34FZKBOKMUTVV7A.", "InvalidAccessKeyId: AKIA" + Redacted + ", ASIA" + Redacted + "."},
		{"openai: Incorrect API key provided: sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", "openai: Incorrect API key provided: sk-" + Redacted},
		{"anthropic: invalid x-api-key sk-ant-api03-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z-AAAA", "anthropic: invalid x-api-key sk-" + Redacted},
		{"stripe: No such key sk_live_51Hx0123456789abcdefABCDEF", "stripe: No such key sk_live_" + Redacted},
		{`vars: [{"name":"GITHUB_TOKEN","value":"` + ghToken + `"}]`, `vars: [{"name":"GITHUB_TOKEN","value":"` + Redacted + `"}]`},
		{`vars: [{"name":"DB_PASSWORD","value":"hunter2"}, {"name":"PORT","value":"80"}]`,
			`vars: [{"name":"DB_PASSWORD","value":"` + Redacted + `"}, {"name":"PORT","value":"80"}]`},
		{`vars: [{"value":"hunter2", "name":"DB_PASSWORD"}]`, `vars: [{"value":"` + Redacted + `", "name":"DB_PASSWORD"}]`},
	} {
		if got := RedactText(tc.in); got != tc.want {
			t.Errorf("RedactText(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// A child's stderr and errors are prose, which names secrets ("auth",
// "key", "password", "Basic") without holding any: each line keeps every
// byte of what a user needs to see why the child failed, and the secret
// that the same line could carry, in the row after it, still goes. A
// JSON value of a secret key goes when it is one (a string, a number,
// true or false, a balanced object or array, or a token shaped like a
// credential), a name=value pair's value when the name is secret, up to
// its own end, and what follows Bearer or Basic when it is shaped like a
// credential.
func TestRedactTextKeepsProse(t *testing.T) {
	const r = Redacted
	for _, tc := range []struct{ in, want string }{
		{`config error in "auth": {missing field "issuer" in /home/u/app.yaml; see docs`,
			`config error in "auth": {missing field "issuer" in /home/u/app.yaml; see docs`},
		{`config error in "auth": {"issuer": "x", "secret": "s3"}; see docs`, `config error in "auth": "` + r + `"; see docs`},
		{`config error in "auth": {"issuer": "x", "secret": "s3`, `config error in "auth": "` + r + `"`}, // cut off in it
		{`config error in "auth": {SSHA}a9Yx2w==; see docs`, `config error in "auth": "` + r + `"; see docs`},
		{`config error in "auth": ["k1", "k2"] unused`, `config error in "auth": "` + r + `" unused`},

		{`Error: invalid "key": expected string, got number`, `Error: invalid "key": expected string, got number`},
		{`Error: invalid "key": "AIzaSyA-1" for project p`, `Error: invalid "key": "` + r + `" for project p`},
		{`Error: invalid "api_key": 12345, "secret": true, "token": null, "password": ""`,
			`Error: invalid "api_key": "` + r + `", "secret": "` + r + `", "token": null, "password": ""`},

		{`warn: "password": must be at least 8 chars`, `warn: "password": must be at least 8 chars`},
		{`warn: "password": hunter2 is too weak`, `warn: "password": "` + r + `" is too weak`},

		{"Running basic health checks", "Running basic health checks"},
		{"Bearer authentication failed: Bearer tokens expire", "Bearer authentication failed: Bearer tokens expire"},
		{`WWW-Authenticate: Bearer realm="api", error="invalid_token"`, `WWW-Authenticate: Bearer realm="api", error="invalid_token"`},
		{"Running basic dXNlcjpwYXNzd29yZA== checks", "Running basic " + r + " checks"},
		{"proxy: Basic YTpi rejected", "proxy: Basic " + r + " rejected"},
		{"(Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.c2ln)", "(Authorization: Bearer " + r + ")"},

		{"Listening key=value pairs: primary_key=id sort_key=ts foreign_key=user_id", "Listening key=value pairs: primary_key=id sort_key=ts foreign_key=user_id"},
		{"Listening key=AIzaSyA1 api_key=sk-1 private_key=k secret_key=s client_secret=c primary_key=id",
			"Listening key=" + r + " api_key=" + r + " private_key=" + r + " secret_key=" + r + " client_secret=" + r + " primary_key=id"},
		{"bad flag (--api-key=x): unknown; [token=t1] {password=p}", "bad flag (--api-key=" + r + "): unknown; [token=" + r + "] {password=" + r + "}"},
		{"login: password=pa)ss'w0rd]x rejected", "login: password=" + r + " rejected"},

		{"GET https://bob:pw@api.test/v1?access_token=t0k&page=2 failed", "GET https://" + r + "@api.test/v1?access_token=" + r + "&page=2 failed"},
		{"GET https://maps.test/api?key=AIzaSyXYZ&alt=json (403)", "GET https://maps.test/api?key=" + r + "&alt=json (403)"},
		{"env: AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY AWS_REGION=us-east-1 PWD=/home/u",
			"env: AWS_SECRET_ACCESS_KEY=" + r + " AWS_REGION=us-east-1 PWD=/home/u"},
		{`export PGPASSWORD="p@ss word"; TOKEN='a b' psql`, `export PGPASSWORD="` + r + `"; TOKEN='` + r + `' psql`},

		{`{"level":"error","req":{"headers":{"authorization":"Bearer x.y.z","cookie":"sid=1"},"url":"/a?token=t9"},"auth":{"user":"bob","pass":"pw"},"msg":"denied: primary_key=id"}`,
			`{"level":"error","req":{"headers":{"authorization":"` + r + `","cookie":"` + r + `"},"url":"/a?token=` + r + `"},"auth":"` + r + `","msg":"denied: primary_key=id"}`},
		{`time=1 "msg" "password": "x" then "token": "t"`, `time=1 "msg" "password": "` + r + `" then "token": "` + r + `"`},

		// A %q-quoted stderr line: its JSON is stringified.
		{"child said " + strconv.Quote(`warn: "password": must be at least 8 chars`), "child said " + strconv.Quote(`warn: "password": must be at least 8 chars`)},
		{"child said " + strconv.Quote(`{"level":"warn","auth":{"user":"bob","password":"hunter2"},"msg":"login failed","key":expected}`),
			"child said " + strconv.Quote(`{"level":"warn","auth":"`+r+`","msg":"login failed","key":expected}`)},
		{`{"arguments":"{\"token\":\"a"}`, `{"arguments":"{\"token\":\"` + r + `\""}`}, // cut after a byte of it
		{`{"env":"TOKEN=","n":1} TOKEN="" x`, `{"env":"TOKEN=","n":1} TOKEN="" x`},
		{`"password": "token": sk-1`, `"password": "token": "` + r + `"`},

		// Near misses: words that hold "sig", a signature check's verdict,
		// the shell's PWD, short or word-shaped token look-alikes.
		{"design=simple signal=SIGTERM signed=true sigma=2 SignatureVersion=2 signatureHelp=on",
			"design=simple signal=SIGTERM signed=true sigma=2 SignatureVersion=2 signatureHelp=on"},
		{"webhook: signature=invalid sig=none", "webhook: signature=invalid sig=none"},
		{"cd: PWD=/home/u/src OLDPWD=~/x pwd=C:\\Users\\u", "cd: PWD=/home/u/src OLDPWD=~/x pwd=C:\\Users\\u"},
		{"task-1234567890abcdefghijKLMN risk-0123456789abcdefghijklmn", "task-1234567890abcdefghijKLMN risk-0123456789abcdefghijklmn"},
		{"pip install sk-learn-extension-toolkit-for-models", "pip install sk-learn-extension-toolkit-for-models"},
		{"ghp_short xoxb- xoxb-help AKIA AKIAIOSFODNN7EXAMPL BAKIAIOSFODNN7EXAMPLE AKIAIOSFODNN7EXAMPLEX",
			"ghp_short xoxb- xoxb-help AKIA AKIAIOSFODNN7EXAMPL BAKIAIOSFODNN7EXAMPLE AKIAIOSFODNN7EXAMPLEX"},
		{`vars: [{"name":"HOME","value":"/home/u"}, {"value":"x"}, {"name":"TOKEN_TTL"}]`,
			`vars: [{"name":"HOME","value":"/home/u"}, {"value":"x"}, {"name":"TOKEN_TTL"}]`},
	} {
		if got := RedactText(tc.in); got != tc.want {
			t.Errorf("RedactText(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}

	// The end of a text cut from a longer one (the history's, at 1 KiB), or
	// a stderr line's "…" (cut at 512 bytes), may be inside a credential:
	// what could be one goes, whatever its shape.
	for _, tc := range []struct{ in, whole, cut string }{
		{`warn: "password": must`, `warn: "password": must`, `warn: "password": "` + r + `"`},
		{"Authorization: Bearer abcd", "Authorization: Bearer abcd", "Authorization: Bearer " + r},
		{"GET /x?key=abcd", "GET /x?key=abcd", "GET /x?key=" + r},
		{"Authorization: Bearer abcd…", "Authorization: Bearer " + r + "…", "Authorization: Bearer " + r + "…"},
		{"bad token ghp_0123", "bad token ghp_0123", "bad token ghp_" + r},
		{"bad key AKIAIOSF…", "bad key AKIA" + r + "…", "bad key AKIA" + r + "…"},
	} {
		if got := RedactText(tc.in); got != tc.whole {
			t.Errorf("RedactText(%q)\n got %q\nwant %q", tc.in, got, tc.whole)
		}
		if got := redactText(tc.in, true); got != tc.cut {
			t.Errorf("redactText(%q, cut)\n got %q\nwant %q", tc.in, got, tc.cut)
		}
	}
}

// FuzzRedactText plants a secret, in each form a child's stderr or error
// carries one, between random texts, or at the end of a text cut in it
// (a history text is cut at 1 KiB, a stderr line at 512 bytes and marked
// "…"): no four bytes of it survive, and the text grows by no more than the markers
// that replace secrets. (A URL cut before the @ of its user information
// does not show it has any: those forms are cut only as the history cuts
// a text, which says it was, not as a stderr line is.)
func FuzzRedactText(f *testing.F) {
	const secret = "S3cr3tV4lu3"
	const urls = 3 // forms[:urls]
	forms := []string{
		"https://bob:%s@db.test:5432/x",
		"git clone https://%s@github.test/o/r.git",
		"dial postgres://app:%s@db:5432/x: refused",
		"password=%s",
		"(--api-key=%s)",
		"AWS_SECRET_ACCESS_KEY=%s",
		"export PGPASSWORD='%s';",
		"Authorization: Bearer %s",
		"Proxy-Authorization: Basic %s",
		`{"apiKey": "%s", "model": "m"}`,
		`"token": %s,`,
		`{"level":"info","auth":{"user":"bob","pass":"%s"},"msg":"ok"}`,
		`{"level":"info","auth":{"user":"bob","pass":"%s"`,
		"https://api.test/v1?q=1&access_token=%s&page=2",
		"https://maps.test/api?key=%s",
		"stderr: " + strconv.Quote(`{"secret":"%s","n":1}`),
		"stderr: " + strconv.Quote(`{"auth":{"password":"%s"}}`),
		`{"arguments":"{\"token\":\"%s\"}"}`,
		`"password": "token": %s`,
		"https://b.s3.test/k?X-Amz-Signature=%s&X-Amz-Expires=60",
		"https://a.blob.test/c?sp=r&sig=%s",
		"Server=db;Uid=sa;Pwd=%s;",
		`[{"name":"GITHUB_TOKEN","value":"%s"}]`,
		"401 for ghp_%s0123456789abcdefghijklmnopqrstuv",
		"(github_pat_11ABCDEFG0%s_abcdefghijklmnopqrstuvwxyz0123456789)",
		"slack xoxb-1234567890-%s-AbCdEfGhIjKlMnOpQrStUvWx",
		"bad key sk-proj-%sAb3dEf6hIj9kLm2nOp5qRs8t",
	}
	for _, s := range [][2]string{
		{"", ""},
		{"Running basic health checks", `config error in "auth": {missing field "issuer"`},
		{`warn: "password": must be`, "Listening key=value pairs: primary_key=id"},
		{`"x`, `\"`},
		{`{"a":"b`, `"}]`},
		{`"password": "abc {`, `"}`},
	} {
		for form := range len(forms) {
			f.Add(s[0], s[1], uint8(form))
			f.Add(s[0], s[1], uint8(128+form))
		}
	}
	f.Fuzz(func(t *testing.T, before, after string, form uint8) {
		if strings.Contains(before+after, secret[:4]) {
			return
		}
		planted := strings.ReplaceAll(forms[int(form)%len(forms)], "%s", secret)
		in := before + " " + planted + " " + after
		got := ""
		switch at := strings.Index(planted, secret) + 4 + len(after)%(len(secret)-3); { // cut after 4 bytes of the secret or more
		case form < 128:
			got = RedactText(in)
		case len(after)%2 == 0:
			in = before + " " + planted[:at]
			got = redactText(in, true)
		case int(form)%len(forms) < urls:
			got = RedactText(in)
		default:
			in = before + " " + planted[:at] + "…"
			got = RedactText(in)
		}
		wantRedacted(t, "RedactText", in, got, secret)
	})
}

// wantRedacted fails t if got, what fn made of in, keeps four bytes of
// secret, or grew by more than its markers.
func wantRedacted(t *testing.T, fn, in, got, secret string) {
	t.Helper()
	if strings.Contains(got, secret[:4]) {
		t.Fatalf("%s(%q) leaks:\n%q", fn, in, got)
	}
	if grown, most := len(got)-len(in), strings.Count(got, Redacted)*len(`\"`+Redacted+`\"`); grown > most {
		t.Fatalf("%s(%q) grew by %d bytes, more than its markers (%d):\n%q", fn, in, grown, most, got)
	}
}

// FuzzRedact plants a URL's user information, in each form a captured
// payload carries one, in a string value between random texts: a value,
// one beside other members, one of stringified JSON, or one whose slashes
// are escaped (\/). The payload is whole or cut at any byte from the
// secret's fifth on (the pool captures a prefix): no four bytes of it
// survive, and the payload grows by no more than the markers.
func FuzzRedact(f *testing.F) {
	const secret = "S3cr3tV4lu3"
	forms := []string{
		"https://bob:%s@host/doc?access_token=x",
		"postgres://app:%s@db/prod",
		"redis://:%s@cache:6379/0",
		"git clone https://%s@github.test/o/r.git",
		"DATABASE_URL=mysql://root:%s@127.0.0.1/app",
	}
	for _, s := range [][2]string{
		{"", ""},
		{"Bearer", "x"},
		{`password="`, `"`},
		{`{"a":"b`, `"}]`},
		{"https://", "@"},
		{`a\`, "é"},
	} {
		for form := range 4 * len(forms) {
			f.Add(s[0], s[1], uint8(form/len(forms)*64+form%len(forms)), uint16(0))
			f.Add(s[0], s[1], uint8(form/len(forms)*64+form%len(forms)), uint16(form+1))
		}
	}
	q := func(s string) string {
		b, err := json.Marshal(s)
		if err != nil {
			panic(err)
		}
		return string(b)
	}
	f.Fuzz(func(t *testing.T, before, after string, form uint8, cut uint16) {
		if strings.Contains(before+after, secret[:4]) {
			return
		}
		planted := strings.ReplaceAll(forms[int(form)%len(forms)], "%s", secret)
		v := q(before + " " + planted + " " + after)
		var in string
		switch form / 64 {
		case 0:
			in = `{"params":{"uri":` + v + `}}`
		case 1:
			in = `{"arguments":{"note":` + q(before) + `,"dsn":` + v + `,"n":1}}`
		case 2:
			in = `{"arguments":` + q(`{"dsn":`+v+`}`) + `}`
		default:
			in = `[` + strings.ReplaceAll(v, "/", `\/`) + `]`
		}
		if cut > 0 {
			at := strings.Index(in, secret) + 4
			in = in[:at+int(cut-1)%(len(in)-at+1)]
		}
		got := string(Redact([]byte(in)))
		wantRedacted(t, "Redact", in, got, secret)
	})
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

// With payload capture on, a resource's URI loses its user information in
// the captured request as it does in the name, and an argument carrying a
// database URL loses its password; a child's command line, recorded with
// every start, loses the password of a URL it is given and the value of a
// secret header.
func TestCapturedPayloadsAndCommandsLoseURLCredentials(t *testing.T) {
	const uri = "https://bob:pw1Secret@host/doc?access_token=abc123"
	s := openT(t, dbPath(t), &Options{CapturePayloads: true, FlushInterval: time.Hour})
	now := time.Now()
	s.Record(pool.Event{Kind: pool.EventBackendStarted, Time: now, Server: "srv", PID: 4242,
		Command:         []string{"npx", "srv-mcp", "postgresql://user:s3cret@localhost/db", "--header", "Authorization: token ghp_tok3n"},
		ResolvedCommand: []string{"node", "srv.js", "redis://:hunter2@cache:6379", "-H", "X-API-Key: k3y"}})
	r := received(1, "s1", "resources/read", uri, now)
	r.Payload = []byte(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"` + uri + `"}}`)
	s.Record(r)
	c := received(2, "s1", "tools/call", "query", now)
	c.Payload = []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"query","arguments":{"dsn":"postgres://app:Hunter2@db/prod"}}}`)
	s.Record(c)
	s.Record(done(1, "s1", "resources/read", uri, pool.StatusOK, 4242, now))
	s.Record(done(2, "s1", "tools/call", "query", pool.StatusOK, 4242, now))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Requests(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]string{
		1: `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"https://[REDACTED]@host/doc?access_token=[REDACTED]"}}`,
		2: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"query","arguments":{"dsn":"postgres://[REDACTED]@db/prod"}}}`,
	}
	for _, r := range rs {
		if r.RequestPayload != want[r.PoolID] {
			t.Errorf("request %d captured\n %s\nwant %s", r.PoolID, r.RequestPayload, want[r.PoolID])
		}
	}
	if len(rs) != 2 {
		t.Errorf("%d requests, want 2", len(rs))
	}
	var cmd, resolved string
	if err := s.rdb().QueryRow(`SELECT command, resolved_command FROM backends`).Scan(&cmd, &resolved); err != nil {
		t.Fatal(err)
	}
	if want := `["npx","srv-mcp","postgresql://[REDACTED]@localhost/db","--header","Authorization: token [REDACTED]"]`; cmd != want {
		t.Errorf("command %s, want %s", cmd, want)
	}
	if want := `["node","srv.js","redis://[REDACTED]@cache:6379","-H","X-API-Key: [REDACTED]"]`; resolved != want {
		t.Errorf("resolved command %s, want %s", resolved, want)
	}
}

// redactName skips RedactText for a name with nothing it could redact:
// never for one it would change.
func TestRedactNameSkipsOnlyWhatNeedsNothing(t *testing.T) {
	parts := []string{"a", "token", "=", "@", "https://", `"`, ` `, "\t", "Bearer ", "x:y", `\"`, "key", ":", "é", ghToken, "AKIAIOSFODNN7EXAMPLE"}
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

// A resources/read of a presigned URL names it: the history and the live
// views keep the name without its signature, and a name that is a bare
// token without the token.
func TestRedactNameLosesSignaturesAndTokens(t *testing.T) {
	for in, want := range map[string]string{
		"https://b.s3.amazonaws.com/k?X-Amz-Expires=60&X-Amz-Signature=fe5f80f77d5f": "https://b.s3.amazonaws.com/k?X-Amz-Expires=60&X-Amz-Signature=" + Redacted,
		"https://a.blob.core.windows.net/c/b?sp=r&sig=AbC%2Bdef123%3D":               "https://a.blob.core.windows.net/c/b?sp=r&sig=" + Redacted,
		"secrets://" + ghToken:         "secrets://ghp_" + Redacted,
		"get_signature_help":           "get_signature_help",
		"https://host/doc?signed=true": "https://host/doc?signed=true",
	} {
		if got := RedactName(in); got != want {
			t.Errorf("RedactName(%q) = %q, want %q", in, got, want)
		}
	}
}
