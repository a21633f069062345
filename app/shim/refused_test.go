//go:build unix

package shim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// refusal is what a pool whose config file does not load answers a hello
// for a server it does not run.
const refusal = `unknown server "notes"; the config file does not load, and the pool runs without what it lists until it is fixed: config.json: line 3: unexpected '}'`

// refusingPool listens on the pool socket of a new SWITCHBOARD_HOME and
// refuses the first session with refusal; refused is closed once the
// shim has closed that connection: it has read the refusal and gone on
// to answer its client.
func refusingPool(t *testing.T) (home string, refused <-chan struct{}) {
	t.Helper()
	home = shortHome(t)
	ln, err := net.Listen("unix", home+"/run/pool.sock")
	if err != nil {
		t.Fatal(err)
	}
	done, sent := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := readHelloMsg(c.(*net.UnixConn)); err != nil {
			return
		}
		w, _ := json.Marshal(map[string]string{"error": refusal})
		if _, err := c.Write(append(w, '\n')); err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, c); err == nil {
			close(sent)
		}
	}()
	return home, sent
}

// errorAnswer is an error answer as the shim writes it to its client.
type errorAnswer struct {
	ID    json.RawMessage `json:"id"`
	Error struct {
		Message string
		Data    struct {
			Retryable       *bool `json:"retryable"`
			MayHaveExecuted *bool `json:"mayHaveExecuted"`
		}
	}
}

// checkRefusalAnswer checks that out is one answer to request 1, an error
// that gives the pool's reason and says, in its data, that it did not
// run and that sending it again cannot work: the pool refused the
// session (no such server, the server disabled) and would again.
func checkRefusalAnswer(t *testing.T, out []byte) {
	t.Helper()
	var a errorAnswer
	line, rest, _ := bytes.Cut(out, []byte("\n"))
	if err := json.Unmarshal(line, &a); err != nil || string(a.ID) != "1" || !strings.Contains(a.Error.Message, "the config file does not load") || len(rest) > 0 {
		t.Fatalf("the client got %q; want one error answer to its initialize that says why", out)
	}
	if d := a.Error.Data; d.Retryable == nil || *d.Retryable || d.MayHaveExecuted == nil || *d.MayHaveExecuted {
		t.Errorf("the client got %q; want data saying retryable false, mayHaveExecuted false", out)
	}
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"

// TestRefusedSessionAnswersALateInitialize: a session the pool refuses
// (the server is unknown, the config file does not load) gets its
// initialize answered with the pool's reason, also when the client
// writes it only after the refusal came: here the test writes it once
// the pool has refused. A relaying shim (its stdio is not a pipe, or
// Windows) and an attached one, a `connect` process whose stdin and
// stdout are pipes. On the first edition the relaying shim answered
// nothing, and the attached one only what was written already: the
// client saw `connect` exit, with the reason on its stderr.
func TestRefusedSessionAnswersALateInitialize(t *testing.T) {
	t.Run("relayed", func(t *testing.T) {
		home, refused := refusingPool(t)
		t.Setenv("SWITCHBOARD_HOME", home)
		inR, inW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer inR.Close()
		defer inW.Close() // ends the shim's reader of it
		var out bytes.Buffer
		connected := make(chan error, 1)
		go func() { connected <- Connect("notes", inR, &out) }()
		<-refused
		if _, err := inW.WriteString(initialize); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-connected:
			if err == nil || !strings.Contains(err.Error(), "the config file does not load") {
				t.Errorf("Connect = %v, want the refusal", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Connect did not return")
		}
		checkRefusalAnswer(t, out.Bytes())
	})
	t.Run("attached", func(t *testing.T) {
		home, refused := refusingPool(t)
		cmd := exec.Command(os.Args[0], "-test.run=^TestConnectProcess$")
		cmd.Env = append(os.Environ(), "SB_TEST_CONNECT=notes", "SWITCHBOARD_HOME="+home, "SWITCHBOARD_NO_ATTACH=")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(bufio.NewReader(stdout))
			got <- b
		}()
		select {
		case <-refused:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("the pool got no hello; connect's stderr:\n%s", stderr.String())
		}
		if _, err := io.WriteString(stdin, initialize); err != nil {
			t.Fatal(err)
		}
		var out []byte
		select {
		case out = <-got:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			out = <-got
			t.Errorf("connect did not exit")
		}
		stdin.Close()
		_ = cmd.Wait()
		if !strings.Contains(stderr.String(), "connect: "+"attached") {
			t.Errorf("connect did not attach its stdio; stderr:\n%s", stderr.String())
		}
		checkRefusalAnswer(t, out)
	})
}

// TestConnectProcess is `switchboard connect $SB_TEST_CONNECT` on this
// process's stdio, for TestRefusedSessionAnswersALateInitialize.
func TestConnectProcess(t *testing.T) {
	name := os.Getenv("SB_TEST_CONNECT")
	if name == "" {
		t.Skip("run by TestRefusedSessionAnswersALateInitialize")
	}
	mode := "relayed"
	if attachable(os.Stdin, os.Stdout) {
		mode = "attached"
	}
	err := Connect(name, os.Stdin, os.Stdout)
	fmt.Fprintf(os.Stderr, "connect: %s: %v\n", mode, err)
	os.Exit(0) // before the test framework writes to stdout, the client's
}
