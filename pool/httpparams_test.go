package pool_test

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// sqlCall is a 2026-07-28 tools/call of the fake's sql tool (-mcp-header)
// with args, which carry a query naming the case: the child log shows
// which calls reached the child.
func sqlCall(id int, args string) string {
	b, _ := json.Marshal(id)
	return `{"jsonrpc":"2.0","id":` + string(b) + `,"method":"tools/call","params":{"name":"sql","arguments":{` + args + `},` + modernMeta + `}}`
}

// postStatus posts body with header and reads the answer's status and
// JSON-RPC error code (0 for a result).
func postStatus(t *testing.T, c *httpClient, body string, header ...string) (int, int, string) {
	t.Helper()
	resp := c.post(body, header...)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m msg
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("answer %q: %v", b, err)
	}
	code := 0
	if m.Error != nil {
		code = m.Error.Code
	} else if m.Result == nil {
		t.Fatalf("neither result nor error: %s", b)
	}
	return resp.StatusCode, code, string(b)
}

// TestHTTPMcpParamValidation: the properties a child's tool marks with
// x-mcp-header are mirrored by a 2026-07-28 client into Mcp-Param-{Name}
// headers, and the pool (the child is stdio and sees no header) checks
// them against the body as the transport's Server Validation says: a
// header that disagrees with the body, one left out while the body has
// the value, or one sent for a value the body lacks is refused with 400
// and -32020, and the call never reaches the child. A matching header,
// plain or Base64, goes through, as does a call of a tool without
// annotations.
func TestHTTPMcpParamValidation(t *testing.T) {
	for _, era := range []string{"modern", "legacy"} {
		t.Run(era, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "child.log")
			tp := newTestPool(t, nil, fake("srv", "-era", era, "-mcp-header", "-log", logPath))
			c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
			// A client lists the tools before it calls them: the pool learns
			// the annotations from the child's answer.
			if m := c.call(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`); !strings.Contains(m.raw, `"x-mcp-header":"Region"`) {
				t.Fatalf("tools/list: %s", m.raw)
			}
			for i, tc := range []struct {
				name   string
				args   string
				header []string
				ok     bool
			}{
				{"plain match", `"region":"us-west1"`, []string{"Mcp-Param-Region", "us-west1"}, true},
				{"header name in any case", `"region":"us-west1"`, []string{"mcp-param-region", "us-west1"}, true},
				{"base64 match", `"region":"Hello, 世界"`, []string{"Mcp-Param-Region", "=?base64?SGVsbG8sIOS4lueVjA==?="}, true},
				{"base64 of a plain value", `"region":"Hello"`, []string{"Mcp-Param-Region", "=?base64?SGVsbG8=?="}, true},
				{"no base64 suffix: a literal", `"region":"=?base64?SGVsbG8="`, []string{"Mcp-Param-Region", "=?base64?SGVsbG8="}, true},
				{"mismatch", `"region":"us-west1"`, []string{"Mcp-Param-Region", "eu-central1"}, false},
				{"omitted", `"region":"us-west1"`, nil, false},
				{"base64 of another value", `"region":"us-west1"`, []string{"Mcp-Param-Region", "=?base64?SGVsbG8=?="}, false},
				{"bad base64 padding", `"region":"Hello"`, []string{"Mcp-Param-Region", "=?base64?SGVsbG8?="}, false},
				{"header without a body value", ``, []string{"Mcp-Param-Region", "us-west1"}, false},
				{"null body value, no header", `"region":null`, nil, true},
				{"duplicate key", `"region":"us-west1","region":"eu-central1"`, []string{"Mcp-Param-Region", "us-west1"}, false},
				{"integer", `"limit":42`, []string{"Mcp-Param-Limit", "42"}, true},
				{"integer compared as a number", `"limit":42`, []string{"Mcp-Param-Limit", "42.0"}, true},
				{"integer mismatch", `"limit":42`, []string{"Mcp-Param-Limit", "43"}, false},
				{"integer beyond a float64's precision", `"limit":9007199254740993`, []string{"Mcp-Param-Limit", "9007199254740992"}, false},
				{"tiny number is not zero", `"limit":1e-400`, []string{"Mcp-Param-Limit", "0"}, false},
				{"integer omitted", `"limit":42`, nil, false},
				{"boolean", `"dry_run":true`, []string{"Mcp-Param-Dry-Run", "true"}, true},
				{"boolean mismatch", `"dry_run":true`, []string{"Mcp-Param-Dry-Run", "false"}, false},
				{"nested", `"target":{"zone":"z1"}`, []string{"Mcp-Param-Zone", "z1"}, true},
				{"nested omitted", `"target":{"zone":"z1"}`, nil, false},
				{"nested mismatch", `"target":{"zone":"z1"}`, []string{"Mcp-Param-Zone", "z2"}, false},
			} {
				args := `"query":"case ` + tc.name + `"`
				if tc.args != "" {
					args = tc.args + "," + args
				}
				status, code, raw := postStatus(t, c, sqlCall(100+i, args), tc.header...)
				if tc.ok && (status != http.StatusOK || code != 0) {
					t.Errorf("%s: %d %s, want 200 and the child's result", tc.name, status, raw)
				}
				if !tc.ok && (status != http.StatusBadRequest || code != -32020) {
					t.Errorf("%s: %d %s, want 400 and -32020", tc.name, status, raw)
				}
			}
			// A tool without annotations is not affected, whatever
			// Mcp-Param headers come with its call.
			echo := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"plain"},` + modernMeta + `}}`
			for _, header := range [][]string{nil, {"Mcp-Param-Region", "elsewhere"}} {
				if status, code, raw := postStatus(t, c, echo, header...); status != http.StatusOK || code != 0 {
					t.Errorf("echo with %q: %d %s", header, status, raw)
				}
			}
			reached := map[string]bool{}
			for _, m := range childLog(t, logPath) {
				p, _ := m["params"].(map[string]any)
				if a, _ := p["arguments"].(map[string]any); m["method"] == "tools/call" && a["query"] != nil {
					reached[strings.TrimPrefix(a["query"].(string), "case ")] = true
				}
			}
			for _, name := range []string{"mismatch", "omitted", "header without a body value", "duplicate key", "integer mismatch", "nested omitted"} {
				if reached[name] {
					t.Errorf("the refused call %q reached the child", name)
				}
			}
			for _, name := range []string{"plain match", "base64 match", "null body value, no header", "integer compared as a number", "nested"} {
				if !reached[name] {
					t.Errorf("the call %q did not reach the child", name)
				}
			}
		})
	}
}

