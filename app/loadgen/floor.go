package loadgen

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// The floor: what a round trip costs on this machine with nothing but Go
// processes and pipes, measured in the same run as the pool, so that the
// pool's added latency is read against what no relay can beat.

// PipeEcho writes every line of in back to out, on one goroutine: the far
// end of a pipe round trip between two Go processes.
func PipeEcho(in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if len(line) > 0 {
			if _, werr := out.Write(line); werr != nil {
				return fmt.Errorf("pipe echo: %w", werr)
			}
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return fmt.Errorf("pipe echo: %w", err)
		}
	}
}

// Relay starts argv and copies in to its stdin and its stdout to out,
// one goroutine per direction, with plain reads and writes (no splice):
// the least a relay process in the middle can do. It returns when the
// child's stdout ends, after in ended and the child exited.
func Relay(argv []string, in io.Reader, out io.Writer) error {
	if len(argv) == 0 {
		return errors.New("relay: no command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	toChild, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	fromChild, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("relay: start %s: %w", argv[0], err)
	}
	sent := make(chan error, 1)
	go func() { // client -> child; ends at the client's EOF, which the child gets
		err := copyPlain(toChild, in)
		toChild.Close()
		sent <- err
	}()
	err = copyPlain(out, fromChild) // child -> client, on this goroutine
	if werr := cmd.Wait(); err == nil {
		err = werr
	}
	select {
	case serr := <-sent:
		if err == nil {
			err = serr
		}
	default: // the child ended first; the process exits with this return
	}
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	return nil
}

// copyPlain copies with read and write system calls only: io.Copy would
// let the kernel splice pipe to pipe, which a relay that looks at what
// it carries cannot do.
func copyPlain(dst io.Writer, src io.Reader) error {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
