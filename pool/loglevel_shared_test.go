package pool_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// childLevels lists the levels a fake child's log shows it was set to.
func childLevels(t *testing.T, logPath string) []string {
	var seen []string
	for _, m := range childLog(t, logPath) {
		if m["method"] == "logging/setLevel" {
			seen = append(seen, fmt.Sprint(m["params"].(map[string]any)["level"]))
		}
	}
	return seen
}

// A shared legacy child that declares no logging but takes
// logging/setLevel runs at the most verbose level its sessions asked for,
// as one that declares logging does: a session's setLevel changes no
// other session's messages. On the first edition the pool sent each
// session's setLevel on as it came, and a session that asked for
// emergency silenced the info messages another had asked for with debug.
func TestUndeclaredSetLevelLowersNoOtherSession(t *testing.T) {
	logPath := filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, nil, fake("u", "-logging", "undeclared", "-log", logPath))
	a := tp.dial(t, "u")
	a.initialize("a", "")
	b := tp.dial(t, "u")
	b.initialize("b", "")
	if m := setLevel(a, "1", "debug"); m.Error != nil {
		t.Fatalf("A setLevel: %s", m.raw)
	}
	if m := setLevel(b, "1", "emergency"); m.Error != nil {
		t.Fatalf("B setLevel: %s", m.raw)
	}
	a.call("2", "log", logArgs("info", "A-info"))
	if _, o := a.recvID("2"); !slices.Equal(loggedData(o), []string{"A-info"}) {
		t.Errorf("A at debug, after B set emergency: got %q, want its info message", loggedData(o))
	}
	b.call("2", "log", logArgs("info", "B-info"))
	if _, o := b.recvID("2"); len(loggedData(o)) > 0 {
		t.Errorf("B at emergency got %q", loggedData(o))
	}
	if got := childLevels(t, logPath); !slices.Equal(got, []string{"debug", "debug"}) {
		t.Errorf("the child was set to %v, want debug for both sessions' setLevel", got)
	}
	// A leaves: the child goes to the level B asked for.
	a.close()
	eventually(t, "the child at emergency once A left", func() bool {
		return slices.Equal(childLevels(t, logPath), []string{"debug", "debug", "emergency"})
	}, func() string { return fmt.Sprintf("the child was set to %v", childLevels(t, logPath)) })
}

// A session's setLevel on a child of its own (share "session") reaches
// the child as it asked: nobody else hears the child, and each level the
// session sets, more verbose or less, is the child's.
func TestUndeclaredSetLevelOnAChildOfItsOwn(t *testing.T) {
	logPath := filepath.Join(shortTempDir(t), "child.log")
	cfg := fake("u", "-logging", "undeclared", "-log", logPath)
	cfg.Share = pool.ShareSession
	tp := newTestPool(t, nil, cfg)
	a := tp.dial(t, "u")
	a.initialize("a", "")
	for i, level := range []string{"debug", "emergency", "warning"} {
		if m := setLevel(a, fmt.Sprint(i+1), level); m.Error != nil {
			t.Fatalf("setLevel %s: %s", level, m.raw)
		}
	}
	if got := childLevels(t, logPath); !slices.Equal(got, []string{"debug", "emergency", "warning"}) {
		t.Errorf("the child was set to %v, want what the session asked, in order", got)
	}
	a.call("9", "log", logArgs("error", "mine"))
	if _, o := a.recvID("9"); !slices.Equal(loggedData(o), []string{"mine"}) {
		t.Errorf("a session at warning got %q for an error message", loggedData(o))
	}
}

// A level that does not exist is refused by the pool (-32602), for a
// legacy child as for a modern one: a shared child never hears it, so
// no session's level it does not know changes what the others get.
func TestUnknownLevelNeverReachesALegacyChild(t *testing.T) {
	for _, mode := range []string{"declared", "undeclared"} {
		t.Run(mode, func(t *testing.T) {
			logPath := filepath.Join(shortTempDir(t), "child.log")
			tp := newTestPool(t, nil, fake("srv", "-logging", mode, "-log", logPath))
			a := tp.dial(t, "srv")
			a.initialize("a", "")
			if m := setLevel(a, "1", "loud"); m.Error == nil || m.Error.Code != -32602 {
				t.Errorf("setLevel loud: %s, want -32602", m.raw)
			}
			a.send(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{}}`)
			if m, _ := a.recvID("2"); m.Error == nil || m.Error.Code != -32602 {
				t.Errorf("setLevel without a level: %s, want -32602", m.raw)
			}
			a.call("3", "echo", `{"text":"after"}`) // the child read whatever was sent before
			if m, _ := a.recvID("3"); m.Error != nil {
				t.Fatalf("echo: %s", m.raw)
			}
			if got := childLevels(t, logPath); len(got) != 0 {
				t.Errorf("the child was set to %v, want nothing", got)
			}
		})
	}
}

// A child that refuses logging/setLevel hears a session's once, its
// answer is the session's, and the pool sends it no level of its own.
func TestRefusedSetLevelIsTriedOnce(t *testing.T) {
	logPath := filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, nil, fake("r", "-logging", "refused", "-log", logPath))
	a := tp.dial(t, "r")
	a.initialize("a", "")
	b := tp.dial(t, "r")
	b.initialize("b", "")
	if m := setLevel(a, "1", "debug"); m.Error == nil || m.Error.Code != -32601 {
		t.Fatalf("setLevel on a child that refuses it: %s, want its -32601", m.raw)
	}
	b.close()
	eventually(t, "B gone", func() bool { return len(tp.Snapshot().Sessions) == 1 })
	a.call("2", "echo", `{"text":"after"}`)
	if m, _ := a.recvID("2"); m.Error != nil {
		t.Fatalf("echo: %s", m.raw)
	}
	if got := childLevels(t, logPath); !slices.Equal(got, []string{"debug"}) {
		t.Errorf("the child was set to %v, want the session's debug alone", got)
	}
}
