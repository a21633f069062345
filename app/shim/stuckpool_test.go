//go:build unix

package shim

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/control/controltest"
)

// silentPool listens on the pool socket of a new SWITCHBOARD_HOME as a
// pool stopped with SIGSTOP (or stuck) does: it takes connections and
// reads nothing. drop closes them, and the client pipes the hellos
// carried with them.
func silentPool(t *testing.T) (home string, drop func()) {
	t.Helper()
	home = shortHome(t)
	return home, controltest.ListenSilent(t, home+"/run/pool.sock").Close
}

// shortHome makes a new SWITCHBOARD_HOME with its run directory, removed
// when the test ends. Its path is short: a Unix socket's name is short.
func shortHome(t *testing.T) string {
	t.Helper()
	home, err := os.MkdirTemp("", "sbs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.Mkdir(home+"/run", 0o700); err != nil {
		t.Fatal(err)
	}
	return home
}

// TestConnectToAStuckPoolAnswersItsClient: a `connect` whose pool takes
// the connection and does not answer the hello (stopped, stuck) gives up
// after its wait and answers each request its client sent meanwhile with
// an error saying why (the request did not run), as it does when no pool
// runs; attached and relayed. On the first edition it exited with the
// reason on stderr only, and its client's initialize and call waited on.
func TestConnectToAStuckPoolAnswersItsClient(t *testing.T) {
	for _, mode := range []string{"attached", "relayed"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			home, drop := silentPool(t)
			noAttach := ""
			if mode == "relayed" {
				noAttach = "1"
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestConnectProcess$")
			cmd.Env = append(os.Environ(), "SB_TEST_CONNECT=fake", "SWITCHBOARD_HOME="+home, "SWITCHBOARD_NO_ATTACH="+noAttach)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			outR, outW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer outR.Close()
			cmd.Stdout = outW
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			outW.Close()
			got := make(chan []byte, 1)
			go func() {
				b, _ := io.ReadAll(outR)
				got <- b
			}()
			call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}` + "\n"
			if _, err := io.WriteString(stdin, initialize+call); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-exited
				t.Errorf("connect did not exit")
			}
			stdin.Close()
			drop() // the pipes the hello carried: the client's stdout ends
			out := <-got
			if !strings.Contains(stderr.String(), "connect: "+mode+": the pool did not answer") {
				t.Errorf("connect's stderr, want it %s and saying the pool did not answer:\n%s", mode, stderr.String())
			}
			checkStuckAnswers(t, out, "1", "2")
		})
	}
}

// checkStuckAnswers checks that out answers each of ids, in order, with
// an error saying the pool did not answer, that the request did not run,
// and may be sent again.
func checkStuckAnswers(t *testing.T, out []byte, ids ...string) {
	t.Helper()
	lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
	if len(lines) != len(ids) {
		t.Fatalf("the client got %q; want an error answer to each of %q", out, ids)
	}
	for i, line := range lines {
		var a errorAnswer
		if err := json.Unmarshal(line, &a); err != nil || string(a.ID) != ids[i] || !strings.Contains(a.Error.Message, "the pool did not answer") {
			t.Errorf("answer %d: %s; want an error to request %s saying the pool did not answer", i+1, line, ids[i])
			continue
		}
		if d := a.Error.Data; d.Retryable == nil || !*d.Retryable || d.MayHaveExecuted == nil || *d.MayHaveExecuted {
			t.Errorf("answer %d: %s; want data saying retryable true, mayHaveExecuted false", i+1, line)
		}
	}
}
