package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app"
	"github.com/switchboard-mcp/switchboard/store"
)

// hangJSON is one entry of `hangs --json` / `history --json`, as the
// interface contract names its keys (pointers: the key must be present).
type hangJSON struct {
	Server         *string `json:"server"`
	Session        *string `json:"session"`
	Method         *string `json:"method"`
	Name           *string `json:"name"`
	Status         *string `json:"status"`
	ReceivedAt     *string `json:"receivedAt"`
	PID            *int    `json:"pid"`
	AgeMs          *int64  `json:"ageMs"`
	WrittenToChild *bool   `json:"writtenToChild"`
	Run            *int64  `json:"run"`
	Abandoned      *bool   `json:"abandoned"`
	Live           bool    `json:"live"`
}

func (in *instance) hangs(args ...string) []hangJSON {
	in.t.Helper()
	out, err := in.run(append([]string{"hangs", "--json"}, args...)...)
	if err != nil {
		in.t.Fatalf("hangs: %v\n%s", err, out)
	}
	var hs []hangJSON
	if err := json.Unmarshal([]byte(out), &hs); err != nil {
		in.t.Fatalf("hangs JSON: %v\n%s", err, out)
	}
	return hs
}

// A call to a tool that sleeps past the threshold shows up in `hangs
// --json` with its session, server, child PID and "written to child";
// `history --json` lists it in flight. After a SIGKILL of the pool it
// is still there, abandoned, read from the database alone.
func TestHangsShowsSleepingCall(t *testing.T) {
	// Its connect must not start the next pool when this one is killed
	// below (it would reattach): the database alone is asked then.
	in := serve(t, noClientStarts(fakeConfig(t)))
	s := in.connect(t, "fake")
	s.initialize("claude-code")
	s.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":600000}}}`)

	var hs []hangJSON
	waitFor(t, "the sleeping call in hangs", func() bool {
		hs = in.hangs("--over", "300ms")
		return len(hs) == 1
	})
	st := in.status()
	h := hs[0]
	for key, ok := range map[string]bool{"server": h.Server != nil, "session": h.Session != nil, "method": h.Method != nil,
		"name": h.Name != nil, "pid": h.PID != nil, "ageMs": h.AgeMs != nil, "writtenToChild": h.WrittenToChild != nil,
		"run": h.Run != nil, "abandoned": h.Abandoned != nil, "status": h.Status != nil, "receivedAt": h.ReceivedAt != nil} {
		if !ok {
			t.Fatalf("hangs entry lacks %q: %+v", key, h)
		}
	}
	if len(st.Backends) != 1 || len(st.Sessions) != 1 || *h.Server != "fake" || *h.Name != "sleep" ||
		*h.Method != "tools/call" || !*h.WrittenToChild || *h.PID != st.Backends[0].PID || *h.Session != st.Sessions[0].ID ||
		*h.AgeMs < 300 || *h.Abandoned || !h.Live {
		t.Errorf("hang %+v; status backends %+v sessions %+v", h, st.Backends, st.Sessions)
	}
	if got := in.hangs("--over", "1h"); len(got) != 0 {
		t.Errorf("hangs --over 1h = %+v, want none", got)
	}

	var hist []hangJSON
	waitFor(t, "the call in history", func() bool {
		out, err := in.run("history", "--json", "--server", "fake", "--method", "tools/call", "--since", "1h")
		if err != nil {
			t.Fatalf("history: %v", err)
		}
		if err := json.Unmarshal([]byte(out), &hist); err != nil {
			t.Fatalf("history JSON: %v\n%s", err, out)
		}
		return len(hist) == 1
	})
	if *hist[0].Status != "in-flight" || *hist[0].PID != *h.PID {
		t.Errorf("history = %+v", hist[0])
	}
	if out, err := in.run("hangs", "--over", "300ms"); err != nil || !strings.Contains(out, "sleep") || !strings.Contains(out, "yes") {
		t.Errorf("hangs (table) = %q, %v", out, err)
	}

	// The pool dies: the database still tells.
	goAway(t, in, true)
	// It had waited under a second when its run was last seen alive (the
	// run's heartbeat, every 10 s, had yet to come): only --over 0s lists
	// it (its age no longer grows with the clock).
	if got := in.hangs(); len(got) != 0 {
		t.Errorf("hangs after SIGKILL at the default threshold = %+v, want none", got)
	}
	hs = in.hangs("--over", "0s")
	if len(hs) != 1 || !*hs[0].Abandoned || *hs[0].PID != *h.PID || !*hs[0].WrittenToChild || hs[0].Live {
		t.Errorf("hangs after SIGKILL of the pool = %+v", hs)
	}
}

// A pool killed (SIGKILL) during a long call, the call its run's last
// event: `hangs --json` of the next run, at the configured threshold,
// lists the call as abandoned, aged at least as long as it had been in
// flight when the killed pool last recorded its heartbeat. It used to be
// aged up to its run's last event, its own receipt: 0 ms, no hang at any
// threshold but --over 0s. The heartbeat is every 50 ms here, 10 s by
// default.
func TestHangsAgesAKilledPoolsCallToItsHeartbeat(t *testing.T) {
	home := homeDir(t)
	cfg := strings.TrimSuffix(noClientStarts(fakeConfig(t)), "}") + `, "hangThreshold": "1s"}`
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	first := serveBinary(t, sbBin, home, app.HistoryHeartbeatEnv+"=50ms")
	s := first.connect(t, "fake")
	s.initialize("claude-code")
	s.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":90000000}}}`)

	var live hangJSON
	waitFor(t, "the call in flight for 1.5 s", func() bool {
		hs := first.hangs()
		if len(hs) != 1 || *hs[0].AgeMs < 1500 {
			return false
		}
		live = hs[0]
		return true
	})
	received, err := time.Parse(time.RFC3339Nano, *live.ReceivedAt)
	if err != nil {
		t.Fatal(err)
	}
	waited := time.Duration(*live.AgeMs) * time.Millisecond
	db, err := store.OpenReadOnly(first.status().History.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	waitFor(t, "a heartbeat of the run after the call's age was read", func() bool {
		runs, err := db.Runs(context.Background(), 1)
		return err == nil && len(runs) == 1 && runs[0].ID == *live.Run && runs[0].Alive.Sub(received) >= waited
	})

	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err = <-first.done
	first.done <- err
	second := serveHome(t, home)
	hs := second.hangs()
	if len(hs) != 1 || !*hs[0].Abandoned || *hs[0].Run != *live.Run || *hs[0].Name != "sleep" || hs[0].Live ||
		time.Duration(*hs[0].AgeMs)*time.Millisecond < waited {
		t.Fatalf("hangs --json of the next run = %s, want the killed run's call abandoned, aged %s or more", jsonText(hs), waited)
	}
	if out, err := second.run("hangs"); err != nil || !strings.Contains(out, "abandoned (run") {
		t.Errorf("hangs (table) = %q, %v", out, err)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// `hangs` without --over uses the config's hangThreshold (it used to be
// 30 s whatever the config said).
func TestHangsDefaultsToTheConfiguredThreshold(t *testing.T) {
	cfg := strings.TrimSuffix(fakeConfig(t), "}") + `, "hangThreshold": "200ms"}`
	in := serve(t, cfg)
	s := in.connect(t, "fake")
	s.initialize("c")
	s.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":600000}}}`)
	waitFor(t, "the call past the configured 200ms in hangs", func() bool { return len(in.hangs()) == 1 })
	out, err := in.run("hangs")
	if err != nil || !strings.Contains(out, "sleep") {
		t.Fatalf("hangs: %v\n%s", err, out)
	}
}
