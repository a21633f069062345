package pool_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// otherShimEnv, in a child's environment, makes this test binary a
// relaying shim in a process of its own: it resumes the session its
// hello (otherShimHelloEnv) names on the pool's socket (the variable's
// value) and prints what it was answered (runOtherShim).
const (
	otherShimEnv      = "SWITCHBOARD_TEST_OTHER_SHIM"
	otherShimHelloEnv = "SWITCHBOARD_TEST_OTHER_SHIM_HELLO"
)

// afterResume is the call a resumed client makes first: the answers a
// resume owes go out before it is read, so what came before its answer
// is all the resume gave.
const afterResume = `{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`

// resumeRelayed resumes a session on the pool's socket (sock) as a
// relaying shim does, with hello, makes the afterResume call, and
// returns the answers its client read before that call's, by id.
func resumeRelayed(sock string, hello []byte) (map[string]string, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := c.Write(append(hello, '\n')); err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	line, err := r.ReadBytes('\n')
	var w pool.Welcome
	if err != nil || json.Unmarshal(line, &w) != nil || w.Session == "" {
		return nil, fmt.Errorf("welcome %q: %v", line, err)
	}
	if _, err := c.Write([]byte(afterResume + "\n")); err != nil {
		return nil, fmt.Errorf("the call after the resume: %w", err)
	}
	got := map[string]string{}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return got, fmt.Errorf("read (answered so far %v): %w", got, err)
		}
		var m struct {
			ID     json.RawMessage
			Method string
		}
		if json.Unmarshal([]byte(line), &m) != nil || m.Method != "" || len(m.ID) == 0 {
			continue // a control line, a notification
		}
		if string(m.ID) == `"after"` {
			return got, nil
		}
		got[string(m.ID)] = line
	}
}

// runOtherShim is this binary as otherShimEnv's shim: it prints the
// answers resumeRelayed returns as JSON, and exits 0 once it has them.
func runOtherShim(sock string) int {
	got, err := resumeRelayed(sock, []byte(os.Getenv(otherShimHelloEnv)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(got)
	return 0
}
