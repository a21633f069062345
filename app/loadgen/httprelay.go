package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// The HTTP floor. The pool's HTTP front door is measured against a server
// that answers the tool itself (inproc.go), and against this: the least
// a process between HTTP clients and one stdio child can do. It answers
// initialize with the child's own answer and server/discover itself, and
// sends every other request to the child under an id of its own, then
// the answer back under the client's. Nothing else: no era translation,
// no progress, no cancellation, no history, no limits, and one write to
// the child per request. What it gets against the in-process server is
// what a plain proxy with a child gets on this machine; the pool is read
// against it.

// HTTPRelay serves MCP over HTTP by relaying each request to one child.
type HTTPRelay struct {
	door  baselineDoor // as the in-process server's
	cmd   *exec.Cmd
	stdin io.WriteCloser
	init  []byte        // the child's initialize result
	done  chan struct{} // closed when the child's stdout has ended

	wmu sync.Mutex // one write to the child at a time

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]relayWait // by the id the child was sent
}

// relayWait is a request the child has not answered yet.
type relayWait struct {
	id     []byte      // the client's id
	answer chan []byte // the answer, under the client's id
}

// StartHTTPRelay starts argv, initializes it, and returns the relay to
// it. It wants token as a bearer token when token is not empty, as the
// pool does.
func StartHTTPRelay(argv []string, token string) (*HTTPRelay, error) {
	if len(argv) == 0 {
		return nil, errors.New("HTTP relay: no command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("HTTP relay: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("HTTP relay: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("HTTP relay: start %s: %w", argv[0], err)
	}
	r := &HTTPRelay{door: newBaselineDoor(token), cmd: cmd, stdin: stdin, done: make(chan struct{}),
		waiting: map[uint64]relayWait{}}
	out := bufio.NewReaderSize(stdout, 64<<10)
	// A child that does not answer its initialize in time is ended: the
	// read waiting for the answer then ends too.
	late := time.AfterFunc(handshakeTimeout, func() { _ = cmd.Process.Kill() })
	err = r.initialize(out)
	if !late.Stop() {
		err = fmt.Errorf("HTTP relay: the child did not answer initialize within %v", handshakeTimeout)
	}
	if err != nil {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	go r.readLoop(out)
	return r, nil
}

// handshakeTimeout is how long the child has to answer initialize (a
// variable for the test of a child that never does).
var handshakeTimeout = 10 * time.Second

// initialize is the child's handshake, before any client's request.
func (r *HTTPRelay) initialize(out *bufio.Reader) error {
	const hello = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",` +
		`"capabilities":{},"clientInfo":{"name":"switchboard-bench-relay","version":"1"}}}` + "\n"
	if _, err := io.WriteString(r.stdin, hello); err != nil {
		return fmt.Errorf("HTTP relay: initialize the child: %w", err)
	}
	line, err := out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("HTTP relay: the child's initialize answer: %w", err)
	}
	m, err := jsonrpc.Parse(line)
	if err != nil || m.Kind != jsonrpc.KindResponse || !m.Result.Present() {
		return fmt.Errorf("HTTP relay: the child answered initialize with %q", line)
	}
	r.init = m.Result.Of(line)
	if _, err := io.WriteString(r.stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		return fmt.Errorf("HTTP relay: initialize the child: %w", err)
	}
	return nil
}

// readLoop hands each of the child's answers to the request waiting for
// it, under the client's id, until the child's stdout ends.
func (r *HTTPRelay) readLoop(out *bufio.Reader) {
	defer close(r.done)
	for {
		line, err := out.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Longer than any answer the bench asks for: skipped.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = out.ReadSlice('\n')
			}
			if err == nil {
				continue
			}
		}
		if err != nil {
			return
		}
		m, err := jsonrpc.Parse(line)
		if err != nil || m.Kind != jsonrpc.KindResponse {
			continue // the child's own requests and notifications: nobody asked
		}
		n, ok := jsonrpc.ParseUint(m.ID.Of(line))
		if !ok {
			continue
		}
		r.mu.Lock()
		w, ok := r.waiting[n]
		delete(r.waiting, n)
		r.mu.Unlock()
		if ok {
			w.answer <- jsonrpc.Splice(nil, line, m.ID, w.id)
		}
	}
}

// Close ends the child (its stdin closes) and waits for it.
func (r *HTTPRelay) Close() error {
	r.stdin.Close()
	<-r.done
	return r.cmd.Wait()
}

