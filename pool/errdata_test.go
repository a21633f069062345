package pool_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// errData is an error answer's data as README promises it.
type errData struct {
	Retryable       *bool  `json:"retryable"`
	MayHaveExecuted *bool  `json:"mayHaveExecuted"`
	Server          string `json:"server"`
}

// wantRefusal checks that m is an error answer whose message holds want
// and whose data says the request did not run, may not be sent again
// with success, and names server.
func wantRefusal(t *testing.T, m msg, want, server string) {
	t.Helper()
	if m.Error == nil || !strings.Contains(m.Error.Message, want) {
		t.Fatalf("got %s; want an error saying %q", m.raw, want)
	}
	var d errData
	if err := json.Unmarshal(m.Error.Data, &d); err != nil || d.Retryable == nil || d.MayHaveExecuted == nil ||
		*d.Retryable || *d.MayHaveExecuted || d.Server != server {
		t.Errorf("the error's data: %s; want retryable false, mayHaveExecuted false, server %q", m.Error.Data, server)
	}
}

// TestDisabledServerRefusesWithData: a session whose server a reload
// disables gets, for its next request, an error whose data says what
// every error of the pool's about a request says (README, *Guarantees*):
// it did not run, and sending it again cannot work while the server is
// disabled. On the first edition the error had no data at all.
func TestDisabledServerRefusesWithData(t *testing.T) {
	cfg := fake("new1")
	tp := newTestPool(t, nil, cfg)
	c := tp.dial(t, "new1")
	c.initialize("c", "")
	cfg.Disabled = true
	if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	c.call("2", "pid", `{}`)
	m, _ := c.recvID("2")
	wantRefusal(t, m, `server is disabled: "new1"`, "new1")
	if m.Error.Code != -32000 {
		t.Errorf("code %d, want -32000", m.Error.Code)
	}
}

// TestNotStartedServerSaysWhy: a server the config holds back for a
// value it lacks (ServerConfig.NotStarted), not disabled by the user,
// refuses a new session and a request of a session it had with that
// reason, not with "disabled".
func TestNotStartedServerSaysWhy(t *testing.T) {
	cfg := fake("needvar")
	tp := newTestPool(t, nil, cfg)
	c := tp.dial(t, "needvar")
	c.initialize("c", "")
	const why = "mcpServers.needvar.env.K: environment variable RVC_UNSET_VAR is not set"
	cfg.Disabled, cfg.NotStarted = true, why
	if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	want := `server "needvar" is not started: ` + why
	c.call("2", "pid", `{}`)
	m, _ := c.recvID("2")
	wantRefusal(t, m, want, "needvar")
	if _, err := tp.tryDial(t, "needvar"); err == nil || !strings.Contains(err.Error(), `"error":"`+strings.ReplaceAll(want, `"`, `\"`)) {
		t.Errorf("a new session: %v; want it refused with %q", err, want)
	}
}