// TestHTTPMcpParamLearnedWithoutAList: a client that calls a tool without
// listing tools through the pool first (it kept an earlier list) has its
// first call served unchecked, without waiting, and the pool lists the
// child's tools itself then: its later calls are checked.
func TestHTTPMcpParamLearnedWithoutAList(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-mcp-header", "-log", logPath))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	if status, code, raw := postStatus(t, c, sqlCall(1, `"region":"us-west1","query":"first"`), "Mcp-Param-Region", "us-west1"); status != 200 || code != 0 {
		t.Fatalf("first call: %d %s", status, raw)
	}
	eventually(t, "the pool to list the child's tools", func() bool { return countMethod(childLog(t, logPath), "tools/list") == 1 })
	id := 2
	eventually(t, "a mismatched header to be refused", func() bool {
		id++
		status, code, _ := postStatus(t, c, sqlCall(id, `"region":"us-west1","query":"probe"`), "Mcp-Param-Region", "eu-central1")
		return status == http.StatusBadRequest && code == -32020
	})
	if status, code, raw := postStatus(t, c, sqlCall(1000, `"region":"us-west1","query":"later"`)); status != 400 || code != -32020 {
		t.Fatalf("omitted header after the pool listed the tools: %d %s", status, raw)
	}
	if n := countMethod(childLog(t, logPath), "tools/list"); n != 1 {
		t.Fatalf("the child was asked tools/list %d times, want once", n)
	}
}