func (r *HTTPRelay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if !r.door.admit(w, req) {
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 4<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m, err := jsonrpc.Parse(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	modern := m.Meta.Present()
	switch {
	case m.Kind != jsonrpc.KindRequest:
		w.WriteHeader(http.StatusAccepted)
		return
	case m.Method == "initialize" && !modern:
		r.door.open(w)
		r.reply(w, jsonrpc.AppendResponse(nil, m.ID.Of(body), r.init))
		return
	case modern:
		if !modernHeaders(w, req, m.Method) {
			return
		}
		if m.Method == "server/discover" {
			r.reply(w, jsonrpc.AppendResponse(nil, m.ID.Of(body), []byte(`{"resultType":"complete","supportedVersions":["`+
				modernVersion+`"],"capabilities":{"tools":{}},"serverInfo":{"name":"relay","version":"1"}}`)))
			return
		}
	default:
		if !r.door.known(w, req) {
			return
		}
	}
	answer, err := r.relay(req.Context(), body, m)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	r.reply(w, answer)
}

// relay sends the request in body to the child under an id of its own
// and waits for the answer.
func (r *HTTPRelay) relay(ctx context.Context, body []byte, m jsonrpc.Message) ([]byte, error) {
	wait := relayWait{id: m.ID.Of(body), answer: make(chan []byte, 1)}
	r.mu.Lock()
	r.next++
	n := r.next
	r.waiting[n] = wait
	r.mu.Unlock()
	line := jsonrpc.Splice(make([]byte, 0, len(body)+24), body, m.ID, jsonrpc.AppendUint(nil, n))
	line = append(line, '\n')
	r.wmu.Lock()
	_, err := r.stdin.Write(line)
	r.wmu.Unlock()
	if err == nil {
		select {
		case a := <-wait.answer:
			return a, nil
		case <-r.done:
			err = errors.New("the child exited")
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	r.mu.Lock()
	delete(r.waiting, n)
	r.mu.Unlock()
	return nil, fmt.Errorf("HTTP relay: %w", err)
}

func (r *HTTPRelay) reply(w http.ResponseWriter, answer []byte) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(answer)
}

// RunHTTPRelay serves a relay to argv on a loopback port until ctx ends,
// after writing its MCP endpoint's URL and a newline to ready.
func RunHTTPRelay(ctx context.Context, argv []string, token string, ready io.Writer) error {
	relay, err := StartHTTPRelay(argv, token)
	if err != nil {
		return err
	}
	defer relay.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("HTTP relay: %w", err)
	}
	srv := &http.Server{Handler: relay, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if _, err := fmt.Fprintf(ready, "http://%s/mcp/fake\n", ln.Addr()); err != nil {
		srv.Close()
		<-served
		return fmt.Errorf("HTTP relay: %w", err)
	}
	select {
	case <-ctx.Done():
		srv.Close()
		<-served
		return nil
	case err := <-served:
		return fmt.Errorf("HTTP relay: %w", err)
	}
}

// RelayTokenEnv is the environment variable that hands the relay process
// its bearer token (not its command line, which any local user can read).
const RelayTokenEnv = "SWITCHBOARD_BENCH_RELAY_TOKEN"

// httpRelayArgv is the relay process's command line for the HTTP
// comparison: o.HTTPRelay, relaying to the fake that answers echo on its
// reading goroutine, as the pool's server there does; nil without one.
func httpRelayArgv(o BenchOptions) []string {
	if len(o.HTTPRelay) == 0 {
		return nil
	}
	argv := append(slices.Clone(o.HTTPRelay), "--")
	argv = append(argv, o.Fake...)
	return append(argv, "-inline-echo")
}

// relayProcess is a relay process the bench started (RunHTTPRelay).
type relayProcess struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{} // closed when the process has exited
}

// startRelayProcess starts argv and waits for the URL it prints.
func startRelayProcess(ctx context.Context, argv []string, token string) (*relayProcess, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), RelayTokenEnv+"="+token)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: the HTTP relay: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start the HTTP relay: %w", err)
	}
	rp := &relayProcess{cmd: cmd, done: make(chan struct{})}
	url := make(chan string, 1)
	go func() {
		defer close(rp.done)
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		url <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
	}()
	if rp.url = <-url; !strings.HasPrefix(rp.url, "http://") {
		rp.stop()
		return nil, fmt.Errorf("bench: the HTTP relay did not start (it printed %q)", rp.url)
	}
	return rp, nil
}

// watched is cfg counting the CPU time of the relay and its child.
func (rp *relayProcess) watched(cfg Config) Config {
	cfg.Watch = []int{rp.cmd.Process.Pid}
	return cfg
}

// stop ends the relay (SIGTERM: it ends its child) and waits for it,
// killing it after 5 s.
func (rp *relayProcess) stop() {
	_ = rp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-rp.done:
	case <-time.After(5 * time.Second):
		_ = rp.cmd.Process.Kill()
		<-rp.done
	}
}
